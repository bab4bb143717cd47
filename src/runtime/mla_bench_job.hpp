// The MLA benchmarks of `attnsel bench` (an MLA model's layer on the host), as a library:
// one layer's execute timed repeatedly (median) on a batch whose cache is already written,
// next to the compute peak probed around each pass, and, for decode batches, the absorbed
// decode kernel alone (decode_latent) beside it.
//
// Accounting (FlashMLA's, runtime::MlaCounts): decode FLOPs 2 · N · s_q · Σ L · (576 + 512)
// and bytes Σ L · 576 · e_kv + b · s_q · N · (576 + 512) · e; prefill FLOPs of the causal
// 192/128 attention 2 · N · (192 + 128) · Σ T (T + 1) / 2. The execute of a decode batch
// also runs the absorption (q_nope · W_UK) and W_UV, whose FLOPs are not counted: its figure
// is the layer's rate as `attnsel run` sees it, the kernel's is decode_latent's.
// Thread-safety: run one at a time (they measure the whole machine).
#pragma once

#include <string>
#include <vector>

#include "runtime/bench_job.hpp"
#include "runtime/ceilings.hpp"
#include "runtime/mla_run_job.hpp"
#include "runtime/mla_workload.hpp"
#include "runtime/paged_workload.hpp"

namespace attnsel::runtime {

struct MlaBenchCase {
  std::string name;
  MlaLayerShape layer;
  std::vector<SequenceShape> requests;  ///< decode requests first, as vLLM orders a batch
  bool decode = true;                   ///< decode: absorbed decode requests; prefill: causal new tokens, no context
  double target_pct = 0.0;              ///< decode: of decode_latent's rate; prefill: of execute's; 0 = none
};

struct MlaBenchResult : BenchResult {
  // BenchResult's figure / pct: the layer's execute in GFLOP/s of the compute peak.
  double gb_per_s = 0.0;         ///< decode: FlashMLA's bytes over the execute's time
  double read_pct = 0.0;         ///< ...of the read bandwidth measured before the cases
  double latent_seconds = 0.0;   ///< decode: decode_latent alone, median
  double latent_figure = 0.0;    ///< its GFLOP/s
  double latent_pct = 0.0;       ///< its median ratio to the compute peak probed around each pass, percent
  int check_samples = 0;         ///< (request, head) samples checked against the reference
};

/// An MLA layer's cases: decode 8 requests × 8192 tokens (one query token each; target: the
/// decode kernel at 60 % of the bf16 dot-product peak) and one causal prefill of 4096 new
/// tokens (target 55 %), at `layer`'s heads; `scale` < 1 shrinks the contexts.
std::vector<MlaBenchCase> standard_mla_bench_cases(const MlaLayerShape& layer, double scale = 1.0);

/// One decode case of a given shape (batch × context tokens, `new_tokens` query tokens per
/// request): the kernel-only anchor for `attnsel run` on the same shape. No target.
MlaBenchCase mla_shape_decode_case(const MlaLayerShape& layer, int batch, int context, int new_tokens);

/// Times `repeats` executes of `c` (and, for decode, as many decode_latent calls,
/// alternating) after a warm-up, each paired with a compute probe just before and after
/// (the bf16 dot-product peak when `isa` names BF16 and the CPU has it, else fp32 FMA), and
/// checks samples of the execute's output against the reference.
MlaBenchResult run_mla_bench_case(const MlaBenchCase& c, const MlaImplFactory& make_impl, const Ceilings& ceilings,
                                  const std::string& isa, int repeats = 5);

}  // namespace attnsel::runtime
