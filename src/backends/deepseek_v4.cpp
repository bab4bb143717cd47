// DeepSeek V4's sparse MLA backends (vLLM's deepseek_v4 model code): model-driven, never in
// an automatic priority list, reached only by explicit selection or by the model.
#include "backends/deepseek_v4.hpp"

#include "backends/class_factories.hpp"
#include "backends/common.hpp"

namespace attnsel::backends {

namespace {
// The common base of the three: bfloat16, 256-token pages, head 512, sinks.
BackendCapabilities deepseek_v4_sparse_mla_capabilities() {
  BackendCapabilities c = sparse_mla_capabilities();
  c.dtypes = {DType::bfloat16};
  c.kernel_block_sizes = {256};
  c.head_sizes = {512};
  c.sink = true;
  return c;
}
}  // namespace

BackendCapabilities deepseek_v4_flashmla_capabilities() {
  BackendCapabilities c = deepseek_v4_sparse_mla_capabilities();
  c.kv_cache_dtypes = {CacheDType::auto_, CacheDType::fp8_ds_mla, CacheDType::fp8};
  c.compute_capability_rule = majors({9, 10});
  return c;
}

BackendCapabilities deepseek_v4_flashinfer_mla_sparse_capabilities() {
  BackendCapabilities c = deepseek_v4_sparse_mla_capabilities();
  c.kv_cache_dtypes = {CacheDType::auto_, CacheDType::bfloat16, CacheDType::fp8, CacheDType::fp8_e4m3,
                       CacheDType::fp8_ds_mla};
  c.compute_capability_rule = majors({10, 12});
  return c;
}

}  // namespace attnsel::backends

// vLLM defines these classes in its model code (vllm.models.deepseek_v4.sparse_mla); their C++
// classes live in the namespace their class paths name.
namespace attnsel::models::deepseek_v4 {
using backends::deepseek_v4_flashinfer_mla_sparse_capabilities;
using backends::deepseek_v4_flashmla_capabilities;

namespace {
class DeepseekV4FlashMLABackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "FLASHMLA_SPARSE_DSV4"; }
  std::string qualname() const override { return "attnsel::models::deepseek_v4::DeepseekV4FlashMLABackend"; }
  BackendCapabilities capabilities(const RuntimeEnv&) const override { return deepseek_v4_flashmla_capabilities(); }
};

class DeepseekV4FlashInferMLASparseBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "FLASHINFER_MLA_SPARSE_DSV4"; }
  std::string qualname() const override {
    return "attnsel::models::deepseek_v4::DeepseekV4FlashInferMLASparseBackend";
  }
  BackendCapabilities capabilities(const RuntimeEnv&) const override {
    return deepseek_v4_flashinfer_mla_sparse_capabilities();
  }
};

class DeepseekV4ROCMAiterMLASparseBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "ROCM_FLASHMLA_SPARSE_DSV4"; }
  std::string qualname() const override {
    return "attnsel::models::deepseek_v4::DeepseekV4ROCMAiterMLASparseBackend";
  }
  BackendCapabilities capabilities(const RuntimeEnv&) const override {
    BackendCapabilities c = backends::deepseek_v4_sparse_mla_capabilities();
    c.kv_cache_dtypes = {CacheDType::auto_, CacheDType::fp8_ds_mla, CacheDType::fp8};
    return c;
  }
};
}  // namespace

}  // namespace attnsel::models::deepseek_v4

namespace attnsel::backends {

void append_deepseek_v4(ClassList& out) {
  out.push_back(std::make_shared<const models::deepseek_v4::DeepseekV4FlashMLABackend>());
  out.push_back(std::make_shared<const models::deepseek_v4::DeepseekV4FlashInferMLASparseBackend>());
  out.push_back(std::make_shared<const models::deepseek_v4::DeepseekV4ROCMAiterMLASparseBackend>());
}

}  // namespace attnsel::backends
