// The different-K/V-head-size backends (head_size_v != head_size):
// vllm/v1/attention/backends/flash_attn_diffkv.py and triton_attn_diffkv.py.
#include "backends/common.hpp"
#include "backends/families.hpp"

namespace attnsel::backends {

namespace {
class FlashAttentionDiffKVBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "FLASH_ATTN_DIFFKV"; }
  std::string qualname() const override { return "attnsel::backends::FlashAttentionDiffKVBackend"; }
  std::vector<std::string> supported_kv_cache_dtypes(const RuntimeEnv&) const override { return {"auto"}; }
  bool forward_includes_kv_cache_update() const override { return false; }
  bool supports_dcp() const override { return true; }
};

class TritonAttentionDiffKVBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "TRITON_ATTN_DIFFKV"; }
  std::string qualname() const override { return "attnsel::backends::TritonAttentionDiffKVBackend"; }
  std::vector<std::string> supported_kv_cache_dtypes(const RuntimeEnv&) const override {
    return {"auto", "bfloat16"};
  }
  bool forward_includes_kv_cache_update() const override { return false; }
};
}  // namespace

void append_diffkv_classes(ClassList& out) {
  out.push_back(std::make_shared<const FlashAttentionDiffKVBackend>());
  out.push_back(std::make_shared<const TritonAttentionDiffKVBackend>());
}

}  // namespace attnsel::backends
