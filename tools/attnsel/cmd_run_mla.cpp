#include "cmd_run_mla.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <stdexcept>

#include "json_output.hpp"
#include "mla_options.hpp"
#include "progress_bar.hpp"
#include "run_report.hpp"
#include "runtime/ceilings.hpp"
#include "runtime/mla_run_job.hpp"

namespace attnsel::cli {

namespace {

constexpr const char* kDecodeCounts = "FLOPs = 2·N·s_q·ΣL·(576+512), bytes = ΣL·576·e_kv + b·s_q·N·(576+512)·e";
constexpr const char* kPrefillCounts = "FLOPs = 2·N·(192+128)·causal (q, k) pairs";

const MlaShape& mla_shape_of(const ChosenMlaBackend& chosen) {
  for (const PlanGroup& g : chosen.plan.groups)
    if (g.mla && g.selection == chosen.selection) return *g.mla;
  throw std::logic_error("the chosen MLA group has no MLA shape");
}

std::string check_line(const runtime::MlaRunReport& r) {
  if (!r.check_prefill.ran && !r.check_decode.ran) return "skipped (--no-check)";
  std::string parts, failures;
  double worst = 0.0, cos = 0.0;
  for (const runtime::MlaCheckResult* c : {&r.check_prefill, &r.check_decode}) {
    if (!c->ran) continue;
    const runtime::MlaComparison& m = c->comparison;
    worst = std::max(worst, m.worst_ratio);
    cos = std::max(cos, m.cos_diff);
    parts += fmt::format("{}{} {} samples (layer, request, head; {} values, abs {:g} or rel {:.4f}, cosine {:g})",
                         parts.empty() ? "" : "; ", c->step, m.samples, m.elements, m.tolerance.abs,
                         m.tolerance.rel, m.tolerance.cos);
    for (const runtime::MlaMismatch& f : m.first_failures)
      failures += fmt::format("\n             {} layer {} token {} head {} dim {}: got {:.6g}, reference {:.6g}",
                              c->step, f.layer, f.token, f.head, f.dim, f.got, f.want);
    if (m.cos_diff > m.tolerance.cos)
      failures += fmt::format("\n             {}: cosine distance {:.3g} exceeds {:g}", c->step, m.cos_diff,
                              m.tolerance.cos);
  }
  return fmt::format("{} — {} vs the un-absorbed double-precision reference; worst error {:.2f} of the tolerance, "
                     "cosine distance {:.2g}{}",
                     r.check_passed() ? "passed" : "FAILED", parts, worst, cos, failures);
}

nlohmann::json check_json(const runtime::MlaCheckResult& c) {
  if (!c.ran) return nullptr;
  const runtime::MlaComparison& m = c.comparison;
  return {{"samples", m.samples},
          {"elements", m.elements},
          {"passed", m.passed()},
          {"worst_ratio", m.worst_ratio},
          {"max_abs_error", m.max_abs_error},
          {"cos_diff", m.cos_diff},
          {"tolerance", {{"abs", m.tolerance.abs}, {"rel", m.tolerance.rel}, {"cos", m.tolerance.cos}}}};
}

// The run's spec, refused before anything is allocated when the memory or the kernel
// cannot run it.
runtime::MlaRunSpec run_spec(const RunRequest& o, const ChosenMlaBackend& chosen) {
  runtime::MlaRunSpec spec;
  spec.steps() = o.steps;
  spec.layer = chosen.layer;
  spec.num_layers = chosen.num_layers;
  if (const runtime::MemoryNeed need = as_usage([&] { return runtime::mla_memory_need(spec); });
      !need.shortfall.empty())
    throw UsageError(need.shortfall, "MemoryError");
  // Layers the kernel cannot run are usage errors (heads beyond its limit, ...).
  as_usage([&] { (void)chosen.make_impl(spec.layer.params({})); });
  return spec;
}

void print_header(const RunRequest& o, const ChosenMlaBackend& chosen, const runtime::MlaRunSpec& spec,
                  const std::string& model_line) {
  const Selection& s = *chosen.selection;
  const kernel::MlaDims& d = spec.layer.dims;
  const int tp = o.model.tensor_parallel_size;
  fmt::print("Platform:  {}\n", chosen.platform->describe());
  fmt::print("Backend:   {}\n", backend_line(s, chosen.isa));
  fmt::print("Config:    {}\n", model_line);
  fmt::print("Model:     MLA, {} query heads per rank{}, latent {} ({} + {}); {}; {} layers ({}); {}, kv-cache "
             "{}{}, block {}\n",
             d.num_heads, tp > 1 ? fmt::format(" (TP {})", tp) : "", d.latent_size(), d.kv_lora_rank,
             d.qk_rope_head_dim, describe_mla(mla_shape_of(chosen)), spec.num_layers, chosen.layers_text,
             dtype_name(chosen.plan.dtype), cache_dtype_name(spec.layer.kv_cache_dtype),
             spec.layer.fp8() ? fmt::format(" (k_scale {:.6g})", spec.layer.k_scale()) : "", spec.layer.block_size);
  if (chosen.kv_cache_dtype_beyond_selection)
    fmt::print("Note:      {} declares no {} cache (vLLM's capabilities); it was selected for the model-dtype cache "
               "and its kernel runs the {} latent cache, which it computes\n",
               s.backend, cache_dtype_name(spec.layer.kv_cache_dtype), cache_dtype_name(spec.layer.kv_cache_dtype));
  fmt::print("Workload:  batch {} × {}-token context, then {} decode steps × {} new token{}\n", spec.batch,
             spec.context, spec.decode_steps, spec.new_tokens, spec.new_tokens == 1 ? "" : "s");
  std::fflush(stdout);
}

nlohmann::ordered_json report_json(const RunRequest& o, const ChosenMlaBackend& chosen, const runtime::MlaRunReport& r,
                           const runtime::Ceilings& ceil) {
  const runtime::MlaRunSpec& spec = r.spec;
  const Selection& s = *chosen.selection;
  const kernel::MlaDims& d = spec.layer.dims;
  const MlaShape& mla = mla_shape_of(chosen);
  const runtime::ComputePeak peak = runtime::compute_peak(ceil, chosen.isa);
  nlohmann::json layers = nlohmann::json::array();
  for (const PlanGroup& g : chosen.plan.groups)
    if (g.mla && g.mixer == MixerKind::attention && g.attn_type == AttentionType::decoder)
      for (const LayerRef& l : g.layers) layers.push_back({{"index", l.index}, {"softmax_scale", g.mla->softmax_scale}});
  auto fraction = [&](double figure, double ceiling) { return o.ceilings && ceiling > 0 ? figure / ceiling : 0.0; };
  return {{"platform", chosen.platform->spec()},
          {"backend", s.backend},
          {"class", s.class_path},
          {"isa", chosen.isa},
          {"device", "cpu"},
          {"kernel",
           {{"prefill_plan", r.prefill_plan},
            {"decode_plan", r.decode_plan},
            {"decode_query_len", r.decode_query_len},
            {"absorbed_decode", r.absorbed_decode}}},
          {"model",
           {{"source", chosen.plan.model_source},
            {"mla", true},
            {"num_heads", d.num_heads},
            {"tensor_parallel_size", o.model.tensor_parallel_size},
            {"kv_lora_rank", d.kv_lora_rank},
            {"qk_rope_head_dim", d.qk_rope_head_dim},
            {"qk_nope_head_dim", d.qk_nope_head_dim},
            {"v_head_dim", d.v_head_dim},
            {"softmax_scale", mla.softmax_scale},
            {"rope_type", mla.rope_type},
            {"yarn_mscale", mla.yarn_mscale},
            {"num_layers", spec.num_layers},
            {"dtype", std::string(dtype_name(chosen.plan.dtype))},
            {"kv_cache_dtype", std::string(cache_dtype_name(spec.layer.kv_cache_dtype))},
            {"kv_cache_dtype_beyond_selection", chosen.kv_cache_dtype_beyond_selection},
            {"k_scale", spec.layer.k_scale()},
            {"block_size", spec.layer.block_size}}},
          {"layers", layers},
          {"workload",
           {{"batch", spec.batch},
            {"context", spec.context},
            {"decode_steps", spec.decode_steps},
            {"new_tokens", spec.new_tokens},
            {"distinct_caches", r.distinct_caches},
            {"cache_bytes", r.cache_bytes},
            {"distinct_weights", r.distinct_weights},
            {"weight_bytes", r.weight_bytes}}},
          {"ceilings", o.ceilings ? ceilings_json(ceil) : nlohmann::json(nullptr)},
          {"check",
           {{"prefill", check_json(r.check_prefill)},
            {"decode", check_json(r.check_decode)},
            {"passed", r.check_passed()}}},
          {"counts", {{"decode", kDecodeCounts}, {"prefill", kPrefillCounts}}},
          {"prefill", phase_json(r.prefill)},
          {"decode", phase_json(r.decode)},
          {"decode_warmup", phase_json(r.decode_warmup)},
          {"fractions",
           {{"peak", std::string(peak.name)},
            {"prefill_of_peak", fraction(r.prefill.gflops(), peak.gflops)},
            {"decode_of_peak", fraction(r.decode.gflops(), peak.gflops)},
            {"decode_of_read_bandwidth", fraction(r.decode.gbps(), ceil.read_gbps)}}}};
}

void print_report(const RunRequest& o, const ChosenMlaBackend& chosen, const runtime::MlaRunReport& r,
                  const runtime::Ceilings& ceil) {
  const runtime::MlaRunSpec& spec = r.spec;
  const runtime::ComputePeak peak = runtime::compute_peak(ceil, chosen.isa);
  fmt::print("Caches:    {} distinct latent cache{} ({}), {} distinct kv_b_proj ({}) in host memory{}\n",
             r.distinct_caches, r.distinct_caches == 1 ? "" : "s", bytes_label(static_cast<double>(r.cache_bytes)),
             r.distinct_weights, bytes_label(static_cast<double>(r.weight_bytes)),
             r.distinct_caches < spec.num_layers || r.distinct_weights < spec.num_layers
                 ? ", shared round-robin by the layers"
                 : "");
  if (o.ceilings) fmt::print("Ceilings:  {}\n", runtime::describe(ceil));
  fmt::print("Check:     {}\n", check_line(r));
  auto of_peak = [&](double gflops) {
    return o.ceilings ? fmt::format(" = {:.0f} % of the {} peak", 100 * gflops / peak.gflops, peak.name) : "";
  };
  if (r.prefill.steps > 0)
    fmt::print("Prefill:   {:.0f} tokens in {:.2f} s: {:.0f} tokens/s, {:.3f} TFLOP/s{}  [{}]\n", r.prefill.tokens,
               r.prefill.seconds, r.prefill.tokens_per_s(), r.prefill.gflops() / 1000, of_peak(r.prefill.gflops()),
               kPrefillCounts);
  if (r.decode_warmup.steps > 0)
    fmt::print("Warm-up:   the first decode step, {:.1f} ms (the plan sized for decode); not in the decode rate\n",
               r.decode_warmup.seconds * 1e3);
  if (r.decode.steps == 0) return;
  fmt::print("Steps:     decode step {:.2f} ms ({:.1f} us a layer: cache write and execute): plan {:.1f} us a "
             "step; {}{}\n",
             r.decode.seconds / r.decode.steps * 1e3, r.decode.seconds / static_cast<double>(r.decode.layers) * 1e6,
             r.decode.plan_us_per_step(), r.decode_plan,
             r.absorbed_decode ? ""
                               : fmt::format(" (decode requests of {} tokens take the prefill path: the kernel's "
                                             "absorbed decode takes at most {})",
                                             spec.new_tokens, r.decode_query_len));
  fmt::print("Decode:    {:.0f} tokens in {:.2f} s: {:.0f} tokens/s, {:.1f} GB/s{}, {:.1f} GFLOP/s{}  [{}]\n",
             r.decode.tokens, r.decode.seconds, r.decode.tokens_per_s(), r.decode.gbps(),
             o.ceilings ? fmt::format(" = {:.0f} % of the read bandwidth", 100 * r.decode.gbps() / ceil.read_gbps) : "",
             r.decode.gflops(), of_peak(r.decode.gflops()), kDecodeCounts);
}

}  // namespace

int run_mla(const RunRequest& o, const std::string& model_line) {
  const ChosenMlaBackend chosen = choose_mla_backend(o.platform, o.backend, o.model);
  const runtime::MlaRunSpec spec = run_spec(o, chosen);
  if (!o.output.json) print_header(o, chosen, spec, model_line);
  runtime::Ceilings ceil;
  if (o.ceilings) ceil = runtime::measure_ceilings(std::size_t{512} << 20);

  ProgressBar bar(o.progress && !o.output.json);
  const runtime::MlaRunReport r = runtime::run_mla_job(spec, chosen.make_impl, bar.callback());
  bar.finish();

  if (o.output.json)
    print_json(report_json(o, chosen, r, ceil));
  else
    print_report(o, chosen, r, ceil);
  return r.check_passed() ? kExitChosen : kExitCheckFailed;
}

}  // namespace attnsel::cli
