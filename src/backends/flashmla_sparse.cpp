// FLASHMLA_SPARSE's capabilities (vllm/v1/attention/backends/mla/flashmla_sparse.py).
// Its kernel: attnsel's sparse MLA CUDA kernel (cuda_sparse_mla_backend.hpp).
#include "backends/class_factories.hpp"
#include "backends/common.hpp"
#include "backends/cuda_sparse_mla_backend.hpp"
#include "backends/runtime_facts.hpp"

namespace attnsel::backends {

namespace {
class FlashMLASparseBackend : public CudaSparseMlaBackend {
 public:
  std::string get_name() const override { return "FLASHMLA_SPARSE"; }
  std::string qualname() const override { return "attnsel::backends::FlashMLASparseBackend"; }
  BackendCapabilities capabilities(const RuntimeEnv& env) const override {
    BackendCapabilities c = sparse_mla_capabilities();
    c.dtypes = {DType::bfloat16};
    c.kv_cache_dtypes = {CacheDType::auto_, CacheDType::bfloat16, CacheDType::fp8_ds_mla, CacheDType::fp8};
    c.kernel_block_sizes = {64};
    c.head_sizes = {576};
    c.dcp = true;
    c.compute_capability_rule = majors({9, 10});
    c.combination_rule = [reason = flashmla_sparse_unsupported_reason(env)](const CombinationArgs&) { return reason; };
    c.kv_cache_layouts = kBlockOuterLayouts;
    return c;
  }
};
}  // namespace

void append_flashmla_sparse(ClassList& out) { out.push_back(std::make_shared<const FlashMLASparseBackend>()); }

}  // namespace attnsel::backends
