#include "kernels/registry/kernel_registry.hpp"

#include <fmt/format.h>

#include <array>
#include <string>

#include "attnsel/errors.hpp"
#include "kernels/attention/cpu/cpu_attention.hpp"
#include "kernels/attention/cuda/flash_attn_cuda.hpp"
#include "kernels/mla/cpu/cpu_mla.hpp"
#include "kernels/sparse_mla/cpu/cpu_indexer.hpp"
#include "kernels/sparse_mla/cpu/cpu_sparse_mla.hpp"
#include "kernels/sparse_mla/cuda/sparse_mla_cuda.hpp"

namespace attnsel::kernel {

namespace {

std::string always_available() { return ""; }
std::vector<std::string> no_gaps(const AttentionSelectorConfig&, const RuntimeEnv&) { return {}; }

KernelInfo cpu_attention_info(ScalarType dtype, CacheDType kv_cache_dtype) {
  KernelInfo k;
  k.available = true;
  k.device = DeviceKind::cpu;
  k.isa = cpu::cpu_attention_isa(dtype, kv_cache_dtype);
  k.graph_support = GraphSupport::never;  // host code: nothing to capture
  k.lse_output = true;
  k.lse_prefill = true;
  return k;
}
std::unique_ptr<AttentionImpl> make_cpu_attention(const LayerParams& p) { return cpu::make_cpu_attention_impl(p); }

KernelInfo flash_attn_cuda_info(ScalarType, CacheDType) {
  KernelInfo k = cuda::flash_attn_cuda_kernel_info();
  k.available = cuda::cuda_kernels_built() && cuda::cuda_kernels_unavailable_reason().empty();
  return k;
}
std::unique_ptr<AttentionImpl> make_flash_attn_cuda(const LayerParams& p) { return cuda::make_flash_attn_cuda_impl(p); }

KernelInfo cpu_mla_info(ScalarType dtype, CacheDType kv_cache_dtype) {
  KernelInfo k;
  k.available = true;
  k.device = DeviceKind::cpu;
  k.isa = mla::cpu::cpu_mla_isa(dtype, kv_cache_dtype);
  k.graph_support = GraphSupport::never;  // host code: nothing to capture
  k.lse_output = true;                    // MlaImpl::decode_latent's
  return k;
}
std::unique_ptr<MlaImpl> make_cpu_mla(const MlaLayerParams& p) { return mla::cpu::make_cpu_mla_impl(p); }

KernelInfo cpu_sparse_mla_info(ScalarType dtype, CacheDType) {
  KernelInfo k;
  k.available = true;
  k.device = DeviceKind::cpu;
  k.isa = sparse_mla::cpu::cpu_sparse_mla_isa(dtype);
  k.graph_support = GraphSupport::never;  // host code: nothing to capture
  k.lse_output = true;                    // SparseMlaImpl::attend_latent's
  return k;
}
std::unique_ptr<SparseMlaImpl> make_cpu_sparse_mla(const SparseMlaLayerParams& p) {
  return sparse_mla::cpu::make_cpu_sparse_mla_impl(p);
}

KernelInfo cpu_indexer_info(ScalarType, CacheDType) {
  KernelInfo k;
  k.available = true;
  k.device = DeviceKind::cpu;
  k.isa = sparse_mla::cpu::cpu_indexer_isa();
  k.graph_support = GraphSupport::never;  // host code: nothing to capture
  return k;
}
std::unique_ptr<IndexerImpl> make_cpu_indexer(const IndexerLayerParams& p) { return sparse_mla::cpu::make_cpu_indexer_impl(p); }
// The model fixes the indexer's backend on every platform; this kernel runs on the CPU only.
std::vector<std::string> cpu_only_gaps(const AttentionSelectorConfig&, const RuntimeEnv& env) {
  if (env.device.kind == PlatformKind::cpu) return {};
  return {"the lightning indexer's kernel in this build runs on the CPU"};
}

KernelInfo cuda_sparse_mla_info(ScalarType, CacheDType) { return cuda::sparse_mla::cuda_sparse_mla_info(); }
std::unique_ptr<SparseMlaImpl> make_cuda_sparse_mla(const SparseMlaLayerParams& p) {
  return cuda::sparse_mla::make_cuda_sparse_mla_impl(p);
}

KernelInfo cuda_indexer_info(ScalarType, CacheDType) { return cuda::sparse_mla::cuda_indexer_info(); }
std::unique_ptr<IndexerImpl> make_cuda_indexer(const IndexerLayerParams& p) {
  return cuda::sparse_mla::make_cuda_indexer_impl(p);
}

const std::array kEntries = {
    KernelEntry{.name = "cpu_attention",
                .family = KernelFamily::attention,
                .device = DeviceKind::cpu,
                .unavailable_reason = always_available,
                .info = cpu_attention_info,
                .gaps = no_gaps,
                .make_attention = make_cpu_attention},
    KernelEntry{.name = "flash_attn_cuda",
                .family = KernelFamily::attention,
                .device = DeviceKind::cuda,
                .unavailable_reason = cuda::cuda_kernels_unavailable_reason,
                .info = flash_attn_cuda_info,
                .gaps = cuda::flash_attn_cuda_gaps,
                .make_attention = make_flash_attn_cuda},
    KernelEntry{.name = "cpu_mla",
                .family = KernelFamily::mla,
                .device = DeviceKind::cpu,
                .unavailable_reason = always_available,
                .info = cpu_mla_info,
                .gaps = no_gaps,
                .make_mla = make_cpu_mla},
    KernelEntry{.name = "cpu_sparse_mla",
                .family = KernelFamily::sparse_mla,
                .device = DeviceKind::cpu,
                .unavailable_reason = always_available,
                .info = cpu_sparse_mla_info,
                .gaps = no_gaps,
                .make_sparse_mla = make_cpu_sparse_mla},
    KernelEntry{.name = "cpu_indexer",
                .family = KernelFamily::sparse_mla,
                .device = DeviceKind::cpu,
                .unavailable_reason = always_available,
                .info = cpu_indexer_info,
                .gaps = cpu_only_gaps,
                .make_indexer = make_cpu_indexer},
    KernelEntry{.name = "cuda_sparse_mla",
                .family = KernelFamily::sparse_mla,
                .device = DeviceKind::cuda,
                .unavailable_reason = cuda::cuda_kernels_unavailable_reason,
                .info = cuda_sparse_mla_info,
                .gaps = cuda::sparse_mla::cuda_sparse_mla_gaps,
                .make_sparse_mla = make_cuda_sparse_mla},
    KernelEntry{.name = "cuda_indexer",
                .family = KernelFamily::sparse_mla,
                .device = DeviceKind::cuda,
                .unavailable_reason = cuda::cuda_kernels_unavailable_reason,
                .info = cuda_indexer_info,
                .gaps = cuda::sparse_mla::cuda_indexer_gaps,
                .make_indexer = make_cuda_indexer},
};

}  // namespace

std::span<const KernelEntry> kernel_entries() { return kEntries; }

const KernelEntry& find_kernel(std::string_view name) {
  for (const KernelEntry& e : kEntries)
    if (e.name == name) return e;
  std::string names;
  for (const KernelEntry& e : kEntries) names += fmt::format("{}{}", names.empty() ? "" : ", ", e.name);
  throw ValueError(fmt::format("no kernel named '{}' in this build; the kernels are: {}", name, names));
}

}  // namespace attnsel::kernel
