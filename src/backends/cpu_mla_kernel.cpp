// CPU_MLA's kernel: the CPU MLA implementation (the kernel registry's "cpu_mla").
#include <fmt/format.h>

#include "attnsel/cache_dtype.hpp"
#include "attnsel/errors.hpp"
#include "attnsel/kernel.hpp"
#include "attnsel/mla.hpp"
#include "backends/cpu_mla.hpp"
#include "kernels/registry/kernel_registry.hpp"

namespace attnsel::backends {

namespace {
const kernel::KernelEntry& cpu_mla_entry() { return kernel::find_kernel("cpu_mla"); }
}  // namespace

// The kernel computes everything CPU_MLA declares (fp16/bf16/f32, kv cache "auto", block 16,
// head 576), so no configuration CPU_MLA accepts is a gap. What it computes beyond that —
// fp8 caches, other block sizes, several query tokens per decode request — stays
// undeclared, as in vLLM.
std::vector<std::string> CPUMLABackend::kernel_gaps(const AttentionSelectorConfig& config,
                                                    const RuntimeEnv& env) const {
  return cpu_mla_entry().gaps(config, env);
}

std::unique_ptr<kernel::AttentionImpl> CPUMLABackend::make_impl(const kernel::LayerParams&) const {
  throw NotImplementedError(fmt::format("{} runs multi-head latent attention: make its kernel with make_mla_impl "
                                        "(kernel::MlaLayerParams, attnsel/mla.hpp), not make_impl",
                                        get_name()));
}

std::unique_ptr<kernel::MlaImpl> CPUMLABackend::make_mla_impl(const kernel::MlaLayerParams& params) const {
  return cpu_mla_entry().make_mla(params);
}

kernel::KernelInfo CPUMLABackend::kernel_info(kernel::ScalarType dtype, CacheDType kv_cache_dtype) const {
  return cpu_mla_entry().info(dtype, kv_cache_dtype);
}

}  // namespace attnsel::backends
