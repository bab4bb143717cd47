// `attnsel run --model` for MLA models (DeepSeek-V2/V3, Kimi-K2): the model planned as
// `attnsel plan` plans it, then prefill and decode steps through every MLA layer on the
// host (runtime/mla_run_job.hpp), checked against the un-absorbed reference, with decode
// GB/s and GFLOP/s and prefill TFLOP/s as fractions of the read bandwidth and the compute
// peak measured in the same run.
#pragma once

#include <string>

#include "common_options.hpp"
#include "workload_options.hpp"

namespace attnsel::cli {

/// The `attnsel run` options an MLA run reads (model_line: apply_model's description).
struct MlaRunRequest {
  PlatformOptions platform;
  BackendChoiceOptions backend;
  ModelOptions model;
  OutputOptions output;
  std::string model_line;
  int batch = 4;
  int context = 1024;
  int new_tokens = 1;
  int decode_steps = 32;
  bool check = true;
  bool ceilings = true;
  bool progress = true;
};

/// Runs it and prints the report (text or --json); the exit code (kExitCheckFailed when the
/// check fails).
int run_mla(const MlaRunRequest& request);

}  // namespace attnsel::cli
