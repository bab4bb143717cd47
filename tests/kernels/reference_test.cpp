// The reference's semantics on hand-checkable cases: values encode their position, so the
// output tells exactly which keys a query saw and with what weight.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "attnsel/errors.hpp"
#include "kernels/attention/reference.hpp"
#include "runtime/paged_workload.hpp"

namespace attnsel::kernel {
namespace {

// One sequence of `seq_len` tokens, 1 KV head, head size 2, block size 4, f32; the block
// table is reversed so that paging matters. Key j = (key_x, 0); value j = (j, 1).
struct TinyBatch {
  int seq_len;
  int query_len;
  std::vector<float> keys, values, query, out;
  std::vector<float> key_cache, value_cache;
  std::vector<std::int32_t> qsl, seq_lens, block_table;
  std::vector<std::int64_t> slots;
  int num_blocks;
  int heads;

  TinyBatch(int seq_len_, int query_len_, int heads_ = 1, float key_x = 0.0f, float query_x = 0.0f)
      : seq_len(seq_len_), query_len(query_len_), heads(heads_) {
    num_blocks = (seq_len + 3) / 4;
    for (int j = 0; j < seq_len; ++j) {
      keys.insert(keys.end(), {key_x, 0.0f});
      values.insert(values.end(), {static_cast<float>(j), 1.0f});
      slots.push_back(static_cast<std::int64_t>(num_blocks - 1 - j / 4) * 4 + j % 4);
    }
    for (int b = 0; b < num_blocks; ++b) block_table.push_back(num_blocks - 1 - b);
    key_cache.assign(static_cast<std::size_t>(num_blocks) * 4 * 2, NAN);
    value_cache = key_cache;
    query.assign(static_cast<std::size_t>(query_len * heads * 2), query_x);
    out.assign(query.size(), NAN);
    qsl = {0, query_len};
    seq_lens = {seq_len};
  }
  KVCacheView cache() {
    return {TensorView::contiguous(key_cache.data(), ScalarType::f32, {num_blocks, 4, 1, 2}),
            TensorView::contiguous(value_cache.data(), ScalarType::f32, {num_blocks, 4, 1, 2})};
  }
  AttentionMetadata md(int tokens) const {
    AttentionMetadata m;
    m.num_seqs = 1;
    m.num_actual_tokens = tokens;
    m.query_start_loc = qsl;
    m.seq_lens = seq_lens;
    m.block_table = block_table;
    m.max_blocks_per_seq = num_blocks;
    m.slot_mapping = slots;
    m.max_query_len = query_len;
    m.max_seq_len = seq_len;
    return m;
  }
  LayerParams params() const {
    LayerParams p;
    p.num_heads = heads;
    p.num_kv_heads = 1;
    p.head_size = 2;
    p.scale = 1.0f;
    return p;
  }
  // Writes all seq_len keys/values, then runs the reference for the last query_len tokens.
  void run(const LayerParams& p) {
    AttentionMetadata write_md = md(seq_len);
    reference::write_kv_cache(p, TensorView::contiguous(keys.data(), ScalarType::f32, {seq_len, 1, 2}),
                              TensorView::contiguous(values.data(), ScalarType::f32, {seq_len, 1, 2}), cache(),
                              write_md);
    reference::forward(p, TensorView::contiguous(query.data(), ScalarType::f32, {query_len, heads, 2}), cache(),
                       md(query_len), TensorView::contiguous(out.data(), ScalarType::f32, {query_len, heads, 2}));
  }
  // Position-weighted mean: output x of query i, head h.
  float x(int i, int h = 0) const { return out[static_cast<std::size_t>((i * heads + h) * 2)]; }
  float y(int i, int h = 0) const { return out[static_cast<std::size_t>((i * heads + h) * 2 + 1)]; }
};

float mean_of_range(int first, int last) { return 0.5f * static_cast<float>(first + last - 1); }

TEST(Reference, CausalDecodeSeesItsPrefix) {
  TinyBatch b(11, 3);  // queries at positions 8, 9, 10
  b.run(b.params());
  for (int i = 0; i < 3; ++i) {
    EXPECT_FLOAT_EQ(b.x(i), mean_of_range(0, 9 + i)) << i;
    EXPECT_FLOAT_EQ(b.y(i), 1.0f);
  }
}

TEST(Reference, SlidingWindowKeepsTheLastWKeys) {
  TinyBatch b(11, 3);
  LayerParams p = b.params();
  p.sliding_window = 4;
  b.run(p);
  for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(b.x(i), mean_of_range(8 + i - 3, 9 + i)) << i;
}

TEST(Reference, NonCausalDecoderSeesEverything) {
  TinyBatch b(11, 3);
  LayerParams p = b.params();
  p.causal = false;
  b.run(p);
  for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(b.x(i), mean_of_range(0, 11));
}

TEST(Reference, EncoderOnlyWindowIsSymmetric) {
  TinyBatch b(9, 9);
  LayerParams p = b.params();
  p.attn_type = AttentionType::encoder_only;
  p.sliding_window = 3;  // keys within 2 positions either side
  b.run(p);
  for (int i = 0; i < 9; ++i) EXPECT_FLOAT_EQ(b.x(i), mean_of_range(std::max(0, i - 2), std::min(9, i + 3))) << i;
}

TEST(Reference, CrossAttentionIsNeverCausal) {
  TinyBatch b(7, 2);
  LayerParams p = b.params();
  p.attn_type = AttentionType::encoder_decoder;
  b.run(p);
  EXPECT_FLOAT_EQ(b.x(0), mean_of_range(0, 7));
  EXPECT_FLOAT_EQ(b.x(1), mean_of_range(0, 7));
}

TEST(Reference, AlibiWeightsByDistance) {
  TinyBatch b(6, 1, 2);  // two heads, one query at position 5
  LayerParams p = b.params();
  p.alibi_slopes = {0.5f, 0.0f};
  b.run(p);
  double num = 0, den = 0;
  for (int j = 0; j < 6; ++j) {
    const double w = std::exp(0.5 * (j - 5));
    num += w * j;
    den += w;
  }
  EXPECT_NEAR(b.x(0, 0), num / den, 1e-6);
  EXPECT_FLOAT_EQ(b.x(0, 1), mean_of_range(0, 6));  // slope 0: uniform
}

TEST(Reference, SinksTakeTheirShareOfTheDenominator) {
  TinyBatch b(5, 1);
  LayerParams p = b.params();
  p.sinks = {std::log(3.0f)};  // weight 3 next to five keys of weight 1
  b.run(p);
  EXPECT_NEAR(b.x(0), (0 + 1 + 2 + 3 + 4) / 8.0, 1e-6);
  EXPECT_NEAR(b.y(0), 5.0 / 8.0, 1e-6);
}

TEST(Reference, SoftCapBoundsTheLogits) {
  // Keys (1, 0) and query (q, 0): all logits q; cap bounds nothing visible with equal keys,
  // so vary the key: key j = (j, 0) makes logit q*j.
  TinyBatch b(3, 1, 1, 0.0f, 2.0f);
  for (int j = 0; j < 3; ++j) b.keys[static_cast<std::size_t>(2 * j)] = static_cast<float>(j);
  LayerParams p = b.params();
  p.logits_soft_cap = 1.5f;
  b.run(p);
  double num = 0, den = 0;
  for (int j = 0; j < 3; ++j) {
    const double w = std::exp(1.5 * std::tanh(2.0 * j / 1.5));
    num += w * j;
    den += w;
  }
  EXPECT_NEAR(b.x(0), num / den, 1e-6);
}

TEST(Reference, Fp8CacheStoresScaledValues) {
  TinyBatch b(4, 1);
  LayerParams p = b.params();
  p.kv_cache_dtype = CacheDType::fp8_e4m3;
  p.v_scale = 0.5f;
  std::vector<std::uint8_t> kc(b.key_cache.size()), vc(b.value_cache.size());
  KVCacheView cache{TensorView::contiguous(kc.data(), ScalarType::fp8_e4m3, {b.num_blocks, 4, 1, 2}),
                    TensorView::contiguous(vc.data(), ScalarType::fp8_e4m3, {b.num_blocks, 4, 1, 2})};
  AttentionMetadata md = b.md(4);
  reference::write_kv_cache(p, TensorView::contiguous(b.keys.data(), ScalarType::f32, {4, 1, 2}),
                            TensorView::contiguous(b.values.data(), ScalarType::f32, {4, 1, 2}), cache, md);
  // value 3 at slot 3 (block 0, reversed table of one block): stored as 3 / 0.5 = 6.
  EXPECT_EQ(reference::load(vc.data(), ScalarType::fp8_e4m3, 3 * 2), 6.0);
  reference::forward(p, TensorView::contiguous(b.query.data(), ScalarType::f32, {1, 1, 2}), cache, b.md(1),
                     TensorView::contiguous(b.out.data(), ScalarType::f32, {1, 1, 2}));
  EXPECT_FLOAT_EQ(b.x(0), 1.5f);
  EXPECT_FLOAT_EQ(b.y(0), 1.0f);
}

TEST(Reference, LayoutsAgree) {
  // The same logical cache in NHD and HND gives the same outputs.
  std::vector<double> results[2];
  for (auto layout : {runtime::CacheLayout::nhd, runtime::CacheLayout::hnd}) {
    runtime::WorkloadSpec spec;
    spec.num_heads = 4;
    spec.num_kv_heads = 2;
    spec.head_size = 32;
    spec.dtype = ScalarType::f32;
    spec.block_size = 16;
    spec.layout = layout;
    spec.sequences = {{17, 1}, {5, 5}};
    runtime::PagedWorkload w(spec);
    LayerParams p;
    p.num_heads = 4;
    p.num_kv_heads = 2;
    p.head_size = 32;
    p.scale = 0.2f;
    std::vector<std::int32_t> tokens(static_cast<std::size_t>(w.num_tokens()));
    std::iota(tokens.begin(), tokens.end(), 0);
    results[layout == runtime::CacheLayout::hnd] = reference::attend(p, w.query(), w.cache(), w.metadata(), tokens);
  }
  ASSERT_EQ(results[0].size(), results[1].size());
  for (std::size_t i = 0; i < results[0].size(); ++i) ASSERT_EQ(results[0][i], results[1][i]) << i;
}

}  // namespace
}  // namespace attnsel::kernel
