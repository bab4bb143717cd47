// The machine's ceilings, measured in the same run as a benchmark so that a kernel's
// figure can be read as a fraction of what the hardware allows right now: read bandwidth
// (a read-only pass over a buffer far larger than the last-level cache) and compute peaks
// (fp32 FMA and, where the CPU has it, the AVX-512-BF16 dot product) with independent
// accumulators the compiler cannot merge.
// Thread-safety: the functions may run concurrently, but their results then disturb each other.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace attnsel::runtime {

struct Ceilings {
  double read_gbps = 0.0;     ///< GB/s (1e9 bytes per second)
  double fp32_gflops = 0.0;   ///< fp32 FMA peak, GFLOP/s (an FMA counts 2)
  double bf16_gflops = 0.0;   ///< bf16 dot-product peak, GFLOP/s; 0 when the CPU has none
  int threads = 0;            ///< the team OpenMP gives now (fewer than asked on a loaded machine)
  std::string isa;            ///< the SIMD target the probes ran on
};

/// "read 48.1 GB/s, fp32 FMA 430 GFLOP/s, bf16 dot 800 GFLOP/s  (2 threads, measured now)":
/// what `attnsel run` and `attnsel bench` print as the host's ceilings.
std::string describe(const Ceilings& c);

/// The compute peak a kernel's GFLOP/s are read against.
struct ComputePeak {
  bool bf16 = false;            ///< the bf16 dot-product peak (else the fp32 FMA peak)
  double gflops = 0.0;
  std::string_view name;        ///< "bf16 dot-product" or "fp32 FMA"
};
/// The bf16 dot-product peak for a kernel whose instruction set `isa` ("AVX3+BF16", ...)
/// names BF16 on a CPU that has the peak; the fp32 FMA peak otherwise.
ComputePeak compute_peak(const Ceilings& c, std::string_view isa);

/// A read-only pass over a buffer far larger than the last-level cache, kept allocated so
/// that passes can be interleaved with the work they measure.
class ReadBandwidthProbe {
 public:
  explicit ReadBandwidthProbe(std::size_t bytes = std::size_t{512} << 20, int threads = 0);
  ~ReadBandwidthProbe();
  ReadBandwidthProbe(const ReadBandwidthProbe&) = delete;
  ReadBandwidthProbe& operator=(const ReadBandwidthProbe&) = delete;
  /// GB/s of one pass with all threads.
  double pass();

 private:
  float* buf_;
  std::size_t count_;
  int threads_;
};

/// Median of `repeats` read-only passes over `bytes` (all threads sharing the buffer).
double measure_read_bandwidth(std::size_t bytes = std::size_t{1} << 30, int threads = 0, int repeats = 5);
/// Peak fp32 FMA throughput with `threads` threads (0: all), median of `repeats`.
double measure_fp32_peak(int threads = 0, int repeats = 5);
/// Peak AVX-512-BF16 dot-product throughput (vdpbf16ps: 2 FLOPs per bf16 pair); 0 when unsupported.
double measure_bf16_peak(int threads = 0, int repeats = 5);
/// All three; `read_bytes` = 0 skips the bandwidth pass.
Ceilings measure_ceilings(std::size_t read_bytes = std::size_t{1} << 30, int threads = 0);

}  // namespace attnsel::runtime
