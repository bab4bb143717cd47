// FLEX_ATTENTION's capabilities (vllm/v1/attention/backends/flex_attention.py): PyTorch's
// FlexAttention, the float32 fallback on CUDA.
#include "backends/class_factories.hpp"
#include "backends/common.hpp"

namespace attnsel::backends {

namespace {
class FlexAttentionBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "FLEX_ATTENTION"; }
  std::string qualname() const override { return "attnsel::backends::FlexAttentionBackend"; }
  BackendCapabilities capabilities(const RuntimeEnv&) const override {
    BackendCapabilities c;
    c.dtypes = kHalfAndFloatDTypes;
    c.forward_includes_kv_cache_update = false;
    c.kernel_block_sizes = {MultipleOf{16}};
    c.non_causal = true;
    c.mm_prefix = true;
    c.batch_invariance = true;
    // Sliding windows are expressed in the mask_mod (see docs/DECISIONS.md).
    c.sliding_window = true;
    c.attn_types = {AttentionType::decoder, AttentionType::encoder_only};
    return c;
  }
};
}  // namespace

void append_flex_attention(ClassList& out) { out.push_back(std::make_shared<const FlexAttentionBackend>()); }

}  // namespace attnsel::backends
