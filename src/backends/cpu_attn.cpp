// CPU_ATTN's capabilities (vllm/v1/attention/backends/cpu_attn.py).
#include "backends/cpu_attn.hpp"

#include "backends/class_factories.hpp"
#include "backends/common.hpp"

namespace attnsel::backends {

BackendCapabilities CPUAttentionBackend::capabilities(const RuntimeEnv&) const {
  BackendCapabilities c;
  c.dtypes = kHalfAndFloatDTypes;
  // vLLM lists neither "float16" nor "bfloat16": the CPU cache stores the model dtype ("auto") or fp8.
  c.kv_cache_dtypes = {CacheDType::auto_, CacheDType::fp8, CacheDType::fp8_e4m3, CacheDType::fp8_e5m2};
  c.forward_includes_kv_cache_update = false;
  c.kernel_block_sizes = {MultipleOf{16}};
  c.head_sizes = {32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512};
  c.non_causal = true;
  c.sliding_window = true;
  c.attn_types = kAllAttnTypes;
  // vLLM's CPU kernels read caches shaped [num_blocks, num_kv_heads, block_size, head_size]
  // (CPUAttentionBackend.get_kv_cache_shape), i.e. HND; ours also read NHD.
  c.kv_cache_layouts = std::vector<KVCacheLayout>{KVCacheLayout::LBHNC, KVCacheLayout::LBNHC};
  return c;
}

void append_cpu_attn(ClassList& out) { out.push_back(std::make_shared<const CPUAttentionBackend>()); }

}  // namespace attnsel::backends
