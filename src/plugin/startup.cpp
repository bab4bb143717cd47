// Plugins at the registry's first use (core/registry_startup.hpp): the class resolver for
// "LIB:SYMBOL" names, then the plugins ATTNSEL_PLUGINS names, like vLLM's general plugins.
// Whichever entry point uses the registry first (C++ API, C API, Python, the command), a
// plugin named there is registered before the first lookup; one that fails to load is a
// warning naming the entry and the reason.
#include <exception>

#include "attnsel/plugin_loader.hpp"
#include "attnsel/registry.hpp"
#include "core/log.hpp"
#include "core/registry_startup.hpp"
#include "plugin/loader.hpp"

namespace attnsel::registry_startup {

void start_plugins() noexcept {
  try {
    add_class_resolver(plugin::resolve_plugin_class);
    (void)load_environment_plugins();  // logs each failure as a warning
  } catch (const std::exception& e) {
    log::logger().error("ATTNSEL_PLUGINS: plugins could not be started: {}", e.what());
  }
}

}  // namespace attnsel::registry_startup
