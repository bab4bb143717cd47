// AMX_MLA's capabilities (vllm/v1/attention/backends/mla/amx_mla.py).
#include "backends/class_factories.hpp"
#include "backends/common.hpp"

namespace attnsel::backends {

namespace {
class AMXMLABackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "AMX_MLA"; }
  std::string qualname() const override { return "attnsel::backends::AMXMLABackend"; }
  BackendCapabilities capabilities(const RuntimeEnv&) const override {
    BackendCapabilities c = mla_common_capabilities();
    c.dtypes = {DType::bfloat16};
    c.kernel_block_sizes = {MultipleOf{32}};
    c.head_sizes = {576};
    // No AMX check here: the CPU platform only routes to AMX_MLA when the host has AMX.
    return c;
  }
};
}  // namespace

void append_amx_mla(ClassList& out) { out.push_back(std::make_shared<const AMXMLABackend>()); }

}  // namespace attnsel::backends
