#include "core/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <mutex>
#include <unordered_set>

namespace attnsel::log {

spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> instance = [] {
    auto l = std::make_shared<spdlog::logger>("attnsel", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    l->set_pattern("%^%L%$ attnsel: %v");
    const char* env = std::getenv("ATTNSEL_LOG_LEVEL");
    l->set_level(env != nullptr ? spdlog::level::from_str(env) : spdlog::level::info);
    return l;
  }();
  return *instance;
}

namespace {
bool first_time(const std::string& key) {
  static std::mutex mu;
  static std::unordered_set<std::string> seen;
  std::lock_guard lock(mu);
  return seen.insert(key).second;
}
}  // namespace

void info_once(const std::string& text) {
  if (first_time("I" + text)) logger().info(text);
}
void debug_once(const std::string& text) {
  if (first_time("D" + text)) logger().debug(text);
}
void warning_once(const std::string& text) {
  if (first_time("W" + text)) logger().warn(text);
}

}  // namespace attnsel::log
