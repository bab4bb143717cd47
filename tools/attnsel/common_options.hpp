// Options shared by the attnsel subcommands (platform, runtime facts, mode, backend choice,
// layer description, output format) and the mapping from errors to exit codes.
//
// A subcommand declares the option groups it needs, lets CLI11 parse them, then turns them
// into library values through the `make_*` functions below. Those functions run in the
// "usage" phase: any library error they raise (unknown backend, bad platform spec, ...) is
// a mistake in the command line and becomes a UsageError (exit code 2).
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "attnsel/errors.hpp"
#include "attnsel/platform.hpp"
#include "attnsel/selector.hpp"

namespace attnsel::cli {

/// The process exit status of every subcommand.
enum ExitCode : int {
  kExitChosen = 0,     ///< success (a backend was chosen, a listing was printed)
  kExitUsage = 2,      ///< unknown flag, malformed or conflicting value, unknown name
  kExitNoBackend = 3,  ///< no valid backend, or the explicit choice is invalid
  kExitInternal = 4,   ///< anything unexpected
  kExitCheckFailed = 5,  ///< `run`/`bench`: the kernel's outputs disagree with the reference
};

/// A mistake in the command line. `error_type` names the library error it came from
/// ("ValueError", ...) or "UsageError" when the CLI itself found it.
class UsageError : public std::runtime_error {
 public:
  explicit UsageError(const std::string& message, std::string error_type = "UsageError")
      : std::runtime_error(message), error_type_(std::move(error_type)) {}
  const std::string& error_type() const { return error_type_; }

 private:
  std::string error_type_;
};

/// Runs `parse` and turns any attnsel::Error it throws into a UsageError.
template <class F>
decltype(auto) as_usage(F&& parse) {
  try {
    return std::forward<F>(parse)();
  } catch (const Error& e) {
    throw UsageError(e.what(), std::string(error_kind_name(e.kind())));
  }
}

/// The check of an integer option: decimal digits with an optional leading '-', in [min,
/// max] (at most the option's type's range); else "must be <what>, got <text>", with the
/// bound when the value is beyond it. The text is rewritten to plain decimal, so that
/// CLI11, which reads "010" as octal and "0x10" as hex and clamps what overflows 64 bits,
/// converts exactly the number the user wrote: add it with Option::transform (check()
/// would drop the rewritten text).
CLI::Validator integer_check(std::string what, std::int64_t min, std::int64_t max);

/// Counts and sizes: "must be a positive integer" (an int, or an int64 for 64-bit options).
extern const CLI::Validator PositiveInteger;
extern const CLI::Validator PositiveInteger64;
/// Counts that may be zero.
extern const CLI::Validator NonNegativeInteger;
/// Any int (the engine arguments check their own range): only the decimal form is checked.
extern const CLI::Validator Integer;

/// An option whose value is one of vLLM's cache dtype names ("auto", "fp8", ...), handed to
/// `store` as the enum when the command line is parsed; any other text (the empty one too)
/// is a usage error with the one cache-dtype message, naming `flag`.
CLI::Option* add_cache_dtype_option(CLI::App& app, const std::string& flag, std::function<void(CacheDType)> store,
                                    const std::string& help);

/// Splits "NAME=VALUE"; UsageError naming `flag` and the expected form otherwise.
std::pair<std::string, std::string> split_assignment(const std::string& text, std::string_view flag,
                                                     std::string_view form);

/// --platform, --fact (repeatable), --mode.
struct PlatformOptions {
  std::optional<std::string> platform;  ///< nullopt: the host
  std::vector<std::string> facts;  ///< "NAME=VALUE"
  std::string mode;                ///< empty = the platform's default

  void add_to(CLI::App& app);
  /// The simulated platform (or the host) with the facts applied.
  std::shared_ptr<Platform> make_platform() const;
};

/// --attention-backend, --attention-config, --backend-per-kind (repeatable).
struct BackendChoiceOptions {
  std::string attention_backend;              ///< meaningful only when --attention-backend was given
  std::string attention_config;               ///< meaningful only when --attention-config was given
  std::vector<std::string> backend_per_kind;  ///< "KIND=NAME"

  void add_to(CLI::App& app);
  /// Applies them to `config` through vLLM's validators (make_attention_config, then the
  /// per-kind overrides).
  void apply(AttentionConfig& config) const;

 private:
  CLI::Option* attention_backend_opt_ = nullptr;
  CLI::Option* attention_config_opt_ = nullptr;
};

/// The layer being selected for: every argument of get_attn_backend and every flag of
/// AttentionSelectorConfig.
struct LayerOptions {
  int head_size = 128;
  std::string dtype = "bfloat16";
  std::optional<CacheDType> kv_cache_dtype;  ///< nullopt: --kv-cache-dtype not given (vLLM's None)
  int block_size = 0;          ///< meaningful only when --block-size was given
  std::string attn_type = "decoder";
  int num_heads = 0;           ///< meaningful only when --num-heads was given
  std::optional<CacheDType> run_cache_dtype;  ///< nullopt: the layer's kv cache dtype, or auto
  /// The boolean selector flags, one per row of the table of checks with a CLI flag,
  /// keyed by vLLM's field name ("use_mla"): the layer's or the engine's.
  std::map<std::string, bool, std::less<>> flags;
  bool flag(std::string_view field) const;

  void add_to(CLI::App& app);
  LayerRequest make_layer() const;
  /// Fills the engine-level fields (cache config, parallel sizes, switches) of `engine`; a
  /// switch flag turns its field on and never off.
  void apply(EngineConfig& engine) const;

 private:
  CLI::Option* block_size_opt_ = nullptr;
  CLI::Option* num_heads_opt_ = nullptr;
};

/// --json.
struct OutputOptions {
  bool json = false;
  void add_to(CLI::App& app);
};

/// The JSON object printed for a failure: {"error", "error_type", "candidates"}.
struct Failure {
  std::string message;
  std::string error_type;
  std::vector<Candidate> candidates;
  nlohmann::ordered_json context = nlohmann::ordered_json::object();  ///< extra fields for the JSON object
};

/// Runs a command body and maps what it throws to an exit code: UsageError → 2,
/// SelectionError and other attnsel::Error → 3, anything else → 4. The message goes to
/// stderr; with `json` the failure object is also printed to stdout. `on_failure` (optional)
/// runs first: it may print context (e.g. the candidates) or add fields to `context`.
int run_command(bool json, const std::function<int()>& body, const std::function<void(Failure&)>& on_failure = {});

struct CommandContext;
/// Parses the command line and runs the chosen subcommand. CLI11's parse errors (unknown
/// flag, malformed number, value not in the valid set) print their message and give
/// kExitUsage; --help gives 0.
int run_cli(CLI::App& app, CommandContext& context, int argc, char** argv);

}  // namespace attnsel::cli
