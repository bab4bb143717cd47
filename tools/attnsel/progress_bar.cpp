#include "progress_bar.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

namespace attnsel::cli {

ProgressBar::ProgressBar(bool enabled) : enabled_(enabled && isatty(STDERR_FILENO) != 0) {}

void ProgressBar::update(std::string_view phase, std::int64_t done, std::int64_t total) {
  if (!enabled_ || total <= 0) return;
  const auto now = Clock::now();
  if (now - start_ < std::chrono::seconds(1)) return;
  if (drawn_ && done < total && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * done / total);
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  std::fprintf(stderr, "\r[%s%s] %3d%%  %-8.*s %lld/%lld  %.1f s ", std::string(static_cast<std::size_t>(filled), '#').c_str(),
               std::string(static_cast<std::size_t>(kWidth - filled), '.').c_str(),
               static_cast<int>(100 * done / total), static_cast<int>(phase.size()), phase.data(),
               static_cast<long long>(done), static_cast<long long>(total), elapsed);
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::finish() {
  if (!drawn_) return;
  std::fprintf(stderr, "\r%80s\r", "");
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace attnsel::cli
