// CPU_MLA's capabilities (vllm/v1/attention/backends/mla/cpu_mla.py).
#include "backends/class_factories.hpp"
#include "backends/common.hpp"

namespace attnsel::backends {

namespace {
class CPUMLABackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "CPU_MLA"; }
  std::string qualname() const override { return "attnsel::backends::CPUMLABackend"; }
  BackendCapabilities capabilities(const RuntimeEnv&) const override {
    BackendCapabilities c = mla_common_capabilities();
    c.dtypes = kHalfAndFloatDTypes;
    c.kv_cache_dtypes = {CacheDType::auto_};
    c.kernel_block_sizes = {16};
    // Exactly 16: the kernel page is the cache block (no "multiple of" rule).
    c.block_size_rule = [](std::optional<int> block_size) { return !block_size || *block_size == 16; };
    c.head_sizes = {576};
    return c;
  }
};
}  // namespace

void append_cpu_mla(ClassList& out) { out.push_back(std::make_shared<const CPUMLABackend>()); }

}  // namespace attnsel::backends
