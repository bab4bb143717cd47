// B12X's capabilities (vllm/v1/attention/backends/b12x.py): b12x paged GQA attention on
// consumer Blackwell (SM 12.x); model-driven.
#include "backends/class_factories.hpp"
#include "backends/common.hpp"

namespace attnsel::backends {

namespace {
class B12xPagedAttentionBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "B12X"; }
  std::string qualname() const override { return "attnsel::backends::B12xPagedAttentionBackend"; }
  BackendCapabilities capabilities(const RuntimeEnv& env) const override {
    BackendCapabilities c;
    c.dtypes = {DType::bfloat16};
    c.kv_cache_dtypes = {CacheDType::auto_, CacheDType::bfloat16, CacheDType::fp8, CacheDType::fp8_e4m3};
    c.forward_includes_kv_cache_update = false;
    c.kernel_block_sizes = {64, 128};
    // Exactly the kernel pages: a 192-token block is not split into 64-token pages.
    c.block_size_rule = [](std::optional<int> block_size) {
      return !block_size || *block_size == 64 || *block_size == 128;
    };
    c.preferred_block_size_rule = [](int d) -> std::optional<int> { return d == 64 || d == 128 ? d : 128; };
    c.head_sizes = {64, 128, 192, 256};
    c.sink = true;
    c.sliding_window = true;
    c.compute_capability_rule = [](const std::optional<DeviceCapability>& cap) {
      return cap && (*cap == DeviceCapability{12, 0} || *cap == DeviceCapability{12, 1});
    };
    c.combination_rule = [available = env.facts.get_bool("b12x.available")](
                             const CombinationArgs& a) -> std::optional<std::string> {
      if (a.dtype != DType::bfloat16) return "b12x currently requires bfloat16 queries";
      if (a.kv_cache_dtype == CacheDType::float16) return "b12x does not support float16 KV cache";
      if (a.kv_cache_dtype && is_quantized_kv_cache(*a.kv_cache_dtype) && *a.kv_cache_dtype != CacheDType::fp8 &&
          *a.kv_cache_dtype != CacheDType::fp8_e4m3)
        return "b12x currently supports only fp8/fp8_e4m3 quantized KV cache dtypes";
      if (!available) return "Install the b12x backend with `pip install vllm[b12x]`";
      return std::nullopt;
    };
    c.kv_cache_layouts = std::vector<KVCacheLayout>{KVCacheLayout::LBHNC, KVCacheLayout::BLHNC};
    return c;
  }
};
}  // namespace

void append_b12x(ClassList& out) { out.push_back(std::make_shared<const B12xPagedAttentionBackend>()); }

}  // namespace attnsel::backends
