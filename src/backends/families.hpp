// Internal: each backend family's source file contributes its classes to the built-in set.
#pragma once

#include <memory>
#include <vector>

#include "attnsel/backend.hpp"

namespace attnsel::backends {

using ClassList = std::vector<std::shared_ptr<const BackendClass>>;

void append_flash_attn_classes(ClassList& out);      // FLASH_ATTN
void append_flashinfer_classes(ClassList& out);      // FLASHINFER
void append_triton_attn_classes(ClassList& out);     // TRITON_ATTN
void append_flex_attention_classes(ClassList& out);  // FLEX_ATTENTION
void append_diffkv_classes(ClassList& out);          // FLASH_ATTN_DIFFKV, TRITON_ATTN_DIFFKV
void append_turboquant_classes(ClassList& out);      // TURBOQUANT, ULTRAQUANT
void append_rocm_attn_classes(ClassList& out);       // ROCM_ATTN, ROCM_SEGMENTED_ATTN, ROCM_AITER_FA, ROCM_AITER_UNIFIED_ATTN
void append_cpu_attn_classes(ClassList& out);        // CPU_ATTN
void append_mla_cuda_classes(ClassList& out);        // dense MLA on CUDA and ROCm
void append_mla_sparse_classes(ClassList& out);      // sparse MLA
void append_mla_cpu_classes(ClassList& out);         // CPU_MLA, AMX_MLA
void append_model_driven_classes(ClassList& out);    // DSV4/DSV41, MiniMax M3 / MSA, HPC_ATTN, B12X
void append_composite_classes(ClassList& out);       // TRITON_FLASHINFER, TRITON_FLASH_ATTN
void append_mamba_classes(ClassList& out);           // MambaAttentionBackendEnum members

}  // namespace attnsel::backends
