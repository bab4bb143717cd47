// The absorbed MLA decode and the latent cache writer on Hopper, against a plain
// double-precision latent-MQA reference (keys = the 576-wide latent rows, values = their
// first 512; query j of a request with L keys and s_q queries sees keys [0, L − s_q + j]),
// judged by FlashMLA's criteria (tests/test_flash_mla_dense_decoding.py): each element
// within abs 8e-4 or rel 2.01/128, cosine distance ≤ 5e-6 over the tensor, LSE within abs
// 1e-6 or rel 8.01/65536. Random inputs, every head count, 1-4 query tokens, odd and prime
// lengths, requests with no keys, permuted block tables with garbage past the used blocks,
// unused cache rows and the outputs poisoned with NaN. Suites named *Gpu* skip without a
// Hopper GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "attnsel/errors.hpp"
#include "kernels/device/cuda/device_memory.hpp"
#include "kernels/fp8.hpp"
#include "kernels/half.hpp"
#include "kernels/mla/cuda/decode_cuda.hpp"

namespace attnsel::kernel::cuda::mla {
namespace {

bool hopper_available() {
  if (!cuda_kernels_built() || !cuda_kernels_unavailable_reason().empty()) return false;
  return device_info(0).major == 9;
}

#define REQUIRE_HOPPER_GPU() \
  if (!hopper_available()) GTEST_SKIP() << "the MLA decode kernels need a Hopper GPU"

constexpr int kD = 576, kDv = 512;

double load16(std::uint16_t v, ScalarType t) { return t == ScalarType::bf16 ? bf16_to_float(v) : half_to_float(v); }
std::uint16_t store16(float f, ScalarType t) { return t == ScalarType::bf16 ? float_to_bf16(f) : float_to_half(f); }

struct Case {
  int heads = 16;
  std::vector<int> q_lens;  // per request
  std::vector<int> lens;    // keys per request
  int page = 64;
  ScalarType dtype = ScalarType::bf16;
  int num_parts = 0;
  float scale = 0.1352337789f;
  std::uint64_t seed = 1;
  int spike_rows = 0;  // the last `spike_rows` keys of every request get huge values (causality check)
};

struct HostBatch {
  std::vector<std::int32_t> qsl, lens, table;
  int max_blocks = 0, num_blocks = 0, tokens = 0;
  std::vector<std::uint16_t> cache, q;
};

HostBatch make_batch(const Case& c) {
  std::mt19937_64 rng(c.seed);
  // FlashMLA's magnitudes for the latent (N(0, 0.1²) clamped to ±1), which its absolute
  // tolerance is made for; queries N(0, 1) so the softmax is far from uniform.
  std::normal_distribution<float> qd(0.0f, 1.0f), kd(0.0f, 0.1f);
  HostBatch b;
  const int n = static_cast<int>(c.lens.size());
  b.qsl.push_back(0);
  for (int i = 0; i < n; ++i) b.qsl.push_back(b.qsl.back() + c.q_lens[std::size_t(i)]);
  b.tokens = b.qsl.back();
  b.lens = c.lens;
  for (int l : c.lens) b.max_blocks = std::max(b.max_blocks, (l + c.page - 1) / c.page);
  b.max_blocks += 2;  // entries past the used blocks hold garbage
  int used = 0;
  for (int l : c.lens) used += (l + c.page - 1) / c.page;
  b.num_blocks = used + 3;  // some blocks no request uses: NaN
  std::vector<std::int32_t> ids(std::size_t(b.num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  b.table.assign(std::size_t(n) * std::size_t(b.max_blocks), 2147480000);
  const std::uint16_t nan16 = 0xFFFF;
  b.cache.assign(std::size_t(b.num_blocks) * c.page * kD, nan16);
  int next = 0;
  for (int i = 0; i < n; ++i) {
    const int blocks = (c.lens[std::size_t(i)] + c.page - 1) / c.page;
    for (int k = 0; k < blocks; ++k) b.table[std::size_t(i) * b.max_blocks + k] = ids[std::size_t(next++)];
    for (int key = 0; key < c.lens[std::size_t(i)]; ++key) {
      const std::int64_t row = std::int64_t(b.table[std::size_t(i) * b.max_blocks + key / c.page]) * c.page + key % c.page;
      const bool spike = key >= c.lens[std::size_t(i)] - c.spike_rows;
      for (int d = 0; d < kD; ++d)
        b.cache[std::size_t(row) * kD + d] = store16(spike ? 30.0f : std::clamp(kd(rng), -1.0f, 1.0f), c.dtype);
    }
  }
  b.q.resize(std::size_t(b.tokens) * c.heads * kD);
  for (auto& v : b.q) v = store16(std::clamp(qd(rng), -3.0f, 3.0f), c.dtype);
  return b;
}

/// The reference: out [tokens, heads, 512] and natural-log LSE [tokens, heads] (−inf and 0
/// for a row that sees no key).
void reference(const Case& c, const HostBatch& b, std::vector<double>& out, std::vector<double>& lse) {
  out.assign(std::size_t(b.tokens) * c.heads * kDv, 0.0);
  lse.assign(std::size_t(b.tokens) * c.heads, -INFINITY);
  std::vector<double> s, key(kD);
  for (std::size_t i = 0; i < c.lens.size(); ++i) {
    const int L = c.lens[i], ql = c.q_lens[i];
    std::vector<std::vector<double>> keys(static_cast<std::size_t>(L), std::vector<double>(kD));
    for (int k = 0; k < L; ++k) {
      const std::int64_t row = std::int64_t(b.table[i * std::size_t(b.max_blocks) + std::size_t(k / c.page)]) * c.page + k % c.page;
      for (int d = 0; d < kD; ++d) keys[std::size_t(k)][std::size_t(d)] = load16(b.cache[std::size_t(row) * kD + d], c.dtype);
    }
    for (int j = 0; j < ql; ++j) {
      const int visible = L == 0 ? 0 : L - ql + j + 1;
      const int tok = b.qsl[i] + j;
      for (int h = 0; h < c.heads; ++h) {
        const std::uint16_t* qr = b.q.data() + (std::size_t(tok) * c.heads + h) * kD;
        if (visible <= 0) continue;
        s.assign(std::size_t(visible), 0.0);
        double mx = -INFINITY;
        for (int k = 0; k < visible; ++k) {
          double dot = 0;
          for (int d = 0; d < kD; ++d) dot += load16(qr[d], c.dtype) * keys[std::size_t(k)][std::size_t(d)];
          s[std::size_t(k)] = dot * c.scale;
          mx = std::max(mx, s[std::size_t(k)]);
        }
        double sum = 0;
        double* o = out.data() + (std::size_t(tok) * c.heads + h) * kDv;
        for (int k = 0; k < visible; ++k) {
          const double w = std::exp(s[std::size_t(k)] - mx);
          sum += w;
          for (int d = 0; d < kDv; ++d) o[d] += w * keys[std::size_t(k)][std::size_t(d)];
        }
        for (int d = 0; d < kDv; ++d) o[d] /= sum;
        lse[std::size_t(tok) * c.heads + h] = mx + std::log(sum);
      }
    }
  }
}

struct Outcome {
  std::vector<std::uint16_t> out;
  std::vector<float> lse;
  std::string plan;
};

Outcome run(const Case& c, const HostBatch& b, bool graph = false) {
  DeviceTensor cache = to_device(TensorView::contiguous(const_cast<std::uint16_t*>(b.cache.data()), c.dtype,
                                                        {b.num_blocks, c.page, kD}));
  DeviceTensor q = to_device(TensorView::contiguous(const_cast<std::uint16_t*>(b.q.data()), c.dtype,
                                                    {b.tokens, c.heads, kD}));
  DeviceTensor out = device_like(TensorView::contiguous(nullptr, c.dtype, {b.tokens, c.heads, kDv}));
  DeviceTensor lse = device_like(TensorView::contiguous(nullptr, ScalarType::f32, {b.tokens, c.heads}));
  out.buffer.fill_bytes(0xFF);
  lse.buffer.fill_bytes(0xFF);
  const DecodeBatch batch{.query_start_loc = b.qsl, .seq_lens = b.lens, .block_table = b.table,
                          .max_blocks_per_seq = b.max_blocks};
  const int max_q = *std::max_element(c.q_lens.begin(), c.q_lens.end());
  DecodeOptions o{.num_heads = c.heads, .dtype = c.dtype, .max_query_len = max_q, .graph_capturable = graph,
                  .num_parts = c.num_parts};
  Outcome res;
  if (!graph) {
    auto plan = plan_decode(batch, cache.view, o, {});
    run_decode(*plan, q.view, cache.view, out.view, c.scale, 1.0f, {}, &lse.view);
    synchronize("MLA decode");
    res.plan = plan->describe();
  } else {
    // Capture one step, then update the plan to the real batch and replay it.
    OwnedStream stream;
    std::vector<std::int32_t> other = b.lens;
    for (auto& l : other) l = std::min(l, std::max(1, l / 3));
    for (std::size_t i = 0; i < other.size(); ++i) other[i] = b.lens[i] == 0 ? 0 : std::max(other[i], c.q_lens[i]);
    const DecodeBatch first{.query_start_loc = b.qsl, .seq_lens = other, .block_table = b.table,
                            .max_blocks_per_seq = b.max_blocks};
    auto plan = plan_decode(first, cache.view, o, stream.get());
    CudaGraph g;
    g.begin_capture(stream.get());
    run_decode(*plan, q.view, cache.view, out.view, c.scale, 1.0f, stream.get(), &lse.view);
    g.end_capture(stream.get());
    update_decode(*plan, batch, stream.get());
    g.launch(stream.get());
    stream.synchronize("MLA decode graph replay");
    res.plan = plan->describe();
  }
  res.out.resize(std::size_t(b.tokens) * c.heads * kDv);
  out.buffer.download(res.out.data(), res.out.size() * 2);
  res.lse.resize(std::size_t(b.tokens) * c.heads);
  lse.buffer.download(res.lse.data(), res.lse.size() * 4);
  return res;
}

/// FlashMLA's check_is_allclose on the output and the LSE.
void expect_close(const Case& c, const Outcome& got, const std::vector<double>& ref, const std::vector<double>& ref_lse) {
  double ar = 0, aa = 0, rr = 0;
  std::int64_t bad = 0, nan = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double a = load16(got.out[i], c.dtype), r = ref[i];
    if (!std::isfinite(a)) {
      ++nan;
      continue;
    }
    const double diff = std::abs(a - r);
    if (!(diff < 8e-4 || diff / (std::abs(r) + 1e-6) < 2.01 / 128)) ++bad;
    ar += a * r;
    aa += a * a;
    rr += r * r;
  }
  EXPECT_EQ(nan, 0) << "outputs not written or not finite; plan: " << got.plan;
  EXPECT_EQ(bad, 0) << "elements outside abs 8e-4 / rel 2.01/128 of " << ref.size() << "; plan: " << got.plan;
  const double cos_diff = aa + rr > 0 ? 1.0 - 2.0 * ar / (aa + rr) : 0.0;
  EXPECT_LE(cos_diff, 5e-6) << "plan: " << got.plan;
  std::int64_t bad_lse = 0;
  for (std::size_t i = 0; i < ref_lse.size(); ++i) {
    const double a = got.lse[i], r = ref_lse[i];
    if (std::isinf(r)) {
      bad_lse += !(std::isinf(a) && a < 0);
      continue;
    }
    const double diff = std::abs(a - r);
    bad_lse += !(diff < 1e-6 || diff / (std::abs(r) + 1e-6) < 8.01 / 65536);
  }
  EXPECT_EQ(bad_lse, 0) << "LSE outside FlashMLA's tolerance; plan: " << got.plan;
}

void check_case(const Case& c, bool graph = false) {
  const HostBatch b = make_batch(c);
  std::vector<double> ref, ref_lse;
  reference(c, b, ref, ref_lse);
  expect_close(c, run(c, b, graph), ref, ref_lse);
}

std::vector<int> lengths_for(int q_len, std::uint64_t seed) {
  std::mt19937 rng(static_cast<unsigned>(seed));
  std::vector<int> l = {q_len, 63, 64, 65, 129, 700 + static_cast<int>(rng() % 900)};
  for (int& x : l) x = std::max(x, q_len);
  return l;
}

TEST(MlaDecodeGpu, EveryHeadCountAndQueryLength) {
  REQUIRE_HOPPER_GPU();
  for (int heads : {8, 12, 16, 32, 64, 96, 128})
    for (int q_len : {1, 2, 3, 4}) {
      SCOPED_TRACE(::testing::Message() << heads << " heads, " << q_len << " query tokens");
      Case c;
      c.heads = heads;
      c.lens = lengths_for(q_len, std::uint64_t(heads * 10 + q_len));
      c.q_lens.assign(c.lens.size(), q_len);
      c.seed = std::uint64_t(heads * 7 + q_len);
      check_case(c);
    }
}

TEST(MlaDecodeGpu, VarlenQueryTokensAndEdgeLengths) {
  REQUIRE_HOPPER_GPU();
  Case c;
  c.heads = 16;
  c.lens = {1, 2, 127, 128, 4099, 3, 64};
  c.q_lens = {1, 2, 4, 3, 2, 3, 1};
  check_case(c);
}

TEST(MlaDecodeGpu, BlockSizes) {
  REQUIRE_HOPPER_GPU();
  for (int page : {16, 32, 48, 64, 128}) {
    SCOPED_TRACE(::testing::Message() << "block size " << page);
    Case c;
    c.heads = 16;
    c.page = page;
    c.lens = {4099, 17, 65, 200};
    c.q_lens = {2, 2, 2, 2};
    c.seed = std::uint64_t(page);
    check_case(c);
  }
}

TEST(MlaDecodeGpu, SplitCountsAgreeAndRerunsAreBitIdentical) {
  REQUIRE_HOPPER_GPU();
  Case c;
  c.heads = 128;
  c.lens = {8191, 4099, 33};
  c.q_lens = {1, 1, 1};
  const HostBatch b = make_batch(c);
  std::vector<double> ref, ref_lse;
  reference(c, b, ref, ref_lse);
  for (int parts : {1, 2, 7, 0}) {
    SCOPED_TRACE(::testing::Message() << parts << " parts");
    Case p = c;
    p.num_parts = parts;
    const Outcome first = run(p, b);
    expect_close(p, first, ref, ref_lse);
    const Outcome again = run(p, b);
    EXPECT_EQ(first.out, again.out) << "a rerun of one plan changed the output";
  }
}

TEST(MlaDecodeGpu, RequestsWithoutKeysWriteZerosAndMinusInfinity) {
  REQUIRE_HOPPER_GPU();
  Case c;
  c.heads = 64;
  c.lens = {300, 0, 5000, 0};
  c.q_lens = {2, 2, 2, 2};
  check_case(c);
}

TEST(MlaDecodeGpu, QueryTokensSeeOnlyTheKeysBeforeThem) {
  REQUIRE_HOPPER_GPU();
  // The last three cached rows of every request are huge: query tokens 0-2 must not see the
  // ones after their own position (the reference would differ by orders of magnitude).
  Case c;
  c.heads = 16;
  c.lens = {4, 70, 130, 1025};
  c.q_lens = {4, 4, 4, 4};
  c.spike_rows = 3;
  c.scale = 0.01f;
  check_case(c);
}

TEST(MlaDecodeGpu, OneLongRequestOverEveryPart) {
  REQUIRE_HOPPER_GPU();
  Case c;
  c.heads = 128;
  c.lens = {32768};
  c.q_lens = {1};
  c.seed = 5;
  check_case(c);
}

TEST(MlaDecodeGpu, Float16) {
  REQUIRE_HOPPER_GPU();
  Case c;
  c.dtype = ScalarType::f16;
  c.heads = 32;
  c.lens = {1000, 65, 2};
  c.q_lens = {2, 2, 2};
  check_case(c);
}

TEST(MlaDecodeGpu, CudaGraphReplaysWithTheUpdatedBatch) {
  REQUIRE_HOPPER_GPU();
  Case c;
  c.heads = 16;
  c.lens = {3000, 129, 0, 64};
  c.q_lens = {2, 2, 2, 2};
  check_case(c, true);
}

TEST(MlaDecodeGpu, BadBatchesAreRejectedOnTheHost) {
  REQUIRE_HOPPER_GPU();
  Case c;
  c.lens = {100};
  c.q_lens = {1};
  HostBatch b = make_batch(c);
  DeviceTensor cache = to_device(TensorView::contiguous(b.cache.data(), c.dtype, {b.num_blocks, c.page, kD}));
  DecodeOptions o{.num_heads = c.heads, .max_query_len = 4};
  std::vector<std::int32_t> qsl = {0, 3}, lens = {2};  // 2 keys for 3 query tokens
  EXPECT_THROW(plan_decode({qsl, lens, b.table, b.max_blocks}, cache.view, o, {}), ValueError);
  std::vector<std::int32_t> table = b.table;
  table[0] = b.num_blocks;  // outside the cache
  std::vector<std::int32_t> qsl1 = {0, 1}, lens1 = {100};
  EXPECT_THROW(plan_decode({qsl1, lens1, table, b.max_blocks}, cache.view, o, {}), ValueError);
}

// ---- the cache writer ----------------------------------------------------------------

void check_cache_write(ScalarType cache_type, float k_scale) {
  const int blocks = 5, page = 16, tokens = 9;
  std::mt19937_64 rng(9);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<std::uint16_t> kv_c(std::size_t(tokens) * 512), k_pe(std::size_t(tokens) * 64);
  for (auto& v : kv_c) v = float_to_bf16(nd(rng));
  for (auto& v : k_pe) v = float_to_bf16(nd(rng));
  k_pe[3] = float_to_bf16(1e4f);  // saturates in e4m3
  const std::vector<std::int64_t> slots = {5, -1, 79, 16, 0, -1, 33, 47};  // the 9th token is graph padding
  const std::size_t es = cache_type == ScalarType::bf16 ? 2 : 1;
  std::vector<std::uint8_t> host(std::size_t(blocks) * page * kD * es, 0x5A);  // sentinel
  DeviceTensor cache = to_device(TensorView::contiguous(host.data(), cache_type, {blocks, page, kD}));
  DeviceTensor dk = to_device(TensorView::contiguous(kv_c.data(), ScalarType::bf16, {tokens, 512}));
  DeviceTensor dp = to_device(TensorView::contiguous(k_pe.data(), ScalarType::bf16, {tokens, 64}));
  DeviceBuffer ds(slots.size() * 8);
  ds.upload(slots.data(), slots.size() * 8);
  write_latent_cache(dk.view, dp.view, slots, static_cast<const std::int64_t*>(ds.data()), cache.view, k_scale, {});
  synchronize("MLA cache write");
  std::vector<std::uint8_t> got(host.size());
  cache.buffer.download(got.data(), got.size());
  std::vector<std::uint8_t> want = host;
  for (std::size_t t = 0; t < slots.size(); ++t) {
    if (slots[t] < 0) continue;
    for (int d = 0; d < kD; ++d) {
      const std::uint16_t v = d < 512 ? kv_c[t * 512 + std::size_t(d)] : k_pe[t * 64 + std::size_t(d - 512)];
      const std::size_t at = (std::size_t(slots[t]) * kD + std::size_t(d)) * es;
      if (es == 2) std::memcpy(&want[at], &v, 2);
      else want[at] = float_to_fp8(bf16_to_float(v) / k_scale, ScalarType::fp8_e4m3);
    }
  }
  EXPECT_EQ(got, want);
  // A slot outside the cache is refused before anything is written.
  const std::vector<std::int64_t> bad = {3, std::int64_t(blocks) * page};
  EXPECT_THROW(write_latent_cache(dk.view, dp.view, bad, static_cast<const std::int64_t*>(ds.data()), cache.view,
                                  k_scale, {}),
               ValueError);
  synchronize("MLA cache write");
  cache.buffer.download(got.data(), got.size());
  EXPECT_EQ(got, want);
}

TEST(MlaCacheWriteGpu, Bf16WritesExactlyTheListedSlots) {
  REQUIRE_HOPPER_GPU();
  check_cache_write(ScalarType::bf16, 1.0f);
}

TEST(MlaCacheWriteGpu, Fp8QuantisesWithTheScale) {
  REQUIRE_HOPPER_GPU();
  for (float s : {0.37f, 1.0f, 3.0f}) {
    SCOPED_TRACE(s);
    check_cache_write(ScalarType::fp8_e4m3, s);
  }
}

}  // namespace
}  // namespace attnsel::kernel::cuda::mla
