// Internal: Python's repr() of a str and of a list of str, for messages that quote vLLM's
// f-strings ({invalid_reasons}, {e!r}) exactly.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace attnsel {

/// repr(s): single quotes, or double quotes when `s` holds a ' and no "; backslashes, the
/// chosen quote and control characters escaped as Python escapes them.
std::string python_str_repr(std::string_view s);

/// repr(list_of_str): "['a', 'b']".
std::string python_list_repr(const std::vector<std::string>& items);

}  // namespace attnsel
