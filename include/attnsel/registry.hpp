// Layer: core (src/layers.txt)
// The backend registry: vLLM's AttentionBackendEnum / MambaAttentionBackendEnum (names →
// default qualified class names), their override tables, dynamic members, and the class
// table that resolves a qualified name to a backend class.
//
// Thread-safety: every function here may be called concurrently from any thread; the
// registry is guarded by a reader-writer lock, and each mutation bumps generation(), which
// the selector cache compares so that a registration is never masked by a stale entry.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attnsel/export.hpp"
#include "attnsel/backend.hpp"

namespace attnsel {

enum class EnumKind : std::uint8_t { attention, mamba };
ATTNSEL_API std::string_view enum_class_name(EnumKind k);  ///< "AttentionBackendEnum", "MambaAttentionBackendEnum"

/// One member of a backend enum. A cheap value (kind + index); members are never removed.
class ATTNSEL_API BackendMember {
 public:
  BackendMember() = default;
  BackendMember(EnumKind kind, std::uint32_t index) : kind_(kind), index_(index) {}

  EnumKind kind() const { return kind_; }
  std::uint32_t index() const { return index_; }
  const std::string& name() const;
  /// The enum value: the default class path; nullopt for CUSTOM (vLLM's None).
  std::optional<std::string> value() const;
  /// "AttentionBackendEnum.FLASH_ATTN" (Python's str() of an enum member).
  std::string str() const;

  /// Override or default path; ValueError "Backend X must be registered before use. ..."
  /// when empty. Without the class name, drops the text after the last "::" (or "." / ":").
  std::string get_path(bool include_classname = true) const;
  /// Resolves get_path() through the class table (ImportError when it cannot).
  std::shared_ptr<const BackendClass> get_class() const;
  /// get_class() as an attention backend (ImportError if it is another kind of class).
  std::shared_ptr<const AttentionBackend> get_attention_class() const;
  bool is_overridden() const;
  void clear_override() const;

  bool operator==(const BackendMember&) const = default;

 private:
  EnumKind kind_ = EnumKind::attention;
  std::uint32_t index_ = 0;
};

/// The enum-like API of one registry (attention or Mamba).
class ATTNSEL_API BackendEnum {
 public:
  explicit BackendEnum(EnumKind kind) : kind_(kind) {}
  /// Exact (case-sensitive) lookup; ValueError "Unknown attention backend: 'X'. Valid options are: ...".
  BackendMember operator[](std::string_view name) const;
  std::optional<BackendMember> find(std::string_view name) const;
  /// Case-insensitive lookup used for user input (vLLM upper-cases before lookup).
  BackendMember from_user_text(std::string_view name) const;
  /// Lookup by value, Python's AttentionBackendEnum(value): the member whose value is
  /// `value` (nullopt is vLLM's None, i.e. CUSTOM); a dynamic member registered later with
  /// the same value takes it over, as in vLLM. ValueError "'x' is not a valid
  /// AttentionBackendEnum" otherwise.
  BackendMember from_value(std::optional<std::string_view> value) const;
  std::vector<BackendMember> members() const;
  /// vLLM's register(name, value): a new member; ValueError when the name exists, or is not
  /// a Python identifier (ASCII here), or names an attribute of the enum class ("register",
  /// "get_path", "mro", dunders, ...).
  BackendMember register_member(std::string_view name, std::string_view value) const;
  EnumKind kind() const { return kind_; }

 private:
  EnumKind kind_;
};

/// The two enums, as in vLLM.
extern ATTNSEL_API const BackendEnum AttentionBackendEnum;
extern ATTNSEL_API const BackendEnum MambaAttentionBackendEnum;

/// vLLM's register_backend with a class path: sets the override (last writer wins; an
/// empty path is stored too, and leaves the member unusable as in vLLM).
/// `backend` is a member, or a new name that becomes a member (value = class_path) first.
ATTNSEL_API void register_backend(const BackendMember& backend, std::string_view class_path);
ATTNSEL_API BackendMember register_backend(std::string_view new_name, std::string_view class_path, bool is_mamba = false);

/// Puts a backend class into the class table under its qualname(). Replaces an existing
/// class of the same name (last writer wins).
ATTNSEL_API void register_class(std::shared_ptr<const BackendClass> cls);

/// The decorator form: registers T's class and overrides `backend` with it, e.g.
///   register_backend_class<MyFlashAttn>(AttentionBackendEnum["FLASH_ATTN"]);
template <class T>
std::shared_ptr<const T> register_backend_class(const BackendMember& backend) {
  auto cls = std::make_shared<const T>();
  register_class(cls);
  register_backend(backend, cls->qualname());
  return cls;
}
/// The decorator form with a new name, as vLLM's @register_backend("NAME"): the new member's
/// value is "" and the class lives only in the override, so clear_override() leaves the
/// member unusable ("must be registered before use").
template <class T>
std::shared_ptr<const T> register_backend_class(std::string_view new_name, bool is_mamba = false) {
  const BackendEnum& e = is_mamba ? MambaAttentionBackendEnum : AttentionBackendEnum;
  return register_backend_class<T>(e.register_member(new_name, ""));
}

/// vLLM's resolve_obj_by_qualname: the class table first, then each resolver in order
/// (a resolver returns nullptr for names it does not handle, or throws ImportError).
ATTNSEL_API std::shared_ptr<const BackendClass> resolve_class(std::string_view qualname);
using ClassResolver = std::function<std::shared_ptr<const BackendClass>(std::string_view qualname)>;
ATTNSEL_API void add_class_resolver(ClassResolver resolver);

/// Every class in the table, sorted by qualified name.
ATTNSEL_API std::vector<std::shared_ptr<const BackendClass>> registered_classes();

/// Starts the registry if nothing has used it yet: vLLM's enum members and every built-in
/// backend class, then the plugins ATTNSEL_PLUGINS names (a plugin that fails to load is
/// logged as a warning). The registry's first use by any function does the same, so calling
/// this is never required; it lets a program choose when the plugins load. Idempotent.
ATTNSEL_API void register_builtin_backends();

/// Restores the registry to its built-in state (tests): drops dynamic members, overrides
/// and non-built-in classes.
ATTNSEL_API void reset_registry_for_testing();

/// Incremented by every mutation of the enums, overrides or class table.
ATTNSEL_API std::uint64_t registry_generation();

}  // namespace attnsel
