// TOKENSPEED_MLA's capabilities (vllm/v1/attention/backends/mla/tokenspeed_mla.py).
#include "backends/class_factories.hpp"
#include "backends/common.hpp"

namespace attnsel::backends {

namespace {
class TokenspeedMLABackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "TOKENSPEED_MLA"; }
  std::string qualname() const override { return "attnsel::backends::TokenspeedMLABackend"; }
  BackendCapabilities capabilities(const RuntimeEnv& env) const override {
    BackendCapabilities c = dense_mla_capabilities();
    c.kv_cache_dtypes = {CacheDType::fp8, CacheDType::fp8_e4m3};
    c.kernel_block_sizes = {32, 64};
    c.compute_capability_rule = majors({10});
    // The kernel is specialised for DeepSeek-R1's dimensions with an FP8 latent cache.
    const auto qk_nope = env.facts.get_int("model.qk_nope_head_dim");
    c.combination_rule = [qk_nope](const CombinationArgs& a) -> std::optional<std::string> {
      if (a.head_size != 576 || qk_nope != 128)
        return "TokenSpeed MLA requires DeepSeek-R1 dimensions (head_size 576, qk_nope_head_dim 128)";
      if (!a.kv_cache_dtype || !cache_dtype_name(*a.kv_cache_dtype).starts_with("fp8")) return "TokenSpeed MLA requires an FP8 KV cache";
      return std::nullopt;
    };
    return c;
  }
};
}  // namespace

void append_tokenspeed_mla(ClassList& out) { out.push_back(std::make_shared<const TokenspeedMLABackend>()); }

}  // namespace attnsel::backends
