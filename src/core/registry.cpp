#include "attnsel/registry.hpp"

#include <algorithm>
#include <atomic>
#include <deque>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <unordered_map>

#include "attnsel/errors.hpp"
#include "core/log.hpp"
#include "core/python_repr.hpp"
#include "core/registry_startup.hpp"

namespace attnsel {

const BackendEnum AttentionBackendEnum{EnumKind::attention};
const BackendEnum MambaAttentionBackendEnum{EnumKind::mamba};

std::string_view enum_class_name(EnumKind k) {
  return k == EnumKind::attention ? "AttentionBackendEnum" : "MambaAttentionBackendEnum";
}

namespace {

struct MemberData {
  std::string name;
  std::optional<std::string> value;
};

struct EnumData {
  std::deque<MemberData> members;  // deque: references stay valid as members are added
  std::unordered_map<std::string, std::uint32_t> index;
  // Python's _value2member_map_: the built-in members in order (the first of equal values
  // wins, as Enum makes the later ones aliases), then each dynamic member takes its value.
  std::unordered_map<std::string, std::uint32_t> by_value;
  std::optional<std::uint32_t> none_member;  // the member whose value is None (CUSTOM)
  std::unordered_map<std::uint32_t, std::string> overrides;

  void reset(std::span<const registry_startup::Member> builtin, std::span<const registry_startup::Member> own = {}) {
    members.clear();
    index.clear();
    by_value.clear();
    none_member.reset();
    overrides.clear();
    for (const auto& m : builtin) {
      const std::optional<std::string> value = m.qualname ? std::optional<std::string>(*m.qualname) : std::nullopt;
      const std::uint32_t i = add(std::string(m.name), value);
      if (!m.qualname) none_member = none_member.value_or(i);
      else by_value.try_emplace(std::string(*m.qualname), i);
    }
    // attnsel's own members follow vLLM's, each taking its value as a registered member does.
    for (const auto& m : own) {
      const std::string value(m.qualname.value_or(""));
      const std::uint32_t i = add(std::string(m.name), value);
      by_value.insert_or_assign(value, i);
    }
  }
  std::uint32_t add(std::string name, std::optional<std::string> value) {
    const auto i = static_cast<std::uint32_t>(members.size());
    index.emplace(name, i);
    members.push_back({std::move(name), std::move(value)});
    return i;
  }
};

// The process-wide registry. Writers take the lock exclusively; every mutation bumps the
// generation so that selector caches can tell that they are stale.
struct Registry {
  std::shared_mutex mu;
  EnumData attention;
  EnumData mamba;
  std::map<std::string, std::shared_ptr<const BackendClass>, std::less<>> classes;
  std::vector<ClassResolver> resolvers;
  std::atomic<std::uint64_t> generation{1};

  EnumData& data(EnumKind k) { return k == EnumKind::attention ? attention : mamba; }

  // `builtin` is computed before the lock is taken (registry_startup::builtin_contents).
  void reset_locked(const registry_startup::BuiltinContents& builtin) {
    attention.reset(builtin.attention_members, builtin.own_attention_members);
    mamba.reset(builtin.mamba_members);
    classes.clear();
    for (const auto& cls : builtin.classes) classes.insert_or_assign(cls->qualname(), cls);
    generation.fetch_add(1);
  }
};

// Plugins start once, right after the registry exists (they register into it). Other
// threads wait until they have started; the starting thread's own calls (a plugin
// registering its backends) pass through.
void start_plugins_once() {
  static std::atomic<bool> started{false};
  static std::once_flag once;
  thread_local bool starting = false;
  if (started.load(std::memory_order_acquire) || starting) return;
  std::call_once(once, [] {
    starting = true;
    registry_startup::start_plugins();
    starting = false;
    started.store(true, std::memory_order_release);
  });
}

// The registry with its built-in contents; registry() also starts the plugins.
Registry& builtin_registry() {
  static Registry* instance = [] {
    auto* r = new Registry();  // never destroyed: selections may run during static destruction
    r->reset_locked(registry_startup::builtin_contents());
    return r;
  }();
  return *instance;
}

Registry& registry() {
  Registry& r = builtin_registry();
  start_plugins_once();
  return r;
}

// The attributes vLLM's enum classes answer to besides their members (hasattr(cls, name)
// in AttentionBackendEnum.register, Python 3.11): their methods, Enum's sunder helpers and
// the dunders of an Enum class. `name` and `value` are not among them.
constexpr std::string_view kReservedNames[] = {
    "clear_override", "get_class", "get_path", "is_overridden", "mro", "register",
    "_check_for_existing_members_", "_convert_", "_create_", "_find_data_repr_", "_find_data_type_", "_find_new_",
    "_generate_next_value_", "_get_mixins_", "_member_map_", "_member_names_", "_member_type_", "_missing_",
    "_new_member_", "_unhashable_values_", "_use_args_", "_value2member_map_", "_value_repr_",
    "__annotations__", "__base__", "__bases__", "__basicsize__", "__bool__", "__call__", "__class__", "__contains__",
    "__copy__", "__deepcopy__", "__delattr__", "__dict__", "__dictoffset__", "__dir__", "__doc__", "__eq__",
    "__flags__", "__format__", "__ge__", "__getattr__", "__getattribute__", "__getitem__", "__getstate__", "__gt__",
    "__hash__", "__init__", "__init_subclass__", "__instancecheck__", "__itemsize__", "__iter__", "__le__", "__len__",
    "__lt__", "__members__", "__module__", "__mro__", "__name__", "__ne__", "__new__", "__or__", "__prepare__",
    "__qualname__", "__reduce__", "__reduce_ex__", "__repr__", "__reversed__", "__ror__", "__setattr__", "__sizeof__",
    "__str__", "__subclasscheck__", "__subclasses__", "__subclasshook__", "__text_signature__", "__weakref__",
    "__weakrefoffset__",
};

// Python's str.isidentifier() for ASCII names: a letter or underscore, then letters, digits
// and underscores. Non-ASCII names are refused (Python accepts some).
bool is_identifier(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// vLLM: `not name.isidentifier() or hasattr(cls, name)` refuses the name.
bool is_valid_member_name(std::string_view name) {
  if (!is_identifier(name)) return false;
  return std::find(std::begin(kReservedNames), std::end(kReservedNames), name) == std::end(kReservedNames);
}

std::string strip_classname(const std::string& path) {
  std::size_t cut = path.rfind("::");
  if (cut == std::string::npos) cut = path.rfind(':');
  if (cut == std::string::npos) cut = path.rfind('.');
  return cut == std::string::npos ? path : path.substr(0, cut);
}

}  // namespace

// --- BackendMember -------------------------------------------------------------------

const std::string& BackendMember::name() const {
  Registry& r = registry();
  std::shared_lock lock(r.mu);
  return r.data(kind_).members.at(index_).name;  // members are never removed: the reference stays valid
}

std::optional<std::string> BackendMember::value() const {
  Registry& r = registry();
  std::shared_lock lock(r.mu);
  return r.data(kind_).members.at(index_).value;
}

std::string BackendMember::str() const { return fmt::format("{}.{}", enum_class_name(kind_), name()); }

std::string BackendMember::get_path(bool include_classname) const {
  Registry& r = registry();
  std::string path;
  std::string member_name;
  {
    std::shared_lock lock(r.mu);
    const EnumData& d = r.data(kind_);
    member_name = d.members.at(index_).name;
    auto it = d.overrides.find(index_);
    if (it != d.overrides.end()) path = it->second;
    else path = d.members.at(index_).value.value_or("");
  }
  if (path.empty())
    throw ValueError(fmt::format("Backend {0} must be registered before use. "
                                 "Use register_backend(Backend.{0}, 'your.module.YourClass')",
                                 member_name));
  return include_classname ? path : strip_classname(path);
}

std::shared_ptr<const BackendClass> BackendMember::get_class() const { return resolve_class(get_path()); }

std::shared_ptr<const AttentionBackend> BackendMember::get_attention_class() const {
  auto cls = get_class();
  auto attn = std::dynamic_pointer_cast<const AttentionBackend>(cls);
  if (!attn) throw ImportError(fmt::format("{} is not an attention backend class", cls->qualname()));
  return attn;
}

bool BackendMember::is_overridden() const {
  Registry& r = registry();
  std::shared_lock lock(r.mu);
  return r.data(kind_).overrides.contains(index_);
}

void BackendMember::clear_override() const {
  Registry& r = registry();
  std::unique_lock lock(r.mu);
  if (r.data(kind_).overrides.erase(index_) > 0) r.generation.fetch_add(1);
}

// --- BackendEnum ---------------------------------------------------------------------

std::optional<BackendMember> BackendEnum::find(std::string_view name) const {
  Registry& r = registry();
  std::shared_lock lock(r.mu);
  const EnumData& d = r.data(kind_);
  auto it = d.index.find(std::string(name));
  if (it == d.index.end()) return std::nullopt;
  return BackendMember(kind_, it->second);
}

BackendMember BackendEnum::operator[](std::string_view name) const {
  if (auto m = find(name)) return *m;
  std::vector<std::string> names;
  for (const BackendMember& m : members()) names.push_back(m.name());
  throw ValueError(fmt::format("Unknown attention backend: '{}'. Valid options are: {}", name, fmt::join(names, ", ")));
}

BackendMember BackendEnum::from_user_text(std::string_view name) const { return (*this)[to_upper(name)]; }

BackendMember BackendEnum::from_value(std::optional<std::string_view> value) const {
  {
    Registry& r = registry();
    std::shared_lock lock(r.mu);
    const EnumData& d = r.data(kind_);
    if (!value) {
      if (d.none_member) return BackendMember(kind_, *d.none_member);
    } else if (auto it = d.by_value.find(std::string(*value)); it != d.by_value.end()) {
      return BackendMember(kind_, it->second);
    }
  }
  throw ValueError(
      fmt::format("{} is not a valid {}", value ? python_str_repr(*value) : "None", enum_class_name(kind_)));
}

std::vector<BackendMember> BackendEnum::members() const {
  Registry& r = registry();
  std::shared_lock lock(r.mu);
  std::vector<BackendMember> out;
  const auto n = static_cast<std::uint32_t>(r.data(kind_).members.size());
  for (std::uint32_t i = 0; i < n; ++i) out.emplace_back(kind_, i);
  return out;
}

BackendMember BackendEnum::register_member(std::string_view name, std::string_view value) const {
  Registry& r = registry();
  BackendMember member;
  {
    std::unique_lock lock(r.mu);
    EnumData& d = r.data(kind_);
    if (d.index.contains(std::string(name)))
      throw ValueError(fmt::format("Backend {0} already exists in {1}. Use register_backend({1}.{0}, '{2}') to override.",
                                   name, enum_class_name(kind_), value));
    if (!is_valid_member_name(name)) throw ValueError(fmt::format("Invalid or reserved backend name: {}", name));
    member = BackendMember(kind_, d.add(std::string(name), std::string(value)));
    d.by_value.insert_or_assign(std::string(value), member.index());
    r.generation.fetch_add(1);
  }
  log::logger().info("Registered new attention backend: {} -> {}", name, value);
  return member;
}

// --- registration --------------------------------------------------------------------

void register_backend(const BackendMember& backend, std::string_view class_path) {
  Registry& r = registry();
  std::unique_lock lock(r.mu);
  r.data(backend.kind()).overrides.insert_or_assign(backend.index(), std::string(class_path));
  r.generation.fetch_add(1);
}

BackendMember register_backend(std::string_view new_name, std::string_view class_path, bool is_mamba) {
  const BackendEnum& e = is_mamba ? MambaAttentionBackendEnum : AttentionBackendEnum;
  BackendMember member = e.register_member(new_name, class_path);
  register_backend(member, class_path);  // vLLM stores any given class_path, even ""
  return member;
}

void register_class(std::shared_ptr<const BackendClass> cls) {
  if (!cls) throw ValueError("register_class: null backend class");
  Registry& r = registry();
  std::unique_lock lock(r.mu);
  r.classes.insert_or_assign(cls->qualname(), std::move(cls));
  r.generation.fetch_add(1);
}

void add_class_resolver(ClassResolver resolver) {
  Registry& r = registry();
  std::unique_lock lock(r.mu);
  r.resolvers.push_back(std::move(resolver));
  r.generation.fetch_add(1);
}

std::shared_ptr<const BackendClass> resolve_class(std::string_view qualname) {
  Registry& r = registry();
  std::vector<ClassResolver> resolvers;
  {
    std::shared_lock lock(r.mu);
    auto it = r.classes.find(qualname);
    if (it != r.classes.end()) return it->second;
    resolvers = r.resolvers;
  }
  // Resolvers run without the lock: a plugin loader registers the classes it finds.
  for (const ClassResolver& resolve : resolvers)
    if (auto cls = resolve(qualname)) return cls;
  throw ImportError(fmt::format("No backend class named '{}': it is not built into this library and no loaded "
                                "plugin provides it",
                                qualname));
}

std::vector<std::shared_ptr<const BackendClass>> registered_classes() {
  Registry& r = registry();
  std::shared_lock lock(r.mu);
  std::vector<std::shared_ptr<const BackendClass>> out;
  for (const auto& [name, cls] : r.classes) out.push_back(cls);
  return out;
}

void register_builtin_backends() { (void)registry(); }

void reset_registry_for_testing() {
  Registry& r = registry();
  const registry_startup::BuiltinContents builtin = registry_startup::builtin_contents();
  std::unique_lock lock(r.mu);
  r.reset_locked(builtin);
}

// Starts the registry too: a selector that caches under the generation before the plugins
// start would see it move at the first lookup.
std::uint64_t registry_generation() { return registry().generation.load(std::memory_order_acquire); }

}  // namespace attnsel
