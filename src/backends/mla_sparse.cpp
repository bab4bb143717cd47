// The sparse MLA backends (DeepSeek-V3.2-style indexer + top-k):
// vllm/v1/attention/backends/mla/{flashmla_sparse,flashinfer_mla_sparse,flashinfer_mla_sparse_sm90,
// flashattn_mla_sparse,rocm_aiter_mla_sparse,xpu_mla_sparse}.py.
#include <fmt/format.h>

#include "backends/common.hpp"
#include "backends/families.hpp"
#include "backends/runtime_facts.hpp"

namespace attnsel::backends {

namespace {
class SparseMLABackend : public MLACommonBackend {
 public:
  bool is_sparse() const override { return true; }
};

/// The CUDA sparse kernels gather whole blocks of one layer's latents: block-outermost pages.
std::optional<std::vector<KVCacheLayout>> block_outer_layouts() {
  return std::vector<KVCacheLayout>{KVCacheLayout::BLHNC};
}

class FlashMLASparseBackend : public SparseMLABackend {
 public:
  std::string get_name() const override { return "FLASHMLA_SPARSE"; }
  std::string qualname() const override { return "attnsel::backends::FlashMLASparseBackend"; }
  std::vector<DType> supported_dtypes(const RuntimeEnv&) const override { return {DType::bfloat16}; }
  std::vector<std::string> supported_kv_cache_dtypes(const RuntimeEnv&) const override {
    return {"auto", "bfloat16", "fp8_ds_mla", "fp8"};
  }
  std::vector<KernelBlockSize> get_supported_kernel_block_sizes(const RuntimeEnv&) const override { return {64}; }
  std::vector<int> get_supported_head_sizes(const RuntimeEnv&) const override { return {576}; }
  bool supports_dcp() const override { return true; }
  bool supports_compute_capability(const std::optional<DeviceCapability>& cap, const RuntimeEnv&) const override {
    return cap_major_in(cap, {9, 10});
  }
  std::optional<std::string> supports_combination(const CombinationArgs&, const RuntimeEnv& env) const override {
    return flashmla_sparse_unsupported_reason(env);
  }
  std::optional<std::vector<KVCacheLayout>> supported_kv_cache_layouts(const RuntimeEnv&) const override {
    return block_outer_layouts();
  }
};

class FlashInferMLASparseTRTLLMBackend : public SparseMLABackend {
 public:
  std::string get_name() const override { return "FLASHINFER_MLA_SPARSE"; }
  std::string qualname() const override { return "attnsel::backends::FlashInferMLASparseTRTLLMBackend"; }
  std::vector<std::string> supported_kv_cache_dtypes(const RuntimeEnv&) const override {
    return {"auto", "float16", "bfloat16", "fp8", "fp8_e4m3"};
  }
  std::vector<KernelBlockSize> get_supported_kernel_block_sizes(const RuntimeEnv&) const override { return {32, 64}; }
  std::vector<int> get_supported_head_sizes(const RuntimeEnv&) const override { return {576}; }
  bool supports_dcp() const override { return true; }
  bool supports_compute_capability(const std::optional<DeviceCapability>& cap, const RuntimeEnv&) const override {
    return cap_major_in(cap, {10});
  }
  std::optional<std::vector<KVCacheLayout>> supported_kv_cache_layouts(const RuntimeEnv&) const override {
    return block_outer_layouts();
  }
};

class FlashInferMLASparseSM120Backend : public SparseMLABackend {
 public:
  std::string get_name() const override { return "FLASHINFER_MLA_SPARSE_SM120"; }
  std::string qualname() const override { return "attnsel::backends::FlashInferMLASparseSM120Backend"; }
  std::vector<DType> supported_dtypes(const RuntimeEnv&) const override { return {DType::bfloat16}; }
  std::vector<std::string> supported_kv_cache_dtypes(const RuntimeEnv&) const override {
    return {"auto", "fp8", "fp8_e4m3", "fp8_ds_mla"};
  }
  std::vector<KernelBlockSize> get_supported_kernel_block_sizes(const RuntimeEnv&) const override { return {64, 256}; }
  std::vector<int> get_supported_head_sizes(const RuntimeEnv&) const override { return {512, 576}; }
  bool supports_compute_capability(const std::optional<DeviceCapability>& cap, const RuntimeEnv&) const override {
    return cap_major_in(cap, {12});
  }
  std::optional<std::string> supports_combination(const CombinationArgs&, const RuntimeEnv& env) const override {
    const auto topk = env.facts.get_int("model.index_topk");
    if (topk != 2048)
      return fmt::format("FlashInfer sparse MLA on SM120 requires index_topk == 2048, but got {}", topk);
    return std::nullopt;
  }
  std::optional<std::vector<KVCacheLayout>> supported_kv_cache_layouts(const RuntimeEnv&) const override {
    return block_outer_layouts();
  }
};

/// NoPE sparse MLA on Hopper.
class FlashInferMLASparseSM90Backend : public SparseMLABackend {
 public:
  std::string get_name() const override { return "FLASHINFER_MLA_SPARSE_SM90"; }
  std::string qualname() const override { return "attnsel::backends::FlashInferMLASparseSM90Backend"; }
  std::vector<DType> supported_dtypes(const RuntimeEnv&) const override { return {DType::bfloat16}; }
  std::vector<std::string> supported_kv_cache_dtypes(const RuntimeEnv&) const override {
    return {"auto", "bfloat16"};
  }
  std::vector<KernelBlockSize> get_supported_kernel_block_sizes(const RuntimeEnv&) const override { return {64}; }
  std::vector<int> get_supported_head_sizes(const RuntimeEnv&) const override { return {512, 576}; }
  bool supports_compute_capability(const std::optional<DeviceCapability>& cap, const RuntimeEnv&) const override {
    return cap_major_in(cap, {9});
  }
  std::optional<std::vector<KVCacheLayout>> supported_kv_cache_layouts(const RuntimeEnv&) const override {
    return block_outer_layouts();
  }
};

class FlashAttnMLASparseBackend : public SparseMLABackend {
 public:
  std::string get_name() const override { return "FLASH_ATTN_MLA_SPARSE"; }
  std::string qualname() const override { return "attnsel::backends::FlashAttnMLASparseBackend"; }
  std::vector<KernelBlockSize> get_supported_kernel_block_sizes(const RuntimeEnv&) const override { return {64}; }
  std::vector<int> get_supported_head_sizes(const RuntimeEnv&) const override { return {}; }
  bool supports_compute_capability(const std::optional<DeviceCapability>& cap, const RuntimeEnv&) const override {
    return cap_major_in(cap, {9});
  }
};

class ROCMAiterMLASparseBackend : public SparseMLABackend {
 public:
  std::string get_name() const override { return "ROCM_AITER_MLA_SPARSE"; }
  std::string qualname() const override { return "attnsel::backends::ROCMAiterMLASparseBackend"; }
  std::vector<std::string> supported_kv_cache_dtypes(const RuntimeEnv&) const override {
    return {"auto", "float16", "bfloat16", "fp8", "fp8_e4m3"};
  }
  std::vector<KernelBlockSize> get_supported_kernel_block_sizes(const RuntimeEnv&) const override {
    return {1, 16, 64};
  }
  std::vector<int> get_supported_head_sizes(const RuntimeEnv&) const override { return {}; }
};

class XPUMLASparseBackend : public SparseMLABackend {
 public:
  std::string get_name() const override { return "XPU_MLA_SPARSE"; }
  std::string qualname() const override { return "attnsel::backends::XPUMLASparseBackend"; }
  std::vector<int> get_supported_head_sizes(const RuntimeEnv&) const override { return {576}; }
};
}  // namespace

void append_mla_sparse_classes(ClassList& out) {
  out.push_back(std::make_shared<const FlashMLASparseBackend>());
  out.push_back(std::make_shared<const FlashInferMLASparseTRTLLMBackend>());
  out.push_back(std::make_shared<const FlashInferMLASparseSM120Backend>());
  out.push_back(std::make_shared<const FlashInferMLASparseSM90Backend>());
  out.push_back(std::make_shared<const FlashAttnMLASparseBackend>());
  out.push_back(std::make_shared<const ROCMAiterMLASparseBackend>());
  out.push_back(std::make_shared<const XPUMLASparseBackend>());
}

}  // namespace attnsel::backends
