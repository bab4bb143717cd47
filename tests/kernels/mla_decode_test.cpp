// CPU_MLA's absorbed decode against the references: execute() against the un-absorbed
// double-precision MLA; decode_latent() against the latent MQA (output and LSE) and, through
// W_UV, against the un-absorbed MLA too, so that a misreading of the absorbed formula shared
// by the kernel and the latent reference cannot pass. Head counts 1-128, 1-4 query tokens
// per request, odd and prime lengths, block sizes 16/32/64, permuted block tables with
// holes and garbage, NaN-poisoned unused cache rows and outputs, fp8 caches, padding
// requests, forced and planned splits.
#include <gtest/gtest.h>

#include <hwy/targets.h>
#include <omp.h>

#include <cstring>
#include <memory>
#include <random>

#include "attnsel/errors.hpp"
#include "kernels/attention/cpu/work.hpp"
#include "kernels/mla/cpu/cpu_mla.hpp"
#include "kernels/mla/cpu/plan.hpp"
#include "mla_test_util.hpp"

namespace attnsel::kernel::mla::cpu {
namespace {

using testing::compare;
using testing::read;
using testing::Request;
using testing::MlaSetup;
using testing::MlaWorkload;

// Runs execute() and decode_latent() on a decode batch and checks both.
void check_decode(MlaWorkload& w, const CpuMlaOptions& options = {}) {
  const MlaSetup& s = w.setup;
  const std::string what = testing::describe(s);
  const auto impl = make_cpu_mla_impl(w.params, options);
  const auto plan = impl->plan(w.md, w.cache.view, {}, w.plan_options());
  const int N = s.heads, Td = w.num_decode_tokens();
  ASSERT_EQ(Td, w.tokens) << "a decode batch: " << what;
  impl->execute(*plan, w.q.view, w.kv_c.view, w.k_pe.view, w.cache.view, w.output.view, {});
  const mla::reference::Result ref = w.reference();
  const std::vector<double> got = read(w.output.view, w.tokens + s.extra_rows);
  const std::vector<double> written(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(ref.out.size()));
  EXPECT_EQ(compare(written, ref.out, testing::output_tolerance(s.dtype)), "") << "execute: " << what;
  for (std::size_t i = ref.out.size(); i < got.size(); ++i)
    ASSERT_TRUE(std::isnan(got[i])) << "execute wrote row " << i / (N * 128) << " past num_actual_tokens: " << what;

  w.absorbed_queries();
  impl->decode_latent(*plan, w.q_latent.view, w.cache.view, w.latent_out.view, {}, &w.lse.view);
  const mla::reference::Result latent = w.latent_reference();
  const std::vector<double> out = read(w.latent_out.view, Td);
  EXPECT_EQ(compare(out, latent.out, testing::latent_tolerance(s.dtype)), "") << "decode_latent output: " << what;
  EXPECT_EQ(compare(read(w.lse.view, Td), latent.lse, testing::lse_tolerance(s.dtype)), "")
      << "decode_latent LSE: " << what;
  EXPECT_EQ(compare(w.through_w_uv(out), ref.out, testing::output_tolerance(s.dtype)), "")
      << "decode_latent · W_UV against the un-absorbed reference: " << what;
  EXPECT_TRUE(std::isnan(read(w.latent_out.view, Td + 1)[static_cast<std::size_t>(Td) * N * 512]))
      << "decode_latent wrote past the decode tokens: " << what;
}

void check_decode(const MlaSetup& s, const CpuMlaOptions& options = {}) {
  MlaWorkload w(s);
  check_decode(w, options);
}

std::vector<Request> one_token_each(std::initializer_list<int> lens) {
  std::vector<Request> r;
  for (int L : lens) r.push_back({L, 1});
  return r;
}

TEST(MlaCpuDecode, HeadCountsAndOddLengths) {
  for (int heads : {1, 8, 12, 16}) {
    MlaSetup s;
    s.heads = heads;
    s.requests = one_token_each({1, 2, 63, 64, 65, 127, 128, 129});
    s.seed = static_cast<std::uint64_t>(heads);
    check_decode(s);
  }
  for (int heads : {96, 128}) {  // several row groups per request
    MlaSetup s;
    s.heads = heads;
    s.requests = one_token_each({1, 33});
    check_decode(s);
  }
}

TEST(MlaCpuDecode, ActivationDtypes) {
  for (ScalarType dtype : {ScalarType::f16, ScalarType::f32}) {
    MlaSetup s;
    s.dtype = dtype;
    s.heads = 12;
    s.requests = one_token_each({1, 64, 97});
    check_decode(s);
  }
}

TEST(MlaCpuDecode, BlockSizes) {
  // 1 and 5: no 16-key run lies in one block, so every run is staged.
  for (int block : {1, 5, 16, 32, 64}) {
    MlaSetup s;
    s.block_size = block;
    s.requests = one_token_each({1, 63, 64, 65, 200});
    s.seed = static_cast<std::uint64_t>(block);
    check_decode(s);
  }
}

TEST(MlaCpuDecode, SeveralQueryTokensPerRequest) {
  for (int s_q : {2, 3, 4})
    for (int heads : {12, 24}) {
      MlaSetup s;
      s.heads = heads;
      s.decode_query_len = 4;
      s.block_size = 32;
      s.requests = {{s_q, s_q}, {63, s_q}, {65, s_q}, {130, s_q}};
      s.seed = static_cast<std::uint64_t>(s_q * 100 + heads);
      check_decode(s);
    }
  MlaSetup mixed;  // query lengths differ between requests (varlen decode)
  mixed.heads = 16;
  mixed.decode_query_len = 4;
  mixed.requests = {{9, 1}, {40, 4}, {3, 2}, {77, 3}};
  check_decode(mixed);
}

TEST(MlaCpuDecode, VarlenBatch) {
  std::mt19937 rng(7);
  for (int mean : {40, 300}) {
    std::normal_distribution<double> len(mean, mean / 2.0);
    MlaSetup s;
    s.heads = 8;
    s.decode_query_len = 2;
    for (int i = 0; i < 6; ++i) s.requests.push_back({std::max(2, static_cast<int>(len(rng))), 2});
    check_decode(s);
  }
}

TEST(MlaCpuDecode, LongSequences) {
  MlaSetup s;
  s.heads = 2;
  s.requests = one_token_each({4099});
  check_decode(s);
  s.heads = 1;
  s.block_size = 64;
  s.requests = one_token_each({8191, 3});
  check_decode(s);
}

TEST(MlaCpuDecode, Fp8CacheAgainstTheDequantisedReference) {
  for (ScalarType dtype : {ScalarType::bf16, ScalarType::f32})
    for (float k_scale : {0.37f, 1.0f, 3.0f})
      for (CacheDType kv : {CacheDType::fp8, CacheDType::fp8_e4m3}) {
        MlaSetup s;
        s.dtype = dtype;
        s.kv_cache_dtype = kv;
        s.k_scale = k_scale;
        s.heads = 12;
        s.decode_query_len = 2;
        s.requests = {{1, 1}, {66, 2}, {129, 2}};
        check_decode(s);
      }
}

// The latent attention on fp8 caches at 16 and 32 rows (whole runs widened during the Q·Kᵀ
// of the run before) and 64 rows, over long requests in blocks of 16 and 64, split and not,
// against the latent reference (output and LSE).
TEST(MlaCpuDecode, Fp8LongRequestsEveryRowCount) {
  for (int heads : {16, 32, 64})
    for (int block : {16, 64}) {
      MlaSetup s;
      s.kv_cache_dtype = CacheDType::fp8_e4m3;
      s.k_scale = 0.37f;
      s.heads = heads;
      s.block_size = block;
      s.requests = one_token_each({1031, 77});
      s.seed = static_cast<std::uint64_t>(heads + block);
      MlaWorkload w(s);
      w.absorbed_queries();
      const mla::reference::Result ref = w.latent_reference();
      for (int splits : {1, 3}) {
        CpuMlaOptions o;
        o.decode_splits = splits;
        const auto impl = make_cpu_mla_impl(w.params, o);
        const auto plan = impl->plan(w.md, w.cache.view, {}, w.plan_options());
        w.poison_outputs();
        impl->decode_latent(*plan, w.q_latent.view, w.cache.view, w.latent_out.view, {}, &w.lse.view);
        const std::string what = fmt::format("{}, {} splits", testing::describe(s), splits);
        EXPECT_EQ(compare(read(w.latent_out.view, w.tokens), ref.out, testing::latent_tolerance(s.dtype)), "") << what;
        EXPECT_EQ(compare(read(w.lse.view, w.tokens), ref.lse, testing::lse_tolerance(s.dtype)), "") << what;
      }
    }
}

TEST(MlaCpuDecode, EveryTargetAndBothBf16Paths) {
  for (std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (bool bf16 : {true, false})
      for (CacheDType kv : {CacheDType::auto_, CacheDType::fp8_e4m3}) {
        MlaSetup s;
        s.kv_cache_dtype = kv;
        s.k_scale = 0.5f;
        s.heads = 16;
        s.decode_query_len = 3;
        s.requests = {{70, 3}, {5, 1}};
        CpuMlaOptions o;
        o.allow_bf16_dot = bf16;
        SCOPED_TRACE(fmt::format("target {} bf16 {}", hwy::TargetName(target), bf16));
        check_decode(s, o);
      }
  }
  hwy::SetSupportedTargetsForTest(0);
}

// Row j of a request with s_q = 4 sees positions [0, L - 4 + j]: replacing the cached row at
// position L - 4 + k (k = 1, 2, 3) with huge values must leave rows j < k bit-identical, and
// the reference (which masks) must still agree.
TEST(MlaCpuDecode, MtpRowsIgnoreTheRowsAfterTheirs) {
  MlaSetup s;
  s.heads = 8;
  s.decode_query_len = 4;
  s.requests = {{37, 4}, {70, 4}};
  MlaWorkload w(s);
  const auto impl = make_cpu_mla_impl(w.params);
  const auto plan = impl->plan(w.md, w.cache.view, {}, w.plan_options());
  w.absorbed_queries();
  auto run = [&] {
    impl->decode_latent(*plan, w.q_latent.view, w.cache.view, w.latent_out.view, {}, &w.lse.view);
    return read(w.latent_out.view, w.tokens);
  };
  const std::vector<double> before = run();
  const int L = 70, seq = 1, t0 = 4;
  for (int k = 3; k >= 1; --k) {
    const std::int64_t slot = w.slot_of(seq, L - 4 + k);
    const std::int64_t row = slot * 576;  // [num_blocks, block_size, 576] contiguous
    for (int e = 0; e < 576; ++e) kernel::reference::store(w.cache.bytes.data(), w.cache.view.dtype, row + e, k % 2 ? 40.0 : -40.0);
    const std::vector<double> after = run();
    for (int j = 0; j < k; ++j)
      for (int i = 0; i < s.heads * 512; ++i) {
        const std::size_t at = static_cast<std::size_t>((t0 + j) * s.heads * 512 + i);
        ASSERT_EQ(after[at], before[at]) << "row " << j << " changed when position L - 4 + " << k << " did";
      }
    EXPECT_EQ(compare(after, w.latent_reference().out, testing::latent_tolerance(s.dtype)), "") << "k = " << k;
  }
  EXPECT_EQ(compare(read(w.lse.view, w.tokens), w.latent_reference().lse, testing::kLse), "");
}

// Padding requests (L = 0, as CUDA-graph padding makes them) attend nothing: output 0, LSE
// -inf; their neighbours are unaffected.
TEST(MlaCpuDecode, PaddingRequestsWriteZerosAndMinusInfinity) {
  for (int s_q : {1, 2}) {
    MlaSetup s;
    s.heads = 12;
    s.decode_query_len = 2;
    s.requests = {{65, s_q}, {0, s_q}, {33, s_q}, {0, s_q}};
    MlaWorkload w(s);
    check_decode(w);
    const std::vector<double> lse = read(w.lse.view, w.tokens);
    const std::vector<double> out = read(w.latent_out.view, w.tokens);
    for (int t = s_q; t < 2 * s_q; ++t)
      for (int n = 0; n < s.heads; ++n) {
        EXPECT_EQ(lse[static_cast<std::size_t>(t * s.heads + n)], -HUGE_VAL);
        for (int e = 0; e < 512; ++e) ASSERT_EQ(out[static_cast<std::size_t>((t * s.heads + n) * 512 + e)], 0.0);
      }
  }
}

// The same decode with 1, 2 and 7 splits per item and the planner's own: fp32 outputs agree
// to 1e-5 relative, bf16 ones are each within tolerance of the reference; reruns of one plan
// give the same bits.
TEST(MlaCpuDecode, SplitCountsAgreeAndRerunsAreBitIdentical) {
  for (ScalarType dtype : {ScalarType::f32, ScalarType::bf16}) {
    MlaSetup s;
    s.dtype = dtype;
    s.heads = 16;
    s.decode_query_len = 2;
    s.requests = {{1500, 2}, {300, 1}};
    MlaWorkload w(s);
    w.absorbed_queries();
    const mla::reference::Result ref = w.latent_reference();
    std::vector<double> first;
    for (int splits : {1, 2, 7, 0}) {
      CpuMlaOptions o;
      o.decode_splits = splits;
      o.num_threads = 4;
      const auto impl = make_cpu_mla_impl(w.params, o);
      const auto plan = impl->plan(w.md, w.cache.view, {}, w.plan_options());
      if (splits > 1) {
        EXPECT_EQ(static_cast<const CpuMlaPlan&>(*plan).decode.splits.size(), 2u) << "one item per request, each split";
      }
      impl->decode_latent(*plan, w.q_latent.view, w.cache.view, w.latent_out.view, {}, &w.lse.view);
      const std::vector<double> out = read(w.latent_out.view, w.tokens);
      EXPECT_EQ(compare(out, ref.out, testing::latent_tolerance(dtype)), "") << splits << " splits";
      if (dtype == ScalarType::f32) {
        if (first.empty()) first = out;
        EXPECT_EQ(compare(out, first, {1e-7, 1e-5, 0.0}), "") << splits << " splits against 1";
      }
      const std::vector<std::uint8_t> bytes = w.latent_out.bytes;
      impl->decode_latent(*plan, w.q_latent.view, w.cache.view, w.latent_out.view, {}, &w.lse.view);
      EXPECT_EQ(bytes, w.latent_out.bytes) << "a rerun of the plan changed the output";
    }
  }
}

// One 32768-token request at 128 heads is split so that every core of the plan has work.
TEST(MlaCpuDecode, OneLongRequestOccupiesEveryCore) {
  MlaLayerParams p;
  p.dims.num_heads = 128;
  p.scale = 0.1f;
  std::vector<std::int32_t> qsl = {0, 1}, lens = {32768}, table(2048);
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<std::int32_t>(i);
  AttentionMetadata md;
  md.num_seqs = 1;
  md.num_actual_tokens = 1;
  md.query_start_loc = qsl;
  md.seq_lens = lens;
  md.block_table = table;
  md.max_blocks_per_seq = 2048;
  md.max_query_len = 1;
  md.max_seq_len = 32768;
  const TensorView cache = TensorView::contiguous(nullptr, ScalarType::bf16, {2048, 16, 576});  // plan() reads no data
  for (int cores : {2, 8, 32}) {
    CpuMlaOptions o;
    o.num_threads = cores;
    const auto impl = make_cpu_mla_impl(p, o);
    const auto plan = impl->plan(md, cache, {});
    const auto& work = static_cast<const CpuMlaPlan&>(*plan).decode;
    EXPECT_GE(static_cast<int>(work.items.size()), cores) << plan->describe();
    std::int64_t keys = 0;
    for (const auto& it : work.items) keys += it.key_end - it.key_begin;
    EXPECT_EQ(keys, 2 * 32768) << "every key once per row group (128 heads = 2 groups of 64)";
  }
}

// A fixed plan gives the same bits on 1, 2 and all threads (and with its splits merged). Not a
// *Concurrency* suite: ThreadSanitizer cannot see libgomp's barriers (libgomp is not built with
// it), so it reports every OpenMP region's hand-over as a race.
TEST(MlaCpuThreads, ThreadCountsGiveIdenticalBits) {
  MlaSetup s;
  s.heads = 16;
  s.decode_query_len = 2;
  s.requests = {{900, 2}, {2, 1}, {333, 2}};
  MlaWorkload w(s);
  w.absorbed_queries();
  CpuMlaOptions o;
  o.num_threads = 8;
  o.decode_splits = 3;
  const auto impl = make_cpu_mla_impl(w.params, o);
  const auto plan = impl->plan(w.md, w.cache.view, {}, w.plan_options());
  const int saved = omp_get_max_threads();
  std::vector<std::uint8_t> out0, lat0, lse0;
  for (int threads : {1, 2, omp_get_num_procs(), 8}) {
    omp_set_num_threads(threads);
    w.poison_outputs();
    impl->execute(*plan, w.q.view, w.kv_c.view, w.k_pe.view, w.cache.view, w.output.view, {});
    impl->decode_latent(*plan, w.q_latent.view, w.cache.view, w.latent_out.view, {}, &w.lse.view);
    if (out0.empty()) {
      out0 = w.output.bytes;
      lat0 = w.latent_out.bytes;
      lse0 = w.lse.bytes;
      continue;
    }
    EXPECT_EQ(out0, w.output.bytes) << threads << " threads";
    EXPECT_EQ(lat0, w.latent_out.bytes) << threads << " threads";
    EXPECT_EQ(lse0, w.lse.bytes) << threads << " threads";
  }
  omp_set_num_threads(saved);
}

}  // namespace
}  // namespace attnsel::kernel::mla::cpu
