// CPU_MLA's prefill against the un-absorbed double-precision reference: the new tokens as
// causal 192/128 attention (odd and prime lengths), cached context read in 1, 2 and more
// chunks (requests whose later chunks are empty; a chunk size rounded down to the block
// size), fp8 caches (context dequantised, new tokens unquantised), and decode + prefill in
// one step matching the two run apart.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <span>

#include "attnsel/errors.hpp"
#include "kernels/mla/cpu/cpu_mla.hpp"
#include "mla_test_util.hpp"

namespace attnsel::kernel::mla::cpu {
namespace {

using testing::compare;
using testing::MlaSetup;
using testing::MlaWorkload;
using testing::read;

// execute() on the workload's step with `options`; the written rows, and the rows after
// them checked untouched.
std::vector<double> execute(MlaWorkload& w, const MlaPlanOptions& options, MlaStepSummary* summary = nullptr) {
  const auto impl = make_cpu_mla_impl(w.params);
  const auto plan = impl->plan(w.md, w.cache.view, {}, options);
  if (summary) *summary = mla_step_summary(*plan);
  w.poison_outputs();
  impl->execute(*plan, w.q.view, w.kv_c.view, w.k_pe.view, w.cache.view, w.output.view, {});
  std::vector<double> got = read(w.output.view, w.tokens + w.setup.extra_rows);
  const std::size_t written = static_cast<std::size_t>(w.tokens) * w.setup.heads * 128;
  for (std::size_t i = written; i < got.size(); ++i) EXPECT_TRUE(std::isnan(got[i])) << "row past num_actual_tokens written";
  got.resize(written);
  return got;
}

std::span<const std::int32_t> md_span(const std::vector<std::int32_t>& v, int first, int count) {
  return std::span<const std::int32_t>(v).subspan(static_cast<std::size_t>(first), static_cast<std::size_t>(count));
}

void check_prefill(MlaWorkload& w, std::int64_t chunk_tokens = 0) {
  MlaPlanOptions o = w.plan_options(false);
  o.context_chunk_tokens = chunk_tokens;
  EXPECT_EQ(compare(execute(w, o), w.reference().out, testing::prefill_tolerance(w.setup.dtype)), "")
      << testing::describe(w.setup) << " chunk_tokens=" << chunk_tokens;
}

TEST(MlaCpuPrefill, NewTokensOnly) {
  for (ScalarType dtype : {ScalarType::bf16, ScalarType::f32}) {
    MlaSetup s;
    s.dtype = dtype;
    s.heads = 12;
    // A prefill first: every request after it takes the prefill path, one-token ones too.
    s.requests = {{2, 2}, {1, 1}, {63, 63}, {64, 64}, {65, 65}, {127, 127}};
    MlaWorkload w(s);
    check_prefill(w);
  }
  MlaSetup s;
  s.heads = 1;
  s.requests = {{4099, 4099}};
  MlaWorkload w(s);
  check_prefill(w);
}

TEST(MlaCpuPrefill, F16AndHeadCounts) {
  for (int heads : {1, 16, 128}) {
    MlaSetup s;
    s.dtype = heads == 16 ? ScalarType::f16 : ScalarType::bf16;
    s.heads = heads;
    s.requests = {{9, 9}, {20, 3}};
    MlaWorkload w(s);
    check_prefill(w);
  }
}

// Contexts of 0, 1, 63, 64, 65 and 4099 tokens in one batch, read in one chunk, two, and
// five (992 tokens: 1000 per request rounded down to the block size); the result is the
// one-shot attention's.
TEST(MlaCpuPrefill, ChunkedContextEqualsOneShot) {
  for (ScalarType dtype : {ScalarType::f32, ScalarType::bf16}) {
    MlaSetup s;
    s.dtype = dtype;
    s.heads = 2;
    s.block_size = 16;
    s.requests = {{5, 5}, {1 + 3, 3}, {63 + 17, 17}, {64 + 2, 2}, {65 + 9, 9}, {4099 + 5, 5}};
    MlaWorkload w(s);
    const mla::reference::Result ref = w.reference();
    std::vector<double> one_chunk;
    for (auto [workspace, chunks] : {std::pair{5 * 4112, 1}, std::pair{5 * 2400, 2}, std::pair{5 * 1000, 5}}) {
      MlaPlanOptions o = w.plan_options(false);
      o.context_chunk_tokens = workspace;
      MlaStepSummary summary;
      const std::vector<double> got = execute(w, o, &summary);
      EXPECT_EQ(summary.context_chunks, chunks) << workspace;
      EXPECT_EQ(summary.num_prefills, 6);
      EXPECT_EQ(summary.num_decodes, 0);
      EXPECT_EQ(compare(got, ref.out, testing::prefill_tolerance(dtype)), "") << workspace << " " << to_string(dtype);
      if (one_chunk.empty()) one_chunk = got;
      if (dtype == ScalarType::f32) {
        EXPECT_EQ(compare(got, one_chunk, {1e-6, 1e-5, 1e-12}), "") << workspace;
      }
    }
  }
}

TEST(MlaCpuPrefill, Fp8ContextDequantisedNewTokensNot) {
  for (float k_scale : {0.37f, 1.0f, 3.0f}) {
    MlaSetup s;
    s.kv_cache_dtype = CacheDType::fp8_e4m3;
    s.k_scale = k_scale;
    s.heads = 8;
    s.requests = {{40, 7}, {130, 33}, {6, 6}};
    MlaWorkload w(s);
    check_prefill(w, 64);  // several chunks
  }
}

// Decodes first, then prefills, in one step: the same as the two parts run apart (splits
// forced, so that each part's work is what it is in the mixed step).
TEST(MlaCpuPrefill, MixedStepMatchesItsPartsRunApart) {
  for (CacheDType kv : {CacheDType::auto_, CacheDType::fp8}) {
    MlaSetup s;
    s.kv_cache_dtype = kv;
    s.k_scale = 0.5f;
    s.heads = 16;
    s.decode_query_len = 2;
    s.requests = {{300, 1}, {77, 2}, {0, 2}, {90, 12}, {33, 1}, {500, 40}};
    MlaWorkload w(s);
    CpuMlaOptions options;
    options.decode_splits = 2;
    const auto impl = make_cpu_mla_impl(w.params, options);
    MlaPlanOptions o = w.plan_options(false);
    o.context_chunk_tokens = 256;
    const auto plan = impl->plan(w.md, w.cache.view, {}, o);
    const MlaStepSummary summary = mla_step_summary(*plan);
    EXPECT_EQ(summary.num_decodes, 3);
    EXPECT_EQ(summary.num_decode_tokens, 5);
    EXPECT_EQ(summary.num_prefills, 3);
    EXPECT_EQ(summary.num_prefill_tokens, 53);
    impl->execute(*plan, w.q.view, w.kv_c.view, w.k_pe.view, w.cache.view, w.output.view, {});
    const std::vector<double> mixed = read(w.output.view, w.tokens);
    EXPECT_EQ(compare(mixed, w.reference().out, testing::kPrefillHalf), "") << cache_dtype_name(kv);

    // The decodes alone, then the prefills alone (their rows and block-table rows).
    const std::size_t row = static_cast<std::size_t>(s.heads) * 128;
    for (bool decodes : {true, false}) {
      AttentionMetadata part = w.md;
      const int first = decodes ? 0 : 3, count = 3, t0 = w.query_start_loc[static_cast<std::size_t>(first)];
      std::vector<std::int32_t> qsl;
      for (int i = 0; i <= count; ++i) qsl.push_back(w.query_start_loc[static_cast<std::size_t>(first + i)] - t0);
      part.num_seqs = count;
      part.num_actual_tokens = qsl.back();
      part.query_start_loc = qsl;
      part.seq_lens = md_span(w.seq_lens, first, count);
      part.block_table = md_span(w.block_table, first * w.md.max_blocks_per_seq, count * w.md.max_blocks_per_seq);
      part.slot_mapping = std::span<const std::int64_t>(w.slot_mapping).subspan(static_cast<std::size_t>(t0), qsl.back());
      auto rows = [&](const TensorView& t) {
        TensorView v = t;
        v.data = static_cast<std::uint8_t*>(t.data) + t0 * t.stride[0] * static_cast<std::int64_t>(element_size(t.dtype));
        v.shape[0] -= t0;
        return v;
      };
      testing::Buffer out(s.dtype, {qsl.back(), s.heads, 128});
      const auto part_plan = impl->plan(part, w.cache.view, {}, o);
      impl->execute(*part_plan, rows(w.q.view), rows(w.kv_c.view), rows(w.k_pe.view), w.cache.view, out.view, {});
      const std::vector<double> got = read(out.view, qsl.back());
      for (std::size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(got[i], mixed[static_cast<std::size_t>(t0) * row + i])
            << (decodes ? "decode" : "prefill") << " part, element " << i;
    }
  }
}

}  // namespace
}  // namespace attnsel::kernel::mla::cpu
