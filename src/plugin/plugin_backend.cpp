#include "plugin/plugin_backend.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "attnsel/capability_checks.hpp"
#include "attnsel/errors.hpp"
#include "plugin/plugin_kernel.hpp"

namespace attnsel::plugin {

PluginBackend::PluginBackend(std::shared_ptr<const SharedLibrary> library, std::string qualname,
                             BackendDeclaration declaration)
    : library_(std::move(library)), qualname_(std::move(qualname)), decl_(std::move(declaration)) {}

std::string PluginBackend::missing_kernel_reason() const {
  return fmt::format("{} (plugin backend {}) declares no kernel entry points", decl_.name, qualname_);
}

std::unique_ptr<kernel::AttentionImpl> PluginBackend::make_impl(const kernel::LayerParams& params) const {
  if (decl_.kernel == nullptr) throw NotImplementedError(missing_kernel_reason());
  return make_plugin_impl(library_, decl_, qualname_, params);
}

BackendCapabilities PluginBackend::capabilities(const RuntimeEnv&) const {
  BackendCapabilities c;
  c.dtypes = decl_.dtypes;
  c.kv_cache_dtypes = decl_.kv_cache_dtypes;
  c.kernel_block_sizes = decl_.block_sizes;
  c.head_sizes = decl_.head_sizes;
  c.attn_types = decl_.attn_types;
  c.kv_cache_layouts = decl_.kv_cache_layouts;
  for (const CapabilityCheck& check : capability_checks())
    if (check.plugin_bit != 0) c.*check.declared = decl_.has(check.plugin_bit);
  if (decl_.compute_capability_range)
    c.compute_capability_rule = [range = *decl_.compute_capability_range](const std::optional<DeviceCapability>& cap) {
      return cap && range.first <= *cap && *cap <= range.second;
    };
  if (decl_.check_combination != nullptr)
    c.combination_rule = [this](const CombinationArgs& args) { return check_combination(args); };
  return c;
}

std::optional<std::string> PluginBackend::check_combination(const CombinationArgs& args) const {
  attnsel_combination c{};
  c.struct_size = sizeof(attnsel_combination);
  c.head_size = args.head_size;
  c.dtype = to_c_dtype(args.dtype);
  // The names are string literals: NUL-terminated, alive for the program.
  c.kv_cache_dtype = args.kv_cache_dtype ? cache_dtype_name(*args.kv_cache_dtype).data() : nullptr;
  c.has_block_size = args.block_size.has_value() ? 1 : 0;
  c.block_size = args.block_size.value_or(0);
  c.use_mla = args.use_mla ? 1 : 0;
  c.has_sink = args.has_sink ? 1 : 0;
  c.use_sparse = args.use_sparse ? 1 : 0;
  c.use_mm_prefix = args.use_mm_prefix ? 1 : 0;
  c.has_device_capability = args.device_capability.has_value() ? 1 : 0;
  if (args.device_capability) c.device_capability = {args.device_capability->major, args.device_capability->minor};
  MessageBuffer reason;
  int status = ATTNSEL_OK;
  try {
    status = decl_.check_combination(decl_.user_data, &c, reason.ptr(), reason.capacity());
  } catch (...) {
    // The ABI forbids exceptions; a C++ plugin that lets one escape still must not take
    // the selection down with it.
    return fmt::format("{}: check_combination threw an exception (plugins must not throw across the ABI)",
                       decl_.name);
  }
  if (status == ATTNSEL_OK) return std::nullopt;
  return reason.text(fmt::format("{} rejects this combination (the plugin gave no reason)", decl_.name));
}

}  // namespace attnsel::plugin
