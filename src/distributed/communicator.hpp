// The collectives decode context parallelism needs, over an existing distributed engine:
// MPI between CPU processes (mpi_communicator.hpp), NCCL between GPUs
// (nccl_communicator.hpp). vLLM's DCP group makes the same calls through its
// GroupCoordinator (vllm/distributed/parallel_state.py: all_gather, reduce_scatter).
// Thread-safety: one communicator per rank, used by one thread at a time.
#pragma once

#include <cstddef>
#include <string_view>

#include "attnsel/kernel.hpp"

namespace attnsel::distributed {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "MPI", "NCCL".
  virtual std::string_view name() const = 0;
  /// Where the buffers handed to the collectives must live.
  virtual kernel::DeviceKind device() const = 0;

  /// Every rank contributes `bytes` from `send`; `recv` (size() * bytes) receives them in
  /// rank order.
  virtual void all_gather(const void* send, void* recv, std::size_t bytes) = 0;
  /// `send` holds size() blocks of `count` floats; `recv` (count floats) receives the
  /// element-wise sum over the ranks of block rank().
  virtual void reduce_scatter_sum(const float* send, float* recv, std::size_t count) = 0;
  /// Returns when the collectives issued so far have completed (a no-op for blocking ones).
  virtual void synchronize() = 0;
};

}  // namespace attnsel::distributed
