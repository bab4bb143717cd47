#include "distributed/nccl_communicator.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdlib>

#include "attnsel/errors.hpp"

namespace attnsel::distributed {

namespace {

void check_nccl(ncclResult_t rc, const char* what) {
  if (rc != ncclSuccess) throw RuntimeError(fmt::format("{} failed: {}", what, ncclGetErrorString(rc)));
}

void check_cuda(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) throw RuntimeError(fmt::format("{} failed: {}", what, cudaGetErrorString(rc)));
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(const ncclUniqueId& id, int rank, int size, int device) : rank_(rank), size_(size) {
    // NVLink multicast (NVLS) stays off unless the user chose otherwise.
    setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
    check_cuda(cudaSetDevice(device), "cudaSetDevice");
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check_nccl(ncclCommInitRank(&comm_, size, id, rank), "ncclCommInitRank");
  }
  ~NcclCommunicator() override {
    if (comm_) ncclCommDestroy(comm_);
    if (stream_) cudaStreamDestroy(stream_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view name() const override { return "NCCL"; }
  kernel::DeviceKind device() const override { return kernel::DeviceKind::cuda; }
  void all_gather(const void* send, void* recv, std::size_t bytes) override {
    check_nccl(ncclAllGather(send, recv, bytes, ncclUint8, comm_, stream_), "ncclAllGather");
  }
  void reduce_scatter_sum(const float* send, float* recv, std::size_t count) override {
    check_nccl(ncclReduceScatter(send, recv, count, ncclFloat32, ncclSum, comm_, stream_), "ncclReduceScatter");
  }
  void synchronize() override { check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

 private:
  int rank_, size_;
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(const MpiSession& session, int device) {
  ncclUniqueId id{};
  if (session.world_rank() == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  if (MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
    throw RuntimeError("MPI_Bcast of NCCL's unique id failed");
  return std::make_unique<NcclCommunicator>(id, session.world_rank(), session.world_size(), device);
}

std::unique_ptr<Communicator> make_single_rank_nccl_communicator(int device) {
  ncclUniqueId id{};
  check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  return std::make_unique<NcclCommunicator>(id, 0, 1, device);
}

bool nccl_built() { return true; }

}  // namespace attnsel::distributed
