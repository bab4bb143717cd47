// The cache-write kernel (vLLM's reshape_and_cache): scatters each new token's keys and
// values into its slot of the paged cache, 8 elements per thread. Slot -1 marks padding.
// A 16-bit cache takes the elements as they are; an e4m3 cache takes value / scale (the
// layer's scale, or the KV head's with per-head scales), rounded to nearest even and
// saturated (as vLLM's fp8 writer does).
#include "kernels/attention/cuda/cache_store.cuh"
#include "kernels/attention/cuda/dispatch.cuh"
#include "kernels/device/cuda/programmatic_launch.cuh"

namespace attnsel::kernel::cuda {
namespace {

/// One token per CTA; each thread moves 8 elements (16 bytes of T) of a KV head's row.
template <class T, bool FP8>
__global__ void __launch_bounds__(128) cache_write_kernel(const __grid_constant__ CacheWriteParams p) {
  // The next layer's attention may start launching now; its reads of this cache wait for
  // this kernel's completion. The slot comes from the plan's upload (a copy, never a
  // kernel's output), so its load is issued while the kernel before may still run; the
  // keys, values and the cache wait for that kernel (the previous layer's attention, or
  // whatever produced the keys and values). Every CTA waits, even one with nothing to
  // write: the kernel after this one waits only for this one, so this one's completion
  // must imply the completion of the kernels before it.
  allow_dependent_grids();
  const int tok = blockIdx.x;
  const std::int64_t slot = p.slot_mapping[tok];
  wait_for_prior_grids();
  if (slot < 0) return;
  const std::int64_t page = slot / p.block_size;
  const int off = static_cast<int>(slot % p.block_size);
  const int chunks = p.head_size / 8;
  const T* key = static_cast<const T*>(p.key);
  const T* value = static_cast<const T*>(p.value);
  for (int idx = threadIdx.x; idx < p.num_kv_heads * chunks; idx += blockDim.x) {
    const int h = idx / chunks, c = (idx % chunks) * 8;
    const uint4 k = *reinterpret_cast<const uint4*>(key + tok * p.key_stride_tok + h * p.key_stride_head + c);
    const uint4 v = *reinterpret_cast<const uint4*>(value + tok * p.value_stride_tok + h * p.value_stride_head + c);
    store_kv_chunk<T, FP8>(p, p.k_cache, p.v_cache, page, off, h, c, k, v);
  }
}

}  // namespace

void launch_cache_write(const CacheWriteParams& p, ScalarType e, bool to_fp8, bool programmatic, void* stream) {
  if (p.num_tokens == 0) return;
  auto cfg = [&] {
    return cfg_string("tokens={} kv_heads={} head_size={} block_size={} cache={}", p.num_tokens, p.num_kv_heads,
                      p.head_size, p.block_size, to_fp8 ? "fp8_e4m3" : "16-bit");
  };
  const auto s = static_cast<cudaStream_t>(stream);
  dispatch_elem(e, [&]<class T>() {
    const cudaError_t err = to_fp8 ? launch_kernel(cache_write_kernel<T, true>, dim3(p.num_tokens), dim3(128), 0, s,
                                                   programmatic, p)
                                   : launch_kernel(cache_write_kernel<T, false>, dim3(p.num_tokens), dim3(128), 0, s,
                                                   programmatic, p);
    if (err != cudaSuccess) throw_cuda_error(static_cast<int>(err), "cache_write_kernel", cfg());
  });
  check_launch_lazy("cache_write_kernel", cfg);
}

}  // namespace attnsel::kernel::cuda
