// Host checks of a kernel's tensors that every kernel family makes. ValueError naming the
// argument and the problem.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "attnsel/errors.hpp"
#include "attnsel/kernel.hpp"

namespace attnsel::kernel {

/// The kernels' checks report bad input as ValueError(message).
[[noreturn]] inline void fail(const std::string& message) { throw ValueError(message); }

/// ValueError when `t`, which the kernel writes, has strides that give two of its elements
/// one address (stride 0, or rows or heads interleaved): PyTorch refuses such writes too.
void check_distinct_elements(const TensorView& t, std::string_view name);

}  // namespace attnsel::kernel
