// `attnsel run`: the main job. Selects the backend for the host as `select` does, builds a
// synthetic paged workload for a model shape, runs prefill then decode steps through the
// backend's kernel, checks a sample against the reference, and reports the throughput
// next to the machine's ceilings measured in the same run. For attnsel's CUDA kernels the
// workload lives in GPU memory, the steps are timed with CUDA events, and the ceiling is
// the GPU's read bandwidth (no CPU ceilings are claimed for a GPU run). An MLA model runs
// through cmd_run_mla.hpp, --dcp through cmd_run_dcp.hpp.
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "attnsel/kernel.hpp"
#include "cmd_run_dcp.hpp"
#include "cmd_run_mla.hpp"
#include "commands.hpp"
#include "common_options.hpp"
#include "json_output.hpp"
#include "progress_bar.hpp"
#include "run_report.hpp"
#include "run_request.hpp"
#include "runtime/ceilings.hpp"
#include "runtime/device_ceilings.hpp"
#include "runtime/run_job.hpp"
#include "runtime/workload_device.hpp"
#include "workload_options.hpp"

namespace attnsel::cli {

namespace {

struct RunOptions {
  RunRequest run;
  DcpOptions dcp;
};

// The ceilings measured before the run: the host's, or the GPU's for a device workload.
struct MeasuredCeilings {
  bool measured = false;
  bool gpu = false;
  runtime::Ceilings host;
  runtime::DeviceCeilings device;
  double read_gbps() const { return gpu ? device.read_gbps : host.read_gbps; }
};

MeasuredCeilings measure(bool wanted, bool gpu) {
  MeasuredCeilings c;
  c.measured = wanted;
  c.gpu = gpu;
  if (wanted && gpu) c.device = runtime::measure_device_ceilings();
  else if (wanted) c.host = runtime::measure_ceilings(std::size_t{512} << 20);
  return c;
}

// The run's spec, refused before anything is allocated when the kernel, the options or the
// memory cannot run it.
runtime::RunSpec run_spec(const RunRequest& o, const ChosenBackend& chosen) {
  runtime::RunSpec spec;
  spec.shape() = chosen.shape;
  spec.steps() = o.steps;
  spec.num_layers = o.model.num_layers;
  spec.device = chosen.device;
  spec.cuda_graphs = o.cuda_graphs;
  spec.sync_steps = o.sync_steps;
  if (o.cuda_graphs && chosen.kernel.graph_support == kernel::GraphSupport::never)
    throw UsageError(fmt::format("--cuda-graphs: {}'s kernel cannot be captured in a CUDA graph (graph support: {}{})",
                                 chosen.selection.backend, kernel::to_string(chosen.kernel.graph_support),
                                 spec.device == kernel::DeviceKind::cuda ? "" : "; it runs on the host"));
  // Memory is sized before any is taken: a run that cannot fit says so, and what to lower.
  if (const runtime::MemoryNeed need = as_usage([&] { return runtime::memory_need(spec); }); !need.shortfall.empty())
    throw UsageError(need.shortfall, "MemoryError");
  // Shapes the kernel cannot run are usage errors (e.g. a head size the backend lacks).
  as_usage([&] { (void)chosen.make_impl(runtime::layer_params_for(spec)); });
  return spec;
}

void print_header(const RunRequest& o, const ChosenBackend& chosen, const runtime::RunSpec& spec,
                  const std::string& model_line) {
  fmt::print("Platform:  {}\n", chosen.platform->describe());
  fmt::print("Backend:   {}\n", backend_line(chosen.selection, chosen.isa));
  if (!model_line.empty()) fmt::print("Config:    {}\n", model_line);
  fmt::print("Model:     {} query / {} KV heads, head size {}, {} layers; {}, kv-cache {}, block {}, {} layout\n",
             spec.num_heads, spec.num_kv_heads, spec.head_size, spec.num_layers, o.model.dtype,
             cache_dtype_name(spec.kv_cache_dtype), spec.block_size, layout_label(spec.layout));
  fmt::print("Workload:  batch {} × {}-token context, then {} decode steps × {} new token{}{}\n", spec.batch,
             spec.context, spec.decode_steps, spec.new_tokens, spec.new_tokens == 1 ? "" : "s",
             spec.cuda_graphs ? ", decode step captured in a CUDA graph" : "");
  std::fflush(stdout);
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

nlohmann::json check_json(const runtime::CheckResult& c) {
  if (!c.ran) return nullptr;
  return {{"tokens", c.tokens},
          {"passed", c.comparison.passed()},
          {"worst_ratio", c.comparison.worst_ratio},
          {"max_abs_error", c.comparison.max_abs_error},
          {"tolerance", {{"atol", c.tolerance.atol}, {"rtol", c.tolerance.rtol}}},
          {"fp8_queries", c.fp8_queries}};
}

nlohmann::ordered_json report_json(const RunRequest& o, const ChosenBackend& chosen, const runtime::RunReport& r,
                           const MeasuredCeilings& ceil) {
  const runtime::RunSpec& spec = r.spec;
  const Selection& s = chosen.selection;
  nlohmann::json ceilings = nullptr;
  if (ceil.measured && ceil.gpu)
    ceilings = {{"device", ceil.device.device}, {"read_gb_per_s", ceil.device.read_gbps}};
  else if (ceil.measured)
    ceilings = ceilings_json(ceil.host);
  return {{"platform", chosen.platform->spec()},
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
          {"ceilings", ceilings},
          {"check",
           {{"prefill", check_json(r.check_prefill)},
            {"decode", check_json(r.check_decode)},
            {"passed", r.check_passed()}}},
          {"prefill", phase_json(r.prefill)},
          {"decode", phase_json(r.decode)},
          {"decode_warmup", phase_json(r.decode_warmup)}};
}

void print_report(const ChosenBackend& chosen, const runtime::RunReport& r, const MeasuredCeilings& ceil) {
  const runtime::RunSpec& spec = r.spec;
  const bool gpu = ceil.gpu;
  fmt::print("Caches:    {} distinct layer cache{} ({}) in {} memory{}\n", r.distinct_caches,
             r.distinct_caches == 1 ? "" : "s", bytes_label(static_cast<double>(r.cache_bytes)),
             gpu ? runtime::device_label(spec.device) : "host",
             r.distinct_caches < spec.num_layers ? ", shared round-robin by the layers" : "");
  if (ceil.measured && gpu)
    fmt::print("Ceilings:  device read {:.0f} GB/s on {}  (measured now; no GPU compute probe, so prefill has no "
               "fraction)\n",
               ceil.device.read_gbps, ceil.device.device);
  else if (ceil.measured)
    fmt::print("Ceilings:  {}\n", runtime::describe(ceil.host));
  fmt::print("Check:     {}\n", check_line(r));
  const runtime::ComputePeak peak = runtime::compute_peak(ceil.host, chosen.isa);
  if (r.prefill.steps > 0)
    fmt::print("Prefill:   {:.0f} tokens in {:.2f} s: {:.0f} tokens/s, {:.1f} GFLOP/s ({:.3f} TFLOP/s){}\n",
               r.prefill.tokens, r.prefill.seconds, r.prefill.tokens_per_s(), r.prefill.gflops(),
               r.prefill.gflops() / 1000,
               ceil.measured && !gpu
                   ? fmt::format(" = {:.0f} % of the {} peak", 100 * r.prefill.gflops() / peak.gflops, peak.name)
                   : "");
  if (r.decode_warmup.steps > 0)
    fmt::print("Warm-up:   the first decode step, {:.1f} ms (decode kernels loaded, the plan sized for decode{}); "
               "not in the decode rate\n",
               r.decode_warmup.seconds * 1e3, r.graph_nodes ? ", the step captured" : "");
  if (r.decode.steps == 0) return;
  fmt::print("Steps:     decode step {:.1f} us ({:.2f} us a layer): plan {:.1f} us a step{}, host {:.2f} us a "
             "layer{}; {}\n",
             r.decode.seconds / r.decode.steps * 1e6, r.decode.seconds / static_cast<double>(r.decode.layers) * 1e6,
             r.decode.plan_us_per_step(),
             // Pipelined steps: the host runs ahead until the staging buffer of the step two behind is free.
             spec.sync_steps || !gpu ? "" : " (with the host's wait for the step two behind)",
             r.decode.host_us_per_layer(),
             r.graph_nodes ? fmt::format(", a graph of {} nodes replayed", r.graph_nodes) : std::string(),
             r.decode_plan);
  fmt::print("Decode:    {:.0f} tokens in {:.2f} s: {:.0f} tokens/s, {:.1f} GB/s of K/V{}\n", r.decode.tokens,
             r.decode.seconds, r.decode.tokens_per_s(), r.decode.gbps(),
             ceil.measured ? fmt::format(" = {:.0f} % of the {}read bandwidth", 100 * r.decode.gbps() / ceil.read_gbps(),
                                         gpu ? "device " : "")
                           : "");
}

// Standard attention: the backend chosen for the model's layer, the job, the report.
int run_standard(const RunRequest& o, const std::string& model_line) {
  const ChosenBackend chosen = as_usage([&] { return choose_backend(o.platform, o.backend, o.model); });
  const runtime::RunSpec spec = run_spec(o, chosen);
  if (!o.output.json) print_header(o, chosen, spec, model_line);
  const MeasuredCeilings ceil = measure(o.ceilings, spec.device == kernel::DeviceKind::cuda);

  ProgressBar bar(o.progress && !o.output.json);
  const runtime::RunReport r = runtime::run_job(spec, chosen.make_impl, bar.callback());
  bar.finish();

  if (o.output.json)
    print_json(report_json(o, chosen, r, ceil));
  else
    print_report(chosen, r, ceil);
  return r.check_passed() ? kExitChosen : kExitCheckFailed;
}

int run_run(RunOptions o) {
  o.dcp.require_dcp_for_its_options();
  if (o.dcp.enabled()) return run_dcp(o.dcp, o.run);
  const std::string model_line = o.run.model.apply_model();
  if (!o.run.model.mla_model) return run_standard(o.run, model_line);
  if (o.run.cuda_graphs)
    throw UsageError("--cuda-graphs: MLA models run on the host here (CPU_MLA), whose work a CUDA graph cannot capture");
  return run_mla(o.run, model_line);
}

}  // namespace

void add_run_command(CLI::App& app, CommandContext& context) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* sub = app.add_subcommand(
      "run", "run a synthetic paged-attention workload (prefill, then decode) on the backend chosen for this host");
  o->run.add_to(*sub);
  o->dcp.add_to(*sub);
  sub->callback([o, &context] {
    context.run = [o] { return run_command(o->run.output.json, [o] { return run_run(*o); }); };
  });
}

}  // namespace attnsel::cli
