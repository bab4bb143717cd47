// The packed-KV quantization backends: TURBOQUANT (turboquant_attn.py) and its ULTRAQUANT
// subclass (ultraquant_attn.py).
#include "backends/common.hpp"
#include "backends/families.hpp"

namespace attnsel::backends {

namespace {
class TurboQuantAttentionBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "TURBOQUANT"; }
  std::string qualname() const override { return "attnsel::backends::TurboQuantAttentionBackend"; }
  std::vector<std::string> supported_kv_cache_dtypes(const RuntimeEnv&) const override {
    return {"turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_3bit_nc"};
  }
  /// Only the turboquant_* presets: neither "auto" nor an unspecified dtype (None).
  bool supports_kv_cache_dtype(const std::optional<std::string>& d, const RuntimeEnv& env) const override {
    return d && contains(supported_kv_cache_dtypes(env), *d);
  }
  bool forward_includes_kv_cache_update() const override { return false; }
  std::vector<KernelBlockSize> get_supported_kernel_block_sizes(const RuntimeEnv&) const override {
    return {16, 32, 64, 128};
  }
  /// The spec's head size is the packed slot size (e.g. 59 for a 128-dim head with k3v4_nc).
  bool supports_head_size(int head_size, const RuntimeEnv&) const override { return head_size > 0; }
  bool supports_mm_prefix(const RuntimeEnv&) const override { return true; }
  /// One packed K+V slot per (block, token, head): [B, N, H, C] inside each layer.
  std::optional<std::vector<KVCacheLayout>> supported_kv_cache_layouts(const RuntimeEnv&) const override {
    return std::vector<KVCacheLayout>{KVCacheLayout::LBNHC};
  }
};

class UltraQuantAttentionBackend : public TurboQuantAttentionBackend {
 public:
  std::string get_name() const override { return "ULTRAQUANT"; }
  std::string qualname() const override { return "attnsel::backends::UltraQuantAttentionBackend"; }
  std::vector<std::string> supported_kv_cache_dtypes(const RuntimeEnv&) const override { return {"ultraquant_4bit"}; }
  int get_preferred_block_size(int, const RuntimeEnv&) const override { return 64; }
  bool supports_sink(const RuntimeEnv&) const override { return true; }
};
}  // namespace

void append_turboquant_classes(ClassList& out) {
  out.push_back(std::make_shared<const TurboQuantAttentionBackend>());
  out.push_back(std::make_shared<const UltraQuantAttentionBackend>());
}

}  // namespace attnsel::backends
