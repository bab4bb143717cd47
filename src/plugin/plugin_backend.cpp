#include "plugin/plugin_backend.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "attnsel/errors.hpp"
#include "plugin/plugin_kernel.hpp"

namespace attnsel::plugin {

PluginBackend::PluginBackend(std::shared_ptr<const SharedLibrary> library, std::string qualname,
                             BackendDeclaration declaration)
    : library_(std::move(library)), qualname_(std::move(qualname)), decl_(std::move(declaration)) {}

std::string PluginBackend::missing_kernel_reason() const {
  return fmt::format("{} (plugin backend {}) declares no kernel entry points", decl_.name, qualname_);
}

std::unique_ptr<kernel::AttentionImpl> PluginBackend::make_impl(const kernel::LayerParams& params) const {
  if (decl_.kernel == nullptr) throw NotImplementedError(missing_kernel_reason());
  return make_plugin_impl(library_, decl_, qualname_, params);
}

bool PluginBackend::supports_attn_type(AttentionType t) const {
  return std::find(decl_.attn_types.begin(), decl_.attn_types.end(), t) != decl_.attn_types.end();
}

bool PluginBackend::supports_compute_capability(const std::optional<DeviceCapability>& cap, const RuntimeEnv&) const {
  if (!decl_.compute_capability_range) return true;
  if (!cap) return false;
  const auto& [lo, hi] = *decl_.compute_capability_range;
  return lo <= *cap && *cap <= hi;
}

std::optional<std::string> PluginBackend::supports_combination(const CombinationArgs& args, const RuntimeEnv&) const {
  if (decl_.check_combination == nullptr) return std::nullopt;
  attnsel_combination c{};
  c.struct_size = sizeof(attnsel_combination);
  c.head_size = args.head_size;
  c.dtype = to_c_dtype(args.dtype);
  c.kv_cache_dtype = args.kv_cache_dtype ? args.kv_cache_dtype->c_str() : nullptr;
  c.has_block_size = args.block_size.has_value() ? 1 : 0;
  c.block_size = args.block_size.value_or(0);
  c.use_mla = args.use_mla ? 1 : 0;
  c.has_sink = args.has_sink ? 1 : 0;
  c.use_sparse = args.use_sparse ? 1 : 0;
  c.use_mm_prefix = args.use_mm_prefix ? 1 : 0;
  c.has_device_capability = args.device_capability.has_value() ? 1 : 0;
  if (args.device_capability) c.device_capability = {args.device_capability->major, args.device_capability->minor};
  MessageBuffer reason;
  int status = ATTNSEL_OK;
  try {
    status = decl_.check_combination(decl_.user_data, &c, reason.ptr(), reason.capacity());
  } catch (...) {
    // The ABI forbids exceptions; a C++ plugin that lets one escape still must not take
    // the selection down with it.
    return fmt::format("{}: check_combination threw an exception (plugins must not throw across the ABI)",
                       decl_.name);
  }
  if (status == ATTNSEL_OK) return std::nullopt;
  return reason.text(fmt::format("{} rejects this combination (the plugin gave no reason)", decl_.name));
}

}  // namespace attnsel::plugin
