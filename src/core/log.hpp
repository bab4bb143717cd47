// Internal: the library's spdlog logger ("attnsel", to stderr). Its level comes from the
// ATTNSEL_LOG_LEVEL environment variable (trace, debug, info, warn, error, off; default info).
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace attnsel::log {

spdlog::logger& logger();
/// vLLM's info_once / debug_once / warning_once: each distinct text is logged once per process.
void info_once(const std::string& text);
void debug_once(const std::string& text);
void warning_once(const std::string& text);

}  // namespace attnsel::log
