// CPU_ATTN's capabilities (vllm/v1/attention/backends/cpu_attn.py).
#include "backends/cpu_attn.hpp"

#include "backends/common.hpp"
#include "backends/families.hpp"

namespace attnsel::backends {

std::vector<DType> CPUAttentionBackend::supported_dtypes(const RuntimeEnv&) const { return kHalfAndFloatDTypes; }

// vLLM lists neither "float16" nor "bfloat16": the CPU cache stores the model dtype ("auto") or fp8.
std::vector<std::string> CPUAttentionBackend::supported_kv_cache_dtypes(const RuntimeEnv&) const {
  return {"auto", "fp8", "fp8_e4m3", "fp8_e5m2"};
}

std::vector<KernelBlockSize> CPUAttentionBackend::get_supported_kernel_block_sizes(const RuntimeEnv&) const {
  return {MultipleOf{16}};
}

std::vector<int> CPUAttentionBackend::get_supported_head_sizes(const RuntimeEnv&) const {
  return {32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512};
}

// vLLM's CPU kernels read caches shaped [num_blocks, num_kv_heads, block_size, head_size]
// (CPUAttentionBackend.get_kv_cache_shape), i.e. HND; ours also read NHD.
std::optional<std::vector<KVCacheLayout>> CPUAttentionBackend::supported_kv_cache_layouts(const RuntimeEnv&) const {
  return std::vector<KVCacheLayout>{KVCacheLayout::LBHNC, KVCacheLayout::LBNHC};
}

void append_cpu_attn_classes(ClassList& out) { out.push_back(std::make_shared<const CPUAttentionBackend>()); }

}  // namespace attnsel::backends
