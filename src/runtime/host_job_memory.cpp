// JobMemory in host memory (the CPU kernels' runs).
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>

#include "attnsel/errors.hpp"

#include "runtime/huge_buffer.hpp"
#include "runtime/job_memory.hpp"

namespace attnsel::runtime {

namespace {

[[noreturn]] void no_graphs() {
  throw ValueError("CUDA graphs capture device work; this job runs on the host (its kernel's graph support is 'never')");
}

class HostJobMemory final : public JobMemory {
 public:
  HostJobMemory(const JobMemorySizes& sizes, JobInputs inputs) : in_(std::move(inputs)) {
    for (int i = 0; i < sizes.caches; ++i) {
      keys_.emplace_back(sizes.cache_bytes);  // 2 MiB pages: blocks are read in random order
      values_.emplace_back(sizes.cache_bytes);
    }
    output_.resize(in_.query.size());
  }

  kernel::DeviceKind device() const override { return kernel::DeviceKind::cpu; }
  void* key_cache(int i) override { return keys_[static_cast<std::size_t>(i)].data(); }
  void* value_cache(int i) override { return values_[static_cast<std::size_t>(i)].data(); }
  void* query() override { return in_.query.data(); }
  void* output() override { return output_.data(); }
  void* new_keys() override { return in_.new_keys.data(); }
  void* new_values() override { return in_.new_values.data(); }
  const std::uint8_t* query_on_host() const override { return in_.query.data(); }
  std::uint8_t* output_on_host(std::size_t) override { return output_.data(); }
  std::pair<std::uint8_t*, std::uint8_t*> cache_on_host(int i) override {
    return {keys_[static_cast<std::size_t>(i)].data(), values_[static_cast<std::size_t>(i)].data()};
  }
  kernel::Stream stream() const override { return {}; }
  void begin_step() override { t0_ = std::chrono::steady_clock::now(); }
  double end_step() override { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }
  void begin_capture() override { no_graphs(); }
  void end_capture() override { no_graphs(); }
  bool captured() const override { return false; }
  int captured_nodes() const override { return 0; }
  void replay() override { no_graphs(); }

 private:
  JobInputs in_;
  std::vector<std::uint8_t> output_;
  std::vector<HugeBuffer> keys_, values_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace

std::size_t host_memory_available() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    std::size_t kib = 0;
    fields >> kib;
    return kib * 1024;
  }
  return 0;
}

std::unique_ptr<JobMemory> make_host_job_memory(const JobMemorySizes& sizes, JobInputs inputs) {
  return std::make_unique<HostJobMemory>(sizes, std::move(inputs));
}

std::unique_ptr<JobMemory> make_job_memory(kernel::DeviceKind device, const JobMemorySizes& sizes, JobInputs inputs) {
  if (device == kernel::DeviceKind::cuda) return make_device_job_memory(sizes, std::move(inputs));
  return make_host_job_memory(sizes, std::move(inputs));
}

}  // namespace attnsel::runtime
