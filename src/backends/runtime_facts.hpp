// Internal: vLLM's runtime capability probes (fa_utils, vllm.utils.flashinfer, _aiter_ops),
// computed from the documented facts of a RuntimeEnv instead of imported kernel libraries.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "attnsel/cache_dtype.hpp"
#include "attnsel/facts.hpp"

namespace attnsel::backends {

/// The keyword arguments of vLLM's get_flash_attn_version(); each is what one layer needs.
struct FaVersionQuery {
  std::optional<int> head_size;
  std::optional<int> head_size_v;
  bool has_sinks = false;
  bool requires_softcap = false;
  std::optional<int> kv_cache_block_size;
  /// The caller can serve FA4's dedicated head-256 kernel (its fixed 128-token page).
  bool supports_fa4_hd256 = false;
  /// The layer serves PrefixLM image masks (vLLM reads model_config.is_mm_prefix_lm); FA4's
  /// head-256 kernel cannot.
  bool mm_prefix = false;
  /// The run's KV-cache dtype (vLLM reads cache_config.cache_dtype); FP8 rules out the FA4 head-256 kernel.
  std::optional<CacheDType> kv_cache_dtype;
};

bool is_cuda(const RuntimeEnv& env);
/// vLLM's is_device_capability_family(major * 10): CUDA with that major.
bool is_capability_family(const RuntimeEnv& env, int major);

/// vllm_flash_attn's is_fa_version_supported(version).
bool is_fa_version_supported(const RuntimeEnv& env, int version);
/// vLLM's uses_fa4_hd256_kernel(head_size, head_size_v): head 256 (V too) on SM 10.x/11.x.
bool uses_fa4_hd256_kernel(const RuntimeEnv& env, std::optional<int> head_size, std::optional<int> head_size_v);
/// vLLM's get_flash_attn_version(...): the FlashAttention version a layer resolves to, or nullopt
/// when none does (ROCm, or an unsupported forced version).
std::optional<int> get_flash_attn_version(const RuntimeEnv& env, const FaVersionQuery& query = {});
/// vLLM's flash_attn_supports_kv_cache_dtype(kv_cache_dtype, ...).
bool flash_attn_supports_kv_cache_dtype(const RuntimeEnv& env, CacheDType kv_cache_dtype,
                                        FaVersionQuery query = {});
/// vLLM's flash_attn_supports_sinks(): XPU, or FA3/FA4.
bool flash_attn_supports_sinks(const RuntimeEnv& env);
/// vLLM's flash_attn_supports_mla(): FA3 (or FA4 on exactly SM 9.0) on Hopper.
bool flash_attn_supports_mla(const RuntimeEnv& env);
/// vLLM's is_flash_attn_varlen_func_available().
bool flash_attn_varlen_available(const RuntimeEnv& env);

/// vLLM's is_flashmla_dense_supported() / is_flashmla_sparse_supported(): nullopt when
/// supported, else vLLM's reason.
std::optional<std::string> flashmla_dense_unsupported_reason(const RuntimeEnv& env);
std::optional<std::string> flashmla_sparse_unsupported_reason(const RuntimeEnv& env);

/// vLLM's force_use_trtllm_attention(): nullopt = auto, else the forced value.
std::optional<bool> force_use_trtllm_attention(const RuntimeEnv& env);
/// vLLM's supports_trtllm_attention().
bool supports_trtllm_attention(const RuntimeEnv& env);
/// vLLM's can_use_trtllm_attention(num_qo_heads, num_kv_heads): supported, not forced off, GQA-divisible.
bool can_use_trtllm_attention(const RuntimeEnv& env, long num_qo_heads, long num_kv_heads);

// The AITER gates (is_aiter_found_and_supported, is_*_enabled) are in platforms/rocm_aiter.hpp.
/// The CDNA generation of a ROCm device (0 = unknown or not ROCm).
int cdna_version(const RuntimeEnv& env);

}  // namespace attnsel::backends
