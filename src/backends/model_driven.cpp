// Model-driven backends: never in an automatic priority list, reached only by explicit
// selection or by model code. DeepSeek V4 / V4.1 sparse MLA (vllm/models/deepseek_v4*),
// MiniMax M3 sparse attention (vllm/models/minimax_m3), HPC_ATTN (hpc_attn.py, Hy3 on
// Hopper) and B12X (b12x.py, SM12x paged attention).
#include "backends/common.hpp"
#include "backends/families.hpp"
#include "backends/runtime_facts.hpp"

namespace attnsel::backends {

namespace {
// --- DeepSeek V4 / V4.1 -------------------------------------------------------------------
class DeepseekV4SparseMLABackend : public MLACommonBackend {
 public:
  bool is_sparse() const override { return true; }
  std::vector<DType> supported_dtypes(const RuntimeEnv&) const override { return {DType::bfloat16}; }
  std::vector<KernelBlockSize> get_supported_kernel_block_sizes(const RuntimeEnv&) const override { return {256}; }
  std::vector<int> get_supported_head_sizes(const RuntimeEnv&) const override { return {512}; }
  bool supports_sink(const RuntimeEnv&) const override { return true; }
};

class DeepseekV4FlashMLABackend : public DeepseekV4SparseMLABackend {
 public:
  std::string get_name() const override { return "FLASHMLA_SPARSE_DSV4"; }
  std::string qualname() const override { return "attnsel::models::deepseek_v4::DeepseekV4FlashMLABackend"; }
  std::vector<std::string> supported_kv_cache_dtypes(const RuntimeEnv&) const override {
    return {"auto", "fp8_ds_mla", "fp8"};
  }
  bool supports_compute_capability(const std::optional<DeviceCapability>& cap, const RuntimeEnv&) const override {
    return cap_major_in(cap, {9, 10});
  }
};

class DeepseekV4FlashInferMLASparseBackend : public DeepseekV4SparseMLABackend {
 public:
  std::string get_name() const override { return "FLASHINFER_MLA_SPARSE_DSV4"; }
  std::string qualname() const override {
    return "attnsel::models::deepseek_v4::DeepseekV4FlashInferMLASparseBackend";
  }
  std::vector<std::string> supported_kv_cache_dtypes(const RuntimeEnv&) const override {
    return {"auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_ds_mla"};
  }
  bool supports_compute_capability(const std::optional<DeviceCapability>& cap, const RuntimeEnv&) const override {
    return cap_major_in(cap, {10, 12});
  }
};

class DeepseekV4ROCMAiterMLASparseBackend : public DeepseekV4SparseMLABackend {
 public:
  std::string get_name() const override { return "ROCM_FLASHMLA_SPARSE_DSV4"; }
  std::string qualname() const override {
    return "attnsel::models::deepseek_v4::DeepseekV4ROCMAiterMLASparseBackend";
  }
  std::vector<std::string> supported_kv_cache_dtypes(const RuntimeEnv&) const override {
    return {"auto", "fp8_ds_mla", "fp8"};
  }
};

/// V4.1's FlashMLA path: 64-token pages on SM 9.x, 256 elsewhere.
class DeepseekV41FlashMLABackend : public DeepseekV4FlashMLABackend {
 public:
  std::string get_name() const override { return "FLASHMLA_SPARSE_DSV41"; }
  std::string qualname() const override { return "attnsel::models::deepseek_v41::DeepseekV4FlashMLABackend"; }
  std::vector<KernelBlockSize> get_supported_kernel_block_sizes(const RuntimeEnv& env) const override {
    if (is_capability_family(env, 9)) return {64};
    return {256};
  }
};

class DeepseekV41FlashInferMLASparseBackend : public DeepseekV4FlashInferMLASparseBackend {
 public:
  std::string get_name() const override { return "FLASHINFER_MLA_SPARSE_DSV41"; }
  std::string qualname() const override {
    return "attnsel::models::deepseek_v41::DeepseekV4FlashInferMLASparseBackend";
  }
};

class FlashMLAMegaAttnBackend : public DeepseekV41FlashMLABackend {
 public:
  std::string get_name() const override { return "FLASHMLA_MEGA_ATTN_DSV41"; }
  std::string qualname() const override { return "attnsel::models::deepseek_v41::FlashMLAMegaAttnBackend"; }
};

// --- MiniMax M3 (block-sparse GQA, not MLA) -------------------------------------------------
class MiniMaxM3SparseBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "MINIMAX_M3_SPARSE"; }
  std::string qualname() const override { return "attnsel::models::minimax_m3::MiniMaxM3SparseBackend"; }
  std::vector<std::string> supported_kv_cache_dtypes(const RuntimeEnv&) const override {
    return {"bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2"};
  }
  bool forward_includes_kv_cache_update() const override { return false; }
  std::vector<KernelBlockSize> get_supported_kernel_block_sizes(const RuntimeEnv&) const override { return {128}; }
  std::vector<int> get_supported_head_sizes(const RuntimeEnv&) const override { return {128}; }
};

/// The MSA decode kernels; AttentionConfig maps these names to minimax_m3_msa_decode_backend.
class MiniMaxM3SparseCutlassBackend : public MiniMaxM3SparseBackend {
 public:
  std::string get_name() const override { return "CUTLASS_MSA"; }
  std::string qualname() const override { return "attnsel::models::minimax_m3::MiniMaxM3SparseCutlassBackend"; }
  bool supports_compute_capability(const std::optional<DeviceCapability>& cap, const RuntimeEnv&) const override {
    return cap_major_in(cap, {10});
  }
};

class MiniMaxM3SparseTritonBackend : public MiniMaxM3SparseBackend {
 public:
  std::string get_name() const override { return "TRITON_MSA"; }
  std::string qualname() const override { return "attnsel::models::minimax_m3::MiniMaxM3SparseTritonBackend"; }
};

// --- HPC_ATTN (Tencent hpc-ops; Hy3 on Hopper) ---------------------------------------------
class HpcAttentionBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "HPC_ATTN"; }
  std::string qualname() const override { return "attnsel::backends::HpcAttentionBackend"; }
  std::vector<std::string> supported_kv_cache_dtypes(const RuntimeEnv&) const override {
    return {"auto", "bfloat16", "fp8_e4m3"};
  }
  // vLLM keeps True here so that the layer does not insert the cache itself: HPC's kernels do.
  bool forward_includes_kv_cache_update() const override { return true; }
  std::vector<KernelBlockSize> get_supported_kernel_block_sizes(const RuntimeEnv&) const override { return {64}; }
  std::vector<int> get_supported_head_sizes(const RuntimeEnv&) const override { return {128}; }
  bool supports_compute_capability(const std::optional<DeviceCapability>& cap, const RuntimeEnv&) const override {
    return cap_at_least(cap, 9, 0);
  }
  // The `hpc` module is checked when the impl is built (an ImportError), not at selection.
};

// --- B12X (b12x paged GQA attention on consumer Blackwell) ---------------------------------
class B12xPagedAttentionBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "B12X"; }
  std::string qualname() const override { return "attnsel::backends::B12xPagedAttentionBackend"; }
  std::vector<DType> supported_dtypes(const RuntimeEnv&) const override { return {DType::bfloat16}; }
  std::vector<std::string> supported_kv_cache_dtypes(const RuntimeEnv&) const override {
    return {"auto", "bfloat16", "fp8", "fp8_e4m3"};
  }
  bool forward_includes_kv_cache_update() const override { return false; }
  std::vector<KernelBlockSize> get_supported_kernel_block_sizes(const RuntimeEnv&) const override { return {64, 128}; }
  /// Exactly the kernel pages: a 192-token block is not split into 64-token pages.
  bool supports_block_size(std::optional<int> block_size, const RuntimeEnv&) const override {
    return !block_size || *block_size == 64 || *block_size == 128;
  }
  int get_preferred_block_size(int default_block_size, const RuntimeEnv&) const override {
    return default_block_size == 64 || default_block_size == 128 ? default_block_size : 128;
  }
  std::vector<int> get_supported_head_sizes(const RuntimeEnv&) const override { return {64, 128, 192, 256}; }
  bool supports_sink(const RuntimeEnv&) const override { return true; }
  bool supports_sliding_window(const RuntimeEnv&) const override { return true; }
  bool supports_compute_capability(const std::optional<DeviceCapability>& cap, const RuntimeEnv&) const override {
    return cap && (*cap == DeviceCapability{12, 0} || *cap == DeviceCapability{12, 1});
  }
  std::optional<std::string> supports_combination(const CombinationArgs& a, const RuntimeEnv& env) const override {
    if (a.dtype != DType::bfloat16) return "b12x currently requires bfloat16 queries";
    if (a.kv_cache_dtype == "float16") return "b12x does not support float16 KV cache";
    if (a.kv_cache_dtype && is_quantized_kv_cache(*a.kv_cache_dtype) && *a.kv_cache_dtype != "fp8" &&
        *a.kv_cache_dtype != "fp8_e4m3")
      return "b12x currently supports only fp8/fp8_e4m3 quantized KV cache dtypes";
    if (!env.facts.get_bool("b12x.available")) return "Install the b12x backend with `pip install vllm[b12x]`";
    return std::nullopt;
  }
  std::optional<std::vector<KVCacheLayout>> supported_kv_cache_layouts(const RuntimeEnv&) const override {
    return std::vector<KVCacheLayout>{KVCacheLayout::LBHNC, KVCacheLayout::BLHNC};
  }
};
}  // namespace

void append_model_driven_classes(ClassList& out) {
  out.push_back(std::make_shared<const DeepseekV4FlashMLABackend>());
  out.push_back(std::make_shared<const DeepseekV4FlashInferMLASparseBackend>());
  out.push_back(std::make_shared<const DeepseekV4ROCMAiterMLASparseBackend>());
  out.push_back(std::make_shared<const DeepseekV41FlashMLABackend>());
  out.push_back(std::make_shared<const DeepseekV41FlashInferMLASparseBackend>());
  out.push_back(std::make_shared<const FlashMLAMegaAttnBackend>());
  out.push_back(std::make_shared<const MiniMaxM3SparseBackend>());
  out.push_back(std::make_shared<const MiniMaxM3SparseCutlassBackend>());
  out.push_back(std::make_shared<const MiniMaxM3SparseTritonBackend>());
  out.push_back(std::make_shared<const HpcAttentionBackend>());
  out.push_back(std::make_shared<const B12xPagedAttentionBackend>());
}

}  // namespace attnsel::backends
