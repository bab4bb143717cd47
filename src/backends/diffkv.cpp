// The different-K/V-head-size backends (head_size_v != head_size, e.g. MiMo's 192/128):
// vllm/v1/attention/backends/flash_attn_diffkv.py and triton_attn_diffkv.py. Both subclass
// their plain backend and pack K and V into one content slot.
#include "attnsel/kernel.hpp"
#include "backends/common.hpp"
#include "backends/families.hpp"
#include "backends/flash_attn.hpp"
#include "backends/triton_attn.hpp"

namespace attnsel::backends {

namespace {
/// A DiffKV backend shares its parent's capabilities but not its kernel (K and V are packed
/// into one slot): pin the kernel hooks to the base "no kernel" answers so that a kernel
/// added to the parent class is never inherited by mistake.
template <class Parent>
class DiffKVBackend : public Parent {
 public:
  bool has_kernel() const override { return AttentionBackend::has_kernel(); }
  std::string missing_kernel_reason() const override { return AttentionBackend::missing_kernel_reason(); }
  std::vector<std::string> kernel_gaps(const AttentionSelectorConfig& c, const RuntimeEnv& env) const override {
    return AttentionBackend::kernel_gaps(c, env);
  }
  std::unique_ptr<kernel::AttentionImpl> make_impl(const kernel::LayerParams& params) const override {
    return AttentionBackend::make_impl(params);
  }
};

/// FlashAttention's capabilities; the V head size (default 128) keeps the layer off FA4's
/// head-256 kernel.
class FlashAttentionDiffKVBackend : public DiffKVBackend<FlashAttentionBackend> {
 public:
  std::string get_name() const override { return "FLASH_ATTN_DIFFKV"; }
  std::string qualname() const override { return "attnsel::backends::FlashAttentionDiffKVBackend"; }

 protected:
  std::optional<int> head_size_v() const override { return 128; }
};

/// Triton's capabilities for decoder self-attention only, without quantized caches, sinks,
/// non-causal attention, mm-prefix or R-SWA (vLLM's TritonDiffKVBackend overrides).
class TritonAttentionDiffKVBackend : public DiffKVBackend<TritonAttentionBackend> {
 public:
  std::string get_name() const override { return "TRITON_ATTN_DIFFKV"; }
  std::string qualname() const override { return "attnsel::backends::TritonAttentionDiffKVBackend"; }
  std::vector<std::string> supported_kv_cache_dtypes(const RuntimeEnv&) const override {
    return {"auto", "bfloat16"};
  }
  bool supports_attn_type(AttentionType t) const override { return t == AttentionType::decoder; }
  bool supports_sink(const RuntimeEnv&) const override { return false; }
  bool supports_non_causal(const RuntimeEnv&) const override { return false; }
  bool supports_mm_prefix(const RuntimeEnv&) const override { return false; }
  bool supports_rswa(const RuntimeEnv&) const override { return false; }
};
}  // namespace

void append_diffkv_classes(ClassList& out) {
  out.push_back(std::make_shared<const FlashAttentionDiffKVBackend>());
  out.push_back(std::make_shared<const TritonAttentionDiffKVBackend>());
}

}  // namespace attnsel::backends
