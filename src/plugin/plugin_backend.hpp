// Internal: a backend declared by a plugin, as an AttentionBackend the registry can hold
// (the adapter between the C declaration and the capability record).
#pragma once

#include <memory>
#include <string>

#include "attnsel/backend.hpp"
#include "plugin/declaration.hpp"
#include "plugin/library.hpp"

namespace attnsel::plugin {

/// Thread-safety: immutable; every method may be called from any thread (the plugin's
/// callbacks must allow that, as plugin.h states).
class PluginBackend final : public AttentionBackend {
 public:
  /// `library` keeps the plugin's code loaded for as long as this object (or any kernel
  /// instance it makes) lives.
  PluginBackend(std::shared_ptr<const SharedLibrary> library, std::string qualname, BackendDeclaration declaration);

  std::string get_name() const override { return decl_.name; }
  std::string qualname() const override { return qualname_; }
  const BackendDeclaration& declaration() const { return decl_; }

  bool has_kernel() const override { return decl_.kernel != nullptr; }
  std::string missing_kernel_reason() const override;
  std::unique_ptr<kernel::AttentionImpl> make_impl(const kernel::LayerParams& params) const override;

  /// The declaration as a capability record: its lists, one feature bit per row of the
  /// table of checks, its compute-capability range and its combination callback.
  BackendCapabilities capabilities(const RuntimeEnv& env) const override;

 private:
  std::optional<std::string> check_combination(const CombinationArgs& args) const;

  std::shared_ptr<const SharedLibrary> library_;
  std::string qualname_;
  BackendDeclaration decl_;
};

}  // namespace attnsel::plugin
