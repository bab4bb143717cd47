#include "runtime/bench_job.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "kernels/attention/reference.hpp"
#include "runtime/accuracy.hpp"
#include "runtime/median.hpp"

namespace attnsel::runtime {

std::vector<BenchCase> standard_bench_cases(const WorkloadShape& shape, double scale) {
  auto base = [&] { return bench_workload(shape, 32, 8); };
  auto scaled = [&](int n) { return std::max(16, static_cast<int>(std::lround(n * scale))); };
  std::vector<BenchCase> cases;
  {
    BenchCase c{"decode-batch", base(), true, 80.0};
    for (int i = 0; i < 8; ++i) c.workload.sequences.push_back({scaled(8192), 1});
    cases.push_back(std::move(c));
  }
  {
    BenchCase c{"decode-long", base(), true, 70.0};
    c.workload.sequences.push_back({scaled(32768), 1});
    cases.push_back(std::move(c));
  }
  {
    BenchCase c{"prefill", base(), false, 50.0};
    const int n = scaled(4096);
    c.workload.sequences.push_back({n, n});
    cases.push_back(std::move(c));
  }
  return cases;
}

BenchCase shape_decode_case(const WorkloadShape& shape, int batch, int context) {
  BenchCase c{"decode-shape", bench_workload(shape, 32, 8), true, 0.0, 0.0};
  for (int i = 0; i < batch; ++i) c.workload.sequences.push_back({context, 1});
  return c;
}

WorkloadSpec bench_workload(const WorkloadShape& shape, int heads, int kv_heads) {
  WorkloadSpec w;
  w.shape() = shape;
  w.num_heads = heads;
  w.num_kv_heads = kv_heads;
  w.head_size = 128;
  w.spare_blocks = 0;
  return w;
}

std::vector<std::int32_t> bench_checked_tokens(const kernel::AttentionMetadata& md) {
  std::vector<std::int32_t> tokens;
  for (int s = 0; s < md.num_seqs && tokens.size() < 4; ++s)
    tokens.push_back(md.query_start_loc[static_cast<std::size_t>(s) + 1] - 1);
  return tokens;
}

std::string bench_case_shape(const BenchCase& c, kernel::ScalarType cache_type) {
  const WorkloadSpec& w = c.workload;
  return fmt::format("{} × {} tokens{}, {}/{} heads, d={}, {} KV {}, block {}", w.sequences.size(),
                     w.sequences.front().seq_len, c.decode ? "" : " (causal)", w.num_heads, w.num_kv_heads,
                     w.head_size, kernel::to_string(cache_type), w.layout == CacheLayout::nhd ? "NHD" : "HND",
                     w.block_size);
}

BenchResult run_bench_case(const BenchCase& c, const ImplFactory& make_impl, const Ceilings& ceilings,
                           const std::string& isa, int repeats) {
  PagedWorkload w(c.workload);
  const kernel::LayerParams p = layer_params_for(c.workload);
  const auto impl = make_impl(p);
  const kernel::AttentionMetadata md = w.metadata();

  impl->forward(w.query(), w.cache(), md, w.output());  // warm-up (and the checked run)
  const std::vector<std::int32_t> tokens = bench_checked_tokens(md);
  const auto want = kernel::reference::attend(p, w.query(), w.cache(), md, tokens);
  // The tolerance of the plan the forward ran (whether it multiplies fp8 queries).
  const auto plan = impl->plan(md, w.cache(), w.query().dtype, kernel::Stream{});
  const Comparison cmp = compare_with_reference(w.output(), tokens, want, tolerance_for(*plan));

  const ComputePeak peak = compute_peak(ceilings, isa);
  std::unique_ptr<ReadBandwidthProbe> read_probe;
  if (c.decode) read_probe = std::make_unique<ReadBandwidthProbe>(std::size_t{512} << 20, ceilings.threads);
  auto probe = [&] {
    if (c.decode) return read_probe->pass();
    return peak.bf16 ? measure_bf16_peak(ceilings.threads, 1) : measure_fp32_peak(ceilings.threads, 1);
  };
  const double work = c.decode ? static_cast<double>(w.kv_bytes_read()) : w.attention_flops(true);
  std::vector<double> times, ceilings_seen, ratios;
  double before = probe();
  for (int r = 0; r < std::max(1, repeats); ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    impl->forward(w.query(), w.cache(), md, w.output());
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double after = probe();
    const double ceiling = 0.5 * (before + after);
    times.push_back(t);
    ceilings_seen.push_back(ceiling);
    ratios.push_back(work / t / 1e9 / ceiling);
    before = after;
  }

  BenchResult r;
  r.name = c.name;
  r.decode = c.decode;
  r.seconds = median(times);
  r.target_pct = c.target_pct;
  r.check_passed = cmp.passed();
  r.shape = bench_case_shape(c, w.cache().key.dtype);
  r.figure = work / r.seconds / 1e9;
  r.ceiling = median(ceilings_seen);
  r.ceiling_name = c.decode ? "read bandwidth" : fmt::format("{} peak", peak.name);
  r.pct = 100.0 * median(ratios);
  return r;
}

}  // namespace attnsel::runtime
