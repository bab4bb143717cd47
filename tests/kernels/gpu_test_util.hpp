// GPU tests run where the CUDA kernels can run and skip, saying why, everywhere else.
#pragma once

#include <gtest/gtest.h>

#include "kernels/cuda/flash_attn_cuda.hpp"

namespace attnsel::kernel::cuda::testing {

inline bool gpu_available() { return cuda_kernels_built() && cuda_kernels_unavailable_reason().empty(); }

}  // namespace attnsel::kernel::cuda::testing

#define REQUIRE_GPU()                                                                                     \
  do {                                                                                                    \
    if (!::attnsel::kernel::cuda::testing::gpu_available())                                               \
      GTEST_SKIP() << "no GPU for the CUDA kernels: " << ::attnsel::kernel::cuda::cuda_kernels_unavailable_reason(); \
  } while (0)
