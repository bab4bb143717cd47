// ROCM_ATTN's capabilities (vllm/v1/attention/backends/rocm_attn.py).
#include "backends/rocm_attn.hpp"

#include "backends/class_factories.hpp"
#include "backends/common.hpp"

namespace attnsel::backends {

BackendCapabilities rocm_attention_capabilities() {
  BackendCapabilities c;
  c.dtypes = kHalfAndFloatDTypes;
  c.kv_cache_dtypes = kHalfAndFp8KvDTypes;
  c.forward_includes_kv_cache_update = false;
  // The native HIP kernel handles 16 and 32; other multiples of 16 take the Triton path.
  c.kernel_block_sizes = {MultipleOf{16}};
  c.head_sizes = {32, 64, 80, 96, 128, 160, 192, 224, 256};
  c.non_causal = true;
  c.sliding_window = true;
  // Its (2, num_blocks, ...) cache is incompatible with connectors that need blocks first.
  c.kv_connector = false;
  // ENCODER_DECODER is excluded: its prefill kernel assumes self-attention.
  c.attn_types = {AttentionType::decoder, AttentionType::encoder, AttentionType::encoder_only};
  // The native HIP kernels need the K and V groups to span all blocks (H outermost in a layer).
  c.kv_cache_layouts = std::vector<KVCacheLayout>{KVCacheLayout::LHBNC, KVCacheLayout::LBHNC};
  return c;
}

namespace {
class RocmAttentionBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "ROCM_ATTN"; }
  std::string qualname() const override { return "attnsel::backends::RocmAttentionBackend"; }
  BackendCapabilities capabilities(const RuntimeEnv&) const override { return rocm_attention_capabilities(); }
};
}  // namespace

void append_rocm_attn(ClassList& out) { out.push_back(std::make_shared<const RocmAttentionBackend>()); }

}  // namespace attnsel::backends
