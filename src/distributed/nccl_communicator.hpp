// DCP's collectives between GPUs over NCCL (device memory, one process per GPU). The
// ranks agree on NCCL's unique id through MPI, which also launches them. NVLink SHARP
// (NVLS multicast) stays off: NCCL_NVLS_ENABLE=0 unless the user set it.
// Built only with CUDA, NCCL (nccl.h) and MPI (ATTNSEL_HAVE_NCCL).
// Thread-safety: as Communicator.
#pragma once

#include <memory>

#include "distributed/communicator.hpp"
#include "distributed/mpi_communicator.hpp"

namespace attnsel::distributed {

/// A communicator over every MPI rank, rank r on CUDA device `device` (usually the rank's
/// local index). Collectives run on the communicator's own stream; synchronize() waits.
std::unique_ptr<Communicator> make_nccl_communicator(const MpiSession& session, int device);

/// A one-rank NCCL communicator on `device` (no MPI): lets a single GPU exercise the path.
std::unique_ptr<Communicator> make_single_rank_nccl_communicator(int device);

/// True when this build has NCCL.
bool nccl_built();

}  // namespace attnsel::distributed
