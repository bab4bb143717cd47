// attnsel's CPU sparse MLA kernel behind the SparseMlaImpl interface (include/attnsel/
// sparse_mla.hpp): DeepSeek-V3.2's sparse attention over a bf16 (or f16 / f32) latent cache
// or the fp8_ds_mla format, any head count up to 128, any block size, decode and prefill
// tokens alike. vLLM has no sparse attention on the CPU (its CPU platform raises "Sparse
// Attention is not supported on CPU."); this kernel computes FlashMLA's sparse kernels with
// the CPU attention kernel's SIMD code (kernels/attention/cpu) over gathered rows and the
// MLA kernels' matrix products (kernels/mla/cpu/gemm.hpp).
// Thread-safety: as SparseMlaImpl.
#pragma once

#include <memory>
#include <string>

#include "attnsel/sparse_mla.hpp"

namespace attnsel::kernel::sparse_mla::cpu {

struct CpuSparseMlaOptions {
  bool allow_bf16_dot = true;  ///< AVX-512-BF16 dot products for bf16 layers when the CPU has them
  /// The cores a plan splits its work for, and the most threads that run it; 0: OpenMP's
  /// default team when the plan is made. Results depend on the plan's split only.
  int num_threads = 0;
};

SparseMlaKernelLimits cpu_sparse_mla_limits();

/// ValueError for a layer outside what the kernel computes (DeepSeek's dimensions only).
std::unique_ptr<SparseMlaImpl> make_cpu_sparse_mla_impl(const SparseMlaLayerParams& params,
                                                        CpuSparseMlaOptions options = {});

/// The instruction set of its attention for layers of `dtype`, e.g. "AVX3+BF16".
std::string cpu_sparse_mla_isa(ScalarType dtype, CpuSparseMlaOptions options = {});

}  // namespace attnsel::kernel::sparse_mla::cpu
