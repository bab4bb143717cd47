// `attnsel run --model` for MLA models (DeepSeek-V2/V3, Kimi-K2): the model planned as
// `attnsel plan` plans it, then prefill and decode steps through every MLA layer on the
// host (runtime/mla_run_job.hpp), checked against the un-absorbed reference, with decode
// GB/s and GFLOP/s and prefill TFLOP/s as fractions of the read bandwidth and the compute
// peak measured in the same run.
#pragma once

#include <string>

#include "run_request.hpp"

namespace attnsel::cli {

/// Runs the request (its model applied: model_line is apply_model's description) and prints
/// the report (text or --json); the exit code (kExitCheckFailed when the check fails).
int run_mla(const RunRequest& request, const std::string& model_line);

}  // namespace attnsel::cli
