// TRITON_FLASH_ATTN (vllm/v1/attention/backends/triton_flash_attn.py): the composite of
// TRITON_ATTN (image masks) and FLASH_ATTN resolved to FA3/FA4 (causal batches) on SM 9.x.
#include "backends/class_factories.hpp"
#include "backends/composite.hpp"
#include "backends/flash_attn.hpp"
#include "backends/runtime_facts.hpp"
#include "backends/triton_attn.hpp"

namespace attnsel::backends {

namespace {
/// The causal child (vLLM's _FABackend): FLASH_ATTN that must resolve to FA3 or FA4.
class TritonFlashAttentionCausalChild : public FlashAttentionBackend {
 public:
  std::string qualname() const override { return "attnsel::backends::TritonFlashAttentionBackend::_FABackend"; }

 protected:
  std::optional<std::string> combination_reason(const CombinationArgs& a, const RuntimeEnv& env) const override {
    if (auto reason = FlashAttentionBackend::combination_reason(a, env)) return reason;
    const std::optional<int> v = get_flash_attn_version(env, layer_query(a));
    if (v != 3 && v != 4) return "causal route requires FlashAttention v3 or v4";
    return std::nullopt;
  }
};
}  // namespace

void append_triton_flash_attn(ClassList& out) {
  out.push_back(CompositeAttentionBackend::create(std::make_shared<const TritonAttentionBackend>(),
                                                  std::make_shared<const TritonFlashAttentionCausalChild>(),
                                                  {.backend_name = "TRITON_FLASH_ATTN",
                                                   .qualname = "attnsel::backends::TritonFlashAttentionBackend",
                                                   .head_sizes = {256, 512},
                                                   .kernel_block_sizes = {},
                                                   .device_major = 9}));
}

}  // namespace attnsel::backends
