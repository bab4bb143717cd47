// The dense MLA backends (vllm/v1/attention/backends/mla/*.py): the CUDA ones and the two
// AITER ones on ROCm. All derive from MLACommonBackend and opt into DCP.
#include <fmt/format.h>

#include "backends/common.hpp"
#include "backends/families.hpp"
#include "backends/runtime_facts.hpp"

namespace attnsel::backends {

namespace {
const StringList kMlaFp8KvDTypes = {"auto", "float16", "bfloat16", "fp8", "fp8_e4m3"};

class DenseMLABackend : public MLACommonBackend {
 public:
  bool supports_dcp() const override { return true; }
};

class FlashInferMLABackend : public DenseMLABackend {
 public:
  std::string get_name() const override { return "FLASHINFER_MLA"; }
  std::string qualname() const override { return "attnsel::backends::FlashInferMLABackend"; }
  std::vector<std::string> supported_kv_cache_dtypes(const RuntimeEnv&) const override { return kMlaFp8KvDTypes; }
  std::vector<KernelBlockSize> get_supported_kernel_block_sizes(const RuntimeEnv&) const override { return {32, 64}; }
  bool supports_non_causal(const RuntimeEnv&) const override { return true; }
  bool supports_compute_capability(const std::optional<DeviceCapability>& cap, const RuntimeEnv&) const override {
    return cap_major_in(cap, {10});
  }
  std::optional<std::string> supports_combination(const CombinationArgs&, const RuntimeEnv& env) const override {
    const auto qk_nope = env.facts.get_int("model.qk_nope_head_dim");
    if (qk_nope != 64 && qk_nope != 128 && qk_nope != 192)
      return fmt::format("FlashInfer MLA kernel requires qk_nope_head_dim in [64, 128, 192], but got {}", qk_nope);
    return std::nullopt;
  }
};

class TokenspeedMLABackend : public DenseMLABackend {
 public:
  std::string get_name() const override { return "TOKENSPEED_MLA"; }
  std::string qualname() const override { return "attnsel::backends::TokenspeedMLABackend"; }
  std::vector<std::string> supported_kv_cache_dtypes(const RuntimeEnv&) const override {
    return {"fp8", "fp8_e4m3"};
  }
  std::vector<KernelBlockSize> get_supported_kernel_block_sizes(const RuntimeEnv&) const override { return {32, 64}; }
  bool supports_compute_capability(const std::optional<DeviceCapability>& cap, const RuntimeEnv&) const override {
    return cap_major_in(cap, {10});
  }
  /// The kernel is specialised for DeepSeek-R1's dimensions with an FP8 latent cache.
  std::optional<std::string> supports_combination(const CombinationArgs& a, const RuntimeEnv& env) const override {
    if (a.head_size != 576 || env.facts.get_int("model.qk_nope_head_dim") != 128)
      return "TokenSpeed MLA requires DeepSeek-R1 dimensions (head_size 576, qk_nope_head_dim 128)";
    if (!a.kv_cache_dtype || !a.kv_cache_dtype->starts_with("fp8")) return "TokenSpeed MLA requires an FP8 KV cache";
    return std::nullopt;
  }
};

class CutlassMLABackend : public DenseMLABackend {
 public:
  std::string get_name() const override { return "CUTLASS_MLA"; }
  std::string qualname() const override { return "attnsel::backends::CutlassMLABackend"; }
  std::vector<std::string> supported_kv_cache_dtypes(const RuntimeEnv&) const override { return kMlaFp8KvDTypes; }
  std::vector<KernelBlockSize> get_supported_kernel_block_sizes(const RuntimeEnv&) const override { return {128}; }
  bool supports_compute_capability(const std::optional<DeviceCapability>& cap, const RuntimeEnv&) const override {
    return cap_major_in(cap, {10});
  }
};

class FlashAttnMLABackend : public DenseMLABackend {
 public:
  std::string get_name() const override { return "FLASH_ATTN_MLA"; }
  std::string qualname() const override { return "attnsel::backends::FlashAttnMLABackend"; }
  std::vector<KernelBlockSize> get_supported_kernel_block_sizes(const RuntimeEnv&) const override {
    return {MultipleOf{16}};
  }
  bool supports_batch_invariance(const RuntimeEnv&) const override { return true; }
  bool supports_compute_capability(const std::optional<DeviceCapability>& cap, const RuntimeEnv&) const override {
    return cap_major_in(cap, {9});
  }
  std::optional<std::string> supports_combination(const CombinationArgs&, const RuntimeEnv& env) const override {
    if (!flash_attn_supports_mla(env)) return "FlashAttention MLA not supported on this device";
    return std::nullopt;
  }
};

class FlashMLABackend : public DenseMLABackend {
 public:
  std::string get_name() const override { return "FLASHMLA"; }
  std::string qualname() const override { return "attnsel::backends::FlashMLABackend"; }
  std::vector<std::string> supported_kv_cache_dtypes(const RuntimeEnv&) const override { return kMlaFp8KvDTypes; }
  std::vector<KernelBlockSize> get_supported_kernel_block_sizes(const RuntimeEnv&) const override { return {64}; }
  bool supports_compute_capability(const std::optional<DeviceCapability>& cap, const RuntimeEnv&) const override {
    return cap_major_in(cap, {9, 10});
  }
  std::optional<std::string> supports_combination(const CombinationArgs& a, const RuntimeEnv& env) const override {
    return a.use_sparse ? flashmla_sparse_unsupported_reason(env) : flashmla_dense_unsupported_reason(env);
  }
};

class TritonMLABackend : public DenseMLABackend {
 public:
  std::string get_name() const override { return "TRITON_MLA"; }
  std::string qualname() const override { return "attnsel::backends::TritonMLABackend"; }
  std::vector<std::string> supported_kv_cache_dtypes(const RuntimeEnv&) const override { return kMlaFp8KvDTypes; }
  std::vector<KernelBlockSize> get_supported_kernel_block_sizes(const RuntimeEnv&) const override {
    return {MultipleOf{16}};
  }
  bool supports_batch_invariance(const RuntimeEnv&) const override { return true; }
  // Any head size: vLLM's ROCm selection test selects TRITON_MLA for head size 128.
  std::vector<int> get_supported_head_sizes(const RuntimeEnv&) const override { return {}; }
};

class AiterMLABackend : public DenseMLABackend {
 public:
  std::string get_name() const override { return "ROCM_AITER_MLA"; }
  std::string qualname() const override { return "attnsel::backends::AiterMLABackend"; }
  std::vector<std::string> supported_kv_cache_dtypes(const RuntimeEnv&) const override {
    return {"auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2"};
  }
  std::vector<int> get_supported_head_sizes(const RuntimeEnv&) const override { return {}; }
};

class AiterTritonMLABackend : public DenseMLABackend {
 public:
  std::string get_name() const override { return "ROCM_AITER_TRITON_MLA"; }
  std::string qualname() const override { return "attnsel::backends::AiterTritonMLABackend"; }
  std::vector<std::string> supported_kv_cache_dtypes(const RuntimeEnv&) const override { return {"auto"}; }
  std::vector<int> get_supported_head_sizes(const RuntimeEnv&) const override { return {}; }
};
}  // namespace

void append_mla_cuda_classes(ClassList& out) {
  out.push_back(std::make_shared<const FlashInferMLABackend>());
  out.push_back(std::make_shared<const TokenspeedMLABackend>());
  out.push_back(std::make_shared<const CutlassMLABackend>());
  out.push_back(std::make_shared<const FlashAttnMLABackend>());
  out.push_back(std::make_shared<const FlashMLABackend>());
  out.push_back(std::make_shared<const TritonMLABackend>());
  out.push_back(std::make_shared<const AiterMLABackend>());
  out.push_back(std::make_shared<const AiterTritonMLABackend>());
}

}  // namespace attnsel::backends
