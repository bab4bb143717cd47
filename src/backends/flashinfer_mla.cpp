// FLASHINFER_MLA's capabilities (vllm/v1/attention/backends/mla/flashinfer_mla.py).
#include "backends/class_factories.hpp"
#include "backends/common.hpp"
#include <fmt/format.h>

namespace attnsel::backends {

namespace {
class FlashInferMLABackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "FLASHINFER_MLA"; }
  std::string qualname() const override { return "attnsel::backends::FlashInferMLABackend"; }
  BackendCapabilities capabilities(const RuntimeEnv& env) const override {
    BackendCapabilities c = dense_mla_capabilities();
    c.kv_cache_dtypes = kMlaFp8KvDTypes;
    c.kernel_block_sizes = {32, 64};
    c.non_causal = true;
    c.compute_capability_rule = majors({10});
    const auto qk_nope = env.facts.get_int("model.qk_nope_head_dim");
    c.combination_rule = [qk_nope](const CombinationArgs&) -> std::optional<std::string> {
      if (qk_nope != 64 && qk_nope != 128 && qk_nope != 192)
        return fmt::format("FlashInfer MLA kernel requires qk_nope_head_dim in [64, 128, 192], but got {}", qk_nope);
      return std::nullopt;
    };
    return c;
  }
};
}  // namespace

void append_flashinfer_mla(ClassList& out) { out.push_back(std::make_shared<const FlashInferMLABackend>()); }

}  // namespace attnsel::backends
