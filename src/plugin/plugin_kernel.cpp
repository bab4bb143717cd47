#include "plugin/plugin_kernel.hpp"

#include <fmt/format.h>

#include "attnsel/errors.hpp"
#include "plugin/abi.hpp"

namespace attnsel::plugin {

namespace {

// Thread-safety: the plugin promises that write_kv_cache and forward may run
// concurrently on distinct outputs; this wrapper adds no state of its own.
class PluginAttentionImpl final : public kernel::AttentionImpl {
 public:
  PluginAttentionImpl(kernel::LayerParams params, std::shared_ptr<const SharedLibrary> library,
                      const attnsel_kernel_ops* ops, void* instance, std::string label)
      : AttentionImpl(std::move(params)),
        library_(std::move(library)),
        ops_(ops),
        instance_(instance),
        label_(std::move(label)) {}

  ~PluginAttentionImpl() override { ops_->destroy(instance_); }
  PluginAttentionImpl(const PluginAttentionImpl&) = delete;
  PluginAttentionImpl& operator=(const PluginAttentionImpl&) = delete;

  void write_kv_cache(const kernel::TensorView& key, const kernel::TensorView& value, const kernel::KVCacheView& cache,
                      const kernel::AttentionMetadata& md) const override {
    kernel::validate_cache_write_args(params_, key, value, cache, md);
    const attnsel_tensor k = to_c_tensor(key);
    const attnsel_tensor v = to_c_tensor(value);
    call("write_kv_cache", cache, md, [&](const attnsel_kv_cache& c, const attnsel_metadata& m, MessageBuffer& error) {
      return ops_->write_kv_cache(instance_, &k, &v, &c, &m, error.ptr(), error.capacity());
    });
  }

  void forward(const kernel::TensorView& query, const kernel::KVCacheView& cache, const kernel::AttentionMetadata& md,
               const kernel::TensorView& output) const override {
    kernel::validate_forward_args(params_, query, cache, md, output);
    const attnsel_tensor q = to_c_tensor(query);
    const attnsel_tensor o = to_c_tensor(output);
    call("forward", cache, md, [&](const attnsel_kv_cache& c, const attnsel_metadata& m, MessageBuffer& error) {
      return ops_->forward(instance_, &q, &c, &m, &o, error.ptr(), error.capacity());
    });
  }

 private:
  // Calls the plugin's operation `op` on `cache` and `md`, which every operation takes (`f`
  // passes it their C forms and the error buffer): a failure it reports becomes a
  // RuntimeError with its message. The ABI forbids exceptions; one that escapes a C++ plugin
  // anyway becomes an error here.
  template <class F>
  void call(std::string_view op, const kernel::KVCacheView& cache, const kernel::AttentionMetadata& md, F&& f) const {
    const attnsel_kv_cache c = to_c_cache(cache);
    const attnsel_metadata m = to_c_metadata(md);
    MessageBuffer error;
    int status = ATTNSEL_OK;
    try {
      status = f(c, m, error);
    } catch (...) {
      throw RuntimeError(fmt::format("{}: the plugin threw an exception (plugins must not throw across the ABI)", label_));
    }
    if (status != ATTNSEL_OK) throw RuntimeError(fmt::format("{}: {} failed: {}", label_, op, error.text("no message")));
  }

  std::shared_ptr<const SharedLibrary> library_;  // keeps the plugin's code (destroy() too) loaded
  const attnsel_kernel_ops* ops_;
  void* instance_;
  std::string label_;
};

}  // namespace

std::unique_ptr<kernel::AttentionImpl> make_plugin_impl(std::shared_ptr<const SharedLibrary> library,
                                                        const BackendDeclaration& declaration,
                                                        const std::string& qualname,
                                                        const kernel::LayerParams& params) {
  kernel::validate_layer_params(params);
  const std::string label = fmt::format("{} (plugin backend {})", declaration.name, qualname);
  // attnsel_plugin_layer_params (plugin ABI v1) carries one k_scale and one v_scale: a plugin
  // cannot be handed per-head scales, and computing with the scalars would be wrong.
  if (!params.k_scales.empty() || !params.v_scales.empty())
    throw ValueError(fmt::format("{} cannot run this layer: per-KV-head quantization scales (LayerParams::k_scales / "
                                 "v_scales) cannot be passed through the plugin ABI, which carries one k_scale and "
                                 "one v_scale per layer",
                                 label));
  if (params.batch_invariant)
    throw ValueError(fmt::format("{} cannot run this layer: batch-invariant mode (LayerParams::batch_invariant) cannot "
                                 "be passed through the plugin ABI",
                                 label));
  const attnsel_plugin_layer_params c = to_c_layer_params(params);
  MessageBuffer error;
  void* instance = nullptr;
  const int status = declaration.kernel->create(declaration.user_data, &c, &instance, error.ptr(), error.capacity());
  if (status != ATTNSEL_OK)
    throw ValueError(fmt::format("{} cannot run this layer: {}", label, error.text("create failed without a message")));
  if (instance == nullptr) throw ValueError(fmt::format("{}: create succeeded but returned no instance", label));
  return std::make_unique<PluginAttentionImpl>(params, std::move(library), declaration.kernel, instance, label);
}

}  // namespace attnsel::plugin
