// ROCM_AITER_MLA_SPARSE's capabilities (vllm/v1/attention/backends/mla/rocm_aiter_mla_sparse.py).
#include "backends/class_factories.hpp"
#include "backends/common.hpp"

namespace attnsel::backends {

namespace {
class ROCMAiterMLASparseBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "ROCM_AITER_MLA_SPARSE"; }
  std::string qualname() const override { return "attnsel::backends::ROCMAiterMLASparseBackend"; }
  BackendCapabilities capabilities(const RuntimeEnv&) const override {
    BackendCapabilities c = sparse_mla_capabilities();
    c.kv_cache_dtypes = {CacheDType::auto_, CacheDType::float16, CacheDType::bfloat16, CacheDType::fp8,
                         CacheDType::fp8_e4m3};
    c.kernel_block_sizes = {1, 16, 64};
    c.head_sizes = {};
    return c;
  }
};
}  // namespace

void append_rocm_aiter_mla_sparse(ClassList& out) { out.push_back(std::make_shared<const ROCMAiterMLASparseBackend>()); }

}  // namespace attnsel::backends
