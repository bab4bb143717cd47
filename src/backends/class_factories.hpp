// Internal: every built-in backend class, one source file per vLLM backend module; each
// file adds its class (or the classes of that one vLLM module) to the built-in set.
#pragma once

#include <memory>
#include <vector>

#include "attnsel/backend.hpp"

namespace attnsel::backends {

using ClassList = std::vector<std::shared_ptr<const BackendClass>>;

// vllm/v1/attention/backends/*.py
void append_flash_attn(ClassList& out);             // FLASH_ATTN
void append_flash_attn_diffkv(ClassList& out);      // FLASH_ATTN_DIFFKV
void append_flashinfer(ClassList& out);             // FLASHINFER
void append_triton_attn(ClassList& out);            // TRITON_ATTN
void append_triton_attn_diffkv(ClassList& out);     // TRITON_ATTN_DIFFKV
void append_flex_attention(ClassList& out);         // FLEX_ATTENTION
void append_turboquant_attn(ClassList& out);        // TURBOQUANT
void append_ultraquant_attn(ClassList& out);        // ULTRAQUANT
void append_rocm_attn(ClassList& out);              // ROCM_ATTN
void append_rocm_segmented_attn(ClassList& out);    // ROCM_SEGMENTED_ATTN
void append_rocm_aiter_fa(ClassList& out);          // ROCM_AITER_FA
void append_rocm_aiter_unified_attn(ClassList& out);  // ROCM_AITER_UNIFIED_ATTN
void append_cpu_attn(ClassList& out);               // CPU_ATTN
void append_triton_flashinfer(ClassList& out);      // TRITON_FLASHINFER (composite)
void append_triton_flash_attn(ClassList& out);      // TRITON_FLASH_ATTN (composite)
void append_hpc_attn(ClassList& out);               // HPC_ATTN
void append_b12x(ClassList& out);                   // B12X
void append_minimax_m3_sparse(ClassList& out);      // MINIMAX_M3_SPARSE, CUTLASS_MSA, TRITON_MSA
// vllm/v1/attention/backends/mla/*.py
void append_flashinfer_mla(ClassList& out);         // FLASHINFER_MLA
void append_tokenspeed_mla(ClassList& out);         // TOKENSPEED_MLA
void append_cutlass_mla(ClassList& out);            // CUTLASS_MLA
void append_flashattn_mla(ClassList& out);          // FLASH_ATTN_MLA
void append_flashmla(ClassList& out);               // FLASHMLA
void append_triton_mla(ClassList& out);             // TRITON_MLA
void append_rocm_aiter_mla(ClassList& out);         // ROCM_AITER_MLA
void append_aiter_triton_mla(ClassList& out);       // ROCM_AITER_TRITON_MLA
void append_flashmla_sparse(ClassList& out);        // FLASHMLA_SPARSE
void append_flashinfer_mla_sparse(ClassList& out);  // FLASHINFER_MLA_SPARSE
void append_flashinfer_mla_sparse_sm120(ClassList& out);  // FLASHINFER_MLA_SPARSE_SM120
void append_flashinfer_mla_sparse_sm90(ClassList& out);   // FLASHINFER_MLA_SPARSE_SM90
void append_flashattn_mla_sparse(ClassList& out);   // FLASH_ATTN_MLA_SPARSE
void append_rocm_aiter_mla_sparse(ClassList& out);  // ROCM_AITER_MLA_SPARSE
void append_xpu_mla_sparse(ClassList& out);         // XPU_MLA_SPARSE
void append_cpu_mla(ClassList& out);                // CPU_MLA
void append_amx_mla(ClassList& out);                // AMX_MLA
void append_cpu_mla_sparse(ClassList& out);         // CPU_MLA_SPARSE (attnsel's own)
// Model code's backends (vLLM's deepseek_v4 / deepseek_v41 models)
void append_deepseek_v4(ClassList& out);            // FLASHMLA_SPARSE_DSV4, FLASHINFER_MLA_SPARSE_DSV4, ROCM_FLASHMLA_SPARSE_DSV4
void append_deepseek_v41(ClassList& out);           // FLASHMLA_SPARSE_DSV41, FLASHINFER_MLA_SPARSE_DSV41, FLASHMLA_MEGA_ATTN_DSV41
// MambaAttentionBackendEnum's classes
void append_mamba(ClassList& out);

}  // namespace attnsel::backends
