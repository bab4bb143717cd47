// The build without NCCL: DCP across GPUs says what is missing.
#include "attnsel/errors.hpp"
#include "distributed/nccl_communicator.hpp"

namespace attnsel::distributed {

namespace {
constexpr const char* kReason =
    "attnsel was built without NCCL, which decode context parallelism across GPUs needs: it builds where CUDA, "
    "NCCL (nccl.h, libnccl.so) and MPI are found";
}

std::unique_ptr<Communicator> make_nccl_communicator(const MpiSession&, int) { throw NotImplementedError(kReason); }
std::unique_ptr<Communicator> make_single_rank_nccl_communicator(int) { throw NotImplementedError(kReason); }
bool nccl_built() { return false; }

}  // namespace attnsel::distributed
