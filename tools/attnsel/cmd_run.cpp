// `attnsel run`: the main job. Selects the backend for the host as `select` does, builds a
// synthetic paged workload for a model shape, runs prefill then decode steps through the
// backend's kernel, checks a sample against the reference, and reports the throughput
// next to the machine's ceilings measured in the same run. For attnsel's CUDA kernels the
// workload lives in GPU memory, the steps are timed with CUDA events, and the ceiling is
// the GPU's read bandwidth (no CPU ceilings are claimed for a GPU run).
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "cmd_run_dcp.hpp"
#include "commands.hpp"
#include "common_options.hpp"
#include "json_output.hpp"
#include "progress_bar.hpp"
#include "runtime/ceilings.hpp"
#include "runtime/device_ceilings.hpp"
#include "runtime/run_job.hpp"
#include "runtime/workload_device.hpp"
#include "attnsel/kernel.hpp"
#include "workload_options.hpp"

namespace attnsel::cli {

namespace {

struct RunOptions {
  PlatformOptions platform;
  BackendChoiceOptions backend;
  ModelOptions model;
  OutputOptions output;
  int batch = 4;
  int context = 1024;
  int new_tokens = 1;
  int decode_steps = 32;
  bool check = true;
  bool ceilings = true;
  bool progress = true;
  bool cuda_graphs = false;
  bool sync_steps = false;
  DcpOptions dcp;
};

std::string bytes_label(double b) {
  if (b >= 1 << 30) return fmt::format("{:.1f} GiB", b / (1 << 30));
  return fmt::format("{:.0f} MiB", b / (1 << 20));
}

std::string check_line(const runtime::RunReport& r) {
  if (!r.check_prefill.ran && !r.check_decode.ran) return "skipped (--no-check)";
  int tokens = 0;
  double worst = 0.0;
  std::string failures, fp8_queries;
  for (const runtime::CheckResult* c : {&r.check_prefill, &r.check_decode}) {
    if (!c->ran) continue;
    tokens += c->tokens;
    worst = std::max(worst, c->comparison.worst_ratio);
    if (c->fp8_queries)
      fp8_queries = fmt::format(" ({} multiplied fp8 queries: tolerance {:g} + {:g}·|x|)", c->step, c->tolerance.atol,
                                c->tolerance.rtol);
    for (const runtime::Mismatch& m : c->comparison.first_failures)
      failures += fmt::format("\n             {} token {} head {} dim {}: got {:.6g}, reference {:.6g}", c->step, m.token,
                              m.head, m.dim, m.got, m.want);
  }
  const int heads = r.spec.num_heads, d = r.spec.head_size;
  return fmt::format("{} — {} sampled tokens × {} heads × {} dims vs the double-precision reference; worst error "
                     "{:.2f} of the tolerance{}{}",
                     r.check_passed() ? "passed" : "FAILED", tokens, heads, d, worst, fp8_queries, failures);
}

nlohmann::json phase_json(const runtime::PhaseStats& p) {
  return {{"steps", p.steps},
          {"seconds", p.seconds},
          {"tokens", p.tokens},
          {"tokens_per_s", p.tokens_per_s()},
          {"kv_bytes", p.kv_bytes},
          {"gb_per_s", p.gbps()},
          {"flops", p.flops},
          {"gflop_per_s", p.gflops()},
          {"plan_us_per_step", p.plan_us_per_step()},
          {"host_us_per_layer", p.host_us_per_layer()},
          {"step_us", p.steps ? p.seconds / p.steps * 1e6 : 0.0},
          {"layer_us", p.layers ? p.seconds / static_cast<double>(p.layers) * 1e6 : 0.0}};
}

nlohmann::json check_json(const runtime::CheckResult& c) {
  if (!c.ran) return nullptr;
  return {{"tokens", c.tokens},
          {"passed", c.comparison.passed()},
          {"worst_ratio", c.comparison.worst_ratio},
          {"max_abs_error", c.comparison.max_abs_error},
          {"tolerance", {{"atol", c.tolerance.atol}, {"rtol", c.tolerance.rtol}}},
          {"fp8_queries", c.fp8_queries}};
}

int run_run(RunOptions o) {
  o.dcp.require_dcp_for_its_options();
  if (o.dcp.enabled())
    return run_dcp(o.dcp, {o.platform, o.backend, o.model, o.output, o.batch, o.context, o.new_tokens, o.decode_steps,
                           o.check});
  const std::string model_line = o.model.apply_model();
  const ChosenBackend chosen = as_usage([&] { return choose_backend(o.platform, o.backend, o.model); });
  runtime::RunSpec spec;
  spec.shape() = chosen.shape;
  spec.num_layers = o.model.num_layers;
  spec.batch = o.batch;
  spec.context = o.context;
  spec.new_tokens = o.new_tokens;
  spec.decode_steps = o.decode_steps;
  spec.check = o.check;
  spec.device = chosen.device;
  spec.cuda_graphs = o.cuda_graphs;
  spec.sync_steps = o.sync_steps;
  const bool gpu = spec.device == kernel::DeviceKind::cuda;
  if (o.cuda_graphs && chosen.kernel.graph_support == kernel::GraphSupport::never)
    throw UsageError(fmt::format("--cuda-graphs: {}'s kernel cannot be captured in a CUDA graph (graph support: {}{})",
                                 chosen.selection.backend, kernel::to_string(chosen.kernel.graph_support),
                                 gpu ? "" : "; it runs on the host"));
  // Memory is sized before any is taken: a run that cannot fit says so, and what to lower.
  if (const runtime::MemoryNeed need = as_usage([&] { return runtime::memory_need(spec); }); !need.shortfall.empty())
    throw UsageError(need.shortfall, "MemoryError");
  // Shapes the kernel cannot run are usage errors (e.g. a head size the backend lacks).
  as_usage([&] { (void)chosen.make_impl(runtime::layer_params(spec)); });

  const Selection& s = chosen.selection;
  if (!o.output.json) {
    fmt::print("Platform:  {}\n", chosen.platform->describe());
    fmt::print("Backend:   {} ({}){}  kernel: {}\n", s.backend, s.class_path,
               s.priority ? fmt::format(", priority {}", *s.priority) : std::string(), chosen.isa);
    if (!model_line.empty()) fmt::print("Config:    {}\n", model_line);
    fmt::print("Model:     {} query / {} KV heads, head size {}, {} layers; {}, kv-cache {}, block {}, {} layout\n",
               spec.num_heads, spec.num_kv_heads, spec.head_size, spec.num_layers, o.model.dtype,
               cache_dtype_name(spec.kv_cache_dtype), spec.block_size, layout_label(spec.layout));
    fmt::print("Workload:  batch {} × {}-token context, then {} decode steps × {} new token{}{}\n", spec.batch,
               spec.context, spec.decode_steps, spec.new_tokens, spec.new_tokens == 1 ? "" : "s",
               spec.cuda_graphs ? ", decode step captured in a CUDA graph" : "");
    std::fflush(stdout);
  }
  runtime::Ceilings ceil;
  runtime::DeviceCeilings gpu_ceil;
  if (o.ceilings && gpu) gpu_ceil = runtime::measure_device_ceilings();
  else if (o.ceilings) ceil = runtime::measure_ceilings(std::size_t{512} << 20);

  ProgressBar bar(o.progress && !o.output.json);
  const runtime::RunReport r =
      runtime::run_job(spec, chosen.make_impl, [&](std::string_view phase, std::int64_t done, std::int64_t total) {
        bar.update(phase, done, total);
      });
  bar.finish();

  const bool bf16_peak = chosen.isa.find("BF16") != std::string::npos && ceil.bf16_gflops > 0;
  const double compute_peak = bf16_peak ? ceil.bf16_gflops : ceil.fp32_gflops;
  const double read_gbps = gpu ? gpu_ceil.read_gbps : ceil.read_gbps;
  nlohmann::json ceilings_json = nullptr;
  if (o.ceilings && gpu)
    ceilings_json = {{"device", gpu_ceil.device}, {"read_gb_per_s", gpu_ceil.read_gbps}};
  else if (o.ceilings)
    ceilings_json = {{"read_gb_per_s", ceil.read_gbps},
                     {"fp32_gflop_per_s", ceil.fp32_gflops},
                     {"bf16_gflop_per_s", ceil.bf16_gflops},
                     {"threads", ceil.threads}};
  if (o.output.json) {
    print_json({{"platform", chosen.platform->spec()},
                {"backend", s.backend},
                {"class", s.class_path},
                {"isa", chosen.isa},
                {"device", runtime::device_label(spec.device)},
                {"kernel",
                 {{"graph_support", kernel::to_string(chosen.kernel.graph_support)},
                  {"cuda_graphs", spec.cuda_graphs},
                  {"graph_nodes", r.graph_nodes},
                  {"decode_plan", r.decode_plan}}},
                {"model",
                 {{"num_heads", spec.num_heads},
                  {"num_kv_heads", spec.num_kv_heads},
                  {"head_size", spec.head_size},
                  {"num_layers", spec.num_layers},
                  {"dtype", o.model.dtype},
                  {"kv_cache_dtype", std::string(cache_dtype_name(spec.kv_cache_dtype))},
                  {"block_size", spec.block_size},
                  {"layout", layout_label(spec.layout)}}},
                {"workload",
                 {{"batch", spec.batch},
                  {"context", spec.context},
                  {"decode_steps", spec.decode_steps},
                  {"sync_steps", spec.sync_steps},
                  {"new_tokens", spec.new_tokens},
                  {"distinct_caches", r.distinct_caches},
                  {"cache_bytes", r.cache_bytes}}},
                {"ceilings", ceilings_json},
                {"check", {{"prefill", check_json(r.check_prefill)}, {"decode", check_json(r.check_decode)},
                           {"passed", r.check_passed()}}},
                {"prefill", phase_json(r.prefill)},
                {"decode", phase_json(r.decode)},
                {"decode_warmup", phase_json(r.decode_warmup)}});
    return r.check_passed() ? kExitChosen : kExitCheckFailed;
  }
  fmt::print("Caches:    {} distinct layer cache{} ({}) in {} memory{}\n", r.distinct_caches,
             r.distinct_caches == 1 ? "" : "s", bytes_label(static_cast<double>(r.cache_bytes)),
             gpu ? runtime::device_label(spec.device) : "host",
             r.distinct_caches < spec.num_layers ? ", shared round-robin by the layers" : "");
  if (o.ceilings && gpu)
    fmt::print("Ceilings:  device read {:.0f} GB/s on {}  (measured now; no GPU compute probe, so prefill has no "
               "fraction)\n",
               gpu_ceil.read_gbps, gpu_ceil.device);
  else if (o.ceilings)
    fmt::print("Ceilings:  {}\n", runtime::describe(ceil));
  fmt::print("Check:     {}\n", check_line(r));
  if (r.prefill.steps > 0)
    fmt::print("Prefill:   {:.0f} tokens in {:.2f} s: {:.0f} tokens/s, {:.1f} GFLOP/s ({:.3f} TFLOP/s){}\n",
               r.prefill.tokens, r.prefill.seconds, r.prefill.tokens_per_s(), r.prefill.gflops(),
               r.prefill.gflops() / 1000,
               o.ceilings && !gpu ? fmt::format(" = {:.0f} % of the {} peak", 100 * r.prefill.gflops() / compute_peak,
                                                bf16_peak ? "bf16 dot-product" : "fp32 FMA")
                                  : "");
  if (r.decode_warmup.steps > 0)
    fmt::print("Warm-up:   the first decode step, {:.1f} ms (decode kernels loaded, the plan sized for decode{}); "
               "not in the decode rate\n",
               r.decode_warmup.seconds * 1e3, r.graph_nodes ? ", the step captured" : "");
  if (r.decode.steps > 0)
    fmt::print("Steps:     decode step {:.1f} us ({:.2f} us a layer): plan {:.1f} us a step{}, host {:.2f} us a "
               "layer{}; {}\n",
               r.decode.seconds / r.decode.steps * 1e6, r.decode.seconds / static_cast<double>(r.decode.layers) * 1e6,
               r.decode.plan_us_per_step(),
               // Pipelined steps: the host runs ahead until the staging buffer of the step two behind is free.
               spec.sync_steps || !gpu ? "" : " (with the host's wait for the step two behind)",
               r.decode.host_us_per_layer(),
               r.graph_nodes ? fmt::format(", a graph of {} nodes replayed", r.graph_nodes) : std::string(),
               r.decode_plan);
  if (r.decode.steps > 0)
    fmt::print("Decode:    {:.0f} tokens in {:.2f} s: {:.0f} tokens/s, {:.1f} GB/s of K/V{}\n", r.decode.tokens,
               r.decode.seconds, r.decode.tokens_per_s(), r.decode.gbps(),
               o.ceilings ? fmt::format(" = {:.0f} % of the {}read bandwidth", 100 * r.decode.gbps() / read_gbps,
                                        gpu ? "device " : "")
                          : "");
  return r.check_passed() ? kExitChosen : kExitCheckFailed;
}

}  // namespace

void add_run_command(CLI::App& app, CommandContext& context) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* sub = app.add_subcommand(
      "run", "run a synthetic paged-attention workload (prefill, then decode) on the backend chosen for this host");
  o->platform.add_to(*sub);
  o->backend.add_to(*sub);
  o->model.add_to(*sub, true);
  o->output.add_to(*sub);
  sub->add_option("--batch", o->batch, "sequences in the batch")->capture_default_str()->transform(PositiveInteger);
  sub->add_option("--context", o->context, "prompt tokens per sequence (prefilled)")
      ->capture_default_str()
      ->transform(NonNegativeInteger);
  sub->add_option("--new-tokens", o->new_tokens, "query tokens per sequence in each decode step")
      ->capture_default_str()
      ->transform(PositiveInteger);
  sub->add_option("--decode-steps", o->decode_steps, "decode steps after the prefill")
      ->capture_default_str()
      ->transform(NonNegativeInteger);
  sub->add_flag("--check,!--no-check", o->check,
                "compare a sample of the outputs with the double-precision reference (default: on)");
  sub->add_flag("--ceilings,!--no-ceilings", o->ceilings,
                "measure the read bandwidth and compute peaks first, to report fractions (default: on)");
  sub->add_flag("!--no-progress", o->progress, "no progress bar");
  sub->add_flag("--cuda-graphs", o->cuda_graphs,
                "capture the decode step (every layer) in a CUDA graph once and replay it (kernels with graph support)");
  sub->add_flag("--sync-steps", o->sync_steps,
                "wait for each decode step before preparing the next (default: the next step's plan update and "
                "launches overlap the running step, as with an engine's asynchronous scheduling)");
  o->dcp.add_to(*sub);
  sub->callback([o, &context] { context.run = [o] { return run_command(o->output.json, [o] { return run_run(*o); }); }; });
}

}  // namespace attnsel::cli
