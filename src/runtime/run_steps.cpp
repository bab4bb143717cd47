#include "runtime/run_steps.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "attnsel/errors.hpp"

namespace attnsel::runtime {

void check_steps(const RunSteps& s, int block_size) {
  if (s.batch <= 0) throw ValueError(fmt::format("batch = {}; it must be at least 1", s.batch));
  if (s.context < 0 || s.decode_steps < 0 || s.new_tokens <= 0)
    throw ValueError(fmt::format("context = {}, decode_steps = {}, new_tokens = {}: context and decode steps must be "
                                 ">= 0 and new tokens >= 1",
                                 s.context, s.decode_steps, s.new_tokens));
  if (s.context + s.decode_steps <= 0) throw ValueError("nothing to run: context and decode_steps are both 0");
  if (block_size <= 0) throw ValueError(fmt::format("block_size = {}; it must be at least 1", block_size));
}

int prefill_chunk(const RunSteps& s) { return std::clamp(s.prefill_chunk_tokens / s.batch, 1, std::max(1, s.context)); }

int max_step_tokens(const RunSteps& s) { return s.batch * std::max(prefill_chunk(s), s.new_tokens); }

std::int64_t max_positions(const RunSteps& s) {
  return std::int64_t(s.context) + std::int64_t(s.decode_steps) * s.new_tokens;
}

std::int64_t blocks_per_sequence(const RunSteps& s, int block_size) {
  return std::max<std::int64_t>(1, (max_positions(s) + block_size - 1) / block_size);
}

StepTally::StepTally(const RunSteps& steps, int num_layers, const Progress& progress)
    : s_(steps),
      layers_(num_layers),
      chunk_(prefill_chunk(steps)),
      prefill_steps_(steps.context > 0 ? (steps.context + chunk_ - 1) / chunk_ : 0),
      progress_(progress),
      total_(static_cast<std::int64_t>(prefill_steps_ + steps.decode_steps) * num_layers) {}

int StepTally::prefill_tokens(int i) const { return std::min(chunk_, s_.context - prefill_cached(i)); }

void StepTally::count(std::string_view phase, PhaseStats& stats, int tokens, double seconds, double layer_kv_bytes,
                      double layer_flops) {
  stats.seconds += seconds;
  stats.steps += 1;
  stats.tokens += static_cast<double>(tokens) * s_.batch;
  stats.kv_bytes += layer_kv_bytes * layers_;
  stats.flops += layer_flops * layers_;
  done_ += layers_;
  report(phase);
}

void StepTally::report(std::string_view phase) const {
  if (progress_) progress_(phase, done_, total_);
}

}  // namespace attnsel::runtime
