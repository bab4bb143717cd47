// CPU_ATTN's kernel: the CPU paged-attention implementation (the kernel registry's
// "cpu_attention").
#include "attnsel/cache_dtype.hpp"
#include "attnsel/kernel.hpp"
#include "backends/cpu_attn.hpp"
#include "kernels/registry/kernel_registry.hpp"

namespace attnsel::backends {

namespace {
const kernel::KernelEntry& cpu_attention_entry() { return kernel::find_kernel("cpu_attention"); }
}  // namespace

// The kernel computes everything CPU_ATTN declares (dtypes, kv-cache dtypes, head sizes,
// block sizes that are multiples of 16, non-causal, sliding window, every attention
// type), so no configuration CPU_ATTN accepts is a gap. Sinks, which CPU_ATTN does not
// declare, are computed too; they stay undeclared, as in vLLM.
std::vector<std::string> CPUAttentionBackend::kernel_gaps(const AttentionSelectorConfig& config,
                                                          const RuntimeEnv& env) const {
  return cpu_attention_entry().gaps(config, env);
}

std::unique_ptr<kernel::AttentionImpl> CPUAttentionBackend::make_impl(const kernel::LayerParams& params) const {
  return cpu_attention_entry().make_attention(params);
}

kernel::KernelInfo CPUAttentionBackend::kernel_info(kernel::ScalarType dtype, CacheDType kv_cache_dtype) const {
  return cpu_attention_entry().info(dtype, kv_cache_dtype);
}

}  // namespace attnsel::backends
