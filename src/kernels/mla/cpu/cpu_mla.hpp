// CPU_MLA's kernel: multi-head latent attention on the CPU behind the MlaImpl interface
// (include/attnsel/mla.hpp). Beyond vLLM's CPU kernel (csrc/cpu/mla_decode.cpp: one token
// per decode request, block 16, no LSE, no fp8, one core per request) it computes any head
// count up to 128, 1 to 4 query tokens per decode request (bottom-right causal), split-KV
// over every core with an exact log-sum-exp combine, fp8 e4m3 caches with a per-tensor scale,
// the decode kernel's LSE, any block size, and the prefill (192/128 attention over the new
// tokens and chunked cached context). The attention passes run the CPU attention kernel's
// SIMD code (kernels/attention/cpu); the matrix products are gemm.hpp's.
// Thread-safety: as MlaImpl.
#pragma once

#include <memory>
#include <string>

#include "attnsel/cache_dtype.hpp"
#include "attnsel/mla.hpp"

namespace attnsel::kernel::mla::cpu {

struct CpuMlaOptions {
  bool allow_bf16_dot = true;  ///< AVX-512-BF16 dot products for bf16 layers when the CPU has them
  /// The cores a plan splits its work for, and the most threads that run it; 0: OpenMP's
  /// default team (omp_get_max_threads()) when the plan is made. Results depend on the
  /// plan's split only: the same bits on any team that runs it.
  int num_threads = 0;
  /// > 0: split every decode work item into this many key ranges (at most one per 32-key
  /// tile) instead of the planner's count — for tests and tuning.
  int decode_splits = 0;
};

/// What the kernel computes at most.
MlaKernelLimits cpu_mla_limits();

/// ValueError for a layer outside what the kernel computes (DeepSeek's dimensions only).
std::unique_ptr<MlaImpl> make_cpu_mla_impl(const MlaLayerParams& params, CpuMlaOptions options = {});

/// The instruction set the attention passes use for layers of `dtype` with this cache
/// dtype on this machine, e.g. "AVX3+BF16".
std::string cpu_mla_isa(ScalarType dtype, CacheDType kv_cache_dtype, CpuMlaOptions options = {});

}  // namespace attnsel::kernel::mla::cpu
