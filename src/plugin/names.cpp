#include "plugin/names.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <system_error>

#include "attnsel/errors.hpp"

#ifndef ATTNSEL_INSTALL_LIBDIR
#define ATTNSEL_INSTALL_LIBDIR "lib"
#endif

namespace attnsel::plugin {

namespace fs = std::filesystem;

bool is_c_identifier(std::string_view s) {
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (s.empty() || !alpha(s[0])) return false;
  return std::all_of(s.begin(), s.end(), [&](char c) { return alpha(c) || (c >= '0' && c <= '9'); });
}

namespace {

// "libfoo.so", "libfoo.so.1", "libfoo.so.1.2.3"
bool looks_like_shared_library(std::string_view lib) {
  if (lib.find('/') != std::string_view::npos) return true;
  const std::size_t so = lib.rfind(".so");
  if (so == std::string_view::npos || so == 0) return false;
  const std::string_view rest = lib.substr(so + 3);
  if (rest.empty()) return true;
  if (rest[0] != '.') return false;
  return std::all_of(rest.begin(), rest.end(), [](char c) { return c == '.' || (c >= '0' && c <= '9'); });
}

std::optional<fs::path> executable_path() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return std::nullopt;
  return exe;
}

// The image (shared library or executable) this code was linked into.
std::optional<fs::path> own_image_path() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&plugin_search_dirs), &info) == 0 || info.dli_fname == nullptr)
    return std::nullopt;
  std::error_code ec;
  fs::path p = fs::canonical(info.dli_fname, ec);
  if (ec) return std::nullopt;
  return p;
}

// <libdir>/attnsel/plugins of the installation: beside libattnsel.so when this code is in
// the shared library, or <prefix>/<libdir>/... when it is linked into <prefix>/bin/attnsel.
std::optional<fs::path> library_plugin_dir() {
  auto image = own_image_path();
  if (!image) return std::nullopt;
  auto exe = executable_path();
  std::error_code ec;
  const bool is_executable = exe && fs::equivalent(*exe, *image, ec);
  if (!is_executable) return image->parent_path() / "attnsel" / "plugins";
  return image->parent_path().parent_path() / ATTNSEL_INSTALL_LIBDIR / "attnsel" / "plugins";
}

}  // namespace

std::optional<QualifiedName> parse_qualified_name(std::string_view text) {
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return std::nullopt;
  QualifiedName q;
  q.library = std::string(text.substr(0, colon));
  std::string_view rest = text.substr(colon + 1);
  if (const std::size_t hash = rest.find('#'); hash != std::string_view::npos) {
    q.backend = std::string(rest.substr(hash + 1));
    rest = rest.substr(0, hash);
  }
  q.symbol = std::string(rest);
  if (!is_c_identifier(q.symbol) || !looks_like_shared_library(q.library)) return std::nullopt;
  return q;
}

PluginSpec parse_plugin_spec(std::string_view text, std::string_view default_symbol) {
  const std::size_t colon = text.rfind(':');
  if (colon != std::string_view::npos && colon > 0 && is_c_identifier(text.substr(colon + 1)))
    return {std::string(text.substr(0, colon)), std::string(text.substr(colon + 1))};
  return {std::string(text), std::string(default_symbol)};
}

std::vector<fs::path> plugin_search_dirs() {
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("ATTNSEL_PLUGIN_PATH")) {
    std::string_view rest = env;
    while (!rest.empty()) {
      const std::size_t sep = rest.find(':');
      const std::string_view entry = rest.substr(0, sep);
      if (!entry.empty()) dirs.emplace_back(entry);
      if (sep == std::string_view::npos) break;
      rest = rest.substr(sep + 1);
    }
  }
  if (auto dir = library_plugin_dir()) dirs.push_back(*dir);
  if (auto exe = executable_path()) dirs.push_back(exe->parent_path());
  return dirs;
}

fs::path locate_library(std::string_view library) {
  if (library.empty()) throw ImportError("the plugin library name is empty");
  if (library.find('\0') != std::string_view::npos)
    throw ImportError(fmt::format("the plugin library name {} contains a NUL character", quote(library)));
  std::error_code ec;
  if (library.find('/') != std::string_view::npos) {
    fs::path p = fs::absolute(fs::path(std::string(library)), ec);
    if (ec || !fs::exists(p, ec))
      throw ImportError(fmt::format("plugin library {} does not exist", quote(library)));
    if (!fs::is_regular_file(p, ec)) throw ImportError(fmt::format("plugin library {} is not a file", quote(library)));
    return p;
  }
  const auto dirs = plugin_search_dirs();
  for (const fs::path& dir : dirs) {
    fs::path candidate = fs::absolute(dir / std::string(library), ec);
    if (!ec && fs::is_regular_file(candidate, ec)) return candidate;
  }
  std::vector<std::string> tried;
  for (const fs::path& dir : dirs) tried.push_back(quote(dir.string()));
  throw ImportError(fmt::format("cannot find plugin library {}: searched {} (set ATTNSEL_PLUGIN_PATH, or give a path "
                                "containing '/')",
                                quote(library), tried.empty() ? std::string("no directories") : fmt::format("{}", fmt::join(tried, ", "))));
}

std::string quote(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\\' || c == '\'') { out += '\\'; out += c; }
    else if (u < 0x20 || u == 0x7f) out += fmt::format("\\x{:02x}", u);
    else out += c;
  }
  out += '\'';
  return out;
}

}  // namespace attnsel::plugin
