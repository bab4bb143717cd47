// `attnsel plan`: which backend every layer of a model gets, with which block size and
// KV-cache layout, and why (or, with --compare, the same model across platforms).
#include <fmt/format.h>

#include <cstdio>
#include <map>
#include <memory>

#include "attnsel/engine_args.hpp"
#include "attnsel/model.hpp"
#include "attnsel/plan.hpp"
#include "commands.hpp"
#include "dcp_plan_report.hpp"
#include "common_options.hpp"
#include "json_output.hpp"
#include "model/config_reader.hpp"
#include "plan_report.hpp"

namespace attnsel::cli {

namespace {

struct PlanOptions {
  std::optional<std::string> model;  ///< nullopt: the built-in default model
  PlatformOptions platform;
  OutputOptions output;
  bool explain = false;
  std::optional<std::string> compare;  ///< "cuda:9.0,cpu"
  // vLLM's engine arguments, spelled as vLLM spells them (nullopt: not given).
  std::optional<std::string> attention_backend;
  std::optional<std::string> attention_config;
  std::string kv_cache_dtype = "auto";
  int block_size = 0;
  std::string dtype = "auto";
  int tensor_parallel_size = 1;
  int decode_context_parallel_size = 1;
  int prefill_context_parallel_size = 1;
  DcpPlanRequest dcp;
  std::optional<std::string> kv_transfer_config;
  std::optional<std::string> kv_cache_layout;
  bool batch_invariant = false;
  CLI::Option* block_size_opt = nullptr;

  void add_to(CLI::App& app) {
    app.add_option("--model", model,
                   "a Hugging Face config.json, or a folder holding one (default: a built-in Llama-3-8B-like model)");
    platform.add_to(app);
    app.add_option("--attention-backend", attention_backend,
                                           "vLLM's --attention-backend: one backend for every attention layer, or auto");
    app.add_option(
        "--attention-config", attention_config,
        R"(vLLM's --attention-config JSON, e.g. '{"backend_per_kind": {"sliding_window": "TRITON_ATTN"}}')");
    app.add_option("--kv-cache-dtype", kv_cache_dtype, "vLLM's --kv-cache-dtype")->capture_default_str();
    block_size_opt = app.add_option("--block-size", block_size,
                                    "vLLM's --block-size (default: chosen by vLLM's rule from the backends)")
                         ->transform(Integer);
    app.add_option("--dtype", dtype, "vLLM's --dtype: auto (from the config), half, bfloat16, float32, ...")
        ->capture_default_str();
    app.add_option("--tensor-parallel-size", tensor_parallel_size, "vLLM's --tensor-parallel-size")
        ->capture_default_str()
        ->transform(Integer);
    app.add_option("--decode-context-parallel-size", decode_context_parallel_size,
                   "vLLM's --decode-context-parallel-size")
        ->capture_default_str()
        ->transform(Integer);
    app.add_option("--cp-kv-cache-interleave-size", dcp.interleave,
                   "vLLM's --cp-kv-cache-interleave-size (with --decode-context-parallel-size)")
        ->capture_default_str()
        ->transform(PositiveInteger);
    app.add_option("--max-model-len", dcp.seq_len,
                   "the sequence whose KV cache the DCP ranks divide (with --decode-context-parallel-size)")
        ->capture_default_str()
        ->transform(PositiveInteger64);
    app.add_option("--prefill-context-parallel-size", prefill_context_parallel_size,
                   "vLLM's --prefill-context-parallel-size")
        ->capture_default_str()
        ->transform(Integer);
    app.add_option("--kv-transfer-config", kv_transfer_config,
                                     R"(vLLM's --kv-transfer-config JSON, e.g. '{"kv_connector": "NixlConnector", )"
                                     R"("kv_role": "kv_both"}')");
    app.add_option("--kv-cache-layout", kv_cache_layout,
                                         "the KV-cache layout to use (vLLM's VLLM_KV_CACHE_LAYOUT): LBNHC, LBHNC, "
                                         "BLNHC, BLHNC, BHLNC, LHBNC, or the legacy NHD / HND");
    app.add_flag("--batch-invariant", batch_invariant, "VLLM_BATCH_INVARIANT");
    app.add_flag("--explain", explain, "show the reasons behind every choice (candidates, block size, layout)");
    app.add_option("--compare", compare,
                   "plan on several platforms and print a matrix, e.g. cuda:9.0,cuda:10.0,rocm:gfx942,cpu");
    output.add_to(app);
  }

  EngineArgs engine_args() const {
    EngineArgs a;
    a.attention_backend = attention_backend;
    a.attention_config = attention_config;
    a.kv_cache_dtype = kv_cache_dtype;
    if (block_size_opt->count() > 0) a.block_size = block_size;
    a.dtype = dtype;
    a.tensor_parallel_size = tensor_parallel_size;
    a.decode_context_parallel_size = decode_context_parallel_size;
    a.prefill_context_parallel_size = prefill_context_parallel_size;
    a.kv_transfer_config = kv_transfer_config;
    a.kv_cache_layout = kv_cache_layout;
    a.batch_invariant = batch_invariant;
    return a;
  }
};

DcpPlanRequest dcp_request(const PlanOptions& o) {
  DcpPlanRequest r = o.dcp;
  r.size = o.decode_context_parallel_size;
  return r;
}

// Everything the command line describes, built in the usage phase (errors exit with 2).
struct PlanInputs {
  ModelSpec model;
  EngineOptions options;
  std::optional<SelectionMode> mode;
};

PlanInputs build_inputs(const PlanOptions& o) {
  return as_usage([&] {
    PlanInputs in;
    in.model = o.model ? load_model_config(*o.model) : default_model();
    in.options = parse_engine_args(o.engine_args());
    (void)shard_model(in.model, in.options.tensor_parallel_size);  // inconsistent heads are bad input
    if (const auto problem = dcp_head_problem(in.model, in.options.tensor_parallel_size, dcp_request(o)))
      throw ValueError(fmt::format("vLLM refuses this DCP configuration: {}", *problem));
    (void)resolve_model_dtype(in.model, in.options.dtype);
    in.mode = o.platform.mode.empty() ? std::nullopt : parse_mode(o.platform.mode);
    return in;
  });
}

// The platform with the plan's facts (model, engine options) under the user's --fact values.
std::shared_ptr<const Platform> build_platform(const PlanOptions& o, const PlanInputs& in,
                                               const std::optional<std::string>& spec) {
  std::map<std::string, std::string> seen;
  for (const std::string& f : o.platform.facts) {
    const auto [name, value] = split_assignment(f, "--fact", "NAME=VALUE");
    const auto [it, fresh] = seen.emplace(name, value);
    if (!fresh && it->second != value)
      throw UsageError(fmt::format("conflicting --fact values for {}: '{}' and '{}'", name, it->second, value));
  }
  const std::optional<std::string_view> platform_spec = spec ? std::optional<std::string_view>(*spec) : std::nullopt;
  return as_usage([&] { return make_plan_platform(in.model, in.options, platform_spec, o.platform.facts, in.mode); });
}

void print_text(const PlanOptions& o, const ModelSpec& model, const ModelPlan& plan) {
  fmt::print("{}", render_plan_text(model, plan));
  fmt::print("{}", render_dcp_text(model, plan, dcp_request(o)));
  if (o.explain) fmt::print("\n{}", render_plan_explanation(plan));
}

int run_single(const PlanOptions& o) {
  const PlanInputs in = build_inputs(o);
  const std::shared_ptr<const Platform> platform = build_platform(o, in, o.platform.platform);
  Selector selector(platform);
  try {
    const ModelPlan plan = make_plan(in.model, in.options, selector);
    as_usage([&] { check_dcp_plan(plan, dcp_request(o)); });
    if (o.output.json) {
      nlohmann::json j = plan_json(in.model, plan);
      if (o.decode_context_parallel_size > 1) j["dcp"] = dcp_json(in.model, plan, dcp_request(o));
      print_json(j);
    } else
      print_text(o, in.model, plan);
    return kExitChosen;
  } catch (const PlanError& e) {
    if (o.output.json) {
      // One JSON object: the failure with the partial plan.
      nlohmann::json j = failure_json(e.what(), std::string(error_kind_name(e.kind())), {});
      j["plan"] = plan_json(in.model, e.partial_plan());
      print_json(j);
      fmt::print(stderr, "attnsel: error: {}\n", e.what());
      return kExitNoBackend;
    }
    print_text(o, in.model, e.partial_plan());
    std::fflush(stdout);
    throw;
  }
}

// Every entry counts: an empty one (",," or a trailing ",") is a mistake, not "nothing".
std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    out.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (out.back().empty())
      throw UsageError(fmt::format("--compare expects a comma-separated list of platforms, e.g. cuda:9.0,cpu; entry {} "
                                   "of '{}' is empty",
                                   out.size(), model::printable(text)));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

int run_compare(const PlanOptions& o) {
  if (o.platform.platform) throw UsageError("--compare and --platform cannot be combined");
  const PlanInputs in = build_inputs(o);
  std::vector<std::shared_ptr<const Platform>> platforms;
  for (const std::string& spec : split_list(*o.compare)) platforms.push_back(build_platform(o, in, spec));
  std::vector<PlatformOutcome> outcomes;
  bool all_ok = true;
  for (const auto& platform : platforms) {
    PlatformOutcome outcome;
    outcome.platform = platform->spec();
    Selector selector(platform);
    try {
      outcome.plan = make_plan(in.model, in.options, selector);
      check_dcp_plan(*outcome.plan, dcp_request(o));  // the interleave rule meets this platform's block size
    } catch (const PlanError& e) {
      outcome.plan = e.partial_plan();
      outcome.error = e.what();
      all_ok = false;
    } catch (const ValueError& e) {
      if (!outcome.plan) throw;  // bad input, not this platform's outcome
      outcome.error = e.what();
      all_ok = false;
    }
    outcomes.push_back(std::move(outcome));
  }
  if (o.output.json) {
    print_json(compare_json(in.model, outcomes));
  } else {
    fmt::print("{}", render_compare_text(in.model, outcomes));
    if (o.explain)
      for (const PlatformOutcome& outcome : outcomes)
        if (outcome.plan) fmt::print("\n== {} ==\n{}", outcome.platform, render_plan_explanation(*outcome.plan));
  }
  return all_ok ? kExitChosen : kExitNoBackend;
}

}  // namespace

void add_plan_command(CLI::App& app, CommandContext& context) {
  auto options = std::make_shared<PlanOptions>();
  CLI::App* sub = app.add_subcommand(
      "plan", "plan a whole model: every layer's backend, the block size, the KV-cache layout and cache size");
  options->add_to(*sub);
  sub->callback([options, &context] {
    context.run = [options] {
      return run_command(options->output.json, [options] {
        return options->compare ? run_compare(*options) : run_single(*options);
      });
    };
  });
}

}  // namespace attnsel::cli
