// Internal: the text forms that name a plugin — qualified backend names
// ("path/libfoo.so:symbol", "libfoo.so:symbol#NAME"), plugin specs ("path[:symbol]")
// — and where a bare library name is searched for.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attnsel::plugin {

/// "LIB:SYMBOL" or "LIB:SYMBOL#NAME", split.
struct QualifiedName {
  std::string library;                ///< as written: a path, or a bare file name
  std::string symbol;                 ///< the init function
  std::optional<std::string> backend; ///< the declared backend's name after '#'
};

/// nullopt when `text` does not name a plugin backend (e.g. "attnsel::backends::X"), so
/// that the class resolver leaves it to others. The library part must end in ".so" or
/// ".so.<version>", or contain a '/'; the symbol must be a C identifier.
std::optional<QualifiedName> parse_qualified_name(std::string_view text);

/// "path" or "path:symbol" (ATTNSEL_PLUGINS entries, --plugin values). The text after
/// the last ':' is the symbol only when it is a C identifier; otherwise the whole text is
/// the path (so "/opt/a:b/libfoo.so" is a path).
struct PluginSpec {
  std::string library;
  std::string symbol;
};
PluginSpec parse_plugin_spec(std::string_view text, std::string_view default_symbol);

bool is_c_identifier(std::string_view s);

/// The directories a bare library name is searched in, in order: each entry of
/// ATTNSEL_PLUGIN_PATH (':'-separated), the library's plugin directory
/// (<libdir>/attnsel/plugins of the installation this code belongs to), and the running
/// executable's directory.
std::vector<std::filesystem::path> plugin_search_dirs();

/// The file a library name refers to, as an absolute path: a name containing '/' is
/// used as written (relative to the working directory); a bare name is searched for in
/// plugin_search_dirs(). Throws ImportError naming what was tried.
std::filesystem::path locate_library(std::string_view library);

/// The text in single quotes, with control bytes, quotes and backslashes escaped (\n, \x01), so a
/// path with odd characters prints unambiguously on one line.
std::string quote(std::string_view text);

}  // namespace attnsel::plugin
