// HPC_ATTN's capabilities (vllm/v1/attention/backends/hpc_attn.py): Tencent hpc-ops, Hy3 on
// Hopper; model-driven. The `hpc` module is checked when the impl is built (an
// ImportError), not at selection.
#include "backends/class_factories.hpp"
#include "backends/common.hpp"

namespace attnsel::backends {

namespace {
class HpcAttentionBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "HPC_ATTN"; }
  std::string qualname() const override { return "attnsel::backends::HpcAttentionBackend"; }
  BackendCapabilities capabilities(const RuntimeEnv&) const override {
    BackendCapabilities c;
    c.kv_cache_dtypes = {CacheDType::auto_, CacheDType::bfloat16, CacheDType::fp8_e4m3};
    // vLLM keeps True here so that the layer does not insert the cache itself: HPC's kernels do.
    c.forward_includes_kv_cache_update = true;
    c.kernel_block_sizes = {64};
    c.head_sizes = {128};
    c.compute_capability_rule = [](const std::optional<DeviceCapability>& cap) { return cap_at_least(cap, 9, 0); };
    return c;
  }
};
}  // namespace

void append_hpc_attn(ClassList& out) { out.push_back(std::make_shared<const HpcAttentionBackend>()); }

}  // namespace attnsel::backends
