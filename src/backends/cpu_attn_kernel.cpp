// CPU_ATTN's kernel: the CPU paged-attention implementation in src/kernels/cpu.
#include "attnsel/kernel.hpp"
#include "backends/cpu_attn.hpp"
#include "kernels/cpu/cpu_attention.hpp"

namespace attnsel::backends {

// The kernel computes everything CPU_ATTN declares (dtypes, kv-cache dtypes, head sizes,
// block sizes that are multiples of 16, non-causal, sliding window, every attention
// type), so no configuration CPU_ATTN accepts is a gap. Sinks, which CPU_ATTN does not
// declare, are computed too; they stay undeclared, as in vLLM.
std::vector<std::string> CPUAttentionBackend::kernel_gaps(const AttentionSelectorConfig&, const RuntimeEnv&) const {
  return {};
}

std::unique_ptr<kernel::AttentionImpl> CPUAttentionBackend::make_impl(const kernel::LayerParams& params) const {
  return kernel::cpu::make_cpu_attention_impl(params);
}

kernel::KernelInfo CPUAttentionBackend::kernel_info(kernel::ScalarType dtype, const std::string& kv_cache_dtype) const {
  kernel::KernelInfo k;
  k.available = true;
  k.device = kernel::DeviceKind::cpu;
  k.isa = kernel::cpu::cpu_attention_isa(dtype, kv_cache_dtype);
  k.graph_support = kernel::GraphSupport::never;  // host code: nothing to capture
  k.lse_output = true;
  k.lse_prefill = true;
  return k;
}

}  // namespace attnsel::backends
