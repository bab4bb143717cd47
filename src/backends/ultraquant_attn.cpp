// ULTRAQUANT's capabilities (vllm/v1/attention/backends/ultraquant_attn.py): a TURBOQUANT subclass.
#include "backends/class_factories.hpp"
#include "backends/common.hpp"
#include "backends/turboquant_attn.hpp"

namespace attnsel::backends {

namespace {
class UltraQuantAttentionBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "ULTRAQUANT"; }
  std::string qualname() const override { return "attnsel::backends::UltraQuantAttentionBackend"; }
  BackendCapabilities capabilities(const RuntimeEnv&) const override {
    BackendCapabilities c = turboquant_capabilities({CacheDType::ultraquant_4bit});
    c.preferred_block_size_rule = [](int) -> std::optional<int> { return 64; };
    c.sink = true;
    return c;
  }
};
}  // namespace

void append_ultraquant_attn(ClassList& out) { out.push_back(std::make_shared<const UltraQuantAttentionBackend>()); }

}  // namespace attnsel::backends
