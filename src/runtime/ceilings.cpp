// Ceiling probes, compiled per Highway target like the kernels they measure.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/ceilings.cpp"
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS HWY_SSSE3
#endif
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <omp.h>
#include <sys/mman.h>

#include <cstdlib>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <new>
#include <vector>

#include "hwy/highway.h"
#include "runtime/ceilings.hpp"
#include "runtime/median.hpp"

#if HWY_TARGET == HWY_AVX3
#include <immintrin.h>

HWY_PUSH_ATTRIBUTES(HWY_TARGET_STR ",avx512bf16")
namespace attnsel::runtime::HWY_NAMESPACE::bf16 {
// 12 independent vdpbf16ps chains: enough to cover the latency on every core we know.
HWY_NOINLINE float DotLoop(std::size_t iters, float seed) {
  const __m512i a = _mm512_set1_epi32(0x3F803F80);  // (1.0, 1.0) in bf16
  const __m512i b = _mm512_set1_epi32(0x00010001);  // tiny denormal pairs: sums stay finite
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(seed + static_cast<float>(i));
  for (std::size_t it = 0; it < iters; ++it) {
    for (int i = 0; i < 12; ++i)
      acc[i] = _mm512_dpbf16_ps(acc[i], reinterpret_cast<__m512bh>(a), reinterpret_cast<__m512bh>(b));
  }
  __m512 sum = acc[0];
  for (int i = 1; i < 12; ++i) sum = _mm512_add_ps(sum, acc[i]);
  return _mm512_reduce_add_ps(sum);
}
}  // namespace attnsel::runtime::HWY_NAMESPACE::bf16
HWY_POP_ATTRIBUTES
#endif

HWY_BEFORE_NAMESPACE();
namespace attnsel::runtime::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Sums n floats with four accumulators (a read-only stream).
float ReadPass(const float* HWY_RESTRICT p, std::size_t n) {
  const hn::ScalableTag<float> d;
  const std::size_t L = hn::Lanes(d);
  auto a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  std::size_t i = 0;
  for (; i + 4 * L <= n; i += 4 * L) {
    a0 = hn::Add(a0, hn::Load(d, p + i));
    a1 = hn::Add(a1, hn::Load(d, p + i + L));
    a2 = hn::Add(a2, hn::Load(d, p + i + 2 * L));
    a3 = hn::Add(a3, hn::Load(d, p + i + 3 * L));
  }
  float s = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
  for (; i < n; ++i) s += p[i];
  return s;
}

// 12 independent FMA chains; returns the sum so nothing is dead.
float FmaLoop(std::size_t iters, float seed) {
  const hn::ScalableTag<float> d;
  const auto m = hn::Set(d, 0.9999999f), c = hn::Set(d, 1e-7f);
  hn::Vec<decltype(d)> acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = hn::Set(d, seed + static_cast<float>(i));
  for (std::size_t it = 0; it < iters; ++it)
    for (int i = 0; i < 12; ++i) acc[i] = hn::MulAdd(acc[i], m, c);
  auto sum = acc[0];
  for (int i = 1; i < 12; ++i) sum = hn::Add(sum, acc[i]);
  return hn::GetLane(hn::SumOfLanes(d, sum));
}

std::size_t FloatLanes() { return hn::Lanes(hn::ScalableTag<float>()); }

float Bf16DotLoop(std::size_t iters, float seed) {
#if HWY_TARGET == HWY_AVX3
  return bf16::DotLoop(iters, seed);
#else
  (void)iters;
  return seed;
#endif
}

const char* Target() { return hwy::TargetName(HWY_TARGET); }
}  // namespace attnsel::runtime::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnsel::runtime {

HWY_EXPORT(ReadPass);
HWY_EXPORT(FmaLoop);
HWY_EXPORT(FloatLanes);
HWY_EXPORT(Bf16DotLoop);
HWY_EXPORT(Target);

namespace {

using Clock = std::chrono::steady_clock;

int resolve_threads(int threads) { return threads > 0 ? threads : omp_get_max_threads(); }

// The probes size their teams as the kernels do (OpenMP's own setting, OMP_DYNAMIC
// included), so a probe and the work it is paired with run on the same number of threads;
// rates count the threads that actually ran.

bool has_bf16_dot() {
#if defined(__x86_64__)
  return (hwy::SupportedTargets() & HWY_AVX3) != 0 && __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

// Runs `loop(iters)` on every thread at once; returns FLOP/s given flops per iteration per thread.
template <class Loop>
double compute_peak(int threads, int repeats, double flops_per_iter, Loop loop) {
  const int n = resolve_threads(threads);
  std::size_t iters = 1 << 16;
  // Calibrate to ~50 ms per measurement.
  for (;;) {
    const auto t0 = Clock::now();
    volatile float sink = loop(iters, 1.0f);
    (void)sink;
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (s > 0.05 || iters > (std::size_t{1} << 34)) break;
    iters *= 2;
  }
  std::vector<double> rates;
  for (int r = 0; r < repeats; ++r) {
    float sink_all = 0.0f;
    int team = 1;
    const auto t0 = Clock::now();
#pragma omp parallel num_threads(n) reduction(+ : sink_all)
    {
#pragma omp single nowait
      team = omp_get_num_threads();
      sink_all += loop(iters, static_cast<float>(omp_get_thread_num()));
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    volatile float keep = sink_all;
    (void)keep;
    rates.push_back(flops_per_iter * static_cast<double>(iters) * team / s);
  }
  return median(rates);
}

}  // namespace

ReadBandwidthProbe::ReadBandwidthProbe(std::size_t bytes, int threads)
    : buf_(nullptr), count_(bytes / sizeof(float)), threads_(resolve_threads(threads)) {
  // On huge pages, like the KV caches it is compared with.
  buf_ = static_cast<float*>(std::aligned_alloc(std::size_t{2} << 20, (count_ * sizeof(float) + (std::size_t{2} << 20) - 1) &
                                                                         ~((std::size_t{2} << 20) - 1)));
  if (buf_ == nullptr) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  (void)madvise(buf_, count_ * sizeof(float), MADV_HUGEPAGE);
#endif
  const std::size_t count = count_;
  float* buf = buf_;
  // First touch in parallel, so pages land where the readers are.
#pragma omp parallel for num_threads(threads_) schedule(static)
  for (std::size_t i = 0; i < count; ++i) buf[i] = 1.0f;
}

ReadBandwidthProbe::~ReadBandwidthProbe() { std::free(buf_); }

double ReadBandwidthProbe::pass() {
  float sink_all = 0.0f;
  const std::size_t count = count_;
  const int n = threads_;
  const float* buf = buf_;
  const auto t0 = Clock::now();
#pragma omp parallel num_threads(n) reduction(+ : sink_all)
  {
    const int t = omp_get_thread_num();
    const auto team = static_cast<std::size_t>(omp_get_num_threads());
    const std::size_t chunk = (count / team + 63) / 64 * 64;
    const std::size_t begin = std::min(count, chunk * static_cast<std::size_t>(t));
    const std::size_t end = std::min(count, begin + chunk);
    sink_all += HWY_DYNAMIC_DISPATCH(ReadPass)(buf + begin, end - begin);
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  volatile float keep = sink_all;
  (void)keep;
  return static_cast<double>(count * sizeof(float)) / s / 1e9;
}

double measure_read_bandwidth(std::size_t bytes, int threads, int repeats) {
  ReadBandwidthProbe probe(bytes, threads);
  probe.pass();  // warm-up
  std::vector<double> rates;
  for (int r = 0; r < repeats; ++r) rates.push_back(probe.pass());
  return median(rates);
}

double measure_fp32_peak(int threads, int repeats) {
  const double lanes = static_cast<double>(HWY_DYNAMIC_DISPATCH(FloatLanes)());
  return compute_peak(threads, repeats, 12.0 * lanes * 2.0,
                      [](std::size_t iters, float seed) { return HWY_DYNAMIC_DISPATCH(FmaLoop)(iters, seed); }) /
         1e9;
}

double measure_bf16_peak(int threads, int repeats) {
  if (!has_bf16_dot()) return 0.0;
  return compute_peak(threads, repeats, 12.0 * 64.0,
                      [](std::size_t iters, float seed) { return HWY_DYNAMIC_DISPATCH(Bf16DotLoop)(iters, seed); }) /
         1e9;
}

Ceilings measure_ceilings(std::size_t read_bytes, int threads) {
  Ceilings c;
  {
    int team = 1;
#pragma omp parallel num_threads(resolve_threads(threads))
#pragma omp single
    team = omp_get_num_threads();
    c.threads = team;  // what the probes (and the kernels) get now
  }
  c.isa = HWY_DYNAMIC_DISPATCH(Target)();
  if (read_bytes > 0) c.read_gbps = measure_read_bandwidth(read_bytes, threads);
  c.fp32_gflops = measure_fp32_peak(threads);
  c.bf16_gflops = measure_bf16_peak(threads);
  return c;
}

}  // namespace attnsel::runtime
#endif
