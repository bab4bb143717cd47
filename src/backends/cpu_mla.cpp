// CPU_MLA's capabilities (vllm/v1/attention/backends/mla/cpu_mla.py).
#include "backends/cpu_mla.hpp"

#include "backends/class_factories.hpp"
#include "backends/common.hpp"

namespace attnsel::backends {

BackendCapabilities CPUMLABackend::capabilities(const RuntimeEnv&) const {
  BackendCapabilities c = mla_common_capabilities();
  c.dtypes = kHalfAndFloatDTypes;
  c.kv_cache_dtypes = {CacheDType::auto_};
  c.kernel_block_sizes = {16};
  // Exactly 16: the kernel page is the cache block (no "multiple of" rule).
  c.block_size_rule = [](std::optional<int> block_size) { return !block_size || *block_size == 16; };
  c.head_sizes = {576};
  return c;
}

void append_cpu_mla(ClassList& out) { out.push_back(std::make_shared<const CPUMLABackend>()); }

}  // namespace attnsel::backends
