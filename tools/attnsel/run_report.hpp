// What the reports of `attnsel run` and `attnsel bench` print alike, for standard and MLA
// jobs: a run phase's figures and the host's ceilings as --json gives them, sizes, and the
// chosen backend's line.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "attnsel/platform.hpp"
#include "runtime/ceilings.hpp"
#include "runtime/run_steps.hpp"

namespace attnsel::cli {

/// {"steps", "seconds", "tokens", "tokens_per_s", "kv_bytes", "gb_per_s", "flops",
/// "gflop_per_s", "plan_us_per_step", "host_us_per_layer", "step_us", "layer_us"}.
nlohmann::json phase_json(const runtime::PhaseStats& p);

/// {"bf16_gflop_per_s", "fp32_gflop_per_s", "read_gb_per_s", "threads"}: the host's ceilings
/// (keys in order, as `attnsel run` and `attnsel bench` print them).
nlohmann::json ceilings_json(const runtime::Ceilings& c);

/// "1.5 GiB", or "300 MiB" below one GiB.
std::string bytes_label(double bytes);

/// "CPU_ATTN (attnsel::backends::CPUAttentionBackend), priority 0  kernel: AVX3+BF16": the
/// backend, its class, its priority where the platform ranks it, and the kernel's ISA.
std::string backend_line(const Selection& s, const std::string& isa);

}  // namespace attnsel::cli
