// The documented runtime facts and their per-platform defaults (vLLM's defaults).
//
// Each fact stands for something vLLM reads at run time from an imported kernel library, an
// environment variable or the model config. Reference mode assumes every kernel library is
// installed, so the library-availability facts follow the hardware: e.g. FA3 is "supported"
// exactly where vllm_flash_attn would build it (SM 9.x).
#include <array>
#include <cstdint>

#include "attnsel/facts.hpp"

namespace attnsel {

namespace {
bool is_cuda(const DeviceDescription& d) { return d.kind == PlatformKind::cuda && d.capability.has_value(); }
int major_of(const DeviceDescription& d) { return is_cuda(d) ? d.capability->major : -1; }

FactValue yes(const DeviceDescription&) { return true; }
FactValue no(const DeviceDescription&) { return false; }

template <std::int64_t Min, std::int64_t Max>
bool int_in(const FactValue& v) {
  const std::int64_t* i = std::get_if<std::int64_t>(&v);
  return i != nullptr && *i >= Min && *i <= Max;
}
bool flash_attn_version_value(const FactValue& v) {
  const std::int64_t* i = std::get_if<std::int64_t>(&v);
  return i != nullptr && (*i == 0 || (*i >= 2 && *i <= 4));
}
bool trtllm_choice(const FactValue& v) {
  const std::string* s = std::get_if<std::string>(&v);
  return s != nullptr && (*s == "auto" || *s == "true" || *s == "false");
}

constexpr std::int64_t kMaxHeads = 65536;  // the model readers' bound (config_reader.hpp)
constexpr FactRange kBoolean{"true or false", nullptr};
constexpr FactRange kHeadCount{"0 (no model config) to 65536", int_in<0, kMaxHeads>};

const std::array<FactDefinition, 30> kFacts = {{
    // --- FlashAttention (vllm/v1/attention/backends/fa_utils.py) ---------------------------
    {"flash_attn_version", "int",
     "AttentionConfig.flash_attn_version: 0 = auto (FA3 on SM 9.x, FA4 on SM 10.x, FA2 otherwise; FA3 on SM >= 10 "
     "becomes FA4, or FA2 where FA4 is not supported), or 2, 3, 4 to force one",
     [](const DeviceDescription&) -> FactValue { return std::int64_t{0}; },
     {"0 (auto), 2, 3 or 4", flash_attn_version_value}},
    {"flash_attn.fa2_supported", "bool",
     "vllm_flash_attn's is_fa_version_supported(2): CUDA with compute capability >= 8.0",
     [](const DeviceDescription& d) -> FactValue { return is_cuda(d) && *d.capability >= DeviceCapability{8, 0}; },
     kBoolean},
    {"flash_attn.fa3_supported", "bool",
     "vllm_flash_attn's is_fa_version_supported(3): FA3 is built for compute capability 9.x only",
     [](const DeviceDescription& d) -> FactValue { return major_of(d) == 9; }, kBoolean},
    {"flash_attn.fa4_supported", "bool",
     "vllm_flash_attn's is_fa_version_supported(4): FA4 (CuTeDSL) runs on compute capability 9.x, 10.x and 11.x",
     [](const DeviceDescription& d) -> FactValue {
       const int m = major_of(d);
       return m == 9 || m == 10 || m == 11;
     }, kBoolean},
    {"flash_attn.varlen_available", "bool",
     "is_flash_attn_varlen_func_available(): CUDA and XPU always; ROCm when the upstream flash-attn package is "
     "installed (assumed in reference mode)",
     [](const DeviceDescription& d) -> FactValue {
       return d.kind == PlatformKind::cuda || d.kind == PlatformKind::xpu || d.kind == PlatformKind::rocm;
     }, kBoolean},
    {"flash_attn.hopper_fa4_fp8", "bool",
     "AttentionConfig._hopper_fa4_fp8: an explicit FA4 request on SM 9.0 with an FP8 KV cache passed the whole-server "
     "Hopper FA4 FP8 check (resolve_flash_attn_version)",
     no, kBoolean},
    // --- FlashInfer (vllm/utils/flashinfer.py, vllm/v1/attention/backends/flashinfer.py) ---
    {"flashinfer.use_trtllm_attention", "string",
     "AttentionConfig.use_trtllm_attention (force_use_trtllm_attention()): auto (None), true (force on) or false "
     "(force off)",
     [](const DeviceDescription&) -> FactValue { return std::string("auto"); }, {"auto, true or false", trtllm_choice}},
    {"flashinfer.trtllm_supported", "bool",
     "supports_trtllm_attention(): FlashInfer's TRTLLM-gen kernels exist for the SM100 family (compute capability "
     "10.x)",
     [](const DeviceDescription& d) -> FactValue { return major_of(d) == 10; }, kBoolean},
    {"flashinfer.mm_prefix_jit_available", "bool",
     "_mm_prefix_jit_available(): FlashInfer can JIT-build its mm-prefix (packed custom mask) prefill variant "
     "(assumed in reference mode on CUDA)",
     [](const DeviceDescription& d) -> FactValue { return is_cuda(d); }, kBoolean},
    // --- FlashMLA / other CUDA kernel libraries -------------------------------------------
    {"flashmla.available", "bool",
     "vLLM's FlashMLA extensions (vllm._flashmla_C, vllm._flashmla_extension_C) are built (assumed in reference "
     "mode on CUDA); the device check (dense: 9.x, sparse: 9.x/10.x) is made from the capability",
     [](const DeviceDescription& d) -> FactValue { return is_cuda(d); }, kBoolean},
    {"b12x.available", "bool",
     "The b12x kernel package that B12X needs is importable (assumed in reference mode on CUDA)",
     [](const DeviceDescription& d) -> FactValue { return is_cuda(d); }, kBoolean},
    // --- ROCm (vllm/_aiter_ops.py, vllm/platforms/rocm.py) ---------------------------------
    {"rocm.use_aiter", "bool", "VLLM_ROCM_USE_AITER: the AITER master switch (default off)", no, kBoolean},
    {"rocm.use_aiter_mha", "bool", "VLLM_ROCM_USE_AITER_MHA: AITER flash attention (AND-ed with rocm.use_aiter)",
     yes, kBoolean},
    {"rocm.use_aiter_mla", "bool", "VLLM_ROCM_USE_AITER_MLA: AITER MLA (AND-ed with rocm.use_aiter)", yes, kBoolean},
    {"rocm.use_aiter_unified_attention", "bool",
     "VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION: AITER's unified attention kernel (AND-ed with rocm.use_aiter)",
     no, kBoolean},
    {"rocm.aiter_found", "bool", "The `aiter` package is importable (assumed in reference mode on ROCm)",
     [](const DeviceDescription& d) -> FactValue { return d.kind == PlatformKind::rocm; }, kBoolean},
    {"rocm.cdna_version", "int", "CDNA generation of the ROCm device (from --platform rocm:gfxNNN; 0 = unknown)",
     [](const DeviceDescription& d) -> FactValue { return std::int64_t{d.cdna_version}; },
     {"0 (unknown) to 4", int_in<0, 4>}},
    // --- CPU -------------------------------------------------------------------------------
    {"cpu.amx", "bool", "The CPU has AMX tiles (torch._C._cpu._is_amx_tile_supported()); needed by AMX_MLA",
     no, kBoolean},
    // --- Process-wide switches -------------------------------------------------------------
    {"env.vllm_batch_invariant", "bool",
     "VLLM_BATCH_INVARIANT: batch-invariant serving; demotes FA4 to FA2 in get_flash_attn_version", no, kBoolean},
    {"parallel.decode_context_parallel_size", "int",
     "ParallelConfig.decode_context_parallel_size; FA4's head-256 kernel falls back to FA2 when it is > 1",
     [](const DeviceDescription&) -> FactValue { return std::int64_t{1}; },
     {"a positive integer", int_in<1, INT64_MAX>}},
    {"kv_connector.configured", "bool",
     "A KV connector is configured (kv_transfer_config); ROCM_AITER_UNIFIED_ATTN then drops its non-block-compact "
     "layout",
     no, kBoolean},
    // --- The model being served (vllm_config.model_config), read by capability rules -------
    {"model.head_size", "int",
     "model_config.get_head_size(): decides whether FLASH_ATTN's kernel block size is pinned to FA4's head-256 page "
     "(128); 0 = no model config",
     [](const DeviceDescription&) -> FactValue { return std::int64_t{0}; }, kHeadCount},
    {"model.num_attention_heads", "int",
     "Query heads per rank; with model.num_kv_heads decides whether FlashInfer advertises TRTLLM page sizes >= 128 "
     "(GQA ratio > 1); 0 = no model config",
     [](const DeviceDescription&) -> FactValue { return std::int64_t{0}; }, kHeadCount},
    {"model.num_kv_heads", "int", "KV heads per rank (see model.num_attention_heads); 0 = no model config",
     [](const DeviceDescription&) -> FactValue { return std::int64_t{0}; }, kHeadCount},
    {"model.is_mm_prefix_lm", "bool",
     "The model is a multimodal PrefixLM (bidirectional image spans); FA4's head-256 kernel falls back to FA2 for it",
     no, kBoolean},
    {"model.uses_rswa", "bool", "The model uses R-SWA (model_config.rswa_window is set)", no, kBoolean},
    {"model.attn_logit_softcapping", "bool", "The model uses attention logit soft-capping", no, kBoolean},
    {"model.is_diffusion", "bool",
     "The model is a diffusion LM (per-sequence causal); on SM 9.x FA3 is upgraded to FA4 for it", no, kBoolean},
    {"model.qk_nope_head_dim", "int",
     "MLA models' qk_nope_head_dim (read by FLASHINFER_MLA's and TOKENSPEED_MLA's combination rules)",
     [](const DeviceDescription&) -> FactValue { return std::int64_t{128}; }, {"1 to 65536", int_in<1, kMaxHeads>}},
    {"model.index_topk", "int", "Sparse-MLA models' index_topk (read by FLASHINFER_MLA_SPARSE_SM120)",
     [](const DeviceDescription&) -> FactValue { return std::int64_t{2048}; },
     {"1 to 2147483647", int_in<1, INT32_MAX>}},
}};
}  // namespace

std::span<const FactDefinition> fact_definitions() { return kFacts; }

}  // namespace attnsel
