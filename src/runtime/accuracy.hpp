// Comparing a kernel's outputs with the double-precision reference: dtype-dependent
// tolerances (the output's rounding, plus bf16 probabilities on the BF16 dot-product
// path, or e4m3 queries and probabilities), shared by the kernel tests and `attnsel run --check`.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "attnsel/kernel.hpp"

namespace attnsel::runtime {

struct Tolerance {
  double atol = 0.0;
  double rtol = 0.0;
};

/// |got - want| <= atol + rtol·|want|, for outputs that average values in [-1, 1].
/// `fp8_queries`: the outputs multiply e4m3 queries and probabilities (StepPlan::fp8_queries),
/// whose rounding, not the output's, sets the bound.
Tolerance tolerance_for(kernel::ScalarType output_dtype, bool fp8_queries = false);
/// The tolerance for the outputs of `plan`: its activation dtype, and whether it multiplies
/// fp8 queries.
Tolerance tolerance_for(const kernel::StepPlan& plan);

struct Mismatch {
  int token = 0, head = 0, dim = 0;
  double got = 0.0, want = 0.0;
};

struct Comparison {
  std::int64_t elements = 0;
  double worst_ratio = 0.0;    ///< largest |error| / allowed; <= 1 passes; NaN/Inf count as 1e30
  double max_abs_error = 0.0;
  std::int64_t failures = 0;
  std::vector<Mismatch> first_failures;  ///< up to 5
  bool passed() const { return failures == 0; }
};

/// Compares rows `tokens` of `output` ([tokens, heads, head_size]) with `want`, laid out
/// [tokens.size(), heads, head_size] (reference::attend's layout).
Comparison compare_with_reference(const kernel::TensorView& output, std::span<const std::int32_t> tokens,
                                  std::span<const double> want, Tolerance tol);

}  // namespace attnsel::runtime
