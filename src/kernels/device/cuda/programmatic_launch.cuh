// Internal: programmatic dependent launch (sm_90+). A layer's cache write and its attention
// are two dependent kernels, and the next layer's cache write depends on this layer's
// attention. Launched with programmatic stream serialization, a kernel's CTAs may start
// while the kernel before it in the stream is still running (once every CTA of that kernel
// has called allow_dependent_grids() or exited), so their launch and their prologue overlap
// its tail. Every kernel launched this way calls wait_for_prior_grids() before it reads or
// writes memory that a kernel before it may write or read: that call returns when the
// prior kernels have completed and their writes are visible, so the data dependencies are
// those of plain stream order. A kernel waits for the one launched just before it only, so
// every CTA of such a kernel calls wait_for_prior_grids() before it exits, even one with no
// work: its kernel's completion then implies that of every kernel before it in the stream.
// Stream capture records the relation as a programmatic edge,
// so it holds inside CUDA graphs too. On sm_80 both calls compile to nothing and the launch
// attribute is not set.
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace attnsel::kernel::cuda {

/// Returns when every kernel this one depends on has completed and its writes are visible
/// (immediately when the kernel was launched without the attribute).
__device__ __forceinline__ void wait_for_prior_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/// Lets the next kernel in the stream start launching (its own wait still orders its
/// memory accesses after this kernel's completion).
__device__ __forceinline__ void allow_dependent_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/// Launches `kernel`, with programmatic stream serialization when `programmatic`.
template <class... Params, class... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem, cudaStream_t stream,
                          bool programmatic, Args&&... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute[1] = {};
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = programmatic ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace attnsel::kernel::cuda
