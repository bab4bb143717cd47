// TRITON_ATTN_DIFFKV's capabilities (vllm/v1/attention/backends/triton_attn_diffkv.py):
// Triton's, for decoder self-attention only, without quantized caches, sinks, non-causal
// attention, mm-prefix or R-SWA (vLLM's TritonDiffKVBackend overrides).
#include "attnsel/kernel.hpp"
#include "backends/class_factories.hpp"
#include "backends/diffkv.hpp"
#include "backends/triton_attn.hpp"

namespace attnsel::backends {

namespace {
class TritonAttentionDiffKVBackend : public DiffKVBackend<TritonAttentionBackend> {
 public:
  std::string get_name() const override { return "TRITON_ATTN_DIFFKV"; }
  std::string qualname() const override { return "attnsel::backends::TritonAttentionDiffKVBackend"; }
  BackendCapabilities capabilities(const RuntimeEnv& env) const override {
    BackendCapabilities c = TritonAttentionBackend::capabilities(env);
    c.kv_cache_dtypes = {CacheDType::auto_, CacheDType::bfloat16};
    c.attn_types = {AttentionType::decoder};
    c.sink = false;
    c.non_causal = false;
    c.mm_prefix = false;
    c.rswa = false;
    return c;
  }
};
}  // namespace

void append_triton_attn_diffkv(ClassList& out) {
  out.push_back(std::make_shared<const TritonAttentionDiffKVBackend>());
}

}  // namespace attnsel::backends
