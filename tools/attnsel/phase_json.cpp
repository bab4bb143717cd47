#include "phase_json.hpp"

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

}  // namespace attnsel::cli
