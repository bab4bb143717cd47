// ROCM_AITER_FA's capabilities (vllm/v1/attention/backends/rocm_aiter_fa.py).
#include "backends/class_factories.hpp"
#include "backends/common.hpp"
#include "backends/runtime_facts.hpp"

namespace attnsel::backends {

namespace {
class AiterFlashAttentionBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "ROCM_AITER_FA"; }
  std::string qualname() const override { return "attnsel::backends::AiterFlashAttentionBackend"; }
  BackendCapabilities capabilities(const RuntimeEnv& env) const override {
    BackendCapabilities c;
    c.kv_cache_dtypes = kHalfAndFp8KvDTypes;
    c.forward_includes_kv_cache_update = false;
    c.kernel_block_sizes = {16, 32};
    c.head_sizes = {64, 128, 256};
    c.sink = true;
    c.non_causal = true;
    c.sliding_window = true;
    // AITER's FA kernels are built for MI300-class (CDNA3) and newer only.
    c.compute_capability_rule = always(cdna_version(env) >= 3);
    return c;
  }
};
}  // namespace

void append_rocm_aiter_fa(ClassList& out) { out.push_back(std::make_shared<const AiterFlashAttentionBackend>()); }

}  // namespace attnsel::backends
