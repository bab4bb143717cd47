// FLASH_ATTN_DIFFKV's capabilities (vllm/v1/attention/backends/flash_attn_diffkv.py):
// FlashAttention's, with a V head size (default 128) that keeps the layer off FA4's head-256 kernel.
#include "attnsel/kernel.hpp"
#include "backends/class_factories.hpp"
#include "backends/diffkv.hpp"
#include "backends/flash_attn.hpp"

namespace attnsel::backends {

namespace {
class FlashAttentionDiffKVBackend : public DiffKVBackend<FlashAttentionBackend> {
 public:
  std::string get_name() const override { return "FLASH_ATTN_DIFFKV"; }
  std::string qualname() const override { return "attnsel::backends::FlashAttentionDiffKVBackend"; }

 protected:
  std::optional<int> head_size_v() const override { return 128; }
};
}  // namespace

void append_flash_attn_diffkv(ClassList& out) { out.push_back(std::make_shared<const FlashAttentionDiffKVBackend>()); }

}  // namespace attnsel::backends
