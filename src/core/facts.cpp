#include "attnsel/facts.hpp"

#include <algorithm>
#include <charconv>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "attnsel/errors.hpp"

namespace attnsel {

std::string_view platform_kind_name(PlatformKind k) {
  switch (k) {
    case PlatformKind::cuda: return "cuda";
    case PlatformKind::rocm: return "rocm";
    case PlatformKind::cpu: return "cpu";
    case PlatformKind::xpu: return "xpu";
    case PlatformKind::other: return "other";
  }
  return "other";
}

std::string fact_value_to_string(const FactValue& v) {
  if (const bool* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (const std::int64_t* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  return std::get<std::string>(v);
}

const FactDefinition* find_fact(std::string_view name) {
  for (const FactDefinition& d : fact_definitions())
    if (d.name == name) return &d;
  return nullptr;
}

RuntimeFacts::RuntimeFacts(const DeviceDescription& device) {
  for (const FactDefinition& d : fact_definitions()) values_.emplace(std::string(d.name), d.default_for(device));
}

namespace {
std::string known_fact_names() {
  std::vector<std::string_view> names;
  for (const FactDefinition& d : fact_definitions()) names.push_back(d.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

FactValue parse_fact_text(const FactDefinition& def, std::string_view text) {
  const std::string t = to_lower(text);
  if (def.type == "bool") {
    if (t == "1" || t == "true" || t == "yes" || t == "on") return true;
    if (t == "0" || t == "false" || t == "no" || t == "off") return false;
    throw ValueError(fmt::format("Invalid value '{}' for fact {}: expected a bool (true, false, 1, 0)", text, def.name));
  }
  if (def.type == "int") {
    std::int64_t v = 0;
    const char* end = text.data() + text.size();
    auto [p, ec] = std::from_chars(text.data(), end, v);
    if (ec != std::errc() || p != end || text.empty())
      throw ValueError(fmt::format("Invalid value '{}' for fact {}: expected an integer", text, def.name));
    return v;
  }
  return std::string(text);
}
}  // namespace

void RuntimeFacts::set(std::string_view name, std::string_view text) {
  const FactDefinition* def = find_fact(name);
  if (def == nullptr)
    throw ValueError(fmt::format("Unknown fact '{}'. Valid facts are: {}", name, known_fact_names()));
  set(name, parse_fact_text(*def, text));
}

namespace {
// The fact's definition, after checking that `value` has its type.
const FactDefinition& checked_definition(std::string_view name, const FactValue& value) {
  const FactDefinition* def = find_fact(name);
  if (def == nullptr)
    throw ValueError(fmt::format("Unknown fact '{}'. Valid facts are: {}", name, known_fact_names()));
  const bool type_ok = (def->type == "bool" && std::holds_alternative<bool>(value)) ||
                       (def->type == "int" && std::holds_alternative<std::int64_t>(value)) ||
                       (def->type == "string" && std::holds_alternative<std::string>(value));
  if (!type_ok)
    throw ValueError(fmt::format("Fact {} takes a value of type {}: {}", name, def->type, def->range.valid));
  if (def->range.accepts != nullptr && !def->range.accepts(value))
    throw ValueError(fmt::format("Invalid value '{}' for fact {}: expected {}", fact_value_to_string(value), name,
                                 def->range.valid));
  return *def;
}
}  // namespace

void RuntimeFacts::set(std::string_view name, FactValue value) {
  (void)checked_definition(name, value);
  values_.insert_or_assign(std::string(name), std::move(value));
  overridden_.insert_or_assign(std::string(name), true);
  from_engine_.erase(std::string(name));
}

void RuntimeFacts::set_from_engine(std::string_view name, FactValue value) {
  (void)checked_definition(name, value);
  if (overridden_.contains(name)) return;
  values_.insert_or_assign(std::string(name), std::move(value));
  from_engine_.insert_or_assign(std::string(name), true);
}

const FactValue& RuntimeFacts::get(std::string_view name) const {
  auto it = values_.find(name);
  if (it != values_.end()) return it->second;
  // A default-constructed RuntimeFacts (no device) answers with the "other" defaults.
  static const RuntimeFacts fallback{DeviceDescription{}};
  auto fb = fallback.values_.find(name);
  if (fb == fallback.values_.end())
    throw ValueError(fmt::format("Unknown fact '{}'. Valid facts are: {}", name, known_fact_names()));
  return fb->second;
}

bool RuntimeFacts::get_bool(std::string_view name) const { return std::get<bool>(get(name)); }
std::int64_t RuntimeFacts::get_int(std::string_view name) const { return std::get<std::int64_t>(get(name)); }
const std::string& RuntimeFacts::get_string(std::string_view name) const { return std::get<std::string>(get(name)); }
bool RuntimeFacts::is_overridden(std::string_view name) const { return overridden_.contains(name); }
bool RuntimeFacts::is_from_engine(std::string_view name) const { return from_engine_.contains(name); }

std::string RuntimeFacts::fingerprint() const {
  std::string out;
  for (const auto& [k, v] : values_) out += fmt::format("{}={};", k, fact_value_to_string(v));
  return out;
}

}  // namespace attnsel
