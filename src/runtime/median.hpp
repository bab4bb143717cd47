// The median of a run's timed passes (and of the probes around them): the figure the
// benchmarks report, since a pass disturbed by the machine shifts it less than the mean.
// Thread-safety: a pure function.
#pragma once

#include <algorithm>
#include <vector>

namespace attnsel::runtime {

/// The upper median of `v` (its middle element once sorted); 0 for no values.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace attnsel::runtime
