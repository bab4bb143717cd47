#include "distributed/mpi_communicator.hpp"

#include <fmt/format.h>
#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <string>

#include "attnsel/errors.hpp"

namespace attnsel::distributed {

namespace {

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw RuntimeError(fmt::format("{} failed: {}", what, std::string(text, static_cast<std::size_t>(len))));
}

int as_count(std::size_t n, const char* what) {
  if (n > static_cast<std::size_t>(INT_MAX))
    throw ValueError(fmt::format("{}: {} elements exceed MPI's count limit ({})", what, n, INT_MAX));
  return static_cast<int>(n);
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    // Errors come back as return codes (thrown as RuntimeError) instead of aborting.
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiCommunicator() override { MPI_Comm_free(&comm_); }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view name() const override { return "MPI"; }
  kernel::DeviceKind device() const override { return kernel::DeviceKind::cpu; }
  void all_gather(const void* send, void* recv, std::size_t bytes) override {
    const int n = as_count(bytes, "MPI all-gather");
    check(MPI_Allgather(send, n, MPI_BYTE, recv, n, MPI_BYTE, comm_), "MPI_Allgather");
  }
  void reduce_scatter_sum(const float* send, float* recv, std::size_t count) override {
    const int n = as_count(count, "MPI reduce-scatter");
    check(MPI_Reduce_scatter_block(send, recv, n, MPI_FLOAT, MPI_SUM, comm_), "MPI_Reduce_scatter_block");
  }
  void synchronize() override {}

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
};

}  // namespace

MpiSession::MpiSession() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  int provided = 0;
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  owns_ = true;
}

MpiSession::~MpiSession() {
  if (!owns_) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

int MpiSession::world_rank() const {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int MpiSession::world_size() const {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

void MpiSession::abort(int code) const {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();  // MPI_Abort does not return; this satisfies [[noreturn]]
}

std::unique_ptr<Communicator> make_mpi_communicator(const MpiSession&) { return std::make_unique<MpiCommunicator>(); }

bool mpi_built() { return true; }

}  // namespace attnsel::distributed
