// DeepSeek V4.1's sparse MLA backends (vLLM's deepseek_v41 model code), which extend V4's.
#include "backends/class_factories.hpp"
#include "backends/common.hpp"
#include "backends/deepseek_v4.hpp"
#include "backends/runtime_facts.hpp"

// vLLM defines these classes in its model code (vllm.models.deepseek_v41.sparse_mla); their C++
// classes live in the namespace their class paths name.
namespace attnsel::models::deepseek_v41 {
using backends::deepseek_v4_flashinfer_mla_sparse_capabilities;
using backends::deepseek_v4_flashmla_capabilities;

namespace {
/// V4.1's FlashMLA path: 64-token pages on SM 9.x, 256 elsewhere.
BackendCapabilities deepseek_v41_flashmla_capabilities(const RuntimeEnv& env) {
  BackendCapabilities c = deepseek_v4_flashmla_capabilities();
  if (backends::is_capability_family(env, 9)) c.kernel_block_sizes = {64};
  else c.kernel_block_sizes = {256};
  return c;
}

class DeepseekV4FlashMLABackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "FLASHMLA_SPARSE_DSV41"; }
  std::string qualname() const override { return "attnsel::models::deepseek_v41::DeepseekV4FlashMLABackend"; }
  BackendCapabilities capabilities(const RuntimeEnv& env) const override {
    return deepseek_v41_flashmla_capabilities(env);
  }
};

class DeepseekV4FlashInferMLASparseBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "FLASHINFER_MLA_SPARSE_DSV41"; }
  std::string qualname() const override {
    return "attnsel::models::deepseek_v41::DeepseekV4FlashInferMLASparseBackend";
  }
  BackendCapabilities capabilities(const RuntimeEnv&) const override {
    return deepseek_v4_flashinfer_mla_sparse_capabilities();
  }
};

class FlashMLAMegaAttnBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "FLASHMLA_MEGA_ATTN_DSV41"; }
  std::string qualname() const override { return "attnsel::models::deepseek_v41::FlashMLAMegaAttnBackend"; }
  BackendCapabilities capabilities(const RuntimeEnv& env) const override {
    return deepseek_v41_flashmla_capabilities(env);
  }
};
}  // namespace

}  // namespace attnsel::models::deepseek_v41

namespace attnsel::backends {

void append_deepseek_v41(ClassList& out) {
  out.push_back(std::make_shared<const models::deepseek_v41::DeepseekV4FlashMLABackend>());
  out.push_back(std::make_shared<const models::deepseek_v41::DeepseekV4FlashInferMLASparseBackend>());
  out.push_back(std::make_shared<const models::deepseek_v41::FlashMLAMegaAttnBackend>());
}

}  // namespace attnsel::backends
