// ROCM_SEGMENTED_ATTN's capabilities (vllm/v1/attention/backends/rocm_segmented_attn.py): an
// opt-in Triton split-KV subclass of ROCM_ATTN for RDNA3/RDNA4 (gfx11/gfx12) that also serves sinks.
#include "backends/class_factories.hpp"
#include "backends/common.hpp"
#include "backends/rocm_attn.hpp"

namespace attnsel::backends {

namespace {
class RocmSegmentedAttentionBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "ROCM_SEGMENTED_ATTN"; }
  std::string qualname() const override { return "attnsel::backends::RocmSegmentedAttentionBackend"; }
  BackendCapabilities capabilities(const RuntimeEnv& env) const override {
    BackendCapabilities c = rocm_attention_capabilities();
    c.sink = true;
    const std::string& arch = env.device.arch;
    c.compute_capability_rule =
        always(env.device.kind == PlatformKind::rocm && (arch.starts_with("gfx11") || arch.starts_with("gfx12")));
    c.combination_rule = [gfx12 = arch.starts_with("gfx12")](const CombinationArgs& a) -> std::optional<std::string> {
      if (a.kv_cache_dtype && cache_dtype_name(*a.kv_cache_dtype).starts_with("fp8") && !gfx12) return "FP8 KV cache requires gfx12";
      return std::nullopt;
    };
    return c;
  }
};
}  // namespace

void append_rocm_segmented_attn(ClassList& out) {
  out.push_back(std::make_shared<const RocmSegmentedAttentionBackend>());
}

}  // namespace attnsel::backends
