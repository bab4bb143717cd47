// CPU_ATTN's kernel implementation: paged attention on the CPU (SIMD through Highway with
// run-time dispatch, OpenMP threads, split-KV). Thread-safety: an implementation is
// immutable; forward/write_kv_cache may run concurrently on distinct outputs.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "attnsel/kernel.hpp"

namespace attnsel::kernel::cpu {

/// Head sizes the CPU kernels compute (CPU_ATTN's declared list).
std::span<const int> supported_head_sizes();

struct CpuAttentionOptions {
  bool allow_bf16_dot = true;  ///< use AVX-512-BF16 dot products for bf16 models when the CPU has them
  int num_threads = 0;         ///< 0: OpenMP's default (every core)
};

/// Throws ValueError when the layer is outside what the CPU kernels compute.
std::unique_ptr<AttentionImpl> make_cpu_attention_impl(const LayerParams& params, CpuAttentionOptions options = {});

/// Which instruction set forward() uses for queries of `dtype` with this kv-cache dtype on
/// this machine, e.g. "AVX3+BF16" or "AVX2".
std::string cpu_attention_isa(ScalarType dtype, CacheDType kv_cache_dtype, CpuAttentionOptions options = {});

}  // namespace attnsel::kernel::cpu
