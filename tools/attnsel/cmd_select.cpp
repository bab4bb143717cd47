// `attnsel select`: one selection, explained (or as one JSON object).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <memory>

#include "attnsel/capability_checks.hpp"
#include "attnsel/engine_facts.hpp"
#include "attnsel/registry.hpp"
#include "attnsel/selector.hpp"
#include "commands.hpp"
#include "common_options.hpp"
#include "json_output.hpp"
#include "report/facts_json.hpp"
#include "report/selector_flags_json.hpp"

namespace attnsel::cli {

namespace {

struct SelectOptions {
  PlatformOptions platform;
  BackendChoiceOptions backend;
  LayerOptions layer;
  OutputOptions output;
  bool list_facts = false;
  bool list_flags = false;
  bool markdown = false;
};

// Everything the command line describes, built in the usage phase.
struct SelectInputs {
  std::shared_ptr<const Platform> platform;  ///< as the engine's settings leave it (with_engine)
  EngineConfig engine;
  LayerRequest layer;
  AttentionSelectorConfig config;
  std::optional<BackendMember> requested;
};

// The engine settings the command line gives: the attention config and backend, then the
// cache config and switches.
EngineConfig build_engine(const SelectOptions& o) {
  EngineConfig engine;
  o.backend.apply(engine.attention);
  o.layer.apply(engine);
  return engine;
}

SelectInputs build_inputs(const SelectOptions& o) {
  SelectInputs in;
  in.layer = o.layer.make_layer();
  in.engine = build_engine(o);
  in.platform = as_usage([&] { return with_engine(o.platform.make_platform(), in.engine); });
  in.config = as_usage([&] { return make_selector_config(in.engine, in.layer); });
  in.requested = effective_backend(in.engine, in.layer);
  return in;
}

// How the backend argument was decided, for the explanation.
std::string describe_request(const SelectInputs& in) {
  if (!in.requested) return "auto (the platform's priority order)";
  const KVCacheSpecKind kind = get_attn_spec_kind(in.layer.use_mla, in.layer.has_sliding_window,
                                                  in.layer.attn_type.value_or(AttentionType::decoder));
  if (in.engine.attention.backend_per_kind.contains(std::string(kind_value(kind))))
    return fmt::format("{} (--backend-per-kind {}; explicit, no fallback)", in.requested->name(), kind_value(kind));
  return fmt::format("{} (explicit, no fallback)", in.requested->name());
}

void print_candidates(const std::vector<Candidate>& candidates) {
  if (candidates.empty()) return;
  fmt::print("Candidates, in priority order:\n");
  for (const Candidate& c : candidates) {
    if (c.valid)
      fmt::print("  [{}] \u2713 {}\n", c.priority, c.backend);
    else
      fmt::print("  [{}] \u2717 {}: {}\n", c.priority, c.backend, fmt::join(c.reasons, "; "));
  }
}

void print_header(const SelectInputs& in) {
  fmt::print("Platform:  {}\n", in.platform->describe());
  fmt::print("Config:    {}\n", in.config.repr());
  if (in.layer.num_heads) fmt::print("Num heads: {}\n", *in.layer.num_heads);
  fmt::print("Requested: {}\n", describe_request(in));
}

void print_explanation(const SelectInputs& in, const Selection& s) {
  print_header(in);
  print_candidates(s.candidates);
  const std::vector<std::string> warnings = s.warnings();
  if (!warnings.empty()) {
    fmt::print("Warnings:\n");
    for (const std::string& w : warnings) fmt::print("  {}\n", w);
  }
  const std::string priority = s.priority ? fmt::format(", priority {}", *s.priority) : std::string();
  fmt::print("Chosen:    {} ({}{})\n", s.backend, s.class_path, priority);
}

int list_facts(const SelectOptions& o) {
  const EngineConfig engine = build_engine(o);
  const std::shared_ptr<const Platform> platform = as_usage([&] { return with_engine(o.platform.make_platform(), engine); });
  const RuntimeFacts& facts = platform->env().facts;
  if (o.output.json) {
    print_json(report::facts_json(*platform));
    return kExitChosen;
  }
  fmt::print("Runtime facts on {} (set with --fact NAME=VALUE):\n", platform->describe());
  for (const FactDefinition& d : fact_definitions()) {
    const std::string value = fact_value_to_string(facts.values().at(std::string(d.name)));
    const std::string default_value = fact_value_to_string(d.default_for(platform->env().device));
    const std::string note = facts.is_overridden(d.name)    ? fmt::format(" (set; default {})", default_value)
                             : facts.is_from_engine(d.name) ? fmt::format(" (engine setting; default {})", default_value)
                                                            : std::string(" (default)");
    fmt::print("  {} = {}{}  [{}: {}]\n      {}\n", d.name, value, note, d.type, d.range.valid, d.doc);
  }
  return kExitChosen;
}

int list_flags(const SelectOptions& o) {
  if (o.output.json) {
    print_json(report::selector_flags_json());
  } else if (o.markdown) {
    fmt::print("{}", report::selector_flags_markdown());
  } else {
    fmt::print("Selector flags (the C API's and the Python package's names; a backend serves a flag when it "
               "declares the capability):\n");
    for (const CapabilityCheck* flag : selector_flags())
      fmt::print("  {}  {}  [{}; capability {}]\n      {}\n", flag->flag, flag->cli_flag,
                 flag->layer_argument != nullptr ? "layer" : "engine", flag->capability, flag->cli_help);
  }
  return kExitChosen;
}

int run_select(const SelectOptions& o) {
  if (o.list_facts) return run_command(o.output.json, [&] { return list_facts(o); });
  if (o.list_flags) return run_command(o.output.json, [&] { return list_flags(o); });
  std::optional<SelectInputs> in;
  auto on_failure = [&](Failure& f) {
    if (!in) return;  // the command line itself was wrong
    if (o.output.json) {
      f.context = {{"platform", in->platform->spec()},
                   {"mode", std::string(mode_name(in->platform->mode()))},
                   {"config", to_json(in->config)}};
    } else if (!f.candidates.empty()) {
      // The explanation up to the failure, so that the reasons are visible without --json.
      print_header(*in);
      print_candidates(f.candidates);
    }
  };
  return run_command(
      o.output.json,
      [&] {
        in = build_inputs(o);
        Selector selector(in->platform);
        const std::shared_ptr<const Selection> s = selector.select(in->engine, in->layer);
        if (o.output.json)
          print_json(report::selection_json(*s, *in->platform, in->config, in->layer.num_heads, in->requested));
        else
          print_explanation(*in, *s);
        return static_cast<int>(kExitChosen);
      },
      on_failure);
}

}  // namespace

void add_select_command(CLI::App& app, CommandContext& context) {
  auto options = std::make_shared<SelectOptions>();
  CLI::App* sub = app.add_subcommand("select", "choose the attention backend for one layer, and explain the choice");
  options->platform.add_to(*sub);
  options->layer.add_to(*sub);
  options->backend.add_to(*sub);
  options->output.add_to(*sub);
  sub->add_flag("--list-facts", options->list_facts,
                "document every runtime fact with its value on the chosen platform, and exit");
  CLI::Option* list_flags_option = sub->add_flag("--list-flags", options->list_flags,
                                          "document every selector flag (its CLI flag, C API and Python name), and exit");
  sub->add_flag("--markdown", options->markdown, "with --list-flags: a Markdown table (for the docs)")
      ->needs(list_flags_option)
      ->excludes(sub->get_option("--json"));
  sub->callback([options, &context] { context.run = [options] { return run_select(*options); }; });
}

}  // namespace attnsel::cli
