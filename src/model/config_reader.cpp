#include "model/config_reader.hpp"

#include <cmath>
#include <cstdint>
#include <set>
#include <vector>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "attnsel/errors.hpp"
#include "core/log.hpp"

namespace attnsel::model {

namespace {

std::string quoted_choices(const std::vector<std::string_view>& choices);

}  // namespace

// Keeps printable ASCII and replaces everything else, so a message never carries raw
// control bytes or invalid UTF-8 from a hostile file.
std::string printable(std::string_view s, std::size_t limit) {
  std::string out;
  for (std::size_t i = 0; i < s.size() && i < limit; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (s.size() > limit) out += "...";
  return out;
}

namespace {

std::string quoted_choices(const std::vector<std::string_view>& choices) {
  std::vector<std::string> q;
  q.reserve(choices.size());
  for (std::string_view c : choices) q.push_back(fmt::format("\"{}\"", c));
  return fmt::format("{}", fmt::join(q, ", "));
}

// The value as an int64 when it is a JSON integer that fits; floats do not count.
std::optional<std::int64_t> integer_value(const nlohmann::json& v) {
  if (v.is_number_unsigned()) {
    const std::uint64_t u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<std::int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<std::int64_t>();
  return std::nullopt;
}

}  // namespace

nlohmann::json parse_json(std::string_view text, std::string_view source) {
  // The keys seen in each open object, and each open object's path ("a.b").
  struct Open {
    std::set<std::string, std::less<>> keys;
    std::string path;
  };
  std::vector<Open> open;
  std::string last_key;
  auto on_event = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) {
      const std::string parent = open.empty() ? "" : open.back().path;
      open.push_back({{}, open.empty() ? "" : parent.empty() ? last_key : parent + "." + last_key});
    } else if (event == Event::object_end) {
      if (!open.empty()) open.pop_back();
    } else if (event == Event::key) {
      last_key = parsed.get<std::string>();
      if (!open.empty() && !open.back().keys.insert(last_key).second) {
        const std::string& path = open.back().path;
        log::logger().warn("{}: key '{}' appears more than once in one object; the last value counts", source,
                           printable(path.empty() ? last_key : path + "." + last_key, 200));
      }
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text.begin(), text.end(), on_event);
  } catch (const nlohmann::json::exception& e) {
    // nlohmann's messages start with "[json.exception.parse_error.101] "; the id helps nobody.
    std::string_view what = e.what();
    if (const auto close = what.find("] "); what.starts_with('[') && close != std::string_view::npos)
      what.remove_prefix(close + 2);
    throw ValueError(fmt::format("{}: malformed JSON: {}", source, printable(what, what.size())));
  }
}

std::string describe_json(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::boolean: return value.get<bool>() ? "true" : "false";
    case nlohmann::json::value_t::number_integer: return fmt::format("{}", value.get<std::int64_t>());
    case nlohmann::json::value_t::number_unsigned: return fmt::format("{}", value.get<std::uint64_t>());
    case nlohmann::json::value_t::number_float: {
      // Keep the decimal point, so "expected an integer, got 3.0" reads right.
      const double d = value.get<double>();
      return std::abs(d) < 1e15 && std::trunc(d) == d ? fmt::format("{:.1f}", d) : fmt::format("{}", d);
    }
    case nlohmann::json::value_t::string:
      return fmt::format("string \"{}\"", printable(value.get_ref<const std::string&>(), 40));
    case nlohmann::json::value_t::array: return fmt::format("an array of {} elements", value.size());
    case nlohmann::json::value_t::object: return "an object";
    default: return "a value of another type";
  }
}

ConfigReader::ConfigReader(const nlohmann::json& object, std::string source, std::string path_prefix)
    : object_(object), source_(std::move(source)), prefix_(std::move(path_prefix)) {}

std::string ConfigReader::field_name(std::string_view name) const { return fmt::format("{}{}", prefix_, name); }

const nlohmann::json* ConfigReader::find(std::string_view name) const {
  auto it = object_.find(name);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

void ConfigReader::fail_type(std::string_view name, std::string_view expected) const {
  const nlohmann::json* v = find(name);
  throw ValueError(fmt::format("{}: field '{}': expected {}, got {}", source_, field_name(name), expected,
                               v ? describe_json(*v) : std::string("null")));
}

void ConfigReader::fail(std::string_view name, std::string_view message) const {
  throw ValueError(fmt::format("{}: field '{}': {}", source_, field_name(name), message));
}

void ConfigReader::fail_missing(std::string_view name, std::string_view expected) const {
  throw ValueError(fmt::format("{}: missing field '{}' (expected {})", source_, field_name(name), expected));
}

std::optional<std::int64_t> ConfigReader::opt_int64(std::string_view name, std::int64_t min, std::int64_t max) const {
  const nlohmann::json* v = find(name);
  if (!v) return std::nullopt;
  const auto s = integer_value(*v);
  if (!s || *s < min || *s > max) fail_type(name, fmt::format("an integer from {} to {}", min, max));
  return s;
}

std::int64_t ConfigReader::get_int64(std::string_view name, std::int64_t min, std::int64_t max) const {
  if (auto v = opt_int64(name, min, max)) return *v;
  fail_missing(name, fmt::format("an integer from {} to {}", min, max));
}

std::optional<int> ConfigReader::opt_int(std::string_view name, int min, int max) const {
  if (auto v = opt_int64(name, min, max)) return static_cast<int>(*v);
  return std::nullopt;
}

int ConfigReader::get_int(std::string_view name, int min, int max) const {
  return static_cast<int>(get_int64(name, min, max));
}

bool ConfigReader::opt_bool(std::string_view name, bool fallback) const {
  const nlohmann::json* v = find(name);
  if (!v) return fallback;
  if (!v->is_boolean()) fail_type(name, "true or false");
  return v->get<bool>();
}

std::optional<double> ConfigReader::opt_number(std::string_view name) const {
  const nlohmann::json* v = find(name);
  if (!v) return std::nullopt;
  if (!v->is_number()) fail_type(name, "a number");
  return v->get<double>();
}

std::optional<std::string> ConfigReader::opt_string(std::string_view name) const {
  const nlohmann::json* v = find(name);
  if (!v) return std::nullopt;
  if (!v->is_string()) fail_type(name, "a string");
  return v->get<std::string>();
}

std::optional<std::string> ConfigReader::opt_choice(std::string_view name,
                                                    const std::vector<std::string_view>& choices) const {
  const nlohmann::json* v = find(name);
  if (!v) return std::nullopt;
  const std::string expected = fmt::format("one of {}", quoted_choices(choices));
  if (!v->is_string()) fail_type(name, expected);
  const auto& s = v->get_ref<const std::string&>();
  for (std::string_view c : choices)
    if (s == c) return s;
  fail_type(name, expected);
}

std::optional<std::vector<std::string>> ConfigReader::opt_choice_array(std::string_view name,
                                                                       const std::vector<std::string_view>& choices,
                                                                       int length) const {
  const nlohmann::json* v = find(name);
  if (!v) return std::nullopt;
  const std::string expected = fmt::format("an array of {} strings, each one of {}", length, quoted_choices(choices));
  if (!v->is_array() || v->size() != static_cast<std::size_t>(length)) fail_type(name, expected);
  std::vector<std::string> out;
  out.reserve(v->size());
  for (std::size_t i = 0; i < v->size(); ++i) {
    const nlohmann::json& e = (*v)[i];
    bool ok = e.is_string();
    if (ok) {
      ok = false;
      for (std::string_view c : choices) ok = ok || e.get_ref<const std::string&>() == c;
    }
    if (!ok)
      fail(name, fmt::format("element {}: expected one of {}, got {}", i, quoted_choices(choices), describe_json(e)));
    out.push_back(e.get<std::string>());
  }
  return out;
}

std::optional<std::vector<int>> ConfigReader::opt_int_array(std::string_view name, int min, int max,
                                                            int length) const {
  const nlohmann::json* v = find(name);
  if (!v) return std::nullopt;
  if (!v->is_array() || v->size() != static_cast<std::size_t>(length))
    fail_type(name, fmt::format("an array of {} integers from {} to {}", length, min, max));
  std::vector<int> out;
  out.reserve(v->size());
  for (std::size_t i = 0; i < v->size(); ++i) {
    const nlohmann::json& e = (*v)[i];
    const auto x = integer_value(e);
    if (!x || *x < min || *x > max)
      fail(name, fmt::format("element {}: expected an integer from {} to {}, got {}", i, min, max, describe_json(e)));
    out.push_back(static_cast<int>(*x));
  }
  return out;
}

std::optional<std::vector<int>> ConfigReader::opt_int_list(std::string_view name, int min, int max,
                                                           int max_length) const {
  const nlohmann::json* v = find(name);
  if (!v) return std::nullopt;
  if (!v->is_array() || v->size() > static_cast<std::size_t>(max_length))
    fail_type(name, fmt::format("an array of at most {} integers from {} to {}", max_length, min, max));
  std::vector<int> out;
  out.reserve(v->size());
  for (std::size_t i = 0; i < v->size(); ++i) {
    const auto x = integer_value((*v)[i]);
    if (!x || *x < min || *x > max)
      fail(name, fmt::format("element {}: expected an integer from {} to {}, got {}", i, min, max,
                             describe_json((*v)[i])));
    out.push_back(static_cast<int>(*x));
  }
  return out;
}

std::optional<ConfigReader> ConfigReader::opt_object(std::string_view name) const {
  const nlohmann::json* v = find(name);
  if (!v) return std::nullopt;
  if (!v->is_object()) fail_type(name, "an object");
  return ConfigReader(*v, source_, fmt::format("{}{}.", prefix_, name));
}

}  // namespace attnsel::model
