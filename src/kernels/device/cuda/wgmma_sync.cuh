// Internal: the synchronisation around Hopper's warpgroup matrix products (sm_90a) — the
// fences, commit groups and waits of wgmma, the shared-memory operand descriptor, named
// barriers and the generic-to-async proxy fence — for kernels that issue wgmma
// (wgmma_ops.cuh holds the products themselves).
#pragma once

#include <cstdint>

namespace attnsel::kernel::cuda {

/// Orders this warpgroup's register and shared-memory accesses before the wgmma that follow.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
/// Closes the wgmma issued since the last commit into one group.
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
/// Waits until at most N committed groups are still running.
template <int N> __device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/// Tells the compiler that `a` may change here (accumulators in flight in a wgmma), so it
/// neither reads them early nor moves their uses across the issue or the wait.
template <int NT> __device__ __forceinline__ void fence_operand(float (&a)[NT][4]) {
#pragma unroll
  for (int i = 0; i < NT; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(a[i][e])::"memory");
}
template <int NT> __device__ __forceinline__ void fence_operand(std::uint32_t (&a)[NT][4]) {
#pragma unroll
  for (int i = 0; i < NT; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(a[i][e])::"memory");
}

/// Shared-memory matrix descriptor of a 128-byte-swizzled operand; lbo and sbo in bytes.
__device__ __forceinline__ std::uint64_t sw128_desc(std::uint32_t addr, std::uint32_t lbo, std::uint32_t sbo) {
  std::uint64_t d = 0;
  d |= std::uint64_t((addr & 0x3FFFF) >> 4);
  d |= std::uint64_t((lbo >> 4) & 0x3FFF) << 16;
  d |= std::uint64_t((sbo >> 4) & 0x3FFF) << 32;
  d |= std::uint64_t(1) << 62;
  return d;
}
/// A descriptor `bytes` further on (a multiple of 16, no carry out of the address field).
/// Opaque to the compiler, so it cannot hoist a loop's worth of descriptors into registers.
__device__ __forceinline__ std::uint64_t desc_plus(std::uint64_t d, std::uint32_t bytes) {
  std::uint64_t r;
  asm volatile("add.s64 %0, %1, %2;\n" : "=l"(r) : "l"(d), "l"(std::uint64_t(bytes >> 4)));
  return r;
}

/// Named barriers: `threads` threads (a multiple of 32) meet at barrier `id` (1-15; 0 is
/// __syncthreads). arrive does not wait: a producer signals, its consumer syncs.
__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

/// Makes this thread's ordinary shared-memory writes visible to the async proxy (wgmma and
/// TMA read or overwrite them next).
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

}  // namespace attnsel::kernel::cuda
