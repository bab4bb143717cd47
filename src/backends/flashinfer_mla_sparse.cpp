// FLASHINFER_MLA_SPARSE's capabilities (vllm/v1/attention/backends/mla/flashinfer_mla_sparse.py).
#include "backends/class_factories.hpp"
#include "backends/common.hpp"

namespace attnsel::backends {

namespace {
class FlashInferMLASparseTRTLLMBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "FLASHINFER_MLA_SPARSE"; }
  std::string qualname() const override { return "attnsel::backends::FlashInferMLASparseTRTLLMBackend"; }
  BackendCapabilities capabilities(const RuntimeEnv&) const override {
    BackendCapabilities c = sparse_mla_capabilities();
    c.kv_cache_dtypes = {CacheDType::auto_, CacheDType::float16, CacheDType::bfloat16, CacheDType::fp8,
                         CacheDType::fp8_e4m3};
    c.kernel_block_sizes = {32, 64};
    c.head_sizes = {576};
    c.dcp = true;
    c.compute_capability_rule = majors({10});
    c.kv_cache_layouts = kBlockOuterLayouts;
    return c;
  }
};
}  // namespace

void append_flashinfer_mla_sparse(ClassList& out) { out.push_back(std::make_shared<const FlashInferMLASparseTRTLLMBackend>()); }

}  // namespace attnsel::backends
