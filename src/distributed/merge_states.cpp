#include "distributed/merge_states.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "attnsel/errors.hpp"

namespace attnsel::distributed {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// NaN and +inf carry no usable weight: they count as an empty shard.
float sanitize(float lse) { return std::isnan(lse) || lse == std::numeric_limits<float>::infinity() ? kNegInf : lse; }

// log(sum_r exp(lse_r)) over `world` values `stride` apart, -inf when every one is -inf.
float log_sum_exp(const float* lse, int world, std::size_t stride) {
  float mx = kNegInf;
  for (int r = 0; r < world; ++r) mx = std::max(mx, sanitize(lse[static_cast<std::size_t>(r) * stride]));
  if (mx == kNegInf) return kNegInf;
  double sum = 0.0;
  for (int r = 0; r < world; ++r) sum += std::exp(static_cast<double>(sanitize(lse[static_cast<std::size_t>(r) * stride]) - mx));
  return static_cast<float>(std::log(sum)) + mx;
}

// exp(lse_r - merged), 0 when the difference is NaN or the shard is empty.
float weight(float lse_r, float merged) {
  const float diff = sanitize(lse_r) - merged;
  if (std::isnan(diff) || diff == std::numeric_limits<float>::infinity()) return 0.0f;
  return std::exp(diff);
}

void check(bool ok, const char* what) {
  if (!ok) throw ValueError(std::string("DCP merge: ") + what);
}

}  // namespace

void correct_partial_output(std::span<const float> lses, int world, int rank, int tokens, int heads, int head_size,
                            std::span<float> out, std::span<float> merged_lse) {
  check(world >= 1 && rank >= 0 && rank < world, "rank outside the group");
  const std::size_t th = static_cast<std::size_t>(tokens) * static_cast<std::size_t>(heads);
  check(lses.size() >= th * static_cast<std::size_t>(world), "the gathered LSEs are smaller than world x tokens x heads");
  check(out.size() >= th * static_cast<std::size_t>(head_size), "the output is smaller than tokens x heads x head_size");
  check(merged_lse.empty() || merged_lse.size() >= th, "the merged LSE is smaller than tokens x heads");
  const std::int64_t n = static_cast<std::int64_t>(th);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    const auto u = static_cast<std::size_t>(i);
    const float merged = log_sum_exp(lses.data() + u, world, th);
    const float w = weight(lses[static_cast<std::size_t>(rank) * th + u], merged);
    float* o = out.data() + u * static_cast<std::size_t>(head_size);
    // A weight of 0 zeroes the row even when it holds NaN (an empty shard's garbage).
    for (int d = 0; d < head_size; ++d) o[d] = w == 0.0f ? 0.0f : o[d] * w;
    if (!merged_lse.empty()) merged_lse[u] = merged;
  }
}

void merge_partials(std::span<const float> outs, std::span<const float> lses, int world, int tokens, int heads,
                    int head_size, std::span<float> out, std::span<float> lse) {
  const std::size_t th = static_cast<std::size_t>(tokens) * static_cast<std::size_t>(heads);
  const std::size_t thd = th * static_cast<std::size_t>(head_size);
  check(outs.size() >= thd * static_cast<std::size_t>(world), "the partial outputs are smaller than world x tokens x "
                                                              "heads x head_size");
  check(out.size() >= thd, "the output is smaller than tokens x heads x head_size");
  std::fill(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(thd), 0.0f);
  std::vector<float> scaled(thd);
  for (int r = 0; r < world; ++r) {
    std::memcpy(scaled.data(), outs.data() + static_cast<std::size_t>(r) * thd, thd * sizeof(float));
    correct_partial_output(lses, world, r, tokens, heads, head_size, scaled, r == 0 ? lse : std::span<float>());
    for (std::size_t i = 0; i < thd; ++i) out[i] += scaled[i];
  }
}

void pack_heads_by_rank(std::span<const float> in, int world, int tokens, int heads, int head_size,
                        std::span<float> packed) {
  check(world >= 1 && heads % world == 0, "the heads must divide evenly among the ranks");
  const std::size_t hpr = static_cast<std::size_t>(heads / world), D = static_cast<std::size_t>(head_size);
  const std::size_t thd = static_cast<std::size_t>(tokens) * static_cast<std::size_t>(heads) * D;
  check(in.size() >= thd && packed.size() >= thd, "buffers smaller than tokens x heads x head_size");
  for (int r = 0; r < world; ++r)
    for (int t = 0; t < tokens; ++t)
      std::memcpy(packed.data() + ((static_cast<std::size_t>(r) * tokens + static_cast<std::size_t>(t)) * hpr) * D,
                  in.data() + (static_cast<std::size_t>(t) * heads + static_cast<std::size_t>(r) * hpr) * D,
                  hpr * D * sizeof(float));
}

}  // namespace attnsel::distributed
