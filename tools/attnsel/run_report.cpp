#include "run_report.hpp"

#include <fmt/format.h>

namespace attnsel::cli {

nlohmann::json phase_json(const runtime::PhaseStats& p) {
  return {{"steps", p.steps},
          {"seconds", p.seconds},
          {"tokens", p.tokens},
          {"tokens_per_s", p.tokens_per_s()},
          {"kv_bytes", p.kv_bytes},
          {"gb_per_s", p.gbps()},
          {"flops", p.flops},
          {"gflop_per_s", p.gflops()},
          {"plan_us_per_step", p.plan_us_per_step()},
          {"host_us_per_layer", p.host_us_per_layer()},
          {"step_us", p.steps ? p.seconds / p.steps * 1e6 : 0.0},
          {"layer_us", p.layers ? p.seconds / static_cast<double>(p.layers) * 1e6 : 0.0}};
}

nlohmann::json ceilings_json(const runtime::Ceilings& c) {
  return {{"read_gb_per_s", c.read_gbps},
          {"fp32_gflop_per_s", c.fp32_gflops},
          {"bf16_gflop_per_s", c.bf16_gflops},
          {"threads", c.threads}};
}

std::string bytes_label(double bytes) {
  if (bytes >= 1 << 30) return fmt::format("{:.1f} GiB", bytes / (1 << 30));
  return fmt::format("{:.0f} MiB", bytes / (1 << 20));
}

std::string backend_line(const Selection& s, const std::string& isa) {
  return fmt::format("{} ({}){}  kernel: {}", s.backend, s.class_path,
                     s.priority ? fmt::format(", priority {}", *s.priority) : std::string(), isa);
}

}  // namespace attnsel::cli
