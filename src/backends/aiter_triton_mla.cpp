// ROCM_AITER_TRITON_MLA's capabilities (vllm/v1/attention/backends/mla/aiter_triton_mla.py).
#include "backends/class_factories.hpp"
#include "backends/common.hpp"

namespace attnsel::backends {

namespace {
class AiterTritonMLABackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "ROCM_AITER_TRITON_MLA"; }
  std::string qualname() const override { return "attnsel::backends::AiterTritonMLABackend"; }
  BackendCapabilities capabilities(const RuntimeEnv&) const override {
    BackendCapabilities c = dense_mla_capabilities();
    c.kv_cache_dtypes = {CacheDType::auto_};
    c.head_sizes = {};
    return c;
  }
};
}  // namespace

void append_aiter_triton_mla(ClassList& out) { out.push_back(std::make_shared<const AiterTritonMLABackend>()); }

}  // namespace attnsel::backends
