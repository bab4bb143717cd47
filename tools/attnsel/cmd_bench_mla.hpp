// `attnsel bench --model` for MLA models (DeepSeek-V2/V3, Kimi-K2): the model's MLA layer
// (its backend, heads per rank, softmax scale and block size as `attnsel plan` chooses
// them) timed on the host — decode 8 × 8192 and a causal 4096-token prefill, or one decode
// case of --batch × --context, the anchor for `attnsel run --model` on that shape — next to
// the compute peak and read bandwidth measured in the same run (runtime/mla_bench_job.hpp).
#pragma once

#include <string>
#include <vector>

#include "common_options.hpp"
#include "workload_options.hpp"

namespace attnsel::cli {

struct MlaBenchRequest {
  PlatformOptions platform;
  BackendChoiceOptions backend;
  ModelOptions model;  ///< apply_model done: mla_model set
  OutputOptions output;
  std::string model_line;
  std::vector<std::string> cases;  ///< empty: all
  int repeats = 5;
  double scale = 1.0;
  int block_size = 0;  ///< 0: the plan's
  int batch = 0;       ///< with context: one decode case of this shape
  int context = 0;
};

int run_mla_bench(const MlaBenchRequest& request);

}  // namespace attnsel::cli
