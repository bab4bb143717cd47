// TURBOQUANT's capabilities (vllm/v1/attention/backends/turboquant_attn.py): packed-KV quantization.
#include "backends/turboquant_attn.hpp"

#include "backends/class_factories.hpp"
#include "backends/common.hpp"

namespace attnsel::backends {

BackendCapabilities turboquant_capabilities(std::vector<CacheDType> kv_cache_dtypes) {
  BackendCapabilities c;
  c.kv_cache_dtypes = std::move(kv_cache_dtypes);
  // Only its presets: neither "auto" nor an unspecified dtype (None).
  c.kv_cache_dtype_rule = [presets = c.kv_cache_dtypes](std::optional<CacheDType> d) {
    return d && contains(presets, *d);
  };
  c.forward_includes_kv_cache_update = false;
  c.kernel_block_sizes = {16, 32, 64, 128};
  // The spec's head size is the packed slot size (e.g. 59 for a 128-dim head with k3v4_nc).
  c.head_size_rule = [](int head_size) { return head_size > 0; };
  c.mm_prefix = true;
  // One packed K+V slot per (block, token, head): [B, N, H, C] inside each layer.
  c.kv_cache_layouts = std::vector<KVCacheLayout>{KVCacheLayout::LBNHC};
  return c;
}

namespace {
class TurboQuantAttentionBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "TURBOQUANT"; }
  std::string qualname() const override { return "attnsel::backends::TurboQuantAttentionBackend"; }
  BackendCapabilities capabilities(const RuntimeEnv&) const override {
    return turboquant_capabilities({CacheDType::turboquant_k8v4, CacheDType::turboquant_4bit_nc,
                                    CacheDType::turboquant_k3v4_nc, CacheDType::turboquant_3bit_nc});
  }
};
}  // namespace

void append_turboquant_attn(ClassList& out) { out.push_back(std::make_shared<const TurboQuantAttentionBackend>()); }

}  // namespace attnsel::backends
