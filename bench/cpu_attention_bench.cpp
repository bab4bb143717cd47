// CPU_ATTN throughput next to the machine's ceilings measured in the same run.
//
//   decode  GB/s    = K and V bytes read once / time (the cache is far larger than L3)
//   prefill GFLOP/s = 4·h·s_q·s_kv·d / time, halved (exactly: visible keys) when causal
//
// Each figure is reported with `pct` (of the ceiling: read bandwidth for decode, the peak
// of the instruction set the kernel uses for prefill) and `target_pct` (the CPU target).
// BM_Ceilings runs first and re-measures; later benchmarks reuse its numbers.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/attention/cpu/cpu_attention.hpp"
#include "runtime/ceilings.hpp"
#include "runtime/paged_workload.hpp"

namespace {

using attnsel::kernel::ScalarType;
using attnsel::runtime::CacheLayout;
using attnsel::runtime::PagedWorkload;
using attnsel::runtime::WorkloadSpec;
namespace cpu = attnsel::kernel::cpu;

attnsel::runtime::Ceilings g_ceilings;
bool g_have_ceilings = false;

const attnsel::runtime::Ceilings& ceilings() {
  if (!g_have_ceilings) {
    g_ceilings = attnsel::runtime::measure_ceilings(std::size_t{512} << 20);
    g_have_ceilings = true;
  }
  return g_ceilings;
}

void BM_Ceilings(benchmark::State& state) {
  for (auto _ : state) {
    g_ceilings = attnsel::runtime::measure_ceilings(std::size_t{512} << 20);
    g_have_ceilings = true;
  }
  state.counters["read_GB/s"] = g_ceilings.read_gbps;
  state.counters["fp32_GFLOP/s"] = g_ceilings.fp32_gflops;
  state.counters["bf16_GFLOP/s"] = g_ceilings.bf16_gflops;
  state.counters["threads"] = g_ceilings.threads;
  state.SetLabel(g_ceilings.isa);
}
BENCHMARK(BM_Ceilings)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

struct Shape {
  int heads = 32, kv_heads = 8, head_size = 128;
  ScalarType dtype = ScalarType::bf16;
  attnsel::CacheDType kv_cache_dtype = attnsel::CacheDType::auto_;
  CacheLayout layout = CacheLayout::hnd;
  int block = 16;
  int batch = 1;
  int context = 0;
  int new_tokens = 1;
  bool allow_bf16_dot = true;  ///< false: the fp32 path even where AVX-512-BF16 is available
};

WorkloadSpec spec_of(const Shape& s) {
  WorkloadSpec spec;
  spec.num_heads = s.heads;
  spec.num_kv_heads = s.kv_heads;
  spec.head_size = s.head_size;
  spec.dtype = s.dtype;
  spec.kv_cache_dtype = s.kv_cache_dtype;
  spec.layout = s.layout;
  spec.block_size = s.block;
  for (int i = 0; i < s.batch; ++i) spec.sequences.push_back({s.context, s.new_tokens});
  return spec;
}

// Workloads are large (hundreds of MB): build each once per process.
std::map<std::string, std::unique_ptr<PagedWorkload>>& workload_cache() {
  static std::map<std::string, std::unique_ptr<PagedWorkload>> cache;
  return cache;
}

PagedWorkload& workload(const std::string& key, const Shape& s) {
  auto& cache = workload_cache();
  auto& slot = cache[key];
  if (!slot) {
    cache.clear();  // keep one at a time: memory is shared with other processes
    auto w = std::make_unique<PagedWorkload>(spec_of(s));
    return *(cache[key] = std::move(w));
  }
  return *slot;
}

attnsel::kernel::LayerParams layer(const Shape& s) {
  attnsel::kernel::LayerParams p;
  p.num_heads = s.heads;
  p.num_kv_heads = s.kv_heads;
  p.head_size = s.head_size;
  p.scale = 1.0f / std::sqrt(static_cast<float>(s.head_size));
  p.kv_cache_dtype = s.kv_cache_dtype;
  return p;
}

void run_decode(benchmark::State& state, const std::string& key, const Shape& s, double target_pct) {
  const double ceiling = ceilings().read_gbps;
  PagedWorkload& w = workload(key, s);
  cpu::CpuAttentionOptions options;
  options.allow_bf16_dot = s.allow_bf16_dot;
  const auto impl = cpu::make_cpu_attention_impl(layer(s), options);
  const auto md = w.metadata();
  for (auto _ : state) impl->forward(w.query(), w.cache(), md, w.output());
  const double bytes = static_cast<double>(w.kv_bytes_read());
  const double gbps = bytes * static_cast<double>(state.iterations()) / 1e9;
  state.counters["GB/s"] = benchmark::Counter(gbps, benchmark::Counter::kIsRate);
  state.counters["ceiling_GB/s"] = ceiling;
  state.counters["target_pct"] = target_pct;
  state.SetLabel(cpu::cpu_attention_isa(s.dtype, s.kv_cache_dtype));
  // pct is derived from the rate after the run: Google Benchmark divides kIsRate by time.
  state.counters["pct"] = benchmark::Counter(gbps / ceiling * 100.0, benchmark::Counter::kIsRate);
}

void run_prefill(benchmark::State& state, const std::string& key, const Shape& s, double target_pct) {
  const std::string isa = cpu::cpu_attention_isa(s.dtype, s.kv_cache_dtype);
  const double ceiling = isa.find("BF16") != std::string::npos ? ceilings().bf16_gflops : ceilings().fp32_gflops;
  PagedWorkload& w = workload(key, s);
  const auto impl = cpu::make_cpu_attention_impl(layer(s));
  const auto md = w.metadata();
  for (auto _ : state) impl->forward(w.query(), w.cache(), md, w.output());
  const double gflop = w.attention_flops(true) * static_cast<double>(state.iterations()) / 1e9;
  state.counters["GFLOP/s"] = benchmark::Counter(gflop, benchmark::Counter::kIsRate);
  state.counters["ceiling_GFLOP/s"] = ceiling;
  state.counters["target_pct"] = target_pct;
  state.counters["pct"] = benchmark::Counter(gflop / ceiling * 100.0, benchmark::Counter::kIsRate);
  state.SetLabel(isa);
}

// The CPU targets: batch 8 × 8192 decode >= 80 % of read bandwidth; one 32k sequence
// >= 70 %; causal 4096-token prefill >= 50 % of the instruction set's peak.
void BM_DecodeBatch8x8192(benchmark::State& state) {
  Shape s;
  s.batch = 8;
  s.context = 8192;
  s.layout = state.range(0) ? CacheLayout::hnd : CacheLayout::nhd;
  run_decode(state, "decode8x8192" + std::to_string(state.range(0)), s, 80);
}
BENCHMARK(BM_DecodeBatch8x8192)->ArgName("hnd")->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_DecodeOne32k(benchmark::State& state) {
  Shape s;
  s.batch = 1;
  s.context = 32768;
  run_decode(state, "decode1x32k", s, 70);
}
BENCHMARK(BM_DecodeOne32k)->Unit(benchmark::kMillisecond)->UseRealTime();

// K/V (8 MiB) stay in L3: the kernel's compute rate, apart from memory.
void BM_DecodeInCache(benchmark::State& state) {
  Shape s;
  s.batch = 1;
  s.context = 2048;
  run_decode(state, "decodeincache", s, 0);
}
BENCHMARK(BM_DecodeInCache)->Unit(benchmark::kMicrosecond)->UseRealTime();

// The step API's two halves on a small decode batch (K/V in cache, so the host's share
// shows): one step's plan, and one layer's execute against it.
void BM_StepPlanDecode16x512(benchmark::State& state) {
  Shape s;
  s.batch = 16;
  s.context = 512;
  PagedWorkload& w = workload("stepplan16x512", s);
  const auto impl = cpu::make_cpu_attention_impl(layer(s));
  const auto md = w.metadata();
  const auto cache = w.cache();
  const auto plan = impl->plan(md, cache, s.dtype, attnsel::kernel::Stream{});
  for (auto _ : state) impl->update(*plan, md, attnsel::kernel::Stream{});
  state.SetLabel(plan->describe());
}
BENCHMARK(BM_StepPlanDecode16x512)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_StepExecuteDecode16x512(benchmark::State& state) {
  Shape s;
  s.batch = 16;
  s.context = 512;
  PagedWorkload& w = workload("stepplan16x512", s);
  const auto impl = cpu::make_cpu_attention_impl(layer(s));
  const auto md = w.metadata();
  const auto cache = w.cache();
  const auto query = w.query(), output = w.output();
  const auto plan = impl->plan(md, cache, s.dtype, attnsel::kernel::Stream{});
  for (auto _ : state) impl->execute(*plan, query, cache, output, attnsel::kernel::Stream{});
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(w.kv_bytes_read()) *
                                                  static_cast<double>(state.iterations()) / 1e9,
                                              benchmark::Counter::kIsRate);
}
BENCHMARK(BM_StepExecuteDecode16x512)->Unit(benchmark::kMicrosecond)->UseRealTime();

// The same in-cache decode on each cache dtype (0 bf16, 1 e4m3, 2 e5m2, 3 e4m3 on the fp32
// path): the compute each fp8 widening costs, apart from memory.
void BM_DecodeInCacheKv(benchmark::State& state) {
  Shape s;
  s.batch = 1;
  s.context = 2048;
  const int kv = static_cast<int>(state.range(0));
  s.kv_cache_dtype = kv == 0   ? attnsel::CacheDType::auto_
                     : kv == 2 ? attnsel::CacheDType::fp8_e5m2
                               : attnsel::CacheDType::fp8_e4m3;
  s.allow_bf16_dot = kv != 3;
  run_decode(state, "decodeincachekv" + std::to_string(kv), s, 0);
}
BENCHMARK(BM_DecodeInCacheKv)
    ->ArgName("bf16_e4m3_e5m2_e4m3fp32")
    ->DenseRange(0, 3)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

void BM_DecodeFp8Batch8x8192(benchmark::State& state) {
  Shape s;
  s.batch = 8;
  s.context = 8192;
  s.kv_cache_dtype = attnsel::CacheDType::fp8_e4m3;
  run_decode(state, "decodefp8", s, 80);
}
BENCHMARK(BM_DecodeFp8Batch8x8192)->Unit(benchmark::kMillisecond)->UseRealTime();

// fp8 against bf16 on the same shape in one process, their forwards alternating (which
// goes first swaps every pair) so that a load that drifts slows both alike: each pair
// gives one time ratio, and the median ratio is reported (`fp8_over_bf16`), with each
// cache's median time and the fp8 read rate. Manual time: the fp8 forwards.
void run_decode_pair(benchmark::State& state, Shape s, attnsel::CacheDType fp8_dtype) {
  const double ceiling = ceilings().read_gbps;
  Shape b = s;
  b.kv_cache_dtype = attnsel::CacheDType::auto_;
  s.kv_cache_dtype = fp8_dtype;
  workload_cache().clear();  // its memory first: both caches are resident here
  PagedWorkload wf(spec_of(s)), wb(spec_of(b));
  const auto impl_f = cpu::make_cpu_attention_impl(layer(s));
  const auto impl_b = cpu::make_cpu_attention_impl(layer(b));
  const auto md_f = wf.metadata(), md_b = wb.metadata();
  auto timed = [](auto& impl, PagedWorkload& w, const auto& md) {
    const auto t0 = std::chrono::steady_clock::now();
    impl->forward(w.query(), w.cache(), md, w.output());
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  timed(impl_f, wf, md_f);  // warm-up
  timed(impl_b, wb, md_b);
  std::vector<double> tf, tb, ratio;
  for (auto _ : state) {
    const bool fp8_first = tf.size() % 2 == 0;
    double f = 0, h = 0;
    if (fp8_first) f = timed(impl_f, wf, md_f);
    h = timed(impl_b, wb, md_b);
    if (!fp8_first) f = timed(impl_f, wf, md_f);
    state.SetIterationTime(f);
    tf.push_back(f);
    tb.push_back(h);
    ratio.push_back(f / h);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  state.counters["fp8_over_bf16"] = median(ratio);
  state.counters["fp8_ms"] = median(tf) * 1e3;
  state.counters["bf16_ms"] = median(tb) * 1e3;
  state.counters["fp8_GB/s"] = static_cast<double>(wf.kv_bytes_read()) / median(tf) / 1e9;
  state.counters["bf16_GB/s"] = static_cast<double>(wb.kv_bytes_read()) / median(tb) / 1e9;
  state.counters["ceiling_GB/s"] = ceiling;
  state.SetLabel(cpu::cpu_attention_isa(s.dtype, s.kv_cache_dtype));
}

// The CPU fp8 target: batch 8 × 8192 decode in at most 0.75 × bf16's time (arg: 1 e4m3,
// 2 e5m2).
void BM_DecodeFp8VsBf16Batch8x8192(benchmark::State& state) {
  Shape s;
  s.batch = 8;
  s.context = 8192;
  run_decode_pair(state, s, state.range(0) == 2 ? attnsel::CacheDType::fp8_e5m2 : attnsel::CacheDType::fp8_e4m3);
}
BENCHMARK(BM_DecodeFp8VsBf16Batch8x8192)
    ->ArgName("e4m3_e5m2")
    ->Arg(1)
    ->Arg(2)
    ->Iterations(11)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// The same pairing in cache (1 × 2048, K/V in L2/L3): the compute per key of each widening
// against bf16's, apart from memory (run it with OMP_NUM_THREADS=1).
void BM_DecodeInCacheFp8VsBf16(benchmark::State& state) {
  Shape s;
  s.batch = 1;
  s.context = 2048;
  run_decode_pair(state, s, state.range(0) == 2 ? attnsel::CacheDType::fp8_e5m2 : attnsel::CacheDType::fp8_e4m3);
}
BENCHMARK(BM_DecodeInCacheFp8VsBf16)
    ->ArgName("e4m3_e5m2")
    ->Arg(1)
    ->Arg(2)
    ->Iterations(301)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

void BM_PrefillCausal4096(benchmark::State& state) {
  Shape s;
  s.batch = 1;
  s.context = 4096;
  s.new_tokens = 4096;
  s.dtype = state.range(0) == 0 ? ScalarType::bf16 : (state.range(0) == 1 ? ScalarType::f16 : ScalarType::f32);
  run_prefill(state, "prefill" + std::to_string(state.range(0)), s, 50);
}
BENCHMARK(BM_PrefillCausal4096)->ArgName("dtype_bf16_f16_f32")->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
