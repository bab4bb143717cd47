#include "cmd_bench_mla.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "json_output.hpp"
#include "mla_options.hpp"
#include "runtime/ceilings.hpp"
#include "runtime/mla_bench_job.hpp"

namespace attnsel::cli {

namespace {

std::string pct_label(double pct) { return pct > 0 ? fmt::format("{:.0f} %", pct) : "-"; }

std::string to_go_label(double target, double pct) {
  if (target <= 0) return "-";
  return target > pct ? fmt::format("{:.0f} pts", target - pct) : "met";
}

nlohmann::json result_json(const runtime::MlaBenchResult& r) {
  nlohmann::json j = {{"case", r.name},
                      {"shape", r.shape},
                      {"timed", r.timed},
                      {"seconds", r.seconds},
                      {"figure", r.figure},
                      {"unit", "GFLOP/s"},
                      {"ceiling", r.ceiling},
                      {"ceiling_name", r.ceiling_name},
                      {"pct_of_ceiling", r.pct},
                      {"target_pct", r.target_pct},
                      {"check_passed", r.check_passed},
                      {"check_samples", r.check_samples},
                      {"device", r.device}};
  if (r.decode) {
    j["gb_per_s"] = r.gb_per_s;
    j["pct_of_read_bandwidth"] = r.read_pct;
    j["kernel"] = {{"timed", "decode_latent"},
                   {"seconds", r.latent_seconds},
                   {"figure", r.latent_figure},
                   {"pct_of_ceiling", r.latent_pct}};
  }
  return j;
}

}  // namespace

int run_mla_bench(const MlaBenchRequest& o) {
  ModelOptions m = o.model;
  m.block_size = o.block_size;
  const ChosenMlaBackend chosen = choose_mla_backend(o.platform, o.backend, m);
  const runtime::MlaLayerShape& layer = chosen.layer;
  std::vector<runtime::MlaBenchCase> cases = runtime::standard_mla_bench_cases(layer, o.scale);
  if (o.batch > 0 || o.context > 0) {
    if (o.batch <= 0 || o.context <= 0)
      throw UsageError("--batch and --context go together: one decode case of batch × context tokens");
    cases = {as_usage([&] { return runtime::mla_shape_decode_case(layer, o.batch, o.context, 1); })};
  }
  if (!o.cases.empty())
    std::erase_if(cases, [&](const runtime::MlaBenchCase& c) {
      return std::find(o.cases.begin(), o.cases.end(), c.name) == o.cases.end();
    });
  if (cases.empty())
    throw UsageError("--case: no MLA case selected; an MLA model's cases are mla-decode and mla-prefill");
  // An fp8 cache is timed against the model-dtype cache case by case in the same run.
  const bool fp8 = layer.fp8();
  as_usage([&] { (void)chosen.make_impl(layer.params({})); });  // a layer the kernel refuses is bad input

  const Selection& s = *chosen.selection;
  if (!o.output.json) {
    fmt::print("Platform:  {}\n", chosen.platform->describe());
    fmt::print("Backend:   {} ({})  kernel: {}\n", s.backend, s.class_path, chosen.isa);
    fmt::print("Config:    {}\n", o.model_line);
    fmt::print("Layer:     MLA, {} query heads per rank, latent {}; softmax scale {:.10f}; {}, kv-cache {}, block {}\n",
               layer.dims.num_heads, layer.dims.latent_size(), layer.scale, kernel::to_string(layer.dtype),
               cache_dtype_name(layer.kv_cache_dtype), layer.block_size);
    if (chosen.kv_cache_dtype_beyond_selection)
      fmt::print("Note:      {} declares no {} cache (vLLM's capabilities); its kernel computes it\n", s.backend,
                 cache_dtype_name(layer.kv_cache_dtype));
    std::fflush(stdout);
  }
  const runtime::Ceilings ceil = runtime::measure_ceilings(std::size_t{1} << 30);
  if (!o.output.json) {
    fmt::print("Ceilings:  {}\n", runtime::describe(ceil));
    fmt::print("Counts:    decode FLOPs = 2·N·s_q·ΣL·(576+512), bytes = ΣL·576·e_kv + b·s_q·N·(576+512)·e; prefill "
               "FLOPs = 2·N·(192+128)·ΣT(T+1)/2\n");
    fmt::print("{:<17} {:>10} {:>14} {:>7} {:>7} {:>9}  {}\n", "case", "median", "achieved", "of", "target", "to go",
               "shape");
    std::fflush(stdout);
  }
  nlohmann::json results = nlohmann::json::array();
  bool all_checked = true;
  for (const runtime::MlaBenchCase& c : cases) {
    const runtime::MlaBenchResult r = runtime::run_mla_bench_case(c, chosen.make_impl, ceil, chosen.isa, o.repeats);
    all_checked = all_checked && r.check_passed;
    runtime::MlaBenchResult anchor;
    if (fp8) {
      runtime::MlaBenchCase a = c;
      a.layer.kv_cache_dtype = CacheDType::auto_;
      anchor = runtime::run_mla_bench_case(a, chosen.make_impl, ceil, chosen.isa, o.repeats);
      all_checked = all_checked && anchor.check_passed;
    }
    const double time_ratio = anchor.seconds > 0 ? r.seconds / anchor.seconds : 0.0;
    if (o.output.json) {
      results.push_back(result_json(r));
      if (time_ratio > 0) {
        results.back()["anchor_kv_cache_dtype"] = "auto";
        results.back()["anchor_seconds"] = anchor.seconds;
        results.back()["anchor_figure"] = anchor.figure;
        results.back()["time_vs_anchor"] = time_ratio;
      }
      continue;
    }
    // Decode: the target is the kernel's (decode_latent); the layer's execute is what `run` sees.
    const double layer_target = r.decode ? 0.0 : r.target_pct;
    fmt::print("{:<17} {:>8.1f}ms {:>6.1f} GFLOP/s {:>5} {:>7} {:>9}  {}; {} ({} of the {}){}{}\n", r.name,
               r.seconds * 1e3, r.figure, pct_label(r.pct), pct_label(layer_target), to_go_label(layer_target, r.pct),
               r.shape, r.decode ? "the layer's execute (absorption and W_UV included)" : "the layer's execute",
               pct_label(r.pct), r.ceiling_name,
               r.decode ? fmt::format(", {:.1f} GB/s = {} of the read bandwidth", r.gb_per_s, pct_label(r.read_pct))
                        : std::string(),
               r.check_passed ? "" : "  CHECK FAILED");
    if (r.decode)
      fmt::print("{:<17} {:>8.1f}ms {:>6.1f} GFLOP/s {:>5} {:>7} {:>9}  decode_latent alone: the absorbed decode "
                 "kernel\n",
                 "  kernel", r.latent_seconds * 1e3, r.latent_figure, pct_label(r.latent_pct), pct_label(r.target_pct),
                 to_go_label(r.target_pct, r.latent_pct));
    if (time_ratio > 0)
      fmt::print("{:<17} {:>8.1f}ms {:>6.1f} GFLOP/s  fp8 takes {:.2f}x the time of the {} cache, measured just "
                 "after{}\n",
                 "  16-bit", anchor.seconds * 1e3, anchor.figure, time_ratio, kernel::to_string(layer.dtype),
                 anchor.check_passed ? "" : "  CHECK FAILED");
    std::fflush(stdout);
  }
  if (o.output.json)
    print_json({{"platform", chosen.platform->spec()},
                {"backend", s.backend},
                {"isa", chosen.isa},
                {"device", "cpu"},
                {"model",
                 {{"source", chosen.plan.model_source},
                  {"mla", true},
                  {"num_heads", layer.dims.num_heads},
                  {"tensor_parallel_size", m.tensor_parallel_size},
                  {"softmax_scale", layer.scale},
                  {"dtype", std::string(kernel::to_string(layer.dtype))},
                  {"kv_cache_dtype", std::string(cache_dtype_name(layer.kv_cache_dtype))},
                  {"block_size", layer.block_size}}},
                {"ceilings",
                 {{"read_gb_per_s", ceil.read_gbps},
                  {"fp32_gflop_per_s", ceil.fp32_gflops},
                  {"bf16_gflop_per_s", ceil.bf16_gflops},
                  {"threads", ceil.threads}}},
                {"results", results}});
  return all_checked ? kExitChosen : kExitCheckFailed;
}

}  // namespace attnsel::cli
