// What `attnsel run` parses, one request for its three runs: standard attention
// (cmd_run.cpp), an MLA model's layers (cmd_run_mla.hpp) and decode context parallelism
// (cmd_run_dcp.hpp).
#pragma once

#include <CLI/CLI.hpp>

#include "common_options.hpp"
#include "runtime/run_steps.hpp"
#include "workload_options.hpp"

namespace attnsel::cli {

struct RunRequest {
  PlatformOptions platform;
  BackendChoiceOptions backend;
  ModelOptions model;
  OutputOptions output;
  runtime::RunSteps steps;  ///< --batch, --context, --new-tokens, --decode-steps, --check
  bool ceilings = true;
  bool progress = true;
  bool cuda_graphs = false;
  bool sync_steps = false;

  /// Every option above, in the order --help lists them.
  void add_to(CLI::App& app);
};

}  // namespace attnsel::cli
