// Internal: a plugin's kernel entry points as a kernel::AttentionImpl.
#pragma once

#include <memory>
#include <string>

#include "attnsel/kernel.hpp"
#include "plugin/declaration.hpp"
#include "plugin/library.hpp"

namespace attnsel::plugin {

/// Builds a kernel instance through the plugin's create(). The instance keeps `library`
/// loaded until it is destroyed. Throws ValueError when the host-side checks or the
/// plugin reject the parameters.
std::unique_ptr<kernel::AttentionImpl> make_plugin_impl(std::shared_ptr<const SharedLibrary> library,
                                                        const BackendDeclaration& declaration,
                                                        const std::string& qualname, const kernel::LayerParams& params);

}  // namespace attnsel::plugin
