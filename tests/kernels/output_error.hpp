// How far a kernel's output is from the double-precision reference, measured one way for
// every kernel test: elements that are not finite (unwritten outputs are poisoned with NaN)
// are counted and left out of the norms.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/attention/reference.hpp"

namespace attnsel::kernel::testing {

struct OutputError {
  double rel_l2 = 0.0;       ///< ‖got − ref‖₂ / ‖ref‖₂ (‖got − ref‖₂ when the reference is all zeros)
  double max_abs = 0.0;      ///< largest |got − ref|
  double max_scaled = 0.0;   ///< largest |got − ref| / max(1, |ref|)
  std::int64_t not_finite = 0;
};

/// `data` holds ref.size() elements of `dtype`, in the reference's order.
inline OutputError output_error(const void* data, ScalarType dtype, const std::vector<double>& ref) {
  OutputError e;
  double err2 = 0.0, ref2 = 0.0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double got = reference::load(data, dtype, static_cast<std::int64_t>(i));
    if (!std::isfinite(got)) {
      ++e.not_finite;
      continue;
    }
    const double diff = std::abs(got - ref[i]);
    err2 += diff * diff;
    ref2 += ref[i] * ref[i];
    e.max_abs = std::max(e.max_abs, diff);
    e.max_scaled = std::max(e.max_scaled, diff / std::max(1.0, std::abs(ref[i])));
  }
  e.rel_l2 = ref2 > 0.0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  return e;
}

}  // namespace attnsel::kernel::testing
