// What FLASH_ATTN declares (FlashAttentionBackend, vllm/v1/attention/backends/flash_attn.py) that attnsel's CUDA kernels do not compute yet.
// Each entry is a rejection reason in runnable mode, never a silent fallback.
#include <fmt/format.h>

#include "attnsel/types.hpp"
#include "kernels/attention/cuda/flash_attn_cuda.hpp"

namespace attnsel::kernel::cuda {

std::vector<std::string> flash_attn_cuda_gaps(const AttentionSelectorConfig& c, const RuntimeEnv& env) {
  std::vector<std::string> gaps;
  const CacheDType kv = c.kv_cache_dtype.value_or(CacheDType::auto_);
  const std::string_view name = cache_dtype_name(kv);
  // fp8 / fp8_e4m3 caches are computed (decode and both prefill kernels widen e4m3 exactly,
  // scaled by k_scale/v_scale, per layer or per KV head: use_per_head_quant_scales
  // is covered); other fp8 formats are not.
  if (name.starts_with("fp8") && kv != CacheDType::fp8 && kv != CacheDType::fp8_e4m3)
    gaps.push_back(fmt::format("kv_cache_dtype '{}' is not implemented in attnsel's CUDA kernels (fp8 caches: fp8, "
                               "fp8_e4m3)",
                               name));
  if ((kv == CacheDType::float16 && c.dtype != DType::float16) ||
      (kv == CacheDType::bfloat16 && c.dtype != DType::bfloat16))
    gaps.push_back(fmt::format("a {} KV cache with {} activations is not implemented in attnsel's CUDA kernels (the "
                               "cache dtype must equal the model dtype)",
                               name, dtype_name(c.dtype)));
  if (c.head_size > 256)
    gaps.push_back(fmt::format("head size {} is not implemented in attnsel's CUDA kernels (multiples of 8 up to 256)",
                               c.head_size));
  if (c.use_mm_prefix)
    gaps.push_back("mm_prefix (PrefixLM bidirectional attention) is not implemented in attnsel's CUDA kernels");
  // DCP (use_dcp) is no gap: the decode kernel writes each row's log-sum-exp
  // (KernelInfo::lse_output), which is what merging the ranks' partial outputs needs.
  if (env.device.kind == PlatformKind::cuda && env.device.capability && env.device.capability->major >= 10)
    gaps.push_back(fmt::format("attnsel's CUDA kernels are built for sm_80 and sm_90a; compute capability {} has no "
                               "kernel image in this build",
                               env.device.capability->str()));
  return gaps;
}

}  // namespace attnsel::kernel::cuda
