// FLASH_ATTN_MLA's capabilities (vllm/v1/attention/backends/mla/flashattn_mla.py).
#include "backends/class_factories.hpp"
#include "backends/common.hpp"
#include "backends/runtime_facts.hpp"

namespace attnsel::backends {

namespace {
class FlashAttnMLABackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "FLASH_ATTN_MLA"; }
  std::string qualname() const override { return "attnsel::backends::FlashAttnMLABackend"; }
  BackendCapabilities capabilities(const RuntimeEnv& env) const override {
    BackendCapabilities c = dense_mla_capabilities();
    c.kernel_block_sizes = {MultipleOf{16}};
    c.batch_invariance = true;
    c.compute_capability_rule = majors({9});
    const bool supported = flash_attn_supports_mla(env);
    c.combination_rule = [supported](const CombinationArgs&) -> std::optional<std::string> {
      if (!supported) return "FlashAttention MLA not supported on this device";
      return std::nullopt;
    };
    return c;
  }
};
}  // namespace

void append_flashattn_mla(ClassList& out) { out.push_back(std::make_shared<const FlashAttnMLABackend>()); }

}  // namespace attnsel::backends
