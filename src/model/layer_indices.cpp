#include <fmt/format.h>
#include <fmt/ranges.h>

#include "attnsel/model.hpp"

namespace attnsel {

namespace {

std::string ordinal(int n) {
  const int last_two = n % 100;
  const char* suffix = "th";
  if (last_two < 11 || last_two > 13) {
    if (n % 10 == 1) suffix = "st";
    if (n % 10 == 2) suffix = "nd";
    if (n % 10 == 3) suffix = "rd";
  }
  return fmt::format("{}{}", n, suffix);
}

}  // namespace

std::string format_layer_indices(std::span<const int> v) {
  if (v.empty()) return "";
  if (v.size() == 1) return fmt::format("{}", v[0]);
  // One evenly spaced progression reads best as a range with its stride.
  const int step = v[1] - v[0];
  bool progression = step > 0;
  for (std::size_t i = 2; progression && i < v.size(); ++i) progression = v[i] - v[i - 1] == step;
  if (progression && step == 1) return fmt::format("{}-{}", v.front(), v.back());
  if (progression && v.size() >= 3) return fmt::format("{}-{} (every {})", v.front(), v.back(), ordinal(step));
  // Otherwise: consecutive runs.
  std::vector<std::string> runs;
  std::size_t start = 0;
  for (std::size_t i = 1; i <= v.size(); ++i) {
    if (i < v.size() && v[i] == v[i - 1] + 1) continue;
    if (i - start == 1)
      runs.push_back(fmt::format("{}", v[start]));
    else
      runs.push_back(fmt::format("{}-{}", v[start], v[i - 1]));
    start = i;
  }
  return fmt::format("{}", fmt::join(runs, ","));
}

}  // namespace attnsel
