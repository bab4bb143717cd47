// The steps of a synthetic run, standard and MLA alike: a batch whose context is prefilled
// in chunks, then decode steps of a few new tokens each. The sizes that follow from them,
// and the tally that counts each step into its phase's figures and reports the progress.
// Thread-safety: RunSteps is a plain value; a StepTally belongs to one run.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

namespace attnsel::runtime {

/// A run's batch and steps (`attnsel run` --batch, --context, --new-tokens, --decode-steps, --check).
struct RunSteps {
  int batch = 4;
  int context = 1024;               ///< prompt tokens per sequence (prefilled)
  int new_tokens = 1;               ///< query tokens per sequence in each decode step
  int decode_steps = 32;
  int prefill_chunk_tokens = 8192;  ///< tokens per prefill step across the batch (chunked prefill)
  bool check = true;
  std::uint64_t seed = 1;

  /// The steps part of a spec that extends them, to copy as a whole.
  RunSteps& steps() { return *this; }
  const RunSteps& steps() const { return *this; }
};

/// ValueError for steps no run can take: no sequence, a negative context or step count, no
/// new token, nothing to run, a block size below 1 (`block_size`: the run's cache's).
void check_steps(const RunSteps& s, int block_size);

/// Tokens per sequence in one prefill step: the batch's share of the chunk, within [1, context].
int prefill_chunk(const RunSteps& s);
/// Query tokens of the largest step, all sequences (a prefill chunk or a decode step).
int max_step_tokens(const RunSteps& s);
/// Positions a sequence reaches: its context and every decode step's tokens.
std::int64_t max_positions(const RunSteps& s);
/// Cache blocks one sequence needs (at least 1).
std::int64_t blocks_per_sequence(const RunSteps& s, int block_size);

struct PhaseStats {
  int steps = 0;             ///< batch steps (each runs every layer)
  double seconds = 0.0;      ///< write_kv_cache + forward, all layers
  double tokens = 0.0;       ///< query tokens processed (per layer stack)
  double kv_bytes = 0.0;     ///< K and V bytes attended, all layers (read once each)
  double flops = 0.0;        ///< 4·q·visible keys·d·heads, all layers
  double plan_seconds = 0.0;   ///< host time building or updating the step plans
  double issue_seconds = 0.0;  ///< host time issuing the layers (GPU: launches return before the kernels end)
  std::int64_t layers = 0;     ///< layer executions (steps × layers)
  double plan_us_per_step() const { return steps ? plan_seconds / steps * 1e6 : 0.0; }
  double host_us_per_layer() const { return layers ? issue_seconds / static_cast<double>(layers) * 1e6 : 0.0; }
  double tokens_per_s() const { return seconds > 0 ? tokens / seconds : 0.0; }
  double gbps() const { return seconds > 0 ? kv_bytes / seconds / 1e9 : 0.0; }
  double gflops() const { return seconds > 0 ? flops / seconds / 1e9 : 0.0; }
};

/// Called after every step: (phase "prefill"/"decode"/"check", done, total).
using Progress = std::function<void(std::string_view phase, std::int64_t done, std::int64_t total)>;

/// A run's steps in order — the prefill chunks, then the decode steps — with the tokens each
/// finds cached, counted into their phases; the progress advances by the layers of each step.
class StepTally {
 public:
  StepTally(const RunSteps& steps, int num_layers, const Progress& progress);

  int prefill_steps() const { return prefill_steps_; }
  /// Prefill step i: the tokens of each sequence cached before it, and its new ones.
  int prefill_cached(int i) const { return i * chunk_; }
  int prefill_tokens(int i) const;
  /// Decode step i: the tokens of each sequence cached before it.
  int decode_cached(int i) const { return s_.context + i * s_.new_tokens; }
  /// The decode steps timed apart as the warm-up: the first, when more follow.
  int decode_warmup_steps() const { return s_.decode_steps > 1 ? 1 : 0; }

  /// Counts a step of `tokens` new tokens a sequence, which took `seconds`, into `stats`:
  /// one layer's K/V bytes and FLOPs times the layers; then reports the progress of `phase`.
  void count(std::string_view phase, PhaseStats& stats, int tokens, double seconds, double layer_kv_bytes,
             double layer_flops);
  /// Reports the progress as it stands, in `phase` (the check between the phases).
  void report(std::string_view phase) const;

 private:
  const RunSteps& s_;
  int layers_;
  int chunk_;
  int prefill_steps_;
  const Progress& progress_;
  std::int64_t done_ = 0;
  std::int64_t total_;
};

}  // namespace attnsel::runtime
