// Internal: what the sparse MLA CUDA implementations share on the host — the device they
// run on, and a step's batch in device memory (each query token's request and the positions
// it sees, seq_lens, the block table, the slot mapping), uploaded once per plan or update.
// Thread-safety: a DeviceBatch belongs to one plan (StepPlan's rules); the free functions
// are safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "attnsel/kernel.hpp"
#include "kernels/device/cuda/device_memory.hpp"
#include "kernels/mla/batch.hpp"

namespace attnsel::kernel::cuda::sparse_mla {

/// Makes `device` the current CUDA device for a scope, restoring the caller's after it.
class DeviceScope {
 public:
  explicit DeviceScope(int device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
};

/// "" when the sparse MLA CUDA kernels can run on `device`; else why not (the build, no
/// device, or a device the build has no kernel image for).
std::string sparse_device_unavailable_reason(int device);
/// NotImplementedError with sparse_device_unavailable_reason when it is not "".
void require_sparse_device(int device);
/// The device's streaming multiprocessors.
int device_multiprocessors(int device);
/// What the indexer and the sparse attention kernels both declare: a CUDA kernel of
/// mma.sync for sm_80 and sm_90a, available where device 0 runs it, never in a graph.
KernelInfo sparse_device_kernel_info();

/// Grows `buffer` to at least `bytes` (256 at the least); one large enough is kept.
void reserve(DeviceBuffer& buffer, std::size_t bytes);

/// ValueError unless `t`'s address and the byte size of each of its strides are multiples
/// of `bytes` (the kernels' vector loads and stores), naming it.
void require_aligned(const TensorView& t, const char* name, int bytes);

/// The batch arrays on the device (pointers into one buffer that only grows).
class DeviceBatch {
 public:
  /// Each query token's request and the positions it sees (L − s_q + j + 1 for query j of a
  /// request holding L, 0 for a request holding none), from the checked batch `b`; then
  /// uploads them with seq_lens, the block table and the slot mapping on `stream`.
  void upload(const kernel::mla::MlaBatch& b, Stream stream);

  const std::int32_t* token_seq() const { return at<std::int32_t>(token_seq_off_); }
  const std::int32_t* row_len() const { return at<std::int32_t>(row_len_off_); }
  const std::int32_t* seq_lens() const { return at<std::int32_t>(seq_lens_off_); }
  const std::int32_t* block_table() const { return at<std::int32_t>(table_off_); }
  const std::int64_t* slots() const { return at<std::int64_t>(slots_off_); }

  /// Host copies of the per-token arrays.
  const std::vector<std::int32_t>& host_row_len() const { return row_len_; }
  std::size_t bytes() const { return buffer_.size(); }

 private:
  template <class E>
  const E* at(std::size_t offset) const {
    return reinterpret_cast<const E*>(static_cast<const std::uint8_t*>(buffer_.data()) + offset);
  }
  DeviceBuffer buffer_;
  std::vector<std::uint8_t> staging_;
  std::vector<std::int32_t> token_seq_, row_len_;
  std::size_t token_seq_off_ = 0, row_len_off_ = 0, seq_lens_off_ = 0, table_off_ = 0, slots_off_ = 0;
};

}  // namespace attnsel::kernel::cuda::sparse_mla
