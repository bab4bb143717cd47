#include "platforms/walk.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/log.hpp"
#include "core/python_repr.hpp"

namespace attnsel::platforms {

std::string python_list_repr(const std::vector<std::string>& items) { return attnsel::python_list_repr(items); }

std::string reasons_str(const std::vector<Candidate>& candidates) {
  std::vector<std::string> parts;
  for (const Candidate& c : candidates)
    if (!c.valid) parts.push_back(fmt::format("{}: [{}]", c.backend, fmt::join(c.reasons, ", ")));
  return fmt::format("{{{}}}", fmt::join(parts, ", "));
}

std::string valid_names_str(const std::vector<Candidate>& candidates) {
  std::vector<std::string> names;
  for (const Candidate& c : candidates)
    if (c.valid) names.push_back(c.backend);
  return python_list_repr(names);
}

SelectionError no_valid_backend(std::string_view device_name, const AttentionSelectorConfig& config,
                                std::vector<Candidate> candidates) {
  // Format before the candidates move into the error.
  std::string message = fmt::format("No valid attention backend found for {} with {}. Reasons: {}.", device_name,
                                    config.repr(), reasons_str(candidates));
  return SelectionError(ErrorKind::value, message, std::move(candidates));
}

void accept_backend(Selection& s, std::string name, std::shared_ptr<const AttentionBackend> cls) {
  s.class_path = cls->qualname();
  s.backend_class = std::move(cls);
  s.backend = std::move(name);
}

void throw_selected_invalid(const BackendMember& selected, const std::vector<std::string>& reasons,
                            std::vector<Candidate> candidates) {
  // An import failure prints without quotes, as vLLM's f"[{type(e).__name__}: {e}]".
  const bool import_failure = reasons.size() == 1 && (reasons.front().starts_with("ImportError: ") ||
                                                      reasons.front().starts_with("OSError: "));
  const std::string reason_text = import_failure ? fmt::format("[{}]", reasons.front()) : python_list_repr(reasons);
  throw SelectionError(ErrorKind::value,
                       fmt::format("Selected backend {} is not valid for this configuration. Reason: {}",
                                   selected.name(), reason_text),
                       std::move(candidates));
}

void add_log(Selection& s, LogLine::Level level, std::string text, bool once) {
  switch (level) {
    case LogLine::Level::debug:
      if (log::logger().should_log(spdlog::level::debug)) once ? log::debug_once(text) : log::logger().debug(text);
      break;
    case LogLine::Level::info: once ? log::info_once(text) : log::logger().info(text); break;
    case LogLine::Level::warning: once ? log::warning_once(text) : log::logger().warn(text); break;
  }
  s.logs.push_back({level, std::move(text)});
}

}  // namespace attnsel::platforms
