// TRITON_ATTN's capabilities (vllm/v1/attention/backends/triton_attn.py).
#include "backends/triton_attn.hpp"

#include "backends/common.hpp"
#include "backends/families.hpp"

namespace attnsel::backends {

std::vector<DType> TritonAttentionBackend::supported_dtypes(const RuntimeEnv&) const { return kHalfAndFloatDTypes; }

std::vector<std::string> TritonAttentionBackend::supported_kv_cache_dtypes(const RuntimeEnv&) const {
  return {"auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2",
          "int4_per_token_head", "int8_per_token_head", "fp8_per_token_head"};
}

std::vector<KernelBlockSize> TritonAttentionBackend::get_supported_kernel_block_sizes(const RuntimeEnv&) const {
  return {MultipleOf{16}};
}

bool TritonAttentionBackend::supports_block_size(std::optional<int> block_size, const RuntimeEnv&) const {
  return !block_size || *block_size % 16 == 0;
}

bool TritonAttentionBackend::supports_head_size(int head_size, const RuntimeEnv&) const { return head_size >= 32; }

void append_triton_attn_classes(ClassList& out) { out.push_back(std::make_shared<const TritonAttentionBackend>()); }

}  // namespace attnsel::backends
