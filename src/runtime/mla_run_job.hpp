// `attnsel run` for MLA models (DeepSeek-V2/V3, Kimi-K2), as a library: a synthetic batch
// prefilled in chunks, then decode steps, through every MLA layer of the model on the host.
// Each step is one plan (MlaImpl::plan, then update) and, per layer, the cache write
// (concat_and_cache_mla) and the layer's attention (execute: the absorbed decode for the
// decode requests, the 192/128 prefill with chunked context for the others). Every layer
// has its own kv_b_proj (W_UK, W_UV) synthesized from the seed and its own latent cache
// while they fit their budgets; beyond them layers share them round-robin. A sample of the
// last prefill and the last decode step (first and last layer, a few requests and heads)
// is checked against the un-absorbed double-precision reference; the phases are timed and
// counted with FlashMLA's formulas (runtime::MlaCounts).
// Thread-safety: run_mla_job may be called from any thread; it uses the kernels' own threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "attnsel/mla.hpp"
#include "runtime/mla_check.hpp"
#include "runtime/mla_workload.hpp"
#include "runtime/run_job.hpp"
#include "runtime/run_steps.hpp"

namespace attnsel::runtime {

/// An MLA run: the layer's shape, how many layers, and the workload's steps (a sequence
/// is a request).
struct MlaRunSpec : RunSteps {
  MlaLayerShape layer;
  int num_layers = 61;
  /// Reference multiply-adds each checked step may spend (mla_reference_cost per sample);
  /// at least one sample is always checked.
  double check_budget = 1e9;
  /// Layers get their own latent cache while the caches stay under this; beyond it they
  /// share caches round-robin (the working set stays far larger than any CPU cache).
  std::size_t max_cache_bytes = std::size_t{3} << 30;
  /// Layers get their own kv_b_proj and kernel implementation (which packs it) while those
  /// stay under this; beyond it they share them round-robin.
  std::size_t max_weight_bytes = std::size_t{1} << 30;
};

struct MlaCheckResult {
  bool ran = false;
  std::string step;  ///< "prefill" or "decode"
  MlaComparison comparison;
};

struct MlaRunReport {
  MlaRunSpec spec;
  int decode_query_len = 1;       ///< the plans' MlaPlanOptions::decode_query_len
  bool absorbed_decode = true;    ///< decode steps take the absorbed decode (else the prefill path)
  std::string prefill_plan;       ///< the last prefill step's plan, described
  std::string decode_plan;        ///< the last decode step's
  int distinct_caches = 0, distinct_weights = 0;
  std::size_t cache_bytes = 0;    ///< all distinct latent caches
  std::size_t weight_bytes = 0;   ///< all distinct kv_b_proj (the kernels' packed copies not counted)
  /// kv_bytes and flops by MlaCounts: decode (absorbed) and prefill (192/128 MHA) formulas.
  PhaseStats prefill, decode;
  PhaseStats decode_warmup;       ///< the first decode step when more follow, timed apart
  MlaCheckResult check_prefill, check_decode;
  bool check_passed() const {
    return (!check_prefill.ran || check_prefill.comparison.passed()) &&
           (!check_decode.ran || check_decode.comparison.passed());
  }
};

using MlaImplFactory = std::function<std::unique_ptr<kernel::MlaImpl>(const kernel::MlaLayerParams&)>;

/// Sizes the run's host memory (caches, weights, step buffers, a bound on the kernel's
/// workspace) against what is available; ValueError for an impossible spec.
MemoryNeed mla_memory_need(const MlaRunSpec& spec);

/// Throws ValueError for an impossible spec and for one whose memory does not fit, before
/// allocating anything.
MlaRunReport run_mla_job(const MlaRunSpec& spec, const MlaImplFactory& make_impl, const Progress& progress = {});

}  // namespace attnsel::runtime
