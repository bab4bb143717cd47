// The memory of a run job (run_job.cpp): one key and value cache per distinct layer slot,
// and the step buffers (queries, outputs, the new tokens' keys and values), either in host
// memory (the CPU kernels) or in device memory (the CUDA kernels). The job fills its inputs
// on the host once; device memory gets a copy. The check reads host copies: on a GPU the
// output and one cache are copied back when asked for. Step timing goes with the memory:
// a host clock on the CPU, CUDA events on the GPU (launches are asynchronous).
// Thread-safety: not synchronised; one job owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "attnsel/kernel.hpp"

namespace attnsel::runtime {

struct JobMemorySizes {
  int caches = 1;                 ///< distinct key/value cache pairs
  std::size_t cache_bytes = 0;    ///< bytes of one key (or value) cache
};

/// The step inputs, filled on the host.
struct JobInputs {
  std::vector<std::uint8_t> query, new_keys, new_values;
};

class JobMemory {
 public:
  virtual ~JobMemory() = default;
  virtual kernel::DeviceKind device() const = 0;

  // What the kernels read and write (device pointers on a GPU).
  virtual void* key_cache(int i) = 0;
  virtual void* value_cache(int i) = 0;
  virtual void* query() = 0;
  virtual void* output() = 0;
  virtual void* new_keys() = 0;
  virtual void* new_values() = 0;

  // Host copies for the check.
  virtual const std::uint8_t* query_on_host() const = 0;
  /// The output's first `bytes` (copied back from the device first on a GPU).
  virtual std::uint8_t* output_on_host(std::size_t bytes) = 0;
  /// Cache pair `i` (copied back from the device first on a GPU).
  virtual std::pair<std::uint8_t*, std::uint8_t*> cache_on_host(int i) = 0;

  /// The stream the job's device work runs on (its own; none for host memory).
  virtual kernel::Stream stream() const = 0;
  /// Brackets the work of one step; end_step waits for it and returns its seconds.
  virtual void begin_step() = 0;
  virtual double end_step() = 0;

  // A step captured as a CUDA graph (device memory only; host memory throws ValueError).
  virtual void begin_capture() = 0;
  virtual void end_capture() = 0;
  virtual bool captured() const = 0;
  virtual int captured_nodes() const = 0;
  virtual void replay() = 0;
};

/// Host memory: caches on huge pages, step buffers in vectors.
std::unique_ptr<JobMemory> make_host_job_memory(const JobMemorySizes& sizes, JobInputs inputs);
/// Device memory on cuda:0. Throws NotImplementedError naming why when this build or this
/// host cannot run CUDA kernels.
std::unique_ptr<JobMemory> make_device_job_memory(const JobMemorySizes& sizes, JobInputs inputs);

/// Bytes of host memory available now (Linux: MemAvailable), or 0 when unknown.
std::size_t host_memory_available();
/// Bytes of free device memory on cuda:0 (0 when there is no usable device).
std::size_t device_memory_available();

/// The one for `device`.
std::unique_ptr<JobMemory> make_job_memory(kernel::DeviceKind device, const JobMemorySizes& sizes, JobInputs inputs);

}  // namespace attnsel::runtime
