#include "backends/runtime_facts.hpp"

#include <fmt/format.h>

#include <optional>

#include "core/log.hpp"

namespace attnsel::backends {

bool is_cuda(const RuntimeEnv& env) {
  return env.device.kind == PlatformKind::cuda && env.device.capability.has_value();
}

bool is_capability_family(const RuntimeEnv& env, int major) {
  return is_cuda(env) && env.device.capability->major == major;
}

bool is_fa_version_supported(const RuntimeEnv& env, int version) {
  switch (version) {
    case 2: return env.facts.get_bool("flash_attn.fa2_supported");
    case 3: return env.facts.get_bool("flash_attn.fa3_supported");
    case 4: return env.facts.get_bool("flash_attn.fa4_supported");
    default: return false;
  }
}

bool uses_fa4_hd256_kernel(const RuntimeEnv& env, std::optional<int> head_size, std::optional<int> head_size_v) {
  if (head_size != 256) return false;
  if (head_size_v && *head_size_v != 256) return false;
  return is_capability_family(env, 10) || is_capability_family(env, 11);
}

namespace {
// vLLM's _fa4_hd256_fallback_reason: the first feature FA4's head-256 kernel does not have, in
// vLLM's words and order.
std::optional<std::string> fa4_hd256_fallback_reason(const RuntimeEnv& env, const FaVersionQuery& q) {
  const RuntimeFacts& f = env.facts;
  if (q.has_sinks) return "attention sinks";
  if (q.requires_softcap || f.get_bool("model.attn_logit_softcapping")) return "logits soft capping";
  if (q.kv_cache_dtype && is_quantized_kv_cache(*q.kv_cache_dtype))
    return fmt::format("quantized KV cache dtype {}", cache_dtype_name(*q.kv_cache_dtype));
  if (q.kv_cache_block_size && *q.kv_cache_block_size % 128 != 0)  // FA4_HD256_PAGE_SIZE
    return fmt::format("a KV cache block size of {}", *q.kv_cache_block_size);
  if (q.mm_prefix || f.get_bool("model.is_mm_prefix_lm")) return "mm_prefix bidirectional attention";
  if (f.get_bool("model.uses_rswa")) return "R-SWA";
  if (f.get_int("parallel.decode_context_parallel_size") > 1) return "decode context parallelism";
  return std::nullopt;
}

// Why FA3 on SM90 becomes FA4 (vLLM's upgrade_reason), if it does.
std::optional<std::string> fa3_upgrade_reason(const RuntimeFacts& f, const FaVersionQuery& q) {
  if (q.head_size && *q.head_size > 256) return fmt::format("FA3 does not support head_size={} on SM90", *q.head_size);
  if (q.has_sinks && q.head_size && q.head_size_v && *q.head_size != *q.head_size_v) return "Diff-KV with sinks";
  if (f.get_bool("model.is_diffusion")) return "Per-sequence causal (dynamic_causal) requires FA4";
  return std::nullopt;
}
}  // namespace

// Each fallback logs what vLLM's get_flash_attn_version logs, once per process.
std::optional<int> get_flash_attn_version(const RuntimeEnv& env, const FaVersionQuery& q) {
  if (env.device.kind == PlatformKind::xpu) return 2;
  if (!is_cuda(env)) return std::nullopt;  // ROCm (and others) do not use vllm_flash_attn
  const RuntimeFacts& f = env.facts;
  const DeviceCapability cap = *env.device.capability;

  // 1. The platform default.
  int v = 2;
  if (cap.major == 9 && is_fa_version_supported(env, 3)) v = 3;
  else if (cap.major == 10 && is_fa_version_supported(env, 4)) v = 4;
  // 2. AttentionConfig.flash_attn_version.
  if (const auto forced = f.get_int("flash_attn_version"); forced != 0) v = static_cast<int>(forced);
  // 3. Fallbacks for unsupported combinations.
  if (cap.major >= 10 && v == 3) {
    log::warning_once(
        "Cannot use FA version 3 on Blackwell platform, defaulting to FA version 4 if supported, otherwise FA2.");
    v = is_fa_version_supported(env, 4) ? 4 : 2;
  }
  if (v == 3 && cap.major == 9 && is_fa_version_supported(env, 4)) {
    if (const std::optional<std::string> reason = fa3_upgrade_reason(f, q)) {
      log::info_once(fmt::format("{}: upgrading FlashAttention 3 -> 4", *reason));
      v = 4;
    }
  }
  // FA4's batch-shape-dependent scheduling on SM100+ breaks batch invariance.
  if (f.get_bool("env.vllm_batch_invariant") && v == 4) {
    log::warning_once("Cannot use FA version 4 with batch invariance, defaulting to FA version 2.");
    v = 2;
  }
  if (v == 4 && uses_fa4_hd256_kernel(env, q.head_size, q.head_size_v)) {
    if (!q.supports_fa4_hd256) {
      v = 2;
    } else if (const std::optional<std::string> reason = fa4_hd256_fallback_reason(env, q)) {
      log::warning_once(fmt::format(
          "FA4's Blackwell head_size=256 kernel does not support {}, defaulting to FA version 2.", *reason));
      v = 2;
    }
  }
  // FA4 on Blackwell: TMEM limits head sizes above 128 to 256 and the 192/128 MLA-prefill shape.
  if (v == 4 && cap.major >= 10 && q.head_size && *q.head_size > 128) {
    const bool hd256 = *q.head_size == 256 && (!q.head_size_v || *q.head_size_v == 256);
    const bool mla_prefill = *q.head_size == 192 && q.head_size_v == 128;
    if (!hd256 && !mla_prefill) {
      log::warning_once(fmt::format(
          "FA4 on Blackwell does not support head_size={} due to TMEM capacity limits, defaulting to FA version 2.",
          *q.head_size));
      v = 2;
    }
  }
  if (!is_fa_version_supported(env, v)) return std::nullopt;
  return v;
}

bool flash_attn_supports_kv_cache_dtype(const RuntimeEnv& env, CacheDType kv_cache_dtype, FaVersionQuery q) {
  if (kv_cache_dtype == CacheDType::fp8_e5m2) return false;
  if (env.device.kind == PlatformKind::xpu) return true;
  if (!q.kv_cache_dtype) q.kv_cache_dtype = kv_cache_dtype;
  const std::optional<int> v = get_flash_attn_version(env, q);
  if (v == 3 && is_capability_family(env, 9)) return true;
  if (v == 4 && is_capability_family(env, 10)) return true;
  if (v == 4 && env.device.capability == DeviceCapability{9, 0}) return env.facts.get_bool("flash_attn.hopper_fa4_fp8");
  return false;
}

bool flash_attn_supports_sinks(const RuntimeEnv& env) {
  if (env.device.kind == PlatformKind::xpu) return true;
  const std::optional<int> v = get_flash_attn_version(env);
  return v == 3 || v == 4;
}

bool flash_attn_supports_mla(const RuntimeEnv& env) {
  if (!is_cuda(env)) return false;
  if (env.device.capability == DeviceCapability{9, 0})
    return is_fa_version_supported(env, 3) || is_fa_version_supported(env, 4);
  return is_capability_family(env, 9) && is_fa_version_supported(env, 3);
}

bool flash_attn_varlen_available(const RuntimeEnv& env) { return env.facts.get_bool("flash_attn.varlen_available"); }

namespace {
std::optional<std::string> flashmla_unavailable_reason(const RuntimeEnv& env) {
  if (!env.facts.get_bool("flashmla.available"))
    return "vllm._flashmla_C is not available, likely was not compiled due to insufficient nvcc version or a "
           "supported arch was not in the list of target arches to compile for.";
  return std::nullopt;
}
}  // namespace

std::optional<std::string> flashmla_dense_unsupported_reason(const RuntimeEnv& env) {
  if (auto reason = flashmla_unavailable_reason(env)) return reason;
  if (!is_capability_family(env, 9)) return "FlashMLA Dense is only supported on Hopper devices.";
  return std::nullopt;
}

std::optional<std::string> flashmla_sparse_unsupported_reason(const RuntimeEnv& env) {
  if (auto reason = flashmla_unavailable_reason(env)) return reason;
  if (!is_capability_family(env, 9) && !is_capability_family(env, 10))
    return "FlashMLA Sparse is only supported on Hopper and Blackwell DC devices.";
  return std::nullopt;
}

std::optional<bool> force_use_trtllm_attention(const RuntimeEnv& env) {
  const std::string& v = env.facts.get_string("flashinfer.use_trtllm_attention");
  if (v == "true") return true;  // the fact's values: auto, true, false
  if (v == "false") return false;
  return std::nullopt;
}

bool supports_trtllm_attention(const RuntimeEnv& env) { return env.facts.get_bool("flashinfer.trtllm_supported"); }

bool can_use_trtllm_attention(const RuntimeEnv& env, long num_qo_heads, long num_kv_heads) {
  if (force_use_trtllm_attention(env) == false) return false;
  return supports_trtllm_attention(env) && num_kv_heads > 0 && num_qo_heads % num_kv_heads == 0;
}

int cdna_version(const RuntimeEnv& env) {
  if (env.device.kind != PlatformKind::rocm) return 0;
  return static_cast<int>(env.facts.get_int("rocm.cdna_version"));
}

}  // namespace attnsel::backends
