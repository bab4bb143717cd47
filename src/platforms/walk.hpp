// Internal: the two selection paths shared by the platforms that validate candidates
// (CUDA, ROCm): the explicit path (validate one backend, never fall back) and the
// automatic priority walk (validate each, keep every reason).
#pragma once

#include <string>
#include <vector>

#include "attnsel/platform.hpp"

namespace attnsel::platforms {

/// Python's list repr of reasons: "['a', 'b']".
std::string python_list_repr(const std::vector<std::string>& items);
/// vLLM's reasons_str: "{NAME: [r1, r2], OTHER: [r3]}" over the invalid candidates.
std::string reasons_str(const std::vector<Candidate>& candidates);
/// "['A', 'B']" over the valid candidates.
std::string valid_names_str(const std::vector<Candidate>& candidates);
/// The error for an explicit backend that fails validation.
[[noreturn]] void throw_selected_invalid(const BackendMember& selected, const std::vector<std::string>& reasons,
                                         std::vector<Candidate> candidates);

/// Appends a log line to the selection and forwards it to spdlog (info/warning once, as vLLM does).
void add_log(Selection& s, LogLine::Level level, std::string text, bool once = true);

}  // namespace attnsel::platforms
