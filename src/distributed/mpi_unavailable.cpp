// The build without MPI: DCP across processes says how to get it.
#include <cstdlib>

#include "attnsel/errors.hpp"
#include "distributed/mpi_communicator.hpp"

namespace attnsel::distributed {

namespace {
constexpr const char* kReason =
    "attnsel was built without MPI, which decode context parallelism across processes needs: install an MPI "
    "implementation (Debian: libopenmpi-dev openmpi-bin) and reconfigure";
}

MpiSession::MpiSession() { throw NotImplementedError(kReason); }
MpiSession::~MpiSession() = default;
int MpiSession::world_rank() const { return 0; }
int MpiSession::world_size() const { return 1; }
void MpiSession::abort(int code) const { std::exit(code); }
std::unique_ptr<Communicator> make_mpi_communicator(const MpiSession&) { throw NotImplementedError(kReason); }
bool mpi_built() { return false; }

}  // namespace attnsel::distributed
