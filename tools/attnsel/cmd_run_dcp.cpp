#include "cmd_run_dcp.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "attnsel/backend.hpp"
#include "attnsel/errors.hpp"
#include "distributed/dcp_job.hpp"
#include "distributed/dcp_layout.hpp"
#include "distributed/mpi_communicator.hpp"
#include "distributed/partial_attention.hpp"
#include "json_output.hpp"

namespace attnsel::cli {

namespace {

std::string bytes_label(double b) {
  if (b >= double(1 << 30)) return fmt::format("{:.2f} GiB", b / (1 << 30));
  if (b >= double(1 << 20)) return fmt::format("{:.1f} MiB", b / (1 << 20));
  return fmt::format("{:.1f} KiB", b / 1024);
}

// What vLLM's selection says of this backend under DCP: its declared capability, reported
// next to the kernel's (the LSE output the merge needs), which is what decides the run.
bool declares_dcp(const ChosenBackend& chosen) {
  const Selection& s = chosen.selection;
  return s.backend_class && s.backend_class->capabilities(chosen.platform->env()).dcp;
}

std::string dcp_capability(const ChosenBackend& chosen, int size) {
  const Selection& s = chosen.selection;
  if (declares_dcp(chosen))
    return fmt::format("{} declares DCP support; its kernel writes the log-sum-exp the merge needs", s.backend);
  return fmt::format("{} declares no DCP support (vLLM's selection with --decode-context-parallel-size {} refuses it: "
                     "DCP not supported); its kernel writes the log-sum-exp the merge needs, so it runs here",
                     s.backend, size);
}

distributed::DcpJobSpec job_spec(const DcpOptions& dcp, const RunRequest& r, const ChosenBackend& chosen) {
  distributed::DcpJobSpec s;
  s.backend = chosen.selection.backend;
  s.world_size = dcp.size;
  s.interleave = dcp.interleave.value_or(1);
  s.shape() = chosen.shape;
  s.num_layers = r.model.num_layers;
  s.batch = r.steps.batch;
  s.context = r.steps.context;
  s.decode_steps = r.steps.decode_steps;
  s.check = r.steps.check;
  return s;
}

void print_text(const distributed::DcpReport& r, const ChosenBackend& chosen, const std::string& capability) {
  const auto& s = r.spec;
  fmt::print("Platform:  {}\n", chosen.platform->describe());
  fmt::print("Backend:   {} ({})  kernel: {}\n", chosen.selection.backend, chosen.selection.class_path, chosen.isa);
  fmt::print("DCP check: {}\n", capability);
  fmt::print("DCP:       {} ranks over {}, interleave {} (token i on rank (i / {}) % {}), block {}\n", s.world_size,
             r.transport, s.interleave, s.interleave, s.world_size, s.block_size);
  fmt::print("Model:     {} query / {} KV heads, head size {}, {} layer{}; {}, kv-cache {}, {} layout\n", s.num_heads,
             s.num_kv_heads, s.head_size, s.num_layers, s.num_layers == 1 ? "" : "s", kernel::to_string(s.dtype),
             cache_dtype_name(s.kv_cache_dtype), layout_label(s.layout));
  fmt::print("Workload:  batch {} × {}-token context, {} decode steps; each shard through the kernel's step plan "
             "with LSE output{}\n",
             s.batch, s.context + 1, s.decode_steps, r.plan.empty() ? std::string() : " (" + r.plan + ")");
  for (std::size_t i = 0; i < r.rank_tokens.size(); ++i)
    fmt::print("Rank {}:    {} cached tokens, {} of K/V\n", i, r.rank_tokens[i],
               bytes_label(static_cast<double>(r.rank_cache_bytes[i])));
  if (r.checked)
    fmt::print("Check:     {} — {} sampled tokens × {} heads × {} dims, merged across the ranks, vs the single-rank "
               "double-precision reference; worst error {:.2f} of the tolerance{}\n",
               r.comparison.passed() ? "passed" : "FAILED", r.check_tokens, s.num_heads, s.head_size,
               r.comparison.worst_ratio,
               r.comparison.first_failures.empty()
                   ? std::string()
                   : fmt::format(" (first: token {} head {} dim {}: got {:.6g}, reference {:.6g})",
                                 r.comparison.first_failures[0].token, r.comparison.first_failures[0].head,
                                 r.comparison.first_failures[0].dim, r.comparison.first_failures[0].got,
                                 r.comparison.first_failures[0].want));
  else
    fmt::print("Check:     skipped (--no-check)\n");
  if (s.decode_steps > 0) {
    fmt::print("Decode:    {:.0f} tokens in {:.3f} s (slowest rank): {:.0f} tokens/s\n", r.tokens, r.seconds,
               r.tokens_per_s());
    for (std::size_t i = 0; i < r.rank_times.size(); ++i) {
      const auto& t = r.rank_times[i];
      const double step = t.step > 0 ? t.step : 1.0;
      fmt::print("Rank {}:    step {:.3f} s = plan {:.1f} %, query gather {:.1f} %, attention {:.1f} %, merge "
                 "{:.1f} %\n",
                 i, t.step, 100 * t.plan / step, 100 * t.query_gather / step, 100 * t.attention / step,
                 100 * t.merge / step);
    }
    fmt::print("Merge:     {:.1f} % of the step (largest over the ranks; LSE all-gather + correction + "
               "reduce-scatter)\n",
               100 * r.merge_share());
  }
}

nlohmann::json report_json(const distributed::DcpReport& r, const ChosenBackend& chosen,
                           const std::string& capability) {
  nlohmann::json ranks = nlohmann::json::array();
  for (std::size_t i = 0; i < r.rank_times.size(); ++i) {
    const auto& t = r.rank_times[i];
    ranks.push_back({{"rank", i},
                     {"cached_tokens", r.rank_tokens[i]},
                     {"cache_bytes", r.rank_cache_bytes[i]},
                     {"step_seconds", t.step},
                     {"plan_seconds", t.plan},
                     {"query_gather_seconds", t.query_gather},
                     {"attention_seconds", t.attention},
                     {"merge_seconds", t.merge}});
  }
  const auto& s = r.spec;
  return {{"backend",
           {{"name", chosen.selection.backend},
            {"kernel", chosen.isa},
            {"declares_dcp", declares_dcp(chosen)},
            {"lse_output", chosen.kernel.lse_output},
            {"dcp_check", capability},
            {"plan", r.plan}}},
          {"dcp", {{"size", s.world_size}, {"interleave", s.interleave}, {"transport", r.transport}}},
          {"model",
           {{"num_heads", s.num_heads},
            {"num_kv_heads", s.num_kv_heads},
            {"head_size", s.head_size},
            {"num_layers", s.num_layers},
            {"dtype", kernel::to_string(s.dtype)},
            {"kv_cache_dtype", std::string(cache_dtype_name(s.kv_cache_dtype))},
            {"block_size", s.block_size},
            {"layout", layout_label(s.layout)}}},
          {"workload", {{"batch", s.batch}, {"seq_len", s.context + 1}, {"decode_steps", s.decode_steps}}},
          {"check",
           r.checked ? nlohmann::json{{"passed", r.comparison.passed()},
                                      {"tokens", r.check_tokens},
                                      {"worst_ratio", r.comparison.worst_ratio},
                                      {"max_abs_error", r.comparison.max_abs_error}}
                     : nlohmann::json(nullptr)},
          {"decode", {{"tokens", r.tokens}, {"seconds", r.seconds}, {"tokens_per_s", r.tokens_per_s()}}},
          {"merge_share", r.merge_share()},
          {"ranks", ranks}};
}

}  // namespace

void DcpOptions::add_to(CLI::App& app) {
  app.add_option("--dcp", size,
                 "decode context parallelism: shard every sequence's KV cache across this many ranks, launched as "
                 "`mpirun -np R attnsel run --dcp R` (decode only)")
      ->transform(PositiveInteger);
  app.add_option("--cp-kv-cache-interleave-size", interleave,
                 "with --dcp: consecutive tokens kept on one rank (vLLM's cp_kv_cache_interleave_size; must divide "
                 "the block size)")
      ->default_str("1")
      ->transform(PositiveInteger);
}

void DcpOptions::require_dcp_for_its_options() const {
  if (!enabled() && interleave)
    throw UsageError("--cp-kv-cache-interleave-size applies to --dcp runs: pass --dcp R too, or leave it out");
}

int run_dcp(const DcpOptions& dcp, RunRequest request) {
  // Only rank 0 speaks; every rank returns the same exit code, so refusals never hang.
  std::unique_ptr<distributed::MpiSession> session;
  int rank = 0;
  return run_command(request.output.json, [&] {
    if (request.steps.new_tokens != 1)
      throw UsageError("--dcp runs decode steps of one new token per sequence: leave --new-tokens at 1");
    (void)request.model.apply_model();
    if (request.model.mla_model)
      throw UsageError(fmt::format("--dcp runs standard attention; {} has MLA layers (run them without --dcp)",
                                   *request.model.model));
    // The backend is selected for the host as `attnsel run` selects it (without DCP in the
    // selector's config: vLLM's CPU_ATTN would refuse it only for not declaring DCP); what
    // the run needs of it is its kernel's LSE output, which KernelInfo declares.
    const ChosenBackend chosen =
        as_usage([&] { return choose_backend(request.platform, request.backend, request.model); });
    distributed::require_dcp_kernel(chosen.kernel, chosen.selection.backend);
    const std::string capability = dcp_capability(chosen, dcp.size);
    const distributed::DcpJobSpec spec = job_spec(dcp, request, chosen);
    // What vLLM refuses at start-up is refused here before any rank starts, with vLLM's
    // reason, as `attnsel plan` refuses it (run_dcp_job checks again on every rank).
    as_usage([&] {
      try {
        (void)distributed::make_dcp_layout(spec.world_size, spec.interleave, spec.block_size);
        distributed::validate_dcp_heads(spec.num_heads, spec.num_kv_heads, spec.world_size);
      } catch (const ValueError& e) {
        throw ValueError(fmt::format("vLLM refuses this DCP configuration: {}", e.what()));
      }
    });
    session = std::make_unique<distributed::MpiSession>();
    rank = session->world_rank();
    if (rank != 0) {
      // Quiet ranks: errors are the same everywhere and rank 0 reports them.
      if (!std::freopen("/dev/null", "w", stdout) || !std::freopen("/dev/null", "w", stderr))
        throw RuntimeError("cannot silence the output of rank " + std::to_string(rank));
    }
    const auto comm = distributed::make_mpi_communicator(*session);
    distributed::DcpReport report;
    try {
      report = distributed::run_dcp_job(spec, chosen.make_impl, *comm);
    } catch (const ValueError&) {
      throw;  // a refusal: every rank refuses alike, before any collective could wait on it
    } catch (const NotImplementedError&) {
      throw;  // likewise (what the kernel or the transport cannot do)
    } catch (const std::exception& e) {
      // Failed on this rank alone: the others may be waiting in a collective, so end them all.
      std::fprintf(stderr, "attnsel: error on DCP rank %d: %s\n", rank, e.what());
      session->abort(kExitInternal);
    }
    if (request.output.json)
      print_json(report_json(report, chosen, capability));
    else
      print_text(report, chosen, capability);
    std::fflush(stdout);
    return report.passed() ? kExitChosen : kExitCheckFailed;
  });
}

}  // namespace attnsel::cli
