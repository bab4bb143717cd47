#include "kernels/tensor_checks.hpp"

#include <fmt/format.h>

#include "attnsel/errors.hpp"

namespace attnsel::kernel {

void check_distinct_elements(const TensorView& t, std::string_view name) {
  if (!t.has_distinct_elements())
    throw ValueError(fmt::format("{} is written, but its strides make elements share memory (stride 0 or interleaved "
                                 "rows or heads): give every element its own memory, e.g. a contiguous tensor: {}",
                                 name, t.describe()));
}

}  // namespace attnsel::kernel
