// The main job, as a library: a synthetic paged workload for a model shape — prefill of
// every sequence's context (in chunks), then decode steps — run layer by layer through an
// attention implementation (any backend's make_impl), with a sample of outputs checked
// against the double-precision reference, and the throughput measured. The workload lives
// where the kernel reads (RunSpec::device: host memory, or GPU memory for CUDA kernels).
// Its layers are layer_params_for(spec) (paged_workload.hpp).
// Thread-safety: run_job may be called from any thread; it uses the kernels' own threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "attnsel/kernel.hpp"
#include "runtime/accuracy.hpp"
#include "runtime/paged_workload.hpp"
#include "runtime/run_steps.hpp"
#include "runtime/workload_shape.hpp"

namespace attnsel::runtime {

/// A run: every layer's shape, how many layers, and the workload's steps.
struct RunSpec : WorkloadShape, RunSteps {
  int num_layers = 32;
  int check_tokens = 8;      ///< query tokens sampled for the check, per checked step
  /// Layers get their own cache while the total stays under this; beyond it, layers
  /// share caches round-robin (the working set stays far larger than any CPU cache).
  std::size_t max_cache_bytes = std::size_t{3} << 30;
  /// Where the caches and step buffers live: cpu for host kernels, cuda for attnsel's CUDA
  /// kernels (see workload_device); the phase times then come from CUDA events.
  kernel::DeviceKind device = kernel::DeviceKind::cpu;
  /// Capture the decode step (every layer's cache write and attention) in a CUDA graph
  /// once, then replay it with each step's batch (the kernel must support graphs).
  bool cuda_graphs = false;
  /// Wait for every decode step before preparing the next. Off (the default), the host
  /// updates the plan and issues step i + 1 while the device still runs step i, as an
  /// engine with asynchronous scheduling does, and the decode phase is timed as a whole.
  bool sync_steps = false;
};

struct CheckResult {
  bool ran = false;
  std::string step;          ///< "prefill" or "decode"
  int tokens = 0;            ///< sampled query tokens (every head, every dim)
  Tolerance tolerance;       ///< of the step's plan (wider where it multiplies fp8 queries)
  bool fp8_queries = false;  ///< the step's plan multiplied fp8 queries (StepPlan::fp8_queries)
  Comparison comparison;
};

struct RunReport {
  RunSpec spec;
  std::string decode_plan;      ///< the last decode step's plan, described
  int graph_nodes = 0;          ///< nodes of the captured decode step (0 = no graph)
  int distinct_caches = 0;
  std::size_t cache_bytes = 0;  ///< all distinct caches, K and V
  PhaseStats prefill, decode;
  /// The first decode step when more follow (kernel loading, the plan sized for decode,
  /// the graph capture), timed apart from `decode`, capture included.
  PhaseStats decode_warmup;
  CheckResult check_prefill, check_decode;
  bool check_passed() const {
    return (!check_prefill.ran || check_prefill.comparison.passed()) &&
           (!check_decode.ran || check_decode.comparison.passed());
  }
};

using ImplFactory = std::function<std::unique_ptr<kernel::AttentionImpl>(const kernel::LayerParams&)>;

/// Throws ValueError(what) unless `ok`: a spec the job cannot run.
void require_spec(bool ok, const std::string& what);
/// Bytes as the memory messages print them ("12.3 GiB").
std::string format_gib(std::size_t bytes);

/// What a run needs before it starts: host and device bytes, and what is free now.
struct MemoryNeed {
  std::size_t host_bytes = 0;
  std::size_t device_bytes = 0;
  std::size_t host_available = 0;    ///< 0 = unknown
  std::size_t device_available = 0;  ///< 0 = no device (or unknown)
  std::size_t cache_bytes = 0;       ///< of which the KV caches (in the workload's memory)
  /// Empty when it fits; else what is short, by how much, and which option to lower.
  std::string shortfall;
  /// Throws ValueError with the shortfall when there is one.
  void require_fit() const;
};
/// Sizes `spec`'s memory (caches, step buffers, the check's host copies) against the free
/// memory of the host and, for device workloads, of cuda:0.
MemoryNeed memory_need(const RunSpec& spec);

/// Throws ValueError for an impossible spec (non-positive sizes, ...) and for one whose
/// memory does not fit (memory_need's shortfall), before allocating anything.
RunReport run_job(const RunSpec& spec, const ImplFactory& make_impl, const Progress& progress = {});

}  // namespace attnsel::runtime
