// `attnsel bench` on a GPU: the GPU cases, run on device copies of the synthetic
// workload, timed with CUDA events, next to the device read bandwidth measured around
// each pass.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "kernels/device/cuda/device_memory.hpp"
#include "kernels/attention/reference.hpp"
#include "runtime/accuracy.hpp"
#include "runtime/bench_job.hpp"
#include "runtime/device_ceilings.hpp"
#include "runtime/median.hpp"
#include "runtime/workload_device.hpp"

namespace attnsel::runtime {

std::vector<BenchCase> standard_gpu_bench_cases(const WorkloadShape& shape, double scale) {
  auto base = [&](int heads, int kv_heads) { return bench_workload(shape, heads, kv_heads); };
  auto scaled = [&](int n) { return std::max(16, static_cast<int>(std::lround(n * scale))); };
  std::vector<BenchCase> cases;
  {
    BenchCase c{"decode-batch", base(32, 8), true, 0.0, 3600.0};
    for (int i = 0; i < 64; ++i) c.workload.sequences.push_back({scaled(4096), 1});
    cases.push_back(std::move(c));
  }
  {
    BenchCase c{"decode-long", base(32, 8), true, 0.0, 2700.0};
    c.workload.sequences.push_back({scaled(32768), 1});
    cases.push_back(std::move(c));
  }
  {
    BenchCase c{"prefill", base(16, 16), false, 0.0, 360000.0};
    const int n = scaled(16384);
    for (int i = 0; i < 2; ++i) c.workload.sequences.push_back({n, n});
    cases.push_back(std::move(c));
  }
  return cases;
}

BenchResult run_device_bench_case(const BenchCase& c, const ImplFactory& make_impl, int repeats) {
  using namespace kernel::cuda;
  DeviceReadProbe probe;  // first: throws with the reason when there is no usable GPU
  PagedWorkload w(c.workload);
  const kernel::LayerParams p = layer_params_for(c.workload);
  const auto impl = make_impl(p);
  const kernel::AttentionMetadata md = w.metadata();
  const kernel::KVCacheView host_cache = w.cache();
  DeviceTensor q = to_device(w.query()), k = to_device(host_cache.key), v = to_device(host_cache.value);
  DeviceTensor o = device_like(w.output());
  const DeviceTensor new_k = to_device(w.new_keys()), new_v = to_device(w.new_values());
  o.buffer.fill_bytes(0xFF);  // NaN: an unwritten output fails the check

  // The step API: one plan (built once, as an engine builds it once per step) and its
  // execute, which is what every layer of a step costs; forward() (a plan update and an
  // execute) is timed beside it.
  const kernel::KVCacheView dev_cache{k.view, v.view};
  const auto plan = impl->plan(md, dev_cache, q.view.dtype, kernel::Stream{});

  impl->forward(q.view, dev_cache, md, o.view);  // warm-up (and the checked run)
  copy_to_host(o, w.output());
  const std::vector<std::int32_t> tokens = bench_checked_tokens(md);
  const auto want = kernel::reference::attend(p, w.query(), host_cache, md, tokens);
  const Comparison cmp = compare_with_reference(w.output(), tokens, want, tolerance_for(*plan));
  auto forward = [&] { impl->forward(q.view, dev_cache, md, o.view); };
  auto kernels = [&] { impl->execute(*plan, q.view, dev_cache, o.view, kernel::Stream{}); };
  // A layer as `attnsel run` issues it: the step's new keys and values written and attended
  // over in one execute (it rewrites the new tokens' slots; the check above is done).
  const kernel::NewKeysValues new_kv{new_k.view, new_v.view};
  auto append = [&] { impl->execute(*plan, q.view, new_kv, dev_cache, o.view, kernel::Stream{}); };
  const double work = c.decode ? static_cast<double>(w.kv_bytes_read()) : w.attention_flops(true);
  std::vector<double> times, forward_times, forward_behind_times, append_times, ceilings_seen, ratios;
  EventTimer timer;
  // Every pass starts with the L2 cache evicted. The kernels are timed as attnsel_cuda_bench
  // and the PyTorch anchors time them: the eviction pass still running when they are
  // launched, so the host's launch cost overlaps it instead of idling the GPU inside the
  // timed region. forward() is timed both ways: from an idle device (the eviction waited
  // for, so its planning is part of its time) and issued behind the eviction, as an engine
  // issues it behind the layer before (its planning overlaps that work).
  auto timed = [&](const auto& pass, bool overlap_launch) {
    probe.evict_async();
    if (!overlap_launch) synchronize("attnsel bench: L2 eviction");
    timer.start();
    pass();
    return timer.stop() * 1e-3;
  };
  // Each decode pass sits between two read probes, which also evict the L2 cache.
  double before = c.decode ? probe.measure() : 0.0;
  for (int r = 0; r < std::max(1, repeats); ++r) {
    const double t = timed(kernels, true);
    times.push_back(t);
    if (c.decode) {
      const double after = probe.measure();
      const double ceiling = 0.5 * (before + after);
      ceilings_seen.push_back(ceiling);
      ratios.push_back(work / t / 1e9 / ceiling);
    }
    forward_times.push_back(timed(forward, false));
    forward_behind_times.push_back(timed(forward, true));
    if (md.slot_mapping.size() >= static_cast<std::size_t>(md.num_actual_tokens)) append_times.push_back(timed(append, true));
    if (c.decode) before = probe.measure();
  }
  // Host costs, with the clock, each from an idle device: one execute (checks and
  // launches), one plan update (checks, work split, staging and the upload's issue).
  std::vector<double> execute_us, plan_us;
  for (int r = 0; r < 50; ++r) {
    synchronize("attnsel bench: host timing");
    const auto t0 = std::chrono::steady_clock::now();
    kernels();
    const auto t1 = std::chrono::steady_clock::now();
    synchronize("attnsel bench: host timing");
    const auto t2 = std::chrono::steady_clock::now();
    impl->update(*plan, md, kernel::Stream{});
    const auto t3 = std::chrono::steady_clock::now();
    execute_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    plan_us.push_back(std::chrono::duration<double, std::micro>(t3 - t2).count());
  }
  synchronize("attnsel bench: host timing");

  BenchResult r;
  r.name = c.name;
  r.decode = c.decode;
  r.device = device_label(kernel::DeviceKind::cuda, q.view.device_index);
  r.seconds = median(times);
  r.forward_seconds = median(forward_times);
  r.forward_behind_seconds = median(forward_behind_times);
  r.append_seconds = median(append_times);
  r.timed = "kernels of one plan";
  r.execute_host_us = median(execute_us);
  r.plan_host_us = median(plan_us);
  r.target_pct = c.target_pct;
  r.target_figure = c.target_figure;
  r.check_passed = cmp.passed();
  r.shape = bench_case_shape(c, host_cache.key.dtype);
  r.figure = work / r.seconds / 1e9;
  r.ceiling = median(ceilings_seen);
  r.ceiling_name = c.decode ? "device read bandwidth" : "no GPU compute probe";
  r.pct = c.decode ? 100.0 * median(ratios) : 0.0;
  return r;
}

}  // namespace attnsel::runtime
