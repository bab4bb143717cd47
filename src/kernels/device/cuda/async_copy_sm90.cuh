// Internal: Hopper asynchronous-copy primitives — mbarriers, bulk copies (cp.async.bulk)
// and tensor copies (TMA). They compile to a trap below sm_90, so kernels that use them can
// share a source file with the portable ones; the host launches them only on sm_90.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace attnsel::kernel::cuda {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define ATTNSEL_SM90_COPY 1
#endif

__device__ __forceinline__ void mbar_init(std::uint32_t bar, std::uint32_t count) {
#ifdef ATTNSEL_SM90_COPY
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
#else
  __trap();
#endif
}
__device__ __forceinline__ void mbar_fence_init() {
#ifdef ATTNSEL_SM90_COPY
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void mbar_arrive_expect_tx(std::uint32_t bar, std::uint32_t bytes) {
#ifdef ATTNSEL_SM90_COPY
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
#else
  __trap();
#endif
}
__device__ __forceinline__ void mbar_arrive(std::uint32_t bar) {
#ifdef ATTNSEL_SM90_COPY
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
#else
  __trap();
#endif
}
/// `count` arrivals at once (one thread standing for several).
__device__ __forceinline__ void mbar_arrive_count(std::uint32_t bar, std::uint32_t count) {
#ifdef ATTNSEL_SM90_COPY
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
#else
  __trap();
#endif
}
__device__ __forceinline__ bool mbar_try_wait(std::uint32_t bar, std::uint32_t parity) {
#ifdef ATTNSEL_SM90_COPY
  std::uint32_t done = 0;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
#else
  __trap();
  return true;
#endif
}
/// Waits for a barrier phase. A wait of more than ~2^35 cycles (tens of seconds) can only be
/// a pipeline bug: trap, so the launch fails with an error instead of hanging the device.
__device__ __forceinline__ void mbar_wait(std::uint32_t bar, std::uint32_t parity) {
  if (mbar_try_wait(bar, parity)) return;
  const long long start = clock64();
  while (!mbar_try_wait(bar, parity))
    if (clock64() - start > (1ll << 35)) __trap();
}
/// The same wait with the whole loop, timeout included, in one asm statement: around the C++
/// loop above, ptxas allocates a warp-specialised kernel's consumers within the kernel's
/// launch-bound registers (168 at 384 threads) instead of their setmaxnreg budget; around
/// this one it honours the budget. One try comes before the clock is read: the usual case,
/// a phase already complete, is a try_wait and a branch. In the Hopper prefill on the H200
/// a loop that read the clock before every try measured 7–13 % slower than the C++ loop at
/// d≤128; this one is within ±1 % of it there, and 11–14 % faster than that loop at d=256.
__device__ __forceinline__ void mbar_wait_in_asm(std::uint32_t bar, std::uint32_t parity) {
#ifdef ATTNSEL_SM90_COPY
  asm volatile(
      "{\n.reg .pred done;\n.reg .u64 t0, t1;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@done bra DONE;\n"
      "mov.u64 t0, %%clock64;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@done bra DONE;\n"
      "mov.u64 t1, %%clock64;\n"
      "sub.u64 t1, t1, t0;\n"
      "setp.lt.u64 done, t1, 34359738368;\n"
      "@done bra WAIT;\n"
      "trap;\n"
      "DONE:\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
#else
  (void)bar;
  (void)parity;
  __trap();
#endif
}
/// Contiguous global→shared copy by the bulk-copy engine; completes bytes on `bar`.
__device__ __forceinline__ void bulk_copy_g2s(std::uint32_t dst, const void* src, std::uint32_t bytes,
                                              std::uint32_t bar) {
#ifdef ATTNSEL_SM90_COPY
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
#else
  __trap();
#endif
}
__device__ __forceinline__ void tma_load_2d(std::uint32_t dst, const CUtensorMap* map, std::uint32_t bar, int c0,
                                            int c1) {
#ifdef ATTNSEL_SM90_COPY
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], "
      "[%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
#else
  __trap();
#endif
}
__device__ __forceinline__ void tma_load_3d(std::uint32_t dst, const CUtensorMap* map, std::uint32_t bar, int c0,
                                            int c1, int c2) {
#ifdef ATTNSEL_SM90_COPY
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], "
      "[%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
#else
  __trap();
#endif
}
__device__ __forceinline__ void tma_load_4d(std::uint32_t dst, const CUtensorMap* map, std::uint32_t bar, int c0,
                                            int c1, int c2, int c3) {
#ifdef ATTNSEL_SM90_COPY
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, "
      "%6}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
#else
  __trap();
#endif
}

__device__ __forceinline__ void tma_load_5d(std::uint32_t dst, const CUtensorMap* map, std::uint32_t bar, int c0,
                                            int c1, int c2, int c3, int c4) {
#ifdef ATTNSEL_SM90_COPY
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, "
      "%6, %7}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4)
      : "memory");
#else
  __trap();
#endif
}

/// A TMA store of one box from shared memory (the tensor map's layout and swizzle) to
/// global memory, in the thread's bulk group; coordinates past the map's bounds are not
/// written. The shared-memory writes it reads must be fenced for the async proxy first.
__device__ __forceinline__ void tma_store_3d(const CUtensorMap* map, std::uint32_t src, int c0, int c1, int c2) {
#ifdef ATTNSEL_SM90_COPY
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
                   reinterpret_cast<std::uint64_t>(map)),
               "r"(src), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
#else
  __trap();
#endif
}
/// Closes the thread's bulk group and waits until every store in it has read its shared
/// memory (the writes to global memory may still be in flight).
__device__ __forceinline__ void bulk_stores_read() {
#ifdef ATTNSEL_SM90_COPY
  asm volatile("cp.async.bulk.commit_group;\ncp.async.bulk.wait_group.read 0;\n" ::: "memory");
#else
  __trap();
#endif
}

}  // namespace attnsel::kernel::cuda
