// The registry's built-in members: vLLM's enums, each vLLM class path mapped to one C++
// class name (attnsel::backends::<Class> for vllm.v1 backends, attnsel::models::<model>::<Class>
// for model-driven ones); then attnsel's own members, which vLLM does not have.
#include <array>

#include "backends/builtin.hpp"

namespace attnsel::backends {

namespace {
using namespace std::string_view_literals;
constexpr std::array<BuiltinMember, 46> kAttention = {{
    {"FLASH_ATTN", "attnsel::backends::FlashAttentionBackend"sv},
    {"FLASH_ATTN_DIFFKV", "attnsel::backends::FlashAttentionDiffKVBackend"sv},
    {"TRITON_ATTN", "attnsel::backends::TritonAttentionBackend"sv},
    {"TRITON_ATTN_DIFFKV", "attnsel::backends::TritonAttentionDiffKVBackend"sv},
    {"TRITON_FLASH_ATTN", "attnsel::backends::TritonFlashAttentionBackend"sv},
    {"ROCM_ATTN", "attnsel::backends::RocmAttentionBackend"sv},
    {"ROCM_SEGMENTED_ATTN", "attnsel::backends::RocmSegmentedAttentionBackend"sv},
    {"ROCM_AITER_MLA", "attnsel::backends::AiterMLABackend"sv},
    {"ROCM_AITER_TRITON_MLA", "attnsel::backends::AiterTritonMLABackend"sv},
    {"ROCM_AITER_FA", "attnsel::backends::AiterFlashAttentionBackend"sv},
    {"ROCM_AITER_MLA_SPARSE", "attnsel::backends::ROCMAiterMLASparseBackend"sv},
    {"XPU_MLA_SPARSE", "attnsel::backends::XPUMLASparseBackend"sv},
    {"TORCH_SDPA", ""sv},
    {"FLASHINFER", "attnsel::backends::FlashInferBackend"sv},
    {"TRITON_FLASHINFER", "attnsel::backends::TritonFlashInferBackend"sv},
    {"FLASHINFER_MLA", "attnsel::backends::FlashInferMLABackend"sv},
    {"TOKENSPEED_MLA", "attnsel::backends::TokenspeedMLABackend"sv},
    {"FLASHINFER_MLA_SPARSE", "attnsel::backends::FlashInferMLASparseTRTLLMBackend"sv},
    {"FLASHINFER_MLA_SPARSE_SM120", "attnsel::backends::FlashInferMLASparseSM120Backend"sv},
    {"FLASHINFER_MLA_SPARSE_SM90", "attnsel::backends::FlashInferMLASparseSM90Backend"sv},
    {"TRITON_MLA", "attnsel::backends::TritonMLABackend"sv},
    {"CUTLASS_MLA", "attnsel::backends::CutlassMLABackend"sv},
    {"FLASHMLA", "attnsel::backends::FlashMLABackend"sv},
    {"FLASHMLA_SPARSE", "attnsel::backends::FlashMLASparseBackend"sv},
    {"FLASHMLA_SPARSE_DSV4", "attnsel::models::deepseek_v4::DeepseekV4FlashMLABackend"sv},
    {"FLASHINFER_MLA_SPARSE_DSV4", "attnsel::models::deepseek_v4::DeepseekV4FlashInferMLASparseBackend"sv},
    {"ROCM_FLASHMLA_SPARSE_DSV4", "attnsel::models::deepseek_v4::DeepseekV4ROCMAiterMLASparseBackend"sv},
    {"FLASHMLA_SPARSE_DSV41", "attnsel::models::deepseek_v41::DeepseekV4FlashMLABackend"sv},
    {"FLASHINFER_MLA_SPARSE_DSV41", "attnsel::models::deepseek_v41::DeepseekV4FlashInferMLASparseBackend"sv},
    {"FLASHMLA_MEGA_ATTN_DSV41", "attnsel::models::deepseek_v41::FlashMLAMegaAttnBackend"sv},
    {"B12X", "attnsel::backends::B12xPagedAttentionBackend"sv},
    {"FLASH_ATTN_MLA", "attnsel::backends::FlashAttnMLABackend"sv},
    {"FLASH_ATTN_MLA_SPARSE", "attnsel::backends::FlashAttnMLASparseBackend"sv},
    {"MINIMAX_M3_SPARSE", "attnsel::models::minimax_m3::MiniMaxM3SparseBackend"sv},
    {"CUTLASS_MSA", "attnsel::models::minimax_m3::MiniMaxM3SparseCutlassBackend"sv},
    {"TRITON_MSA", "attnsel::models::minimax_m3::MiniMaxM3SparseTritonBackend"sv},
    {"NO_ATTENTION", "attnsel::backends::NoAttentionBackend"sv},
    {"FLEX_ATTENTION", "attnsel::backends::FlexAttentionBackend"sv},
    {"HPC_ATTN", "attnsel::backends::HpcAttentionBackend"sv},
    {"ROCM_AITER_UNIFIED_ATTN", "attnsel::backends::RocmAiterUnifiedAttentionBackend"sv},
    {"CPU_ATTN", "attnsel::backends::CPUAttentionBackend"sv},
    {"CPU_MLA", "attnsel::backends::CPUMLABackend"sv},
    {"AMX_MLA", "attnsel::backends::AMXMLABackend"sv},
    {"TURBOQUANT", "attnsel::backends::TurboQuantAttentionBackend"sv},
    {"ULTRAQUANT", "attnsel::backends::UltraQuantAttentionBackend"sv},
    {"CUSTOM", std::nullopt},
}};

// attnsel's own members: backends vLLM does not have, for what vLLM does not run.
constexpr std::array<BuiltinMember, 1> kOwnAttention = {{
    {"CPU_MLA_SPARSE", "attnsel::backends::CPUMLASparseBackend"sv},  // sparse MLA on the CPU
}};

constexpr std::array<BuiltinMember, 6> kMamba = {{
    {"MAMBA1", "attnsel::backends::Mamba1AttentionBackend"sv},
    {"MAMBA2", "attnsel::backends::Mamba2AttentionBackend"sv},
    {"SHORT_CONV", "attnsel::backends::ShortConvAttentionBackend"sv},
    {"LINEAR", "attnsel::backends::LinearAttentionBackend"sv},
    {"GDN_ATTN", "attnsel::backends::GDNAttentionBackend"sv},
    {"CUSTOM", std::nullopt},
}};
}  // namespace

std::span<const BuiltinMember> builtin_attention_members() { return kAttention; }
std::span<const BuiltinMember> builtin_mamba_members() { return kMamba; }
std::span<const BuiltinMember> own_attention_members() { return kOwnAttention; }

}  // namespace attnsel::backends
