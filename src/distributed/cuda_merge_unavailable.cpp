// The build without CUDA: the GPU merge says so.
#include "attnsel/errors.hpp"
#include "kernels/attention/cuda/merge_states.hpp"

namespace attnsel::kernel::cuda {

void correct_partial_output(const float*, int, int, int, int, int, float*, float*, void*) {
  throw NotImplementedError("attnsel was built without CUDA (nvcc not found, or ATTNSEL_CUDA=OFF)");
}

}  // namespace attnsel::kernel::cuda
