// Layer: plugin (src/layers.txt)
// Loading third-party attention backends from shared libraries (attnsel/plugin.h is the
// ABI a plugin implements).
//
// A plugin backend is reached by a qualified name that get_class() resolves:
//   "path/to/libfoo.so:symbol"     the first backend declared by init function `symbol`
//   "libfoo.so:symbol"             the same, with libfoo.so searched for (see below)
//   "libfoo.so:symbol#NAME"        the backend named NAME declared by `symbol`
// so that register_backend(AttentionBackendEnum["CUSTOM"], "libfoo.so:symbol") works as
// in vLLM. A loaded backend's class is registered under "libfoo.so:symbol" (first) or
// "libfoo.so:symbol#NAME" (the others): the file name, not the directory, so the same
// name works whichever path loaded it.
//
// A bare library name (no '/') is searched for in: each directory of ATTNSEL_PLUGIN_PATH
// (':'-separated), the installation's plugin directory (<libdir>/attnsel/plugins), and
// the running executable's directory. ATTNSEL_PLUGINS (','-separated "path[:symbol]"
// entries) names plugins loaded at the registry's first use by any function of the
// library (or by register_builtin_backends()); their failures are logged, not thrown.
//
// Every failure is an ImportError whose message names the library and what went wrong;
// nothing of a plugin that fails is registered.
//
// Thread-safety: every function may be called from any thread; loading is serialised.
// A plugin's init must not call back into attnsel.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "attnsel/export.hpp"

namespace attnsel {

/// The init symbol used when a plugin is named without ":symbol".
inline constexpr std::string_view kDefaultPluginSymbol = "attnsel_plugin_init";

/// One backend a loaded plugin declares.
struct ATTNSEL_API PluginBackendInfo {
  std::string name;                        ///< get_name(), e.g. "MY_ATTN"
  std::string qualname;                    ///< "libfoo.so:symbol" or "libfoo.so:symbol#MY_ATTN"
  bool available = true;                   ///< false when its score was 0
  std::uint32_t score = 0;                 ///< the plugin's score (0 = cannot run here)
  std::string unavailable_reason;          ///< why, when not available
  bool has_kernel = false;
  std::vector<std::string> registered_as;  ///< enum members it was registered as when loaded
};

/// A loaded plugin.
struct ATTNSEL_API PluginInfo {
  std::string library;   ///< the absolute path it was loaded from
  std::string symbol;    ///< its init function
  std::string name;      ///< the name the plugin gives itself
  std::string version;   ///< the plugin's own version text (may be empty)
  std::uint32_t abi_major = 0;
  std::uint32_t abi_minor = 0;
  std::vector<PluginBackendInfo> backends;
};

/// Loads (once per library file and symbol; later calls return the same plugin) and
/// registers every backend a plugin declares. Throws ImportError.
ATTNSEL_API PluginInfo load_plugin(std::string_view library, std::string_view symbol);
/// The same from "path" or "path:symbol" (the text after the last ':' is the symbol only
/// when it is a C identifier, so a directory containing ':' still works).
ATTNSEL_API PluginInfo load_plugin(std::string_view spec);

/// Loads every entry of ATTNSEL_PLUGINS that is not loaded yet; returns one message per
/// failure (each also logged as a warning).
ATTNSEL_API std::vector<std::string> load_environment_plugins();

/// Every plugin loaded so far, in load order.
ATTNSEL_API std::vector<PluginInfo> loaded_plugins();

/// The directories a bare library name is searched in, in order.
ATTNSEL_API std::vector<std::string> plugin_search_path();

}  // namespace attnsel
