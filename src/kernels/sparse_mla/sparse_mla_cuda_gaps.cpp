// What FLASHMLA_SPARSE and FLASH_ATTN_MLA_SPARSE (vllm/v1/attention/backends/mla/
// flashmla_sparse.py, flashattn_mla_sparse.py) and, on a CUDA platform, DeepSeek-V3.2's
// indexer backend (indexer.py) declare that attnsel's sparse MLA CUDA kernels do not
// compute. Each entry is a rejection reason in runnable mode, never a silent fallback.
// Compiled in every build (the statements do not depend on the build's CUDA).
#include <fmt/format.h>

#include "attnsel/types.hpp"
#include "kernels/sparse_mla/cuda/sparse_mla_cuda.hpp"

namespace attnsel::kernel::cuda::sparse_mla {

namespace {

// The kernels' images: sm_80 and sm_90a.
void device_gap(const RuntimeEnv& env, std::vector<std::string>& gaps) {
  if (env.device.kind == PlatformKind::cuda && env.device.capability && env.device.capability->major != 8 &&
      env.device.capability->major != 9)
    gaps.push_back(
        fmt::format("attnsel's sparse MLA CUDA kernels are built for sm_80 and sm_90a; compute capability "
                    "{} has no kernel image in this build",
                    env.device.capability->str()));
}

}  // namespace

std::vector<std::string> cuda_sparse_mla_gaps(const AttentionSelectorConfig& c, const RuntimeEnv& env) {
  std::vector<std::string> gaps;
  if (c.dtype != DType::bfloat16 && c.dtype != DType::float16)
    gaps.push_back(fmt::format("dtype {} is not implemented in attnsel's sparse MLA CUDA kernel (bfloat16, float16)",
                               dtype_name(c.dtype)));
  const CacheDType kv = c.kv_cache_dtype.value_or(CacheDType::auto_);
  const bool model_dtype = kv == CacheDType::auto_ || (kv == CacheDType::bfloat16 && c.dtype == DType::bfloat16) ||
                           (kv == CacheDType::float16 && c.dtype == DType::float16);
  const bool ds_mla = kv == CacheDType::fp8_ds_mla && c.dtype == DType::bfloat16;
  if (!model_dtype && !ds_mla)
    gaps.push_back(
        fmt::format("kv_cache_dtype '{}' with {} activations is not implemented in attnsel's sparse MLA "
                    "CUDA kernel (the model dtype, or fp8_ds_mla with bfloat16)",
                    cache_dtype_name(kv), dtype_name(c.dtype)));
  if (c.head_size != 576)
    gaps.push_back(
        fmt::format("head size {} is not implemented in attnsel's sparse MLA CUDA kernel (DeepSeek's "
                    "576-wide latent: kv_lora_rank 512 + qk_rope_head_dim 64)",
                    c.head_size));
  device_gap(env, gaps);
  return gaps;
}

std::vector<std::string> cuda_indexer_gaps(const AttentionSelectorConfig& c, const RuntimeEnv& env) {
  std::vector<std::string> gaps;
  if (c.head_size != 0 && c.head_size != 128)
    gaps.push_back(
        fmt::format("index_head_dim {} is not implemented in attnsel's lightning indexer CUDA kernel (128: "
                    "one fp8 quantisation block)",
                    c.head_size));
  device_gap(env, gaps);
  return gaps;
}

}  // namespace attnsel::kernel::cuda::sparse_mla
