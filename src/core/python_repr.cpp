#include "core/python_repr.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace attnsel {

std::string python_str_repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == quote || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;  // printable ASCII, and UTF-8 bytes of non-ASCII text as they are
    }
  }
  out += quote;
  return out;
}

std::string python_list_repr(const std::vector<std::string>& items) {
  std::vector<std::string> quoted;
  quoted.reserve(items.size());
  for (const std::string& i : items) quoted.push_back(python_str_repr(i));
  return fmt::format("[{}]", fmt::join(quoted, ", "));
}

}  // namespace attnsel
