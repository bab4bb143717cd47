// TRITON_MLA's capabilities (vllm/v1/attention/backends/mla/triton_mla.py).
#include "backends/class_factories.hpp"
#include "backends/common.hpp"

namespace attnsel::backends {

namespace {
class TritonMLABackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "TRITON_MLA"; }
  std::string qualname() const override { return "attnsel::backends::TritonMLABackend"; }
  BackendCapabilities capabilities(const RuntimeEnv&) const override {
    BackendCapabilities c = dense_mla_capabilities();
    c.kv_cache_dtypes = kMlaFp8KvDTypes;
    c.kernel_block_sizes = {MultipleOf{16}};
    c.batch_invariance = true;
    // Any head size: vLLM's ROCm selection test selects TRITON_MLA for head size 128.
    c.head_sizes = {};
    return c;
  }
};
}  // namespace

void append_triton_mla(ClassList& out) { out.push_back(std::make_shared<const TritonMLABackend>()); }

}  // namespace attnsel::backends
