// Internal: what every platform's chooser shares: vLLM's text forms of candidates and
// reasons, its two errors (an invalid explicit choice, no valid backend), accepting a
// validated backend, and the selection's log.
#pragma once

#include <string>
#include <vector>

#include "attnsel/platform.hpp"
#include "attnsel/registry.hpp"

namespace attnsel::platforms {

/// A built-in backend of a priority list, by name.
inline BackendMember member(std::string_view name) { return AttentionBackendEnum[name]; }

/// Python's list repr of reasons: "['a', 'b']".
std::string python_list_repr(const std::vector<std::string>& items);
/// vLLM's reasons_str: "{NAME: [r1, r2], OTHER: [r3]}" over the invalid candidates.
std::string reasons_str(const std::vector<Candidate>& candidates);
/// "['A', 'B']" over the valid candidates.
std::string valid_names_str(const std::vector<Candidate>& candidates);
/// vLLM's "No valid attention backend found for <device> with <config>. Reasons: {...}."
/// over the candidates, as the error to throw.
SelectionError no_valid_backend(std::string_view device_name, const AttentionSelectorConfig& config,
                                std::vector<Candidate> candidates);
/// Records a validated backend as the selection's choice (name, class, class path).
void accept_backend(Selection& s, std::string name, std::shared_ptr<const AttentionBackend> cls);

/// The error for an explicit backend that fails validation.
[[noreturn]] void throw_selected_invalid(const BackendMember& selected, const std::vector<std::string>& reasons,
                                         std::vector<Candidate> candidates);

/// Appends a log line to the selection and forwards it to spdlog (info/warning once, as vLLM does).
void add_log(Selection& s, LogLine::Level level, std::string text, bool once = true);

}  // namespace attnsel::platforms
