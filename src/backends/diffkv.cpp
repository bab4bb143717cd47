// The different-K/V-head-size backends (head_size_v != head_size, e.g. MiMo's 192/128):
// vllm/v1/attention/backends/flash_attn_diffkv.py and triton_attn_diffkv.py. Both subclass
// their plain backend and pack K and V into one content slot.
#include "backends/common.hpp"
#include "backends/families.hpp"
#include "backends/flash_attn.hpp"
#include "backends/triton_attn.hpp"

namespace attnsel::backends {

namespace {
/// FlashAttention's capabilities; the V head size (default 128) keeps the layer off FA4's
/// head-256 kernel.
class FlashAttentionDiffKVBackend : public FlashAttentionBackend {
 public:
  std::string get_name() const override { return "FLASH_ATTN_DIFFKV"; }
  std::string qualname() const override { return "attnsel::backends::FlashAttentionDiffKVBackend"; }

 protected:
  std::optional<int> head_size_v() const override { return 128; }
};

/// Triton's capabilities for decoder self-attention only, without quantized caches.
class TritonAttentionDiffKVBackend : public TritonAttentionBackend {
 public:
  std::string get_name() const override { return "TRITON_ATTN_DIFFKV"; }
  std::string qualname() const override { return "attnsel::backends::TritonAttentionDiffKVBackend"; }
  std::vector<std::string> supported_kv_cache_dtypes(const RuntimeEnv&) const override {
    return {"auto", "bfloat16"};
  }
  bool supports_attn_type(AttentionType t) const override { return t == AttentionType::decoder; }
};
}  // namespace

void append_diffkv_classes(ClassList& out) {
  out.push_back(std::make_shared<const FlashAttentionDiffKVBackend>());
  out.push_back(std::make_shared<const TritonAttentionDiffKVBackend>());
}

}  // namespace attnsel::backends
