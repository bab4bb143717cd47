#include "attnsel/backend.hpp"

#include <fmt/format.h>

#include "attnsel/capability_checks.hpp"
#include "attnsel/errors.hpp"
#include "attnsel/kernel.hpp"
#include "attnsel/mla.hpp"
#include "attnsel/sparse_mla.hpp"

namespace attnsel {

std::string AttentionBackend::missing_kernel_reason() const {
  return fmt::format("{} has no kernel implementation in this build", get_name());
}

std::vector<std::string> AttentionBackend::kernel_gaps(const AttentionSelectorConfig&, const RuntimeEnv&) const {
  return {};
}

std::unique_ptr<kernel::AttentionImpl> AttentionBackend::make_impl(const kernel::LayerParams&) const {
  throw NotImplementedError(missing_kernel_reason());
}

std::unique_ptr<kernel::MlaImpl> AttentionBackend::make_mla_impl(const kernel::MlaLayerParams&) const {
  throw NotImplementedError(missing_kernel_reason());
}

std::unique_ptr<kernel::SparseMlaImpl> AttentionBackend::make_sparse_mla_impl(const kernel::SparseMlaLayerParams&) const {
  throw NotImplementedError(missing_kernel_reason());
}

std::unique_ptr<kernel::IndexerImpl> AttentionBackend::make_indexer_impl(const kernel::IndexerLayerParams&) const {
  throw NotImplementedError(missing_kernel_reason());
}

BackendCapabilities AttentionBackend::capabilities(const RuntimeEnv&) const { return {}; }

std::vector<std::string> AttentionBackend::validate_configuration(const AttentionSelectorConfig& config,
                                                                  const RuntimeEnv& env) const {
  return run_capability_checks(config, capabilities(env), env.device.capability);
}

std::vector<KernelBlockSize> AttentionBackend::get_supported_kernel_block_sizes(const RuntimeEnv& env) const {
  return capabilities(env).kernel_block_sizes;
}

bool AttentionBackend::supports_block_size(std::optional<int> block_size, const RuntimeEnv& env) const {
  return capabilities(env).supports_block_size(block_size);
}

int AttentionBackend::get_preferred_block_size(int default_block_size, const RuntimeEnv& env) const {
  return capabilities(env).preferred_block_size(default_block_size);
}

std::optional<std::vector<KVCacheLayout>> AttentionBackend::supported_kv_cache_layouts(const RuntimeEnv& env) const {
  return capabilities(env).kv_cache_layouts;
}

}  // namespace attnsel
