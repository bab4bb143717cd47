// The cache-write kernel (vLLM's reshape_and_cache): scatters each new token's keys and
// values into its slot of the paged cache, 16 bytes per thread. Slot -1 marks padding.
#include "kernels/cuda/dispatch.cuh"

namespace attnsel::kernel::cuda {
namespace {

__global__ void __launch_bounds__(128) cache_write_kernel(const __grid_constant__ CacheWriteParams p) {
  const int tok = blockIdx.x;
  const std::int64_t slot = p.slot_mapping[tok];
  if (slot < 0) return;
  const std::int64_t page = slot / p.block_size;
  const int off = static_cast<int>(slot % p.block_size);
  const int chunks = p.head_size / 8;  // 16-byte chunks of 16-bit elements
  const auto* key = static_cast<const std::uint16_t*>(p.key);
  const auto* value = static_cast<const std::uint16_t*>(p.value);
  auto* kc = static_cast<std::uint16_t*>(p.k_cache);
  auto* vc = static_cast<std::uint16_t*>(p.v_cache);
  for (int idx = threadIdx.x; idx < p.num_kv_heads * chunks; idx += blockDim.x) {
    const int h = idx / chunks, c = (idx % chunks) * 8;
    const uint4 k = *reinterpret_cast<const uint4*>(key + tok * p.key_stride_tok + h * p.key_stride_head + c);
    const uint4 v = *reinterpret_cast<const uint4*>(value + tok * p.value_stride_tok + h * p.value_stride_head + c);
    *reinterpret_cast<uint4*>(kc + page * p.k_stride_block + off * p.k_stride_tok + h * p.k_stride_head + c) = k;
    *reinterpret_cast<uint4*>(vc + page * p.v_stride_block + off * p.v_stride_tok + h * p.v_stride_head + c) = v;
  }
}

}  // namespace

void launch_cache_write(const CacheWriteParams& p, void* stream) {
  if (p.num_tokens == 0) return;
  cache_write_kernel<<<p.num_tokens, 128, 0, static_cast<cudaStream_t>(stream)>>>(p);
  check_launch("cache_write_kernel", cfg_string("tokens={} kv_heads={} head_size={} block_size={}", p.num_tokens,
                                                 p.num_kv_heads, p.head_size, p.block_size));
}

}  // namespace attnsel::kernel::cuda
