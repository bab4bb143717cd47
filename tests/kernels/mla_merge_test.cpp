// merge_attn_states on the CPU: vLLM's rule against a double reference, and attnsel's rules
// where vLLM leaves a case open (+inf read as -inf, both sides -inf, a side of weight 0 never
// read), rows past prefill_tokens_with_context copied, in-place merging, bad arguments.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "attnsel/errors.hpp"
#include "kernels/mla/cpu/merge_attn_states.hpp"
#include "mla_test_util.hpp"

namespace attnsel::kernel::mla::cpu {
namespace {

using testing::Buffer;
using testing::read;

struct Merge {
  Buffer prefix, suffix, output, prefix_lse, suffix_lse, output_lse;
  int T, H, D;
  Merge(int t, int h, int d, ScalarType dtype, std::uint64_t seed) : T(t), H(h), D(d) {
    prefix = Buffer(dtype, {T, H, D});
    suffix = Buffer(dtype, {T, H, D});
    output = Buffer(dtype, {T, H, D});
    prefix_lse = Buffer(ScalarType::f32, {H, T});
    suffix_lse = Buffer(ScalarType::f32, {H, T});
    output_lse = Buffer(ScalarType::f32, {H, T});
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal(0.0, 1.0);
    for (Buffer* b : {&prefix, &suffix, &prefix_lse, &suffix_lse})
      for (std::size_t i = 0; i < b->bytes.size() / element_size(b->view.dtype); ++i)
        kernel::reference::store(b->bytes.data(), b->view.dtype, static_cast<std::int64_t>(i), normal(rng));
    output.poison();
    output_lse.poison();
  }
  float& lse(Buffer& b, int h, int t) { return reinterpret_cast<float*>(b.bytes.data())[h * T + t]; }
  void run(std::optional<std::int64_t> with_context = std::nullopt) {
    merge_attn_states(output.view, &output_lse.view, prefix.view, prefix_lse.view, suffix.view, suffix_lse.view,
                      with_context);
  }
};

// vLLM's test: LSEs ~ N(0, 1) with 10 % +inf (never both), head sizes 128 and 512, against
// double; tolerances atol = rtol = 1e-3 (fp32, fp16), bf16 1e-3 / 1e-2.
TEST(MlaMerge, RandomStatesAgainstDouble) {
  for (ScalarType dtype : {ScalarType::f32, ScalarType::f16, ScalarType::bf16})
    for (int D : {128, 512}) {
      Merge m(37, 5, D, dtype, static_cast<std::uint64_t>(D));
      std::mt19937 rng(3);
      for (int h = 0; h < m.H; ++h)
        for (int t = 0; t < m.T; ++t)
          if (rng() % 10 == 0) (rng() % 2 ? m.lse(m.prefix_lse, h, t) : m.lse(m.suffix_lse, h, t)) = HUGE_VALF;
      m.run();
      const std::vector<double> p = read(m.prefix.view, m.T), s = read(m.suffix.view, m.T), o = read(m.output.view, m.T);
      const double rtol = dtype == ScalarType::bf16 ? 1e-2 : 1e-3;
      for (int t = 0; t < m.T; ++t)
        for (int h = 0; h < m.H; ++h) {
          double pl = m.lse(m.prefix_lse, h, t), sl = m.lse(m.suffix_lse, h, t);
          if (std::isinf(pl)) pl = -INFINITY;
          if (std::isinf(sl)) sl = -INFINITY;
          const double M = std::max(pl, sl), a = std::exp(pl - M), c = std::exp(sl - M);
          EXPECT_NEAR(m.lse(m.output_lse, h, t), std::log(a + c) + M, 1e-5 * (1 + std::abs(M)));
          for (int d = 0; d < D; ++d) {
            const std::size_t i = (static_cast<std::size_t>(t) * m.H + h) * D + d;
            const double want = (p[i] * a + s[i] * c) / (a + c);
            ASSERT_NEAR(o[i], want, 1e-3 + rtol * std::abs(want)) << to_string(dtype) << " t " << t << " h " << h;
          }
        }
    }
}

TEST(MlaMerge, EmptySidesAndWeightZeroNeverRead) {
  Merge m(4, 1, 128, ScalarType::f32, 1);
  // t0: prefix empty (+inf, FlashAttention-2's) → the suffix exactly; t1: suffix empty (-inf)
  // → the prefix exactly; t2: both empty → 0 and -inf; t3: prefix weight exp(-200) = 0 in
  // fp32, its output NaN → never read.
  m.lse(m.prefix_lse, 0, 0) = HUGE_VALF;
  m.lse(m.suffix_lse, 0, 1) = -HUGE_VALF;
  m.lse(m.prefix_lse, 0, 2) = -HUGE_VALF;
  m.lse(m.suffix_lse, 0, 2) = HUGE_VALF;
  m.lse(m.prefix_lse, 0, 3) = -200.0f;
  m.lse(m.suffix_lse, 0, 3) = 1.0f;
  for (int d = 0; d < 128; ++d) reinterpret_cast<float*>(m.prefix.bytes.data())[3 * 128 + d] = NAN;
  for (int d = 0; d < 128; ++d) reinterpret_cast<float*>(m.prefix.bytes.data())[2 * 128 + d] = NAN;
  m.run();
  const auto* o = reinterpret_cast<const float*>(m.output.bytes.data());
  const auto* p = reinterpret_cast<const float*>(m.prefix.bytes.data());
  const auto* s = reinterpret_cast<const float*>(m.suffix.bytes.data());
  for (int d = 0; d < 128; ++d) {
    EXPECT_EQ(o[d], s[d]);
    EXPECT_EQ(o[128 + d], p[128 + d]);
    EXPECT_EQ(o[256 + d], 0.0f);
    EXPECT_EQ(o[384 + d], s[384 + d]);
  }
  EXPECT_EQ(m.lse(m.output_lse, 0, 0), m.lse(m.suffix_lse, 0, 0));
  EXPECT_EQ(m.lse(m.output_lse, 0, 1), m.lse(m.prefix_lse, 0, 1));
  EXPECT_EQ(m.lse(m.output_lse, 0, 2), -HUGE_VALF);
  EXPECT_EQ(m.lse(m.output_lse, 0, 3), 1.0f);
}

TEST(MlaMerge, RowsPastTheTokensWithContextCopyTheSuffix) {
  Merge m(9, 3, 128, ScalarType::bf16, 5);
  m.run(4);
  const std::vector<double> s = read(m.suffix.view, m.T), o = read(m.output.view, m.T), p = read(m.prefix.view, m.T);
  for (std::size_t i = 4 * 3 * 128; i < s.size(); ++i) ASSERT_EQ(o[i], s[i]);
  bool mixed = false;  // the rows before merge both sides
  for (std::size_t i = 0; i < 4 * 3 * 128; ++i) mixed |= o[i] != s[i] && o[i] != p[i];
  EXPECT_TRUE(mixed);
  for (int h = 0; h < 3; ++h)
    for (int t = 4; t < 9; ++t) EXPECT_EQ(m.lse(m.output_lse, h, t), m.lse(m.suffix_lse, h, t));
}

TEST(MlaMerge, InPlaceEqualsOutOfPlace) {
  Merge a(11, 2, 128, ScalarType::f32, 9), b(11, 2, 128, ScalarType::f32, 9);
  a.run();
  merge_attn_states(b.prefix.view, &b.prefix_lse.view, b.prefix.view, b.prefix_lse.view, b.suffix.view,
                    b.suffix_lse.view);
  EXPECT_EQ(a.output.bytes, b.prefix.bytes);
  EXPECT_EQ(a.output_lse.bytes, b.prefix_lse.bytes);
}

TEST(MlaMerge, BadArgumentsAreRefused) {
  Merge m(5, 2, 128, ScalarType::f32, 2);
  TensorView wrong = m.output.view;
  wrong.shape[2] = 64;
  EXPECT_THROW(merge_attn_states(wrong, nullptr, m.prefix.view, m.prefix_lse.view, m.suffix.view, m.suffix_lse.view),
               ValueError);
  TensorView lse_tokens_first = m.prefix_lse.view;  // [tokens, heads] instead of [heads, tokens]
  std::swap(lse_tokens_first.shape[0], lse_tokens_first.shape[1]);
  EXPECT_THROW(merge_attn_states(m.output.view, nullptr, m.prefix.view, lse_tokens_first, m.suffix.view,
                                 m.suffix_lse.view),
               ValueError);
  EXPECT_THROW(m.run(6), ValueError);
  TensorView shifted = m.suffix.view;  // overlaps the suffix without being it
  shifted.data = m.suffix.bytes.data() + 4;
  shifted.shape[0] = 4;
  TensorView prefix4 = m.prefix.view, suffix4 = m.suffix.view;
  prefix4.shape[0] = suffix4.shape[0] = 4;
  TensorView p_lse = m.prefix_lse.view, s_lse = m.suffix_lse.view;
  p_lse.shape[1] = s_lse.shape[1] = 4;
  EXPECT_THROW(merge_attn_states(shifted, nullptr, prefix4, p_lse, suffix4, s_lse), ValueError);
}

}  // namespace
}  // namespace attnsel::kernel::mla::cpu
