// Layer: core (src/layers.txt)
// Runtime facts: everything a backend's capabilities depend on beyond the selector
// configuration — which FlashAttention version resolves, whether FlashInfer's TRTLLM path
// is usable, ROCm's AITER switches, AMX on the CPU, ... In vLLM these are read from
// imported kernel libraries and environment variables; here they are explicit inputs with
// vLLM's defaults for each platform (see `attnsel select --list-facts`).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "attnsel/export.hpp"
#include "attnsel/types.hpp"

namespace attnsel {

enum class PlatformKind : std::uint8_t { cuda, rocm, cpu, xpu, other };
ATTNSEL_API std::string_view platform_kind_name(PlatformKind k);  ///< "cuda", "rocm", "cpu", "xpu", "other"

using FactValue = std::variant<bool, std::int64_t, std::string>;
ATTNSEL_API std::string fact_value_to_string(const FactValue& v);

/// How a platform's device looks, for computing fact defaults.
struct ATTNSEL_API DeviceDescription {
  PlatformKind kind = PlatformKind::other;
  std::optional<DeviceCapability> capability;  ///< CUDA only
  std::string device_name;                      ///< "cuda", "rocm", "cpu", "xpu", or a custom name
  std::string arch;                             ///< "gfx942" for ROCm; empty otherwise
  int cdna_version = 0;                         ///< ROCm only: 1..4, 0 = unknown
};

/// The values a fact takes, beyond its type.
struct ATTNSEL_API FactRange {
  std::string_view valid;                    ///< as messages say them: "0 (auto), 2, 3 or 4"
  bool (*accepts)(const FactValue& value);   ///< null: any value of the fact's type
};

/// The definition of one fact: name, type, documentation, default per platform and range.
struct ATTNSEL_API FactDefinition {
  std::string_view name;
  std::string_view type;  ///< "bool", "int" or "string"
  std::string_view doc;
  FactValue (*default_for)(const DeviceDescription&);
  FactRange range;
};

/// Every known fact, in documentation order.
ATTNSEL_API std::span<const FactDefinition> fact_definitions();
ATTNSEL_API const FactDefinition* find_fact(std::string_view name);

/// A resolved set of facts for one platform: defaults plus user overrides.
/// Thread-safety: immutable after construction; safe to share across threads.
class ATTNSEL_API RuntimeFacts {
 public:
  RuntimeFacts() = default;
  explicit RuntimeFacts(const DeviceDescription& device);

  /// Sets a fact from text ("true", "3", ...). Throws ValueError naming the fact and its
  /// valid values for a value of the wrong type or out of its range, or listing every known
  /// fact when the name is unknown.
  void set(std::string_view name, std::string_view text);
  void set(std::string_view name, FactValue value);
  /// Text, not the bool alternative a string literal would otherwise convert to.
  void set(std::string_view name, const char* text) { set(name, std::string_view(text)); }

  bool get_bool(std::string_view name) const;
  std::int64_t get_int(std::string_view name) const;
  const std::string& get_string(std::string_view name) const;
  bool is_overridden(std::string_view name) const;
  /// Sets a fact from the engine's settings (attnsel/engine_facts.hpp): kept only where the
  /// user has not set the fact (a user's fact wins); not counted as overridden.
  void set_from_engine(std::string_view name, FactValue value);
  /// The value came from the engine's settings (set_from_engine), not the user or a default.
  bool is_from_engine(std::string_view name) const;

  const std::map<std::string, FactValue, std::less<>>& values() const { return values_; }
  /// Stable text of every value, for cache keys and reports.
  std::string fingerprint() const;

 private:
  const FactValue& get(std::string_view name) const;
  std::map<std::string, FactValue, std::less<>> values_;
  std::map<std::string, bool, std::less<>> overridden_;
  std::map<std::string, bool, std::less<>> from_engine_;
};

/// Everything a capability query may depend on besides the selector configuration.
struct ATTNSEL_API RuntimeEnv {
  DeviceDescription device;
  RuntimeFacts facts;
};

}  // namespace attnsel
