// The built-in backend classes: one object per class named in builtin_members.cpp.
// TORCH_SDPA (empty path), CUSTOM (unset) and NO_ATTENTION (vLLM's dead reference, whose
// get_class() raises ImportError) deliberately have none.
#include "backends/builtin.hpp"
#include "backends/class_factories.hpp"

namespace attnsel::backends {

std::vector<std::shared_ptr<const BackendClass>> make_builtin_classes() {
  ClassList out;
  for (void (*append)(ClassList&) :
       {append_flash_attn, append_flash_attn_diffkv, append_flashinfer, append_triton_attn, append_triton_attn_diffkv,
        append_flex_attention, append_turboquant_attn, append_ultraquant_attn, append_rocm_attn,
        append_rocm_segmented_attn, append_rocm_aiter_fa, append_rocm_aiter_unified_attn, append_cpu_attn,
        append_triton_flashinfer, append_triton_flash_attn, append_hpc_attn, append_b12x, append_minimax_m3_sparse,
        append_flashinfer_mla, append_tokenspeed_mla, append_cutlass_mla, append_flashattn_mla, append_flashmla,
        append_triton_mla, append_rocm_aiter_mla, append_aiter_triton_mla, append_flashmla_sparse,
        append_flashinfer_mla_sparse, append_flashinfer_mla_sparse_sm120, append_flashinfer_mla_sparse_sm90,
        append_flashattn_mla_sparse, append_rocm_aiter_mla_sparse, append_xpu_mla_sparse, append_cpu_mla,
        append_amx_mla, append_cpu_mla_sparse, append_deepseek_v4, append_deepseek_v41, append_mamba})
    append(out);
  return out;
}

}  // namespace attnsel::backends
