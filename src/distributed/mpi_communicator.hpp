// DCP's collectives between processes over MPI (host memory). Built only where an MPI
// implementation was found (ATTNSEL_HAVE_MPI); `mpirun -np R attnsel run --dcp R` starts
// the ranks. Thread-safety: as Communicator.
#pragma once

#include <memory>

#include "distributed/communicator.hpp"

namespace attnsel::distributed {

/// Initialises MPI for the lifetime of the object (when nobody else has) and finalises it
/// after. Thread-safety: create once, on the main thread.
class MpiSession {
 public:
  MpiSession();
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  int world_rank() const;
  int world_size() const;
  /// Ends every rank (MPI_Abort): for failures after the ranks started talking, where a
  /// rank that simply returned would leave the others waiting in a collective.
  [[noreturn]] void abort(int code) const;

 private:
  bool owns_ = false;
};

/// A communicator over every rank of MPI_COMM_WORLD (a duplicate of it).
std::unique_ptr<Communicator> make_mpi_communicator(const MpiSession& session);

/// True when this build has MPI.
bool mpi_built();

}  // namespace attnsel::distributed
