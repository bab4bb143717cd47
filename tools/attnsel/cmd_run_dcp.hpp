// `attnsel run --dcp R`: decode with the KV cache sharded across R ranks (decode context
// parallelism), launched as `mpirun -np R attnsel run --dcp R ...`. The backend is selected
// for the host as `attnsel run` selects it, and its kernel computes each rank's partial
// output and log-sum-exp over the rank's share of every sequence's tokens (a kernel that
// declares no LSE output is refused); the partial outputs are merged with their LSEs over
// MPI; rank 0 prints what vLLM's selection says of DCP for that backend, the check against
// the single-rank reference, tokens/s, and the merge's share of the step.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>

#include "run_request.hpp"

namespace attnsel::cli {

/// --dcp and --cp-kv-cache-interleave-size.
struct DcpOptions {
  int size = 0;        ///< 0: no DCP (the ordinary run)
  std::optional<int> interleave;  ///< --cp-kv-cache-interleave-size; nullopt: 1 (token by token)
  void add_to(CLI::App& app);
  bool enabled() const { return size > 0; }
  /// UsageError for --cp-kv-cache-interleave-size without --dcp: an ordinary run has no
  /// ranks to interleave, so the value would be ignored.
  void require_dcp_for_its_options() const;
};

/// Runs this process's rank of the group with what `attnsel run` parsed (the platform,
/// backend, model, output and steps; decode steps of one new token); returns the exit code
/// (on every rank).
int run_dcp(const DcpOptions& dcp, RunRequest request);

}  // namespace attnsel::cli
