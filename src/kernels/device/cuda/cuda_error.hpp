// Internal: the one error every CUDA failure becomes (no CUDA headers here, so host planners
// compiled by the C++ compiler can raise it too).
#pragma once

#include <string>

namespace attnsel::kernel::cuda {

/// Raised on any CUDA error as RuntimeError; the message names the call or kernel, CUDA's
/// error, and the configuration when one is given.
[[noreturn]] void throw_cuda_error(int code, const char* what, const std::string& config);

}  // namespace attnsel::kernel::cuda
