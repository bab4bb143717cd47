// A run phase's figures as `attnsel run --json` prints them (standard and MLA runs alike).
#pragma once

#include <nlohmann/json.hpp>

#include "runtime/run_job.hpp"

namespace attnsel::cli {

/// {"steps", "seconds", "tokens", "tokens_per_s", "kv_bytes", "gb_per_s", "flops",
/// "gflop_per_s", "plan_us_per_step", "host_us_per_layer", "step_us", "layer_us"}.
nlohmann::json phase_json(const runtime::PhaseStats& p);

}  // namespace attnsel::cli
