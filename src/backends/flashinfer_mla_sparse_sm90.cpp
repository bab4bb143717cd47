// FLASHINFER_MLA_SPARSE_SM90's capabilities (vllm/v1/attention/backends/mla/flashinfer_mla_sparse_sm90.py: NoPE sparse MLA on Hopper).
#include "backends/class_factories.hpp"
#include "backends/common.hpp"

namespace attnsel::backends {

namespace {
class FlashInferMLASparseSM90Backend : public AttentionBackend {
 public:
  std::string get_name() const override { return "FLASHINFER_MLA_SPARSE_SM90"; }
  std::string qualname() const override { return "attnsel::backends::FlashInferMLASparseSM90Backend"; }
  BackendCapabilities capabilities(const RuntimeEnv&) const override {
    BackendCapabilities c = sparse_mla_capabilities();
    c.dtypes = {DType::bfloat16};
    c.kv_cache_dtypes = {CacheDType::auto_, CacheDType::bfloat16};
    c.kernel_block_sizes = {64};
    c.head_sizes = {512, 576};
    c.compute_capability_rule = majors({9});
    c.kv_cache_layouts = kBlockOuterLayouts;
    return c;
  }
};
}  // namespace

void append_flashinfer_mla_sparse_sm90(ClassList& out) { out.push_back(std::make_shared<const FlashInferMLASparseSM90Backend>()); }

}  // namespace attnsel::backends
