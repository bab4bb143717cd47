// CUTLASS_MLA's capabilities (vllm/v1/attention/backends/mla/cutlass_mla.py).
#include "backends/class_factories.hpp"
#include "backends/common.hpp"

namespace attnsel::backends {

namespace {
class CutlassMLABackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "CUTLASS_MLA"; }
  std::string qualname() const override { return "attnsel::backends::CutlassMLABackend"; }
  BackendCapabilities capabilities(const RuntimeEnv&) const override {
    BackendCapabilities c = dense_mla_capabilities();
    c.kv_cache_dtypes = kMlaFp8KvDTypes;
    c.kernel_block_sizes = {128};
    c.compute_capability_rule = majors({10});
    return c;
  }
};
}  // namespace

void append_cutlass_mla(ClassList& out) { out.push_back(std::make_shared<const CutlassMLABackend>()); }

}  // namespace attnsel::backends
