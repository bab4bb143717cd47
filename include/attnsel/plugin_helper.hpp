// Layer: none (for plugin authors; no layer of the library includes it)
// Header-only C++ helper for writing an attnsel plugin: write each backend as a C++
// class, and let one macro export the C init function that attnsel/plugin.h specifies.
//
//   class MyBackend : public attnsel::plugin_sdk::Backend {
//    public:
//     attnsel::plugin_sdk::Capabilities capabilities() const override {
//       attnsel::plugin_sdk::Capabilities c;
//       c.name = "MY_ATTN";
//       c.dtypes = {ATTNSEL_DTYPE_FLOAT32};
//       return c;
//     }
//   };
//   ATTNSEL_PLUGIN_ENTRY(attnsel_plugin_init, "my-plugin", "1.0", MyBackend)
//
// Methods of Backend and Kernel may throw: every exception is caught at the boundary and
// becomes the failure message the ABI carries, so none crosses into the host.
//
// This header uses only attnsel/plugin.h and the standard library: a plugin does not
// link libattnsel (and must not: the host already holds the registry it would use).
//
// Thread-safety: a Backend's const methods and a Kernel's write_kv_cache/forward may be
// called from several threads at once (plugin.h's rule); keep them free of shared
// mutable state.
#pragma once

#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "attnsel/plugin.h"

namespace attnsel::plugin_sdk {

/// Copies `text` into a buffer the host provides: truncated to fit, always NUL-terminated.
inline void write_message(char* buffer, std::size_t capacity, std::string_view text) noexcept {
  if (buffer == nullptr || capacity == 0) return;
  const std::size_t n = text.size() < capacity - 1 ? text.size() : capacity - 1;
  std::memcpy(buffer, text.data(), n);
  buffer[n] = '\0';
}

/// What one backend declares, in C++ containers; see attnsel_backend for each field. The
/// defaults are vLLM's AttentionBackend defaults.
struct Capabilities {
  std::string name;
  std::vector<std::string> register_as;
  std::vector<attnsel_dtype> dtypes{ATTNSEL_DTYPE_FLOAT16, ATTNSEL_DTYPE_BFLOAT16};
  std::vector<std::string> kv_cache_dtypes{"auto", "float16", "bfloat16"};
  std::vector<attnsel_block_size> block_sizes{{1, 1}};
  std::vector<std::int32_t> head_sizes;                    ///< empty = any
  std::vector<attnsel_kv_cache_layout> kv_cache_layouts;   ///< empty = no preference
  std::uint32_t attn_types = ATTNSEL_ATTN_TYPE_BIT(ATTNSEL_ATTN_TYPE_DECODER);
  std::uint64_t features = ATTNSEL_FEATURE_VLLM_DEFAULTS;
  std::optional<std::pair<attnsel_compute_capability, attnsel_compute_capability>> compute_capability_range;
};

/// One layer's kernel instance, made by Backend::make_kernel. The host has validated the
/// shapes, dtypes, strides, block table and slots before either method is called.
class Kernel {
 public:
  virtual ~Kernel() = default;
  /// key/value: [num_tokens, num_kv_heads, head_size]; writes token i to slot_mapping[i].
  virtual void write_kv_cache(const attnsel_tensor& key, const attnsel_tensor& value, const attnsel_kv_cache& cache,
                              const attnsel_metadata& metadata) const = 0;
  /// query, output: [num_tokens, num_heads, head_size]; output written in place.
  virtual void forward(const attnsel_tensor& query, const attnsel_kv_cache& cache, const attnsel_metadata& metadata,
                       const attnsel_tensor& output) const = 0;
};

/// One backend. Override capabilities(); the rest is optional.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual Capabilities capabilities() const = 0;
  /// vLLM's supports_combination: a reason when the combination does not work.
  virtual std::optional<std::string> check_combination(const attnsel_combination& args) const {
    (void)args;
    return std::nullopt;
  }
  /// Whether the backend can run on this machine: 0 (and a reason) when it cannot.
  virtual std::uint32_t score(std::string& reason) const {
    (void)reason;
    return 1;
  }
  /// True when make_kernel() builds kernels (the backend then exports kernel entry points).
  virtual bool has_kernel() const { return false; }
  /// Builds a kernel for one layer; throw (e.g. std::invalid_argument) to reject the
  /// parameters with a message.
  virtual std::unique_ptr<Kernel> make_kernel(const attnsel_plugin_layer_params& params) const {
    (void)params;
    throw std::logic_error("this backend has no kernel");
  }
};

namespace detail {

// Runs `f`, turning any exception into a message and ATTNSEL_FAILED.
template <class F>
int guarded(char* error, std::size_t capacity, F&& f) noexcept {
  try {
    f();
    return ATTNSEL_OK;
  } catch (const std::exception& e) {
    write_message(error, capacity, e.what());
  } catch (...) {
    write_message(error, capacity, "unknown exception");
  }
  return ATTNSEL_FAILED;
}

// One backend with the C declaration built from its capabilities. Heap-allocated and
// never moved, so the pointers inside the declaration stay valid.
class Entry {
 public:
  explicit Entry(std::unique_ptr<Backend> backend) : backend_(std::move(backend)), caps_(backend_->capabilities()) {
    for (const std::string& s : caps_.register_as) register_as_.push_back(s.c_str());
    for (const std::string& s : caps_.kv_cache_dtypes) kv_cache_dtypes_.push_back(s.c_str());
    desc_.struct_size = sizeof(attnsel_backend);
    desc_.name = caps_.name.c_str();
    desc_.register_as = register_as_.data();
    desc_.num_register_as = static_cast<std::uint32_t>(register_as_.size());
    desc_.dtypes = caps_.dtypes.data();
    desc_.num_dtypes = static_cast<std::uint32_t>(caps_.dtypes.size());
    desc_.kv_cache_dtypes = kv_cache_dtypes_.data();
    desc_.num_kv_cache_dtypes = static_cast<std::uint32_t>(kv_cache_dtypes_.size());
    desc_.block_sizes = caps_.block_sizes.data();
    desc_.num_block_sizes = static_cast<std::uint32_t>(caps_.block_sizes.size());
    desc_.head_sizes = caps_.head_sizes.data();
    desc_.num_head_sizes = static_cast<std::uint32_t>(caps_.head_sizes.size());
    desc_.kv_cache_layouts = caps_.kv_cache_layouts.data();
    desc_.num_kv_cache_layouts = static_cast<std::uint32_t>(caps_.kv_cache_layouts.size());
    desc_.attn_types = caps_.attn_types;
    desc_.features = caps_.features;
    if (caps_.compute_capability_range) {
      desc_.has_compute_capability_range = 1;
      desc_.min_compute_capability = caps_.compute_capability_range->first;
      desc_.max_compute_capability = caps_.compute_capability_range->second;
    }
    desc_.user_data = this;
    desc_.check_combination = &Entry::check_combination;
    desc_.score = &Entry::score;
    if (backend_->has_kernel()) {
      ops_.struct_size = sizeof(attnsel_kernel_ops);
      ops_.create = &Entry::create;
      ops_.destroy = &Entry::destroy;
      ops_.write_kv_cache = &Entry::write_kv_cache;
      ops_.forward = &Entry::forward;
      desc_.kernel = &ops_;
    }
  }
  Entry(const Entry&) = delete;
  Entry& operator=(const Entry&) = delete;

  const attnsel_backend* declaration() const { return &desc_; }

 private:
  static const Entry& self(void* user_data) { return *static_cast<const Entry*>(user_data); }

  static int check_combination(void* user_data, const attnsel_combination* args, char* reason,
                               std::size_t capacity) {
    std::optional<std::string> why;
    if (guarded(reason, capacity, [&] { why = self(user_data).backend_->check_combination(*args); }) != ATTNSEL_OK)
      return ATTNSEL_FAILED;
    if (!why) return ATTNSEL_OK;
    write_message(reason, capacity, *why);
    return ATTNSEL_FAILED;
  }

  static std::uint32_t score(void* user_data, char* reason, std::size_t capacity) {
    std::uint32_t value = 0;
    std::string why;
    if (guarded(reason, capacity, [&] { value = self(user_data).backend_->score(why); }) != ATTNSEL_OK) return 0;
    if (value == 0) write_message(reason, capacity, why);
    return value;
  }

  static int create(void* user_data, const attnsel_plugin_layer_params* params, void** impl, char* error,
                    std::size_t capacity) {
    return guarded(error, capacity, [&] {
      std::unique_ptr<Kernel> kernel = self(user_data).backend_->make_kernel(*params);
      if (!kernel) throw std::logic_error("make_kernel returned no kernel");
      *impl = kernel.release();
    });
  }

  static void destroy(void* impl) { delete static_cast<Kernel*>(impl); }

  static int write_kv_cache(void* impl, const attnsel_tensor* key, const attnsel_tensor* value,
                            const attnsel_kv_cache* cache, const attnsel_metadata* metadata, char* error,
                            std::size_t capacity) {
    return guarded(error, capacity,
                   [&] { static_cast<const Kernel*>(impl)->write_kv_cache(*key, *value, *cache, *metadata); });
  }

  static int forward(void* impl, const attnsel_tensor* query, const attnsel_kv_cache* cache,
                     const attnsel_metadata* metadata, const attnsel_tensor* output, char* error,
                     std::size_t capacity) {
    return guarded(error, capacity, [&] { static_cast<const Kernel*>(impl)->forward(*query, *cache, *metadata, *output); });
  }

  std::unique_ptr<Backend> backend_;
  Capabilities caps_;
  std::vector<const char*> register_as_;
  std::vector<const char*> kv_cache_dtypes_;
  attnsel_kernel_ops ops_{};
  attnsel_backend desc_{};
};

}  // namespace detail

/// A plugin's description, built once from its backends and valid for the library's
/// lifetime. Use through ATTNSEL_PLUGIN_ENTRY.
class Plugin {
 public:
  Plugin(std::string name, std::string version, std::vector<std::unique_ptr<Backend>> backends)
      : name_(std::move(name)), version_(std::move(version)) {
    for (auto& b : backends) {
      entries_.push_back(std::make_unique<detail::Entry>(std::move(b)));
      pointers_.push_back(entries_.back()->declaration());
    }
    desc_.abi_major = ATTNSEL_PLUGIN_ABI_MAJOR;
    desc_.abi_minor = ATTNSEL_PLUGIN_ABI_MINOR;
    desc_.struct_size = sizeof(attnsel_plugin);
    desc_.name = name_.c_str();
    desc_.version = version_.c_str();
    desc_.num_backends = static_cast<std::uint32_t>(pointers_.size());
    desc_.backends = pointers_.data();
  }
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  const attnsel_plugin* description() const { return &desc_; }

  template <class... Backends>
  static std::vector<std::unique_ptr<Backend>> make_backends() {
    std::vector<std::unique_ptr<Backend>> out;
    (out.push_back(std::make_unique<Backends>()), ...);
    return out;
  }

  /// Runs `build` (which returns the plugin's description); an exception becomes a
  /// description whose `error` carries its message.
  template <class F>
  static const attnsel_plugin* guarded_init(const char* name, F&& build) noexcept {
    static std::string message;
    static attnsel_plugin failed{};
    try {
      return build();
    } catch (const std::exception& e) {
      message = e.what();
    } catch (...) {
      message = "unknown exception";
    }
    failed.abi_major = ATTNSEL_PLUGIN_ABI_MAJOR;
    failed.abi_minor = ATTNSEL_PLUGIN_ABI_MINOR;
    failed.struct_size = sizeof(attnsel_plugin);
    failed.name = name;
    failed.error = message.c_str();
    return &failed;
  }

 private:
  std::string name_;
  std::string version_;
  std::vector<std::unique_ptr<detail::Entry>> entries_;
  std::vector<const attnsel_backend*> pointers_;
  attnsel_plugin desc_{};
};

}  // namespace attnsel::plugin_sdk

/// Defines and exports the init function `symbol` for a plugin made of the listed
/// Backend classes (each default-constructible). The description is built on the first
/// call; an exception while building it is reported through the description's `error`.
#define ATTNSEL_PLUGIN_ENTRY(symbol, plugin_name, plugin_version, ...)                                 \
  extern "C" ATTNSEL_PLUGIN_EXPORT const attnsel_plugin* symbol(const attnsel_host* host) {             \
    (void)host;                                                                                        \
    return ::attnsel::plugin_sdk::Plugin::guarded_init(plugin_name, []() -> const attnsel_plugin* {     \
      static const ::attnsel::plugin_sdk::Plugin plugin(                                               \
          plugin_name, plugin_version, ::attnsel::plugin_sdk::Plugin::make_backends<__VA_ARGS__>());   \
      return plugin.description();                                                                     \
    });                                                                                                \
  }
