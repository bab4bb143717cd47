// ROCM_AITER_MLA's capabilities (vllm/v1/attention/backends/mla/rocm_aiter_mla.py).
#include "backends/class_factories.hpp"
#include "backends/common.hpp"

namespace attnsel::backends {

namespace {
class AiterMLABackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "ROCM_AITER_MLA"; }
  std::string qualname() const override { return "attnsel::backends::AiterMLABackend"; }
  BackendCapabilities capabilities(const RuntimeEnv&) const override {
    BackendCapabilities c = dense_mla_capabilities();
    c.kv_cache_dtypes = kHalfAndFp8KvDTypes;
    c.head_sizes = {};
    return c;
  }
};
}  // namespace

void append_rocm_aiter_mla(ClassList& out) { out.push_back(std::make_shared<const AiterMLABackend>()); }

}  // namespace attnsel::backends
