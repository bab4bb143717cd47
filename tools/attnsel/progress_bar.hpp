// A one-line progress bar on stderr for long runs: it appears only once a run has taken
// more than a second, only on a terminal, and redraws at most ten times a second.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/run_steps.hpp"

namespace attnsel::cli {

class ProgressBar {
 public:
  explicit ProgressBar(bool enabled);
  ~ProgressBar() { finish(); }
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void update(std::string_view phase, std::int64_t done, std::int64_t total);
  /// update() as a job's progress callback (the bar must outlive the job).
  runtime::Progress callback() {
    return [this](std::string_view phase, std::int64_t done, std::int64_t total) { update(phase, done, total); };
  }
  /// Erases the bar (if it was drawn).
  void finish();

 private:
  using Clock = std::chrono::steady_clock;
  bool enabled_;
  bool drawn_ = false;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_draw_{};
};

}  // namespace attnsel::cli
