// JobMemory in device memory (the CUDA kernels' runs), through the CUDA helpers of
// kernels/device/cuda/device_memory.hpp: without CUDA they throw, and so does this, first, with
// the reason.
#include <fmt/format.h>

#include <algorithm>

#include "attnsel/errors.hpp"
#include "kernels/device/cuda/device_memory.hpp"
#include "runtime/huge_buffer.hpp"
#include "runtime/job_memory.hpp"

namespace attnsel::runtime {

namespace {

using kernel::cuda::DeviceBuffer;

DeviceBuffer upload(const std::vector<std::uint8_t>& host) {
  DeviceBuffer d(std::max<std::size_t>(host.size(), 16));
  if (!host.empty()) d.upload(host.data(), host.size());
  return d;
}

class DeviceJobMemory final : public JobMemory {
 public:
  DeviceJobMemory(const JobMemorySizes& sizes, JobInputs inputs) : in_(std::move(inputs)), sizes_(sizes) {
    query_ = upload(in_.query);
    new_keys_ = upload(in_.new_keys);
    new_values_ = upload(in_.new_values);
    output_ = DeviceBuffer(std::max<std::size_t>(in_.query.size(), 16));
    output_.fill_bytes(0xFF);  // NaN in f16/bf16: rows a kernel skips would fail the check
    host_output_.resize(in_.query.size());
    for (int i = 0; i < sizes.caches; ++i) {
      keys_.emplace_back(sizes.cache_bytes);
      values_.emplace_back(sizes.cache_bytes);
    }
    // The uploads and fills ran on the legacy default stream; the job's own stream does not
    // wait for it.
    kernel::cuda::synchronize("attnsel run: after filling the job's device memory");
  }

  kernel::DeviceKind device() const override { return kernel::DeviceKind::cuda; }
  void* key_cache(int i) override { return keys_[static_cast<std::size_t>(i)].data(); }
  void* value_cache(int i) override { return values_[static_cast<std::size_t>(i)].data(); }
  void* query() override { return query_.data(); }
  void* output() override { return output_.data(); }
  void* new_keys() override { return new_keys_.data(); }
  void* new_values() override { return new_values_.data(); }
  const std::uint8_t* query_on_host() const override { return in_.query.data(); }

  std::uint8_t* output_on_host(std::size_t bytes) override {
    kernel::cuda::synchronize("attnsel run: before copying the output back");
    output_.download(host_output_.data(), std::min(bytes, host_output_.size()));
    return host_output_.data();
  }
  std::pair<std::uint8_t*, std::uint8_t*> cache_on_host(int i) override {
    kernel::cuda::synchronize("attnsel run: before copying a cache back");
    if (host_k_.size() != sizes_.cache_bytes) {
      host_k_ = HugeBuffer(sizes_.cache_bytes);
      host_v_ = HugeBuffer(sizes_.cache_bytes);
    }
    keys_[static_cast<std::size_t>(i)].download(host_k_.data(), sizes_.cache_bytes);
    values_[static_cast<std::size_t>(i)].download(host_v_.data(), sizes_.cache_bytes);
    return {host_k_.data(), host_v_.data()};
  }

  kernel::Stream stream() const override { return stream_.get(); }
  void begin_step() override { timer_.start(stream_.get()); }
  double end_step() override { return timer_.stop(stream_.get()) * 1e-3; }  // waits for the step's last kernel
  void begin_capture() override { graph_.begin_capture(stream_.get()); }
  void end_capture() override { graph_.end_capture(stream_.get()); }
  bool captured() const override { return graph_.ready(); }
  int captured_nodes() const override { return graph_.nodes(); }
  void replay() override { graph_.launch(stream_.get()); }

 private:
  JobInputs in_;
  JobMemorySizes sizes_;
  DeviceBuffer query_, output_, new_keys_, new_values_;
  std::vector<DeviceBuffer> keys_, values_;
  std::vector<std::uint8_t> host_output_;
  HugeBuffer host_k_, host_v_;
  kernel::cuda::OwnedStream stream_{0};
  kernel::cuda::EventTimer timer_;
  kernel::cuda::CudaGraph graph_;
};

}  // namespace

std::size_t device_memory_available() {
  if (!kernel::cuda::cuda_kernels_unavailable_reason().empty()) return 0;
  return kernel::cuda::device_memory_use(0).free_bytes;
}

std::unique_ptr<JobMemory> make_device_job_memory(const JobMemorySizes& sizes, JobInputs inputs) {
  if (const std::string why = kernel::cuda::cuda_kernels_unavailable_reason(); !why.empty())
    throw NotImplementedError(
        fmt::format("this workload belongs in GPU memory (its backend runs attnsel's CUDA kernels), but {}", why));
  return std::make_unique<DeviceJobMemory>(sizes, std::move(inputs));
}

}  // namespace attnsel::runtime
