// FLEX_ATTENTION's capabilities (vllm/v1/attention/backends/flex_attention.py): PyTorch's
// FlexAttention, the float32 fallback on CUDA.
#include "backends/common.hpp"
#include "backends/families.hpp"

namespace attnsel::backends {

namespace {
class FlexAttentionBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "FLEX_ATTENTION"; }
  std::string qualname() const override { return "attnsel::backends::FlexAttentionBackend"; }
  std::vector<DType> supported_dtypes(const RuntimeEnv&) const override { return kHalfAndFloatDTypes; }
  bool forward_includes_kv_cache_update() const override { return false; }
  std::vector<KernelBlockSize> get_supported_kernel_block_sizes(const RuntimeEnv&) const override {
    return {MultipleOf{16}};
  }
  bool supports_non_causal(const RuntimeEnv&) const override { return true; }
  bool supports_mm_prefix(const RuntimeEnv&) const override { return true; }
  bool supports_batch_invariance(const RuntimeEnv&) const override { return true; }
  // Sliding windows are expressed in the mask_mod (see docs/DECISIONS.md).
  bool supports_sliding_window(const RuntimeEnv&) const override { return true; }
  bool supports_attn_type(AttentionType t) const override {
    return t == AttentionType::decoder || t == AttentionType::encoder_only;
  }
};
}  // namespace

void append_flex_attention_classes(ClassList& out) { out.push_back(std::make_shared<const FlexAttentionBackend>()); }

}  // namespace attnsel::backends
