// CPU_MLA_SPARSE's capabilities: attnsel's own record (vLLM has no sparse CPU backend), what
// its kernel computes.
#include "backends/cpu_mla_sparse.hpp"

#include "backends/class_factories.hpp"
#include "backends/common.hpp"

namespace attnsel::backends {

BackendCapabilities CPUMLASparseBackend::capabilities(const RuntimeEnv&) const {
  BackendCapabilities c = sparse_mla_capabilities();
  c.dtypes = kHalfAndFloatDTypes;
  // The activation dtype, or DeepSeek's 656-byte fp8 token (bf16 layers; the kernel checks).
  c.kv_cache_dtypes = {CacheDType::auto_, CacheDType::bfloat16, CacheDType::float16, CacheDType::fp8_ds_mla};
  c.head_sizes = {576};
  // Any block size (the default MultipleOf(1)): the kernel reads the cache a row at a time.
  c.batch_invariance = true;  // a batch-invariant layer never splits a token's index row
  return c;
}

void append_cpu_mla_sparse(ClassList& out) { out.push_back(std::make_shared<const CPUMLASparseBackend>()); }

}  // namespace attnsel::backends
