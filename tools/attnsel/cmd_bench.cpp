// `attnsel bench`: the attention benchmarks on the backend chosen for this host, each next
// to the ceiling measured in the same run, with its target and the distance to it. On the
// CPU: the CPU cases (decode batch 8 × 8192, one 32k-token sequence, a causal 4096-token
// prefill) against read bandwidth and compute peaks. For attnsel's CUDA kernels: the GPU
// cases on device memory (decode 64 × 4096, one 32k sequence, causal prefill 2 × 16k)
// against the device read bandwidth and their absolute targets on an H200. With --model of
// an MLA model: its layer's cases on the host (cmd_bench_mla.hpp).
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "cmd_bench_mla.hpp"
#include "commands.hpp"
#include "common_options.hpp"
#include "json_output.hpp"
#include "run_report.hpp"
#include "runtime/bench_job.hpp"
#include "runtime/ceilings.hpp"
#include "runtime/device_ceilings.hpp"
#include "runtime/workload_device.hpp"
#include "workload_options.hpp"

namespace attnsel::cli {

namespace {

struct BenchOptions {
  PlatformOptions platform;
  BackendChoiceOptions backend;
  ModelOptions model;
  OutputOptions output;
  std::vector<std::string> cases;
  int repeats = 5;
  double scale = 1.0;
  int block_size = 16;  // the targets' block size
  CLI::Option* block_size_opt = nullptr;
  int batch = 0;        // with context: one decode case of this shape instead of the standard ones
  int context = 0;
};

int run_bench(const BenchOptions& o) {
  if (o.model.model) {
    MlaBenchRequest r{o.platform, o.backend, o.model, o.output, {}, o.cases, o.repeats, o.scale,
                      o.block_size_opt->count() > 0 ? o.block_size : 0, o.batch, o.context};
    r.model_line = r.model.apply_model();
    if (!r.model.mla_model)
      throw UsageError(fmt::format("--model: {} has standard attention; bench's standard cases have a fixed shape "
                                   "(32/8 heads, head size 128), so --model names an MLA model (DeepSeek-V2/V3, "
                                   "Kimi-K2) whose layer the MLA cases run",
                                   *o.model.model));
    return run_mla_bench(r);
  }
  if (o.model.tensor_parallel_size != 1) throw UsageError("--tensor-parallel-size needs --model (an MLA model)");
  ModelOptions m = o.model;
  m.shape.num_heads = 32;  // the cases fix the shape; only dtype, kv-cache dtype, layout and block size vary
  m.shape.num_kv_heads = 8;
  m.shape.head_size = 128;
  m.block_size = o.block_size;
  const ChosenBackend chosen = as_usage([&] { return choose_backend(o.platform, o.backend, m); });
  const bool gpu = chosen.device == kernel::DeviceKind::cuda;
  std::vector<runtime::BenchCase> cases = gpu ? runtime::standard_gpu_bench_cases(chosen.shape, o.scale)
                                              : runtime::standard_bench_cases(chosen.shape, o.scale);
  if (o.batch > 0 || o.context > 0) {
    if (o.batch <= 0 || o.context <= 0)
      throw UsageError("--batch and --context go together: one decode case of batch × context tokens");
    cases = {runtime::shape_decode_case(chosen.shape, o.batch, o.context)};
  }
  if (!o.cases.empty())
    std::erase_if(cases, [&](const runtime::BenchCase& c) {
      return std::find(o.cases.begin(), o.cases.end(), c.name) == o.cases.end();
    });

  // An fp8 cache is timed against the model-dtype cache ("auto") case by case in the same
  // run: the time ratio is what halving the bytes bought.
  const bool fp8 = cache_dtype_name(m.shape.kv_cache_dtype).starts_with("fp8");
  // Each anchor is its case with the cache dtype swapped (standard cases and --batch/--context alike).
  std::vector<runtime::BenchCase> anchors;
  if (fp8)
    for (runtime::BenchCase a : cases) {
      a.workload.kv_cache_dtype = CacheDType::auto_;
      anchors.push_back(std::move(a));
    }

  if (!o.output.json) {
    fmt::print("Platform:  {}\n", chosen.platform->describe());
    fmt::print("Backend:   {} ({})  kernel: {}\n", chosen.selection.backend, chosen.selection.class_path, chosen.isa);
    std::fflush(stdout);
  }
  runtime::Ceilings ceil;
  runtime::DeviceCeilings gpu_ceil;
  if (gpu) gpu_ceil = runtime::measure_device_ceilings();
  else ceil = runtime::measure_ceilings(std::size_t{1} << 30);
  if (!o.output.json) {
    if (gpu)
      fmt::print("Ceilings:  device read {:.0f} GB/s on {}  (measured now, and again around each decode pass)\n",
                 gpu_ceil.read_gbps, gpu_ceil.device);
    else
      fmt::print("Ceilings:  {}\n", runtime::describe(ceil));
    fmt::print("{:<13} {:>10} {:>14} {:>7} {:>7} {:>9}  {}\n", "case", "median", "achieved", "of", "target", "to go",
               "shape");
    std::fflush(stdout);
  }
  nlohmann::json results = nlohmann::json::array();
  bool all_checked = true;
  for (const runtime::BenchCase& c : cases) {
    const runtime::BenchResult r = gpu ? runtime::run_device_bench_case(c, chosen.make_impl, o.repeats)
                                       : runtime::run_bench_case(c, chosen.make_impl, ceil, chosen.isa, o.repeats);
    all_checked = all_checked && r.check_passed;
    const std::string unit = r.decode ? "GB/s" : "GFLOP/s";
    runtime::BenchResult anchor;
    if (fp8)
      for (const runtime::BenchCase& a : anchors)
        if (a.name == c.name) {
          anchor = gpu ? runtime::run_device_bench_case(a, chosen.make_impl, o.repeats)
                       : runtime::run_bench_case(a, chosen.make_impl, ceil, chosen.isa, o.repeats);
          all_checked = all_checked && anchor.check_passed;
        }
    const double time_ratio = anchor.seconds > 0 ? r.seconds / anchor.seconds : 0.0;
    if (o.output.json) {
      results.push_back({{"case", r.name},
                         {"shape", r.shape},
                         {"seconds", r.seconds},
                         {"figure", r.figure},
                         {"unit", unit},
                         {"ceiling", r.ceiling},
                         {"ceiling_name", r.ceiling_name},
                         {"pct_of_ceiling", r.pct},
                         {"target_pct", r.target_pct},
                         {"target_figure", r.target_figure},
                         {"timed", r.timed},
                         {"forward_seconds", r.forward_seconds},
                         {"forward_behind_seconds", r.forward_behind_seconds},
                         {"append_seconds", r.append_seconds},
                         {"execute_host_us", r.execute_host_us},
                         {"plan_host_us", r.plan_host_us},
                         {"device", r.device},
                         {"check_passed", r.check_passed}});
      if (time_ratio > 0) {
        results.back()["anchor_kv_cache_dtype"] = "auto";
        results.back()["anchor_seconds"] = anchor.seconds;
        results.back()["anchor_figure"] = anchor.figure;
        results.back()["time_vs_anchor"] = time_ratio;
      }
    } else if (r.device != "cpu") {
      // GPU cases: an absolute target; the fraction of the measured ceiling where there is one.
      const double to_go = r.target_figure - r.figure;
      fmt::print("{:<13} {:>8.3f}ms {:>8.0f} {:<7} {:>7} {:>7} {:>9}  {}; {}; one layer's execute {:.1f} us on the "
                 "host, one step's plan {:.1f} us; forward with planning {:.3f} ms from an idle device, {:.3f} ms issued "
                 "behind running work; execute appending the new keys and values {:.3f} ms{}\n",
                 r.name, r.seconds * 1e3, r.figure, unit, r.ceiling > 0 ? fmt::format("{:.0f} %", r.pct) : "-",
                 r.target_figure > 0 ? fmt::format("{:.0f}", r.target_figure) : "-",
                 r.target_figure <= 0 ? "-" : to_go > 0 ? fmt::format("{:.0f}", to_go) : "met", r.shape, r.timed,
                 r.execute_host_us, r.plan_host_us, r.forward_seconds * 1e3, r.forward_behind_seconds * 1e3,
                 r.append_seconds * 1e3,
                 r.check_passed ? "" : "  CHECK FAILED");
    } else {
      const double to_go = r.target_pct - r.pct;
      fmt::print("{:<13} {:>8.1f}ms {:>8.1f} {:<7} {:>5.0f} % {:>5.0f} % {:>9}  {} (of the {}){}\n", r.name,
                 r.seconds * 1e3, r.figure, unit, r.pct, r.target_pct,
                 to_go > 0 ? fmt::format("{:.0f} pts", to_go) : "met", r.shape, r.ceiling_name,
                 r.check_passed ? "" : "  CHECK FAILED");
      std::fflush(stdout);
    }
    if (time_ratio > 0 && !o.output.json) {
      fmt::print("{:<13} {:>8.{}f}ms {:>8.{}f} {:<7}  fp8 takes {:.2f}x the time of the {} cache, measured just after{}\n",
                 "  16-bit", anchor.seconds * 1e3, gpu ? 3 : 1, anchor.figure, gpu ? 0 : 1, unit, time_ratio,
                 kernel::to_string(chosen.shape.dtype), anchor.check_passed ? "" : "  CHECK FAILED");
      std::fflush(stdout);
    }
  }
  if (o.output.json)
    print_json({{"platform", chosen.platform->spec()},
                {"backend", chosen.selection.backend},
                {"isa", chosen.isa},
                {"device", runtime::device_label(chosen.device)},
                {"ceilings",
                 gpu ? nlohmann::json{{"device", gpu_ceil.device}, {"read_gb_per_s", gpu_ceil.read_gbps}}
                     : ceilings_json(ceil)},
                {"results", results}});
  return all_checked ? kExitChosen : kExitCheckFailed;
}

}  // namespace

void add_bench_command(CLI::App& app, CommandContext& context) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* sub = app.add_subcommand(
      "bench", "benchmark the host's attention kernel against the machine's measured ceilings and its targets");
  o->platform.add_to(*sub);
  o->backend.add_to(*sub);
  o->model.add_model_options(*sub, "an MLA model's config.json (DeepSeek-V2/V3, Kimi-K2): run the MLA cases "
                                   "(mla-decode, mla-prefill) on its layer, at its heads per rank");
  o->model.add_dtype_option(*sub);
  add_cache_dtype_option(*sub, "--kv-cache-dtype", [o](CacheDType d) { o->model.shape.kv_cache_dtype = d; },
                         "kv-cache dtype")
      ->default_str("auto");
  sub->add_option("--layout", o->model.layout, "KV-cache layout: NHD or HND (default: the backend's)");
  o->block_size_opt =
      sub->add_option("--block-size", o->block_size, "KV-cache block size in tokens (the targets are defined at 16)")
          ->capture_default_str()
          ->transform(PositiveInteger);
  sub->add_option("--case", o->cases, "run only these cases")
      ->check(CLI::IsMember({"decode-batch", "decode-long", "prefill", "mla-decode", "mla-prefill"}));
  sub->add_option("--batch", o->batch, "with --context: one decode case of this many sequences instead of the "
                                       "standard cases (the kernel-only anchor for `attnsel run` on that shape)")
      ->transform(PositiveInteger);
  sub->add_option("--context", o->context, "with --batch: tokens per sequence of that decode case")
      ->transform(PositiveInteger);
  sub->add_option("--repeats", o->repeats, "timed passes per case (the median is reported)")
      ->capture_default_str()
      ->transform(PositiveInteger);
  sub->add_option("--scale", o->scale, "shrink the contexts by this factor (targets are defined at 1)")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 1.0));
  o->output.add_to(*sub);
  sub->callback([o, &context] { context.run = [o] { return run_command(o->output.json, [o] { return run_bench(*o); }); }; });
}

}  // namespace attnsel::cli
