// TRITON_ATTN's capabilities (vllm/v1/attention/backends/triton_attn.py).
#include "backends/triton_attn.hpp"

#include "backends/class_factories.hpp"
#include "backends/common.hpp"

namespace attnsel::backends {

BackendCapabilities TritonAttentionBackend::capabilities(const RuntimeEnv&) const {
  BackendCapabilities c;
  c.dtypes = kHalfAndFloatDTypes;
  c.kv_cache_dtypes = {CacheDType::auto_, CacheDType::float16, CacheDType::bfloat16, CacheDType::fp8,
                       CacheDType::fp8_e4m3, CacheDType::fp8_e5m2, CacheDType::int4_per_token_head,
                       CacheDType::int8_per_token_head, CacheDType::fp8_per_token_head};
  c.forward_includes_kv_cache_update = false;
  c.kernel_block_sizes = {MultipleOf{16}};
  c.head_size_rule = [](int head_size) { return head_size >= 32; };
  c.sink = true;
  c.mm_prefix = true;
  c.sliding_window = true;
  c.non_causal = true;
  c.batch_invariance = true;
  c.rswa = true;
  c.attn_types = kAllAttnTypes;
  c.alibi_sqrt = true;
  return c;
}

void append_triton_attn(ClassList& out) { out.push_back(std::make_shared<const TritonAttentionBackend>()); }

}  // namespace attnsel::backends
