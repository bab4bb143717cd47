#include "kernels/sparse_mla/cuda/device_batch.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "attnsel/errors.hpp"
#include "kernels/device/cuda/cuda_error.hpp"

namespace attnsel::kernel::cuda::sparse_mla {

namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw_cuda_error(static_cast<int>(err), what, "");
}

std::size_t align256(std::size_t n) { return (n + 255) / 256 * 256; }

}  // namespace

DeviceScope::DeviceScope(int device) {
  check(cudaGetDevice(&previous_), "cudaGetDevice");
  if (device != previous_) check(cudaSetDevice(device), "cudaSetDevice");
}

DeviceScope::~DeviceScope() { cudaSetDevice(previous_); }

std::string sparse_device_unavailable_reason(int device) {
  std::string why = cuda_kernels_unavailable_reason();
  if (!why.empty()) return why;
  if (device < 0 || device >= device_count())
    return fmt::format("CUDA device {} does not exist ({} devices)", device, device_count());
  const DeviceInfo info = device_info(device);
  // The kernels are compiled for sm_80 and sm_90a (mma.sync, cp.async): images for 8.x and 9.0.
  if (info.major != 8 && info.major != 9)
    return fmt::format(
        "attnsel's sparse MLA CUDA kernels are built for sm_80 and sm_90a; device {} ({}) has compute "
        "capability {}.{}",
        device, info.name, info.major, info.minor);
  return "";
}

void require_sparse_device(int device) {
  const std::string why = sparse_device_unavailable_reason(device);
  if (!why.empty()) throw NotImplementedError(why);
}

int device_multiprocessors(int device) { return device_info(device).multiprocessors; }

KernelInfo sparse_device_kernel_info() {
  KernelInfo k;
  k.device = DeviceKind::cuda;
  k.available = sparse_device_unavailable_reason(0).empty();
  k.isa = "CUDA mma.sync (sm_80, sm_90a)";
  k.graph_support = GraphSupport::never;  // plans upload their batch synchronously
  return k;
}

void reserve(DeviceBuffer& buffer, std::size_t bytes) {
  if (buffer.size() < bytes) buffer = DeviceBuffer(std::max<std::size_t>(bytes, 256));
}

void require_aligned(const TensorView& t, const char* name, int bytes) {
  const auto es = static_cast<std::int64_t>(element_size(t.dtype));
  bool ok = reinterpret_cast<std::uintptr_t>(t.data) % static_cast<std::uintptr_t>(bytes) == 0;
  for (int d = 0; d + 1 < t.ndim; ++d) ok = ok && (t.stride[d] * es) % bytes == 0;
  if (!ok)
    throw ValueError(
        fmt::format("{} must start at a multiple of {} bytes and have strides of multiples of {} bytes "
                    "(the CUDA kernels' vector loads), got {}",
                    name, bytes, bytes, t.describe()));
}

void DeviceBatch::upload(const kernel::mla::MlaBatch& b, Stream stream) {
  const int tokens = b.num_actual_tokens;
  token_seq_.assign(static_cast<std::size_t>(tokens), 0);
  row_len_.assign(static_cast<std::size_t>(tokens), 0);
  for (int seq = 0; seq < b.num_seqs; ++seq) {
    const int q_len = b.query_len(seq);
    const std::int32_t len = b.seq_lens[static_cast<std::size_t>(seq)];
    for (int j = 0; j < q_len; ++j) {
      const auto t = static_cast<std::size_t>(b.query_start_loc[static_cast<std::size_t>(seq)] + j);
      token_seq_[t] = seq;
      row_len_[t] = len == 0 ? 0 : len - q_len + j + 1;
    }
  }
  const std::size_t table_entries = b.block_table.size();  // [num_seqs, max_blocks_per_seq]
  token_seq_off_ = 0;
  row_len_off_ = align256(token_seq_off_ + token_seq_.size() * 4);
  seq_lens_off_ = align256(row_len_off_ + row_len_.size() * 4);
  table_off_ = align256(seq_lens_off_ + b.seq_lens.size() * 4);
  slots_off_ = align256(table_off_ + table_entries * 4);
  const std::size_t total = std::max<std::size_t>(align256(slots_off_ + b.slot_mapping.size() * 8), 256);
  staging_.assign(total, 0);
  std::memcpy(staging_.data() + token_seq_off_, token_seq_.data(), token_seq_.size() * 4);
  std::memcpy(staging_.data() + row_len_off_, row_len_.data(), row_len_.size() * 4);
  std::memcpy(staging_.data() + seq_lens_off_, b.seq_lens.data(), b.seq_lens.size() * 4);
  std::memcpy(staging_.data() + table_off_, b.block_table.data(), table_entries * 4);
  std::memcpy(staging_.data() + slots_off_, b.slot_mapping.data(), b.slot_mapping.size() * 8);
  if (buffer_.size() < total) buffer_ = DeviceBuffer(total);
  // From pageable memory the copy returns once the source has been read, so the staging
  // vector may change afterwards; it runs in stream order after the plan's earlier users.
  check(cudaMemcpyAsync(buffer_.data(), staging_.data(), total, cudaMemcpyHostToDevice,
                        static_cast<cudaStream_t>(stream.native)),
        "cudaMemcpyAsync (sparse MLA batch)");
}

}  // namespace attnsel::kernel::cuda::sparse_mla
