// XPU_MLA_SPARSE's capabilities (vllm/v1/attention/backends/mla/xpu_mla_sparse.py).
#include "backends/class_factories.hpp"
#include "backends/common.hpp"

namespace attnsel::backends {

namespace {
class XPUMLASparseBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "XPU_MLA_SPARSE"; }
  std::string qualname() const override { return "attnsel::backends::XPUMLASparseBackend"; }
  BackendCapabilities capabilities(const RuntimeEnv&) const override {
    BackendCapabilities c = sparse_mla_capabilities();
    c.head_sizes = {576};
    return c;
  }
};
}  // namespace

void append_xpu_mla_sparse(ClassList& out) { out.push_back(std::make_shared<const XPUMLASparseBackend>()); }

}  // namespace attnsel::backends
