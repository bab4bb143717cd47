// attnsel's sparse MLA CUDA kernels as the kernel registry and the tests see them:
// DeepSeek-V3.2's sparse attention (SparseMlaImpl: FlashMLA's sparse decode over a bf16 or
// fp8_ds_mla latent cache, any head count up to 128, with the absorption around it) and its
// lightning indexer (IndexerImpl: the fp8 key cache write, the scores, the top-k), for
// FLASHMLA_SPARSE, FLASH_ATTN_MLA_SPARSE and DEEPSEEK_V32_INDEXER on Hopper. Plain
// mma.sync kernels compiled for sm_80 and sm_90a; correctness before speed.
//
// Without CUDA, or without a device they run on, the makers throw NotImplementedError
// saying why. Tensors, caches and index rows live on the device; AttentionMetadata stays on
// the host (checked there, uploaded once per plan).
// Thread-safety: as SparseMlaImpl and IndexerImpl.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "attnsel/facts.hpp"
#include "attnsel/kernel.hpp"
#include "attnsel/selector_config.hpp"
#include "attnsel/sparse_mla.hpp"

namespace attnsel::kernel::cuda::sparse_mla {

SparseMlaKernelLimits cuda_sparse_mla_limits();
IndexerKernelLimits cuda_indexer_limits();

/// ValueError for a layer outside what the kernels compute (DeepSeek's dimensions, bf16 or
/// f16, fp8_ds_mla for bf16 layers; the indexer: head_dim 128, top-k up to 4096).
std::unique_ptr<SparseMlaImpl> make_cuda_sparse_mla_impl(const SparseMlaLayerParams& params);
std::unique_ptr<IndexerImpl> make_cuda_indexer_impl(const IndexerLayerParams& params);

/// Device, ISA and availability on this host (the indexer's: lse_output false).
KernelInfo cuda_sparse_mla_info();
KernelInfo cuda_indexer_info();

/// What FLASHMLA_SPARSE / FLASH_ATTN_MLA_SPARSE declare for this configuration that the
/// sparse attention kernel does not compute: one reason each (runnable mode rejects the
/// backend with them).
std::vector<std::string> cuda_sparse_mla_gaps(const AttentionSelectorConfig& config, const RuntimeEnv& env);
/// Likewise for the indexer kernel behind DEEPSEEK_V32_INDEXER on a CUDA platform.
std::vector<std::string> cuda_indexer_gaps(const AttentionSelectorConfig& config, const RuntimeEnv& env);

}  // namespace attnsel::kernel::cuda::sparse_mla
