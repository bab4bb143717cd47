#include <fmt/format.h>

#include "runtime/ceilings.hpp"

namespace attnsel::runtime {

std::string describe(const Ceilings& c) {
  return fmt::format("read {:.1f} GB/s, fp32 FMA {:.0f} GFLOP/s{}  ({} thread{}, measured now)", c.read_gbps,
                     c.fp32_gflops, c.bf16_gflops > 0 ? fmt::format(", bf16 dot {:.0f} GFLOP/s", c.bf16_gflops) : "",
                     c.threads, c.threads == 1 ? "" : "s");
}

}  // namespace attnsel::runtime
