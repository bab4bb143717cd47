// The plugin loader: dlopen → dlsym → init → ABI check → validate every declaration →
// score → register. A plugin is registered only after every check passed, so a failure
// leaves nothing behind (its library is closed again when the last reference goes).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "attnsel/errors.hpp"
#include "attnsel/plugin_loader.hpp"
#include "attnsel/registry.hpp"
#include "attnsel/version.h"
#include "core/log.hpp"
#include "plugin/abi.hpp"
#include "plugin/declaration.hpp"
#include "plugin/library.hpp"
#include "plugin/loader.hpp"
#include "plugin/names.hpp"
#include "plugin/plugin_backend.hpp"

namespace attnsel::plugin {

namespace {

namespace fs = std::filesystem;

constexpr std::uint32_t kMaxBackends = 4096;

struct LoadedBackend {
  PluginBackendInfo info;
  std::shared_ptr<const PluginBackend> cls;  // also kept when unavailable, for its declaration
};

struct LoadedPlugin {
  std::shared_ptr<const SharedLibrary> library;
  PluginInfo info;
  std::vector<LoadedBackend> backends;
  std::string label;  // "'name' (libfoo.so:symbol)" for messages
};

const attnsel_host& host_description() {
  static const attnsel_host host{ATTNSEL_PLUGIN_ABI_MAJOR, ATTNSEL_PLUGIN_ABI_MINOR, sizeof(attnsel_host),
                                 ATTNSEL_VERSION_STRING};
  return host;
}

// Set while this thread runs a plugin's init, so that an init calling back into the
// loader gets an error instead of a deadlock.
thread_local bool in_plugin_init = false;

std::string cannot_load(const fs::path& path, std::string_view symbol, std::string_view why) {
  return fmt::format("cannot load plugin {} (init symbol '{}'): {}", quote(path.string()), symbol, why);
}

std::string join_problems(const std::vector<std::string>& problems) {
  return fmt::format("{}", fmt::join(problems, "; "));
}

class Loader {
 public:
  std::shared_ptr<const LoadedPlugin> load(std::string_view library_text, std::string_view symbol) {
    if (in_plugin_init) throw ImportError("a plugin's init function may not load plugins");
    // The registry starts first (and loads ATTNSEL_PLUGINS through this loader), never
    // under the lock below.
    register_builtin_backends();
    if (!is_c_identifier(symbol))
      throw ImportError(fmt::format("cannot load plugin {}: init symbol {} is not a C identifier",
                                    quote(library_text), quote(symbol)));
    const fs::path path = locate_library(library_text);
    std::lock_guard lock(mu_);
    const auto id = file_id(path);
    for (const auto& p : plugins_)
      if (id && p->library->id() == *id && p->info.symbol == symbol) return p;  // loaded twice: the same plugin

    std::shared_ptr<const SharedLibrary> library = SharedLibrary::open(path);
    auto plugin = describe(library, path, std::string(symbol));
    register_backends(*plugin);
    plugins_.push_back(plugin);
    log::logger().info("Loaded attnsel plugin {} from {}: {}", plugin->label, quote(path.string()),
                       summary(*plugin));
    return plugin;
  }

  // A plugin already loaded from a file of this name with this init symbol: a bare
  // qualified name ("libfoo.so:symbol", as registered for the plugin's backends) means it
  // before any search of the filesystem.
  std::shared_ptr<const LoadedPlugin> find_loaded(std::string_view file_name, std::string_view symbol) {
    std::lock_guard lock(mu_);
    for (const auto& p : plugins_)
      if (p->info.symbol == symbol && p->library->path().filename() == file_name) return p;
    return nullptr;
  }

  std::vector<PluginInfo> loaded() {
    std::lock_guard lock(mu_);
    std::vector<PluginInfo> out;
    for (const auto& p : plugins_) out.push_back(p->info);
    return out;
  }

  void reset() {
    std::lock_guard lock(mu_);
    plugins_.clear();
    member_owner_.clear();
  }

 private:
  // Calls init and reads everything it declares; throws ImportError listing every problem.
  std::shared_ptr<LoadedPlugin> describe(const std::shared_ptr<const SharedLibrary>& library, const fs::path& path,
                                         const std::string& symbol) {
    void* address = library->symbol(symbol);
    if (address == nullptr) {
      // The library itself loaded: what is wrong is the symbol asked for (or its export).
      const bool has_default =
          symbol != kDefaultPluginSymbol && library->symbol(std::string(kDefaultPluginSymbol)) != nullptr;
      throw ImportError(fmt::format(
          "plugin {} has no init symbol '{}': the library loaded, but exports no symbol '{}' ({})",
          quote(path.string()), symbol, symbol,
          has_default
              ? fmt::format("it exports the default init symbol {}: leave out ':{}'", kDefaultPluginSymbol, symbol)
              : std::string("export the init function with extern \"C\" ATTNSEL_PLUGIN_EXPORT")));
    }
    auto init = reinterpret_cast<attnsel_plugin_init_fn>(address);
    const attnsel_plugin* desc = nullptr;
    in_plugin_init = true;
    try {
      desc = init(&host_description());
    } catch (...) {
      in_plugin_init = false;
      throw ImportError(cannot_load(path, symbol, "its init function threw an exception (plugins must not throw "
                                                  "across the ABI)"));
    }
    in_plugin_init = false;
    if (desc == nullptr) throw ImportError(cannot_load(path, symbol, "its init function returned NULL"));
    if (auto why = check_abi(*desc, ATTNSEL_PLUGIN_ABI_MAJOR, abi_layouts()))
      throw ImportError(cannot_load(path, symbol, *why));
    const AbiLayout& layout = abi_layouts()[desc->abi_minor];

    auto plugin = std::make_shared<LoadedPlugin>();
    plugin->library = library;
    PluginInfo& info = plugin->info;
    info.library = path.string();
    info.symbol = symbol;
    info.abi_major = desc->abi_major;
    info.abi_minor = desc->abi_minor;
    std::vector<std::string> problems;
    auto read_text = [&](const char* s, std::string_view field) -> std::string {
      if (s == nullptr) return {};
      const std::size_t n = strnlen(s, 4097);
      if (n > 4096) problems.push_back(fmt::format("its {} is not NUL-terminated within 4096 bytes", field));
      return std::string(s, std::min<std::size_t>(n, 4096));
    };
    info.name = read_text(desc->name, "name");
    info.version = read_text(desc->version, "version");
    if (info.name.empty()) info.name = path.filename().string();
    plugin->label = fmt::format("'{}' ({}:{})", info.name, path.filename().string(), symbol);
    if (desc->error != nullptr)
      throw ImportError(cannot_load(path, symbol, fmt::format("its init function reported an error: {}",
                                                              read_text(desc->error, "error"))));
    if (desc->num_backends == 0) problems.emplace_back("it declares no backends");
    else if (desc->num_backends > kMaxBackends)
      problems.push_back(fmt::format("num_backends is {}, more than {}", desc->num_backends, kMaxBackends));
    else if (desc->backends == nullptr)
      problems.push_back(fmt::format("backends is NULL but num_backends is {}", desc->num_backends));
    if (!problems.empty()) throw ImportError(cannot_load(path, symbol, join_problems(problems)));

    const std::string prefix = fmt::format("{}:{}", path.filename().string(), symbol);
    std::vector<BackendDeclaration> decls;
    for (std::uint32_t i = 0; i < desc->num_backends; ++i) {
      const attnsel_backend* b = desc->backends[i];
      if (b == nullptr) {
        problems.push_back(fmt::format("backend #{} is NULL", i));
        continue;
      }
      DeclarationRead read = read_backend_declaration(*b, layout);
      const std::string who = read.declaration.name.empty() ? fmt::format("backend #{}", i)
                                                            : fmt::format("backend #{} '{}'", i, read.declaration.name);
      for (const std::string& p : read.problems) problems.push_back(fmt::format("{}: {}", who, p));
      decls.push_back(std::move(read.declaration));
    }
    check_names(decls, path, prefix, problems);
    if (!problems.empty()) throw ImportError(cannot_load(path, symbol, join_problems(problems)));

    for (std::size_t i = 0; i < decls.size(); ++i) {
      LoadedBackend lb;
      lb.info.name = decls[i].name;
      lb.info.qualname = i == 0 ? prefix : fmt::format("{}#{}", prefix, decls[i].name);
      lb.info.has_kernel = decls[i].kernel != nullptr;
      score(decls[i], lb.info);
      lb.cls = std::make_shared<const PluginBackend>(library, lb.info.qualname, std::move(decls[i]));
      plugin->backends.push_back(std::move(lb));
    }
    return plugin;
  }

  // Names must be unique within the plugin; qualified names and created enum members
  // must not collide with another library's. Called with mu_ held.
  void check_names(const std::vector<BackendDeclaration>& decls, const fs::path& path, const std::string& prefix,
                   std::vector<std::string>& problems) const {
    std::map<std::string, std::size_t> names;
    std::map<std::string, std::string> register_as;
    for (std::size_t i = 0; i < decls.size(); ++i) {
      const BackendDeclaration& d = decls[i];
      if (d.name.empty()) continue;
      if (auto [it, fresh] = names.emplace(d.name, i); !fresh)
        problems.push_back(fmt::format("duplicate backend name '{}': backends #{} and #{} both use it", d.name,
                                       it->second, i));
      for (const std::string& member : d.register_as)
        if (auto [it, fresh] = register_as.emplace(member, d.name); !fresh && it->second != d.name)
          problems.push_back(fmt::format("duplicate backend name '{}': backends '{}' and '{}' both register as it",
                                         member, it->second, d.name));
    }
    const auto id = file_id(path);
    for (std::size_t i = 0; i < decls.size(); ++i) {
      const std::string qualname = i == 0 ? prefix : fmt::format("{}#{}", prefix, decls[i].name);
      for (const auto& other : plugins_) {
        if (id && other->library->id() == *id) continue;
        for (const LoadedBackend& b : other->backends)
          if (b.info.qualname == qualname)
            problems.push_back(fmt::format("duplicate backend name '{}': plugin {} from {} already provides it "
                                           "(two libraries with the same file name and init symbol cannot both be "
                                           "loaded)",
                                           qualname, other->label, quote(other->info.library)));
      }
      for (const auto& cls : registered_classes())
        if (cls->qualname() == qualname && !dynamic_cast<const PluginBackend*>(cls.get()))
          problems.push_back(
              fmt::format("duplicate backend name '{}': a backend class of that name is already registered", qualname));
    }
    for (const auto& [member, backend] : register_as)
      if (auto owner = member_owner_.find(member); owner != member_owner_.end())
        problems.push_back(fmt::format("duplicate backend name '{}': backend '{}' registers as it, but plugin {} "
                                       "already registered that name",
                                       member, backend, owner->second));
  }

  // llama.cpp's score: 0 = this backend cannot run on this machine.
  static void score(const BackendDeclaration& d, PluginBackendInfo& info) {
    if (d.score == nullptr) {
      info.score = 1;
      return;
    }
    MessageBuffer reason;
    try {
      info.score = d.score(d.user_data, reason.ptr(), reason.capacity());
      if (info.score == 0) info.unavailable_reason = reason.text("the plugin gave no reason");
    } catch (...) {
      info.score = 0;
      info.unavailable_reason = "its score function threw an exception (plugins must not throw across the ABI)";
    }
    info.available = info.score != 0;
  }

  // Everything was checked: registration cannot fail half-way for a reason of the plugin's.
  void register_backends(LoadedPlugin& plugin) {
    for (LoadedBackend& b : plugin.backends) {
      if (b.info.available) register_class(b.cls);
      for (const std::string& member : b.cls->declaration().register_as) {
        if (auto existing = AttentionBackendEnum.find(member)) {
          log::logger().info("Plugin {} overrides attention backend {} with {}", plugin.label, member, b.info.qualname);
          register_backend(*existing, b.info.qualname);
        } else {
          register_backend(member, b.info.qualname);
          member_owner_[member] = plugin.label;
        }
        b.info.registered_as.push_back(member);
      }
      plugin.info.backends.push_back(b.info);
    }
  }

  static std::string summary(const LoadedPlugin& p) {
    std::vector<std::string> parts;
    for (const LoadedBackend& b : p.backends)
      parts.push_back(b.info.available ? fmt::format("{} as {}", b.info.name, b.info.qualname)
                                       : fmt::format("{} unavailable here ({})", b.info.name, b.info.unavailable_reason));
    return fmt::format("{}", fmt::join(parts, ", "));
  }

  std::mutex mu_;
  std::vector<std::shared_ptr<const LoadedPlugin>> plugins_;
  std::map<std::string, std::string> member_owner_;  // enum member created by a plugin → that plugin's label
};

Loader& loader() {
  static Loader* instance = new Loader();  // never destroyed: backends may run during static destruction
  return *instance;
}

std::vector<std::string> split_plugin_list(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    std::string_view entry = text.substr(0, comma);
    while (!entry.empty() && entry.front() == ' ') entry.remove_prefix(1);
    while (!entry.empty() && entry.back() == ' ') entry.remove_suffix(1);
    if (!entry.empty()) out.emplace_back(entry);
    if (comma == std::string_view::npos) break;
    text = text.substr(comma + 1);
  }
  return out;
}

}  // namespace

std::shared_ptr<const BackendClass> resolve_plugin_class(std::string_view qualname) {
  auto q = parse_qualified_name(qualname);
  if (!q) return nullptr;
  if (in_plugin_init) throw ImportError("a plugin's init function may not resolve plugin backends");
  std::shared_ptr<const LoadedPlugin> plugin;
  if (q->library.find('/') == std::string::npos) plugin = loader().find_loaded(q->library, q->symbol);
  if (!plugin) plugin = loader().load(q->library, q->symbol);
  const LoadedBackend* chosen = nullptr;
  if (!q->backend) {
    chosen = &plugin->backends.front();
  } else {
    const std::string wanted = to_upper(*q->backend);
    for (const LoadedBackend& b : plugin->backends)
      if (b.info.name == wanted) chosen = &b;
    if (chosen == nullptr) {
      std::vector<std::string> names;
      for (const LoadedBackend& b : plugin->backends) names.push_back(b.info.name);
      throw ImportError(fmt::format("plugin {} declares no backend named {}; it declares: {}", plugin->label,
                                    quote(*q->backend), fmt::join(names, ", ")));
    }
  }
  if (!chosen->info.available)
    throw ImportError(fmt::format("{} (plugin backend {}) cannot run on this machine: {}", chosen->info.name,
                                  chosen->info.qualname, chosen->info.unavailable_reason));
  return chosen->cls;
}

void reset_plugins_for_testing() { loader().reset(); }

}  // namespace attnsel::plugin

namespace attnsel {

PluginInfo load_plugin(std::string_view library, std::string_view symbol) {
  return plugin::loader().load(library, symbol)->info;
}

PluginInfo load_plugin(std::string_view spec) {
  const plugin::PluginSpec s = plugin::parse_plugin_spec(spec, kDefaultPluginSymbol);
  return load_plugin(s.library, s.symbol);
}

std::vector<std::string> load_environment_plugins() {
  std::vector<std::string> failures;
  const char* env = std::getenv("ATTNSEL_PLUGINS");
  if (env == nullptr) return failures;
  for (const std::string& entry : plugin::split_plugin_list(env)) {
    const plugin::PluginSpec s = plugin::parse_plugin_spec(entry, kDefaultPluginSymbol);
    try {
      (void)plugin::loader().load(s.library, s.symbol);
    } catch (const std::exception& e) {  // ImportError, or anything else: one entry's failure
      failures.push_back(fmt::format("ATTNSEL_PLUGINS entry {}: {}", plugin::quote(entry), e.what()));
      log::logger().warn("{}", failures.back());
    }
  }
  return failures;
}

std::vector<PluginInfo> loaded_plugins() { return plugin::loader().loaded(); }

std::vector<std::string> plugin_search_path() {
  std::vector<std::string> out;
  for (const auto& dir : plugin::plugin_search_dirs()) out.push_back(dir.string());
  return out;
}

}  // namespace attnsel
