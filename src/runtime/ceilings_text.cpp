// Reading the ceilings: their one-line description, and the compute peak a kernel's
// figure is a fraction of.
#include <fmt/format.h>

#include "runtime/ceilings.hpp"

namespace attnsel::runtime {

std::string describe(const Ceilings& c) {
  return fmt::format("read {:.1f} GB/s, fp32 FMA {:.0f} GFLOP/s{}  ({} thread{}, measured now)", c.read_gbps,
                     c.fp32_gflops, c.bf16_gflops > 0 ? fmt::format(", bf16 dot {:.0f} GFLOP/s", c.bf16_gflops) : "",
                     c.threads, c.threads == 1 ? "" : "s");
}

ComputePeak compute_peak(const Ceilings& c, std::string_view isa) {
  const bool bf16 = isa.find("BF16") != std::string_view::npos && c.bf16_gflops > 0;
  return {bf16, bf16 ? c.bf16_gflops : c.fp32_gflops, bf16 ? "bf16 dot-product" : "fp32 FMA"};
}

}  // namespace attnsel::runtime
