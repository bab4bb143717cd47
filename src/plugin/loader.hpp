// Internal: the plugin loader's hooks into the registry (startup.cpp) and the tests.
#pragma once

#include <memory>
#include <string_view>

#include "attnsel/backend.hpp"

namespace attnsel::plugin {

/// The class resolver for plugin backends ("LIB:SYMBOL" and "LIB:SYMBOL#NAME"): nullptr
/// for any other name; ImportError when the plugin cannot provide the backend.
std::shared_ptr<const BackendClass> resolve_plugin_class(std::string_view qualname);

/// Forgets every loaded plugin (tests). Objects made from them keep their libraries
/// loaded until they are destroyed; registered classes stay until the registry is reset.
void reset_plugins_for_testing();

}  // namespace attnsel::plugin
