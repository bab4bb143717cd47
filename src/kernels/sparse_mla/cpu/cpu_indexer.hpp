// The CPU kernel of DeepSeek-V3.2's lightning indexer behind the IndexerImpl interface
// (include/attnsel/sparse_mla.hpp): the fp8 key cache and its write, the scores of every
// query token over the positions it sees, and their top-k. vLLM has no CPU indexer (its
// kernels are DeepGEMM's fp8_mqa_logits / fp8_paged_mqa_logits and CUDA top-k kernels):
// this one computes what they compute, in any block size, for decode and prefill alike.
// The products q8 · k8 run in bf16 (exact for e4m3 values) with fp32 sums, AVX-512-BF16 dot
// products where the CPU has them (the MLA kernels' gemm.hpp), else fp32.
// Thread-safety: as IndexerImpl.
#pragma once

#include <memory>
#include <string>

#include "attnsel/sparse_mla.hpp"

namespace attnsel::kernel::sparse_mla::cpu {

struct CpuIndexerOptions {
  bool allow_bf16_dot = true;  ///< AVX-512-BF16 products when the CPU has them
  /// The cores a plan splits its work for, and the most threads that run it; 0: OpenMP's
  /// default team when the plan is made. Results do not depend on it.
  int num_threads = 0;
};

IndexerKernelLimits cpu_indexer_limits();

/// ValueError for a layer outside what the kernel computes (index_head_dim other than 128).
std::unique_ptr<IndexerImpl> make_cpu_indexer_impl(const IndexerLayerParams& params, CpuIndexerOptions options = {});

/// The instruction set of its products on this machine, e.g. "AVX3+BF16".
std::string cpu_indexer_isa(CpuIndexerOptions options = {});

}  // namespace attnsel::kernel::sparse_mla::cpu
