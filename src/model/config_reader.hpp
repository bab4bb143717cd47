// Typed access to one JSON object of a config.json, with errors that name the file, the
// field (with its path, e.g. "text_config.num_attention_heads") and what was expected.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace attnsel::model {

/// Upper bounds that keep a hostile config from asking for absurd allocations.
inline constexpr int kMaxLayers = 4096;
inline constexpr int kMaxHeads = 65536;
inline constexpr int kMaxHeadSize = 65536;
inline constexpr std::int64_t kMaxWidth = std::int64_t{1} << 24;

class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& object, std::string source, std::string path_prefix = "");

  const std::string& source() const { return source_; }
  /// The field's full name, e.g. "text_config.head_dim".
  std::string field_name(std::string_view name) const;
  /// Present and not null.
  bool has(std::string_view name) const { return find(name) != nullptr; }
  /// The field's JSON value; null when it is absent or null.
  const nlohmann::json* value(std::string_view name) const { return find(name); }
  /// The field is the string `text`.
  bool is_string(std::string_view name, std::string_view text) const {
    const nlohmann::json* v = find(name);
    return v && v->is_string() && v->get_ref<const std::string&>() == text;
  }
  /// Present, possibly null (to tell an explicit null from an absent field).
  bool present(std::string_view name) const { return object_.contains(name); }

  int get_int(std::string_view name, int min, int max) const;
  std::optional<int> opt_int(std::string_view name, int min, int max) const;
  std::int64_t get_int64(std::string_view name, std::int64_t min, std::int64_t max) const;
  std::optional<std::int64_t> opt_int64(std::string_view name, std::int64_t min, std::int64_t max) const;
  bool opt_bool(std::string_view name, bool fallback) const;
  std::optional<double> opt_number(std::string_view name) const;
  std::optional<std::string> opt_string(std::string_view name) const;
  /// A string that must be one of `choices`.
  std::optional<std::string> opt_choice(std::string_view name, const std::vector<std::string_view>& choices) const;
  /// An array of strings from `choices`, exactly `length` long.
  std::optional<std::vector<std::string>> opt_choice_array(std::string_view name,
                                                           const std::vector<std::string_view>& choices,
                                                           int length) const;
  /// An array of integers in [min, max], exactly `length` long.
  std::optional<std::vector<int>> opt_int_array(std::string_view name, int min, int max, int length) const;
  /// An array of at most `max_length` integers in [min, max].
  std::optional<std::vector<int>> opt_int_list(std::string_view name, int min, int max, int max_length) const;
  /// A nested object (e.g. text_config); nullopt when absent or null.
  std::optional<ConfigReader> opt_object(std::string_view name) const;

  /// ValueError "<file>: field '<path>': expected <expected>, got <what is there>".
  [[noreturn]] void fail_type(std::string_view name, std::string_view expected) const;
  /// ValueError "<file>: field '<path>': <message>".
  [[noreturn]] void fail(std::string_view name, std::string_view message) const;
  /// ValueError "<file>: missing field '<path>' (expected <expected>)".
  [[noreturn]] void fail_missing(std::string_view name, std::string_view expected) const;

 private:
  const nlohmann::json* find(std::string_view name) const;
  const nlohmann::json& object_;
  std::string source_;
  std::string prefix_;
};

/// Parses `text` as JSON. ValueError "<source>: malformed JSON: <the parser's message>", its
/// bytes escaped as printable() escapes them; a key given twice in one object is a warning
/// naming `source` and the key's path (the last value counts, as in Python's json module,
/// which reads vLLM's configs).
nlohmann::json parse_json(std::string_view text, std::string_view source);

/// `s` with quotes, backslashes and non-printable bytes escaped, cut after `limit` bytes.
std::string printable(std::string_view s, std::size_t limit = 60);

/// A short, printable description of a JSON value for messages ("string \"abc\"",
/// "number 3.5", "an array of 2 elements"). Never throws, whatever the bytes.
std::string describe_json(const nlohmann::json& value);

}  // namespace attnsel::model
