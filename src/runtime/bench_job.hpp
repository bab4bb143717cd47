// The standard attention benchmarks (with their targets) as a library, for `attnsel bench`:
// a forward pass timed repeatedly (median), reported next to the ceiling measured in the
// same run.
// Thread-safety: run one at a time (they measure the whole machine).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/ceilings.hpp"
#include "runtime/paged_workload.hpp"
#include "runtime/run_job.hpp"
#include "runtime/workload_shape.hpp"

namespace attnsel::runtime {

struct BenchCase {
  std::string name;
  WorkloadSpec workload;
  bool decode = true;        ///< decode: GB/s vs read bandwidth; prefill: GFLOP/s vs compute peak
  double target_pct = 0.0;   ///< the target fraction of the ceiling, in percent
  double target_figure = 0.0;  ///< or an absolute target in GB/s or GFLOP/s (GPU cases); 0 = none
};

struct BenchResult {
  std::string name;
  std::string shape;         ///< human description of the workload
  bool decode = true;
  double seconds = 0.0;      ///< median of the timed passes (see `timed`)
  double forward_seconds = 0.0;  ///< GPU: median of forward() calls from an idle device, host planning included
  /// GPU: median of forward() calls issued while earlier work still runs (as an engine
  /// calls it between layers): the host's planning overlaps that work
  double forward_behind_seconds = 0.0;
  /// GPU: median of one execute that also appends the step's new keys and values (the cache
  /// write and the attention of a layer in one call, as `attnsel run` issues them)
  double append_seconds = 0.0;
  double execute_host_us = 0.0;  ///< GPU: host time of one layer's execute (checks and launch), median
  double plan_host_us = 0.0;     ///< GPU: host time of one step's plan update (work split and upload), median
  std::string timed = "forward";  ///< "forward", or "kernels of one plan" (execute of a step plan)
  double figure = 0.0;       ///< GB/s (decode) or GFLOP/s (prefill)
  double ceiling = 0.0;      ///< the same unit
  std::string ceiling_name;  ///< "read bandwidth", "bf16 dot-product peak", ...
  double pct = 0.0;          ///< median over passes of figure / ceiling probed around that pass, percent
  double target_pct = 0.0;
  double target_figure = 0.0;  ///< absolute target (same unit as figure); 0 = none
  std::string device = "cpu";  ///< where the workload ran ("cpu", "cuda:0")
  bool check_passed = true;  ///< a sample of the outputs against the reference
};

/// The CPU cases: decode batch 8 × 8192 (32/8 heads, d=128), one 32k-token sequence, and a
/// causal 4096-token prefill, in `shape`'s dtypes, block size and layout (the targets are
/// defined for bf16 at block 16); `scale` < 1 shrinks the contexts (for a quick look; the
/// targets are defined at scale 1).
std::vector<BenchCase> standard_bench_cases(const WorkloadShape& shape, double scale = 1.0);

/// One decode case of a given shape (batch × context, 32/8 heads, d=128): the kernel-only
/// anchor for `attnsel run` on the same shape. No target.
BenchCase shape_decode_case(const WorkloadShape& shape, int batch, int context);

/// The workload every bench case starts from: `shape`'s dtypes, block size and layout with
/// the given heads, d=128 and no spare blocks (sequences are the case's).
WorkloadSpec bench_workload(const WorkloadShape& shape, int heads, int kv_heads);
/// The query tokens whose outputs a bench case checks: the last one of each of the first
/// four sequences (the longest contexts).
std::vector<std::int32_t> bench_checked_tokens(const kernel::AttentionMetadata& md);
/// BenchResult::shape of `c`, whose cache stores `cache_type`: sequences × context, heads,
/// head size, the cache's type, layout and block size.
std::string bench_case_shape(const BenchCase& c, kernel::ScalarType cache_type);

/// Times `repeats` forward passes of `c` (after one warm-up) and checks a sample against
/// the reference. Each pass is paired with a ceiling probe just before and just after it
/// (a read pass for decode, a compute burst for prefill): on a machine shared with other
/// work the ratio of the pair is what stays meaningful. `ceilings` gives the probe's
/// thread count; `isa` names the kernel's instruction set ("BF16" selects the bf16 peak).
BenchResult run_bench_case(const BenchCase& c, const ImplFactory& make_impl, const Ceilings& ceilings,
                           const std::string& isa, int repeats = 5);

/// The GPU cases, with absolute targets on an H200: paged decode batch 64 × 4096
/// (bf16, 32/8 heads, d=128, block 16; 3.6 TB/s), one 32k-token sequence (2.7 TB/s), and a
/// causal prefill of 2 × 16k tokens (16 heads, d=128; 360 TFLOP/s), in `shape`'s dtypes,
/// block size and layout. `scale` shrinks them.
std::vector<BenchCase> standard_gpu_bench_cases(const WorkloadShape& shape, double scale = 1.0);

/// run_bench_case on the GPU: the workload is built on the host and copied to device
/// memory; passes are timed with CUDA events (median of `repeats` after a warm-up): the
/// kernels of one step plan (execute), the execute that appends the new keys and values,
/// and forward() with its planning beside them; the
/// host time of one execute and of one plan update are timed with the clock; decode passes are paired with device
/// read-bandwidth probes; a sample of the outputs is copied back and checked against the
/// reference. Prefill has no measured ceiling (ceiling 0). Throws NotImplementedError
/// without a usable GPU.
BenchResult run_device_bench_case(const BenchCase& c, const ImplFactory& make_impl, int repeats = 5);

}  // namespace attnsel::runtime
