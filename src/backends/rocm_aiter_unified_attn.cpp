// ROCM_AITER_UNIFIED_ATTN's capabilities (vllm/v1/attention/backends/rocm_aiter_unified_attn.py).
#include "backends/class_factories.hpp"
#include "backends/common.hpp"

namespace attnsel::backends {

namespace {
class RocmAiterUnifiedAttentionBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "ROCM_AITER_UNIFIED_ATTN"; }
  std::string qualname() const override { return "attnsel::backends::RocmAiterUnifiedAttentionBackend"; }
  BackendCapabilities capabilities(const RuntimeEnv& env) const override {
    BackendCapabilities c;
    c.kv_cache_dtypes = kHalfAndFp8KvDTypes;
    c.forward_includes_kv_cache_update = false;
    c.kernel_block_sizes = {MultipleOf{16}};
    c.sink = true;
    c.mm_prefix = true;
    c.sliding_window = true;
    c.attn_types = kAllAttnTypes;
    // Block-contiguous first; LHBNC (not block-compact) only without a KV connector, which moves whole blocks.
    std::vector<KVCacheLayout> layouts{KVCacheLayout::LBHNC, KVCacheLayout::BLHNC};
    if (!env.facts.get_bool("kv_connector.configured")) layouts.push_back(KVCacheLayout::LHBNC);
    c.kv_cache_layouts = std::move(layouts);
    return c;
  }
};
}  // namespace

void append_rocm_aiter_unified_attn(ClassList& out) {
  out.push_back(std::make_shared<const RocmAiterUnifiedAttentionBackend>());
}

}  // namespace attnsel::backends
