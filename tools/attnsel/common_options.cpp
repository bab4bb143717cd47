#include "common_options.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <limits>
#include <map>

#include "attnsel/capability_checks.hpp"
#include "attnsel/engine_args.hpp"
#include "commands.hpp"
#include "json_output.hpp"
#include "model/config_reader.hpp"

namespace attnsel::cli {

namespace {

// A CLI11 validator for an enumerated value: the message names every valid value.
CLI::Validator one_of(std::string what, std::vector<std::string> valid,
                      std::function<bool(const std::string&)> accepts) {
  const std::string list = fmt::format("{}", fmt::join(valid, ", "));
  return CLI::Validator(
      [what, list, accepts](std::string& value) -> std::string {
        if (accepts(value)) return {};
        return fmt::format("unknown {} '{}'; valid values are: {}", what, value, list);
      },
      fmt::format("{{{}}}", fmt::join(valid, "|")));
}

std::vector<std::string> strings(std::span<const std::string_view> views) {
  return {views.begin(), views.end()};
}

// Rejects a repeated NAME=VALUE flag that gives one name two different values.
void reject_conflicts(const std::vector<std::pair<std::string, std::string>>& assignments, std::string_view flag) {
  std::map<std::string, std::string> seen;
  for (const auto& [name, value] : assignments) {
    auto [it, fresh] = seen.emplace(name, value);
    if (!fresh && it->second != value)
      throw UsageError(fmt::format("conflicting {} values for {}: '{}' and '{}'", flag, name, it->second, value));
  }
}

}  // namespace

CLI::Option* add_cache_dtype_option(CLI::App& app, const std::string& flag, std::function<void(CacheDType)> store,
                                    const std::string& help) {
  return app.add_option_function<std::string>(
      flag,
      [flag, store = std::move(store)](const std::string& text) {
        try {
          store(cache_dtype_from(text, flag));
        } catch (const ValueError& e) {
          throw CLI::ValidationError(e.what());  // CLI11 reports it as a usage error (exit 2)
        }
      },
      help);
}

std::pair<std::string, std::string> split_assignment(const std::string& text, std::string_view flag,
                                                     std::string_view form) {
  const std::size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw UsageError(fmt::format("{} expects {}, got '{}'", flag, form, text));
  return {text.substr(0, eq), text.substr(eq + 1)};
}

// --- PlatformOptions ------------------------------------------------------------------

void PlatformOptions::add_to(CLI::App& app) {
  app.add_option("--platform", platform,
                 "where to select: cuda:MAJOR.MINOR, rocm:gfxNNN, xpu, cpu or other:NAME (default: this host)");
  app.add_option("--fact", facts,
                 "set a runtime fact or platform switch, NAME=VALUE (repeatable; see `attnsel select --list-facts`)")
      ->take_all()
      ->allow_extra_args(false);
  app.add_option("--mode", mode,
                 "reference: what vLLM would choose there; runnable: what this build can run "
                 "(default: reference for a simulated platform, runnable for the host)")
      ->check(one_of("mode", {"reference", "runnable"},
                     [](const std::string& s) { return parse_mode(s).has_value(); }));
}

std::shared_ptr<Platform> PlatformOptions::make_platform() const {
  std::vector<std::pair<std::string, std::string>> assignments;
  for (const std::string& f : facts) assignments.push_back(split_assignment(f, "--fact", "NAME=VALUE"));
  reject_conflicts(assignments, "--fact");
  const std::optional<SelectionMode> m = mode.empty() ? std::nullopt : parse_mode(mode);
  return as_usage([&] {
    return platform ? attnsel::make_platform(*platform, facts, m) : detect_host_platform(facts, m);
  });
}

// --- BackendChoiceOptions -------------------------------------------------------------

void BackendChoiceOptions::add_to(CLI::App& app) {
  attention_backend_opt_ = app.add_option("--attention-backend", attention_backend,
                                          "the backend to use (case-insensitive), or auto for the platform's "
                                          "priority list")
                               ->default_str("auto");
  attention_config_opt_ = app.add_option(
      "--attention-config", attention_config,
      R"(vLLM's --attention-config JSON, e.g. '{"flash_attn_version": 2, "backend_per_kind": {"sliding_window": )"
      R"("TRITON_ATTN"}}')");
  app.add_option("--backend-per-kind", backend_per_kind,
                 "override the backend for one KV-cache group kind, KIND=NAME (repeatable), e.g. "
                 "sliding_window=TRITON_ATTN")
      ->take_all()
      ->allow_extra_args(false);
}

void BackendChoiceOptions::apply(AttentionConfig& config) const {
  std::vector<std::pair<std::string, std::string>> assignments;
  for (const std::string& a : backend_per_kind)
    assignments.push_back(split_assignment(a, "--backend-per-kind", "KIND=NAME"));
  reject_conflicts(assignments, "--backend-per-kind");
  auto given = [](const CLI::Option* opt, const std::string& text) {
    return opt != nullptr && opt->count() > 0 ? std::optional<std::string_view>(text) : std::nullopt;
  };
  as_usage([&] {
    config = make_attention_config(given(attention_backend_opt_, attention_backend),
                                   given(attention_config_opt_, attention_config));
    for (const auto& [kind, name] : assignments) config.set_backend_per_kind(kind, name);
  });
}

CLI::Validator integer_check(std::string what, std::int64_t min, std::int64_t max) {
  return CLI::Validator(
      [what, min, max](std::string& input) -> std::string {
        const std::string_view digits = std::string_view(input).substr(input.starts_with('-') ? 1 : 0);
        const bool decimal = !digits.empty() && std::all_of(digits.begin(), digits.end(), [](char c) {
          return c >= '0' && c <= '9';
        });
        std::int64_t value = 0;
        const auto [end, ec] = std::from_chars(input.data(), input.data() + input.size(), value);
        const std::string shown = model::printable(input);
        if (!decimal || ec == std::errc::invalid_argument || end != input.data() + input.size())
          return fmt::format("must be {}, got '{}'", what, shown);
        if (ec == std::errc::result_out_of_range || value > max)
          return fmt::format("must be {} no larger than {}, got {}", what, max, shown);
        if (value < min) return fmt::format("must be {}, got {}", what, shown);
        input = std::to_string(value);  // plain decimal: CLI11 would read "010" as octal
        return {};
      },
      "");  // the help shows the option's type (INT) already
}

const CLI::Validator PositiveInteger = integer_check("a positive integer", 1, std::numeric_limits<int>::max());
const CLI::Validator PositiveInteger64 =
    integer_check("a positive integer", 1, std::numeric_limits<std::int64_t>::max());
const CLI::Validator NonNegativeInteger =
    integer_check("a non-negative integer", 0, std::numeric_limits<int>::max());
const CLI::Validator Integer =
    integer_check("an integer", std::numeric_limits<int>::min(), std::numeric_limits<int>::max());

// --- LayerOptions ---------------------------------------------------------------------

void LayerOptions::add_to(CLI::App& app) {
  app.add_option("--head-size", head_size, "attention head size")->transform(PositiveInteger)->capture_default_str();
  app.add_option("--dtype", dtype, "model (activation) dtype")
      ->check(one_of("dtype", strings(dtype_names()), [](const std::string& s) { return parse_dtype(s).has_value(); }))
      ->capture_default_str();
  std::vector<std::string_view> cache_dtypes;
  for (CacheDType d : all_cache_dtypes()) cache_dtypes.push_back(cache_dtype_name(d));
  add_cache_dtype_option(app, "--kv-cache-dtype", [this](CacheDType d) { kv_cache_dtype = d; },
                         fmt::format("KV-cache dtype, one of: {} (default: not given)", fmt::join(cache_dtypes, ", ")));
  block_size_opt_ = app.add_option("--block-size", block_size,
                                   "KV-cache block size; giving it makes it user-specified, so the selector sees it")
                        ->transform(PositiveInteger);
  app.add_option("--attn-type", attn_type, "attention type")
      ->check(one_of("attention type", strings(attn_type_names()),
                     [](const std::string& s) { return parse_attn_type(s).has_value(); }))
      ->capture_default_str();
  num_heads_opt_ = app.add_option("--num-heads", num_heads, "number of query heads (orders CUDA's sparse MLA list)")
                       ->transform(PositiveInteger);
  add_cache_dtype_option(app, "--run-cache-dtype", [this](CacheDType d) { run_cache_dtype = d; },
                         "CacheConfig.cache_dtype of the whole run, when it differs from this layer's (ROCm's "
                         "TurboQuant boundary rule); default: --kv-cache-dtype, else auto");
  for (const CapabilityCheck& check : capability_checks())
    if (!check.cli_flag.empty())
      app.add_flag(std::string(check.cli_flag), flags[std::string(check.flag)], std::string(check.cli_help));
}

LayerRequest LayerOptions::make_layer() const {
  LayerRequest layer;
  layer.head_size = head_size;
  layer.dtype = *parse_dtype(dtype);  // validated by the option's check
  layer.kv_cache_dtype = kv_cache_dtype;
  for (const CapabilityCheck& check : capability_checks())
    if (!check.cli_flag.empty() && check.layer_argument != nullptr) layer.*check.layer_argument = flag(check.flag);
  layer.attn_type = *parse_attn_type(attn_type);
  if (num_heads_opt_ != nullptr && num_heads_opt_->count() > 0) layer.num_heads = num_heads;
  return layer;
}

void LayerOptions::apply(EngineConfig& engine) const {
  engine.cache.cache_dtype = run_cache_dtype.value_or(kv_cache_dtype.value_or(CacheDType::auto_));
  if (block_size_opt_ != nullptr && block_size_opt_->count() > 0) {
    engine.cache.block_size = block_size;
    engine.cache.user_specified_block_size = true;
  }
  // A flag only turns its switch on: a switch the attention config set stays set.
  for (const CapabilityCheck& check : capability_checks())
    if (!check.cli_flag.empty() && check.to_engine != nullptr && flag(check.flag)) check.to_engine(engine, true);
}

bool LayerOptions::flag(std::string_view field) const {
  const auto it = flags.find(field);
  return it != flags.end() && it->second;
}

// --- OutputOptions --------------------------------------------------------------------

void OutputOptions::add_to(CLI::App& app) {
  app.add_flag("--json", json, "print one JSON object on stdout instead of the explanation");
}

// --- error → exit code ----------------------------------------------------------------

int run_command(bool json, const std::function<int()>& body, const std::function<void(Failure&)>& on_failure) {
  auto fail = [&](int code, Failure f) {
    if (on_failure) on_failure(f);
    std::fflush(stdout);
    fmt::print(stderr, "attnsel: error: {}\n", f.message);
    if (json) {
      nlohmann::ordered_json j = failure_json(f.message, f.error_type, f.candidates);
      j.update(f.context);
      print_json(j);
    }
    return code;
  };
  try {
    return body();
  } catch (const UsageError& e) {
    return fail(kExitUsage, {e.what(), e.error_type(), {}});
  } catch (const SelectionError& e) {
    return fail(kExitNoBackend, {e.what(), std::string(error_kind_name(e.kind())), e.candidates()});
  } catch (const Error& e) {
    return fail(kExitNoBackend, {e.what(), std::string(error_kind_name(e.kind())), {}});
  } catch (const std::exception& e) {
    return fail(kExitInternal, {fmt::format("internal error: {}", e.what()), "InternalError", {}});
  } catch (...) {
    return fail(kExitInternal, {"internal error: unknown exception", "InternalError", {}});
  }
}

int run_cli(CLI::App& app, CommandContext& context, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help, or the message and a hint, as CLI11 does
    return code == 0 ? kExitChosen : kExitUsage;
  }
  if (!context.run) return kExitUsage;  // unreachable with require_subcommand(1)
  return run_command(false, context.run);
}

}  // namespace attnsel::cli
