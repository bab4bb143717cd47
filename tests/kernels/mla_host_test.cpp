// The MLA host code every device shares (kernels/mla): vLLM's decode/prefill split and
// context-chunk rule, mla_step_summary, and the checks of the layer, the batch and every
// call's tensors — each bad input a ValueError naming the problem, before memory is touched.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "attnsel/errors.hpp"
#include "kernels/attention/cpu/cpu_attention.hpp"
#include "kernels/mla/batch.hpp"
#include "kernels/mla/cpu/cpu_mla.hpp"
#include "mla_test_util.hpp"

namespace attnsel::kernel::mla {
namespace {

using cpu::make_cpu_mla_impl;
using testing::MlaSetup;
using testing::MlaWorkload;

// Runs `f`, expecting a ValueError whose text contains `needle`.
template <class F>
void expect_value_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(MlaHost, SplitDecodesAndPrefillsAsVllm) {
  const std::vector<std::int32_t> qsl = {0, 1, 3, 4, 9, 10};  // query lengths 1, 2, 1, 5, 1
  auto split = [&](int threshold) { return split_decodes_and_prefills(qsl, 5, threshold); };
  EXPECT_EQ(split(1).num_decodes, 1);  // the first request with more ends the decodes
  EXPECT_EQ(split(1).num_decode_tokens, 1);
  EXPECT_EQ(split(2).num_decodes, 3);
  EXPECT_EQ(split(2).num_decode_tokens, 4);
  EXPECT_EQ(split(2).num_prefills, 2);  // the one-token request after the prefill is a prefill
  EXPECT_EQ(split(2).num_prefill_tokens, 6);
  EXPECT_EQ(split(5).num_decodes, 5);
  const std::vector<std::int32_t> prefill_first = {0, 7, 8};
  EXPECT_EQ(split_decodes_and_prefills(prefill_first, 2, 4).num_decodes, 0);
}

TEST(MlaHost, ContextChunksShareBoundariesAndRoundDownToTheBlock) {
  const std::vector<std::int64_t> context = {0, 100, 1000, 5};
  // 3 requests with context; 1000 / 3 = 333 → 320 (block 16); ceil(1000 / 320) = 4 chunks.
  const ContextChunks c = plan_context_chunks(context, 16, 1000);
  EXPECT_EQ(c.prefills_with_context, 3);
  EXPECT_EQ(c.chunk_tokens, 320);
  EXPECT_EQ(c.num_chunks, 4);
  EXPECT_EQ(c.range(0, 100), (std::pair<std::int64_t, std::int64_t>{0, 100}));
  EXPECT_EQ(c.range(1, 100), (std::pair<std::int64_t, std::int64_t>{100, 100}));  // empty later chunk
  EXPECT_EQ(c.range(3, 1000), (std::pair<std::int64_t, std::int64_t>{960, 1000}));
  EXPECT_EQ(plan_context_chunks(std::vector<std::int64_t>{0, 0}, 16, 1000).num_chunks, 0);
  expect_value_error([&] { plan_context_chunks(context, 16, 40); }, "context_chunk_tokens = 40");
}

TEST(MlaHost, SummaryOfAPlanAndOfAnotherKind) {
  MlaSetup s;
  s.decode_query_len = 2;
  s.requests = {{30, 2}, {12, 1}, {80, 20}, {3, 3}};
  MlaWorkload w(s);
  const auto impl = make_cpu_mla_impl(w.params);
  MlaPlanOptions o = w.plan_options();
  o.context_chunk_tokens = 32;  // one prefill with context (60 tokens): chunks of 32 → 2
  const auto plan = impl->plan(w.md, w.cache.view, {}, o);
  const MlaStepSummary sum = mla_step_summary(*plan);
  EXPECT_EQ(sum.num_decodes, 2);
  EXPECT_EQ(sum.num_decode_tokens, 3);
  EXPECT_EQ(sum.num_prefills, 2);
  EXPECT_EQ(sum.num_prefill_tokens, 23);
  EXPECT_EQ(sum.context_chunks, 2);
  EXPECT_NE(plan->describe().find("2 decode requests"), std::string::npos) << plan->describe();
  EXPECT_GT(plan->workspace_bytes(), 0u);

  LayerParams lp;
  lp.num_heads = lp.num_kv_heads = 1;
  lp.head_size = 64;
  lp.scale = 0.125f;
  const auto attention = kernel::cpu::make_cpu_attention_impl(lp);
  std::vector<std::int32_t> qsl = {0, 1}, lens = {1}, table = {0};
  AttentionMetadata md;
  md.num_seqs = 1;
  md.num_actual_tokens = 1;
  md.query_start_loc = qsl;
  md.seq_lens = lens;
  md.block_table = table;
  md.max_blocks_per_seq = 1;
  md.max_query_len = md.max_seq_len = 1;
  std::vector<std::uint16_t> kv(16 * 64);
  KVCacheView cache;
  cache.key = cache.value = TensorView::contiguous(kv.data(), ScalarType::bf16, {1, 16, 1, 64});
  const auto other = attention->plan(md, cache, ScalarType::bf16, {});
  expect_value_error([&] { mla_step_summary(*other); }, "MLA implementation");
}

TEST(MlaHost, BadLayersAreRefusedNamingTheField) {
  MlaLayerParams p;
  p.dims.num_heads = 16;
  p.scale = 0.07f;
  auto make = [&](auto edit, const std::string& needle) {
    MlaLayerParams q = p;
    edit(q);
    expect_value_error([&] { make_cpu_mla_impl(q); }, needle);
  };
  make([](MlaLayerParams& q) { q.dims.num_heads = 0; }, "num_heads = 0");
  make([](MlaLayerParams& q) { q.dims.num_heads = 129; }, "num_heads = 129");
  make([](MlaLayerParams& q) { q.dims.kv_lora_rank = 256; }, "kv_lora_rank = 256");
  make([](MlaLayerParams& q) { q.dims.qk_rope_head_dim = 32; }, "qk_rope_head_dim = 32");
  make([](MlaLayerParams& q) { q.dims.v_head_dim = 64; }, "v_head_dim = 64");
  make([](MlaLayerParams& q) { q.scale = 0.0f; }, "scale = 0");
  make([](MlaLayerParams& q) { q.scale = NAN; }, "scale = nan");
  make([](MlaLayerParams& q) { q.dtype = ScalarType::fp8_e4m3; }, "dtype fp8_e4m3");
  make([](MlaLayerParams& q) { q.kv_cache_dtype = CacheDType::fp8_e5m2; }, "kv_cache_dtype 'fp8_e5m2'");
  make([](MlaLayerParams& q) { q.kv_cache_dtype = CacheDType::fp8_ds_mla; }, "fp8_ds_mla");
  make([](MlaLayerParams& q) { q.kv_cache_dtype = CacheDType::float16; }, "kv_cache_dtype 'float16'");
  for (float scale : {0.0f, -1.0f, NAN, INFINITY})
    make([&](MlaLayerParams& q) { q.kv_cache_dtype = CacheDType::fp8, q.k_scale = scale; }, "k_scale");
  std::vector<std::uint16_t> w(16 * 256 * 512);
  make([&](MlaLayerParams& q) { q.kv_b_proj = TensorView::contiguous(w.data(), ScalarType::bf16, {16 * 256, 256}); },
       "kv_b_proj must be");
  make([&](MlaLayerParams& q) { q.kv_b_proj = TensorView::contiguous(w.data(), ScalarType::f16, {16 * 256, 512}); },
       "kv_b_proj dtype f16");
  MlaLayerParams ok = p;
  ok.kv_cache_dtype = CacheDType::bfloat16;  // names the activation dtype: accepted
  EXPECT_NO_THROW(make_cpu_mla_impl(ok));
}

TEST(MlaHost, BadBatchesAreRefusedBeforeAnyWork) {
  MlaSetup s;
  s.decode_query_len = 4;
  s.requests = {{30, 2}, {12, 1}};
  MlaWorkload w(s);
  const auto impl = make_cpu_mla_impl(w.params);
  auto plan_with = [&](AttentionMetadata md, MlaPlanOptions o) { impl->plan(md, w.cache.view, {}, o); };
  const MlaPlanOptions o = w.plan_options();
  {
    MlaPlanOptions bad = o;
    bad.decode_query_len = 5;
    expect_value_error([&] { plan_with(w.md, bad); }, "decode_query_len = 5");
    bad.decode_query_len = 0;
    expect_value_error([&] { plan_with(w.md, bad); }, "decode_query_len = 0");
    bad = o;
    bad.graph_capturable = true;
    expect_value_error([&] { plan_with(w.md, bad); }, "graph");
    bad = o;
    bad.context_chunk_tokens = -1;
    expect_value_error([&] { plan_with(w.md, bad); }, "context_chunk_tokens = -1");
  }
  std::vector<std::int32_t> lens = {1, 12};  // 0 < L < s_q
  AttentionMetadata md = w.md;
  md.seq_lens = lens;
  expect_value_error([&] { plan_with(md, o); }, "request 0 has 2 query tokens but seq_lens[0] = 1");
  std::vector<std::int32_t> table = w.block_table;
  table[1] = 1 << 20;
  md = w.md;
  md.block_table = table;
  expect_value_error([&] { plan_with(md, o); }, "block_table[0][1]");
  std::vector<std::int32_t> qsl = {0, 2, 2};
  md = w.md;
  md.query_start_loc = qsl;
  expect_value_error([&] { plan_with(md, o); }, "num_actual_tokens");
  md = w.md;
  md.max_seq_len = 5;
  expect_value_error([&] { plan_with(md, o); }, "max_seq_len = 5");
  TensorView cache = w.cache.view;
  cache.shape[2] = 512;
  expect_value_error([&] { impl->plan(w.md, cache, {}, o); }, "576");
  cache = w.cache.view;
  cache.dtype = ScalarType::f16;
  expect_value_error([&] { impl->plan(w.md, cache, {}, o); }, "cache dtype f16");
}

TEST(MlaHost, BadCallsAreRefusedNamingTheTensor) {
  MlaSetup s;
  s.decode_query_len = 2;
  s.requests = {{30, 2}, {12, 1}};
  MlaWorkload w(s);
  const auto impl = make_cpu_mla_impl(w.params);
  const auto plan = impl->plan(w.md, w.cache.view, {}, w.plan_options(false));
  auto execute = [&](const TensorView& q, const TensorView& out) {
    impl->execute(*plan, q, w.kv_c.view, w.k_pe.view, w.cache.view, out, {});
  };
  TensorView q = w.q.view;
  q.shape[0] = 2;
  expect_value_error([&] { execute(q, w.output.view); }, "q must be");
  q = w.q.view;
  q.dtype = ScalarType::f16;
  expect_value_error([&] { execute(q, w.output.view); }, "q dtype f16");
  TensorView out = w.output.view;
  out.shape[2] = 192;
  expect_value_error([&] { execute(w.q.view, out); }, "output must be");
  out = w.q.view;  // the output over the queries
  out.shape[2] = 128;
  expect_value_error([&] { execute(w.q.view, out); }, "overlaps q");
  TensorView other_cache = w.cache.view;
  other_cache.shape[0] -= 1;
  expect_value_error([&] { impl->execute(*plan, w.q.view, w.kv_c.view, w.k_pe.view, other_cache, w.output.view, {}); },
                     "plan's cache geometry");
  w.absorbed_queries();
  expect_value_error(
      [&] { impl->decode_latent(*plan, w.q_latent.view, w.cache.view, w.latent_out.view, {}, &w.lse.view); },
      "MlaPlanOptions::lse");
  TensorView lat_q = w.q_latent.view;
  lat_q.shape[2] = 512;
  expect_value_error([&] { impl->decode_latent(*plan, lat_q, w.cache.view, w.latent_out.view, {}); }, "q_latent");

  // A plan of another layer group, and a layer without kv_b_proj.
  MlaLayerParams other = w.params;
  other.dims.num_heads = 8;
  other.kv_b_proj = {};
  const auto other_impl = make_cpu_mla_impl(other);
  expect_value_error([&] { other_impl->decode_latent(*plan, w.q_latent.view, w.cache.view, w.latent_out.view, {}); },
                     "not in the plan's group");
  MlaLayerParams latent_only = w.params;
  latent_only.kv_b_proj = {};
  const auto latent_impl = make_cpu_mla_impl(latent_only);
  const auto latent_plan = latent_impl->plan(w.md, w.cache.view, {});
  expect_value_error(
      [&] {
        latent_impl->execute(*latent_plan, w.q.view, w.kv_c.view, w.k_pe.view, w.cache.view, w.output.view, {});
      },
      "kv_b_proj");
}

// Every tensor a call writes gives each element its own memory: an output whose heads, a
// latent output whose rows, an lse whose rows share addresses, and a cache whose tokens
// overlap, are refused before anything is written.
TEST(MlaHost, WrittenTensorsWhoseElementsShareMemoryAreRefused) {
  MlaSetup s;
  s.requests = {{30, 1}, {12, 1}};
  MlaWorkload w(s);
  const auto impl = make_cpu_mla_impl(w.params);
  const auto plan = impl->plan(w.md, w.cache.view, {}, w.plan_options(true));
  w.absorbed_queries();
  w.output.poison();
  w.latent_out.poison();
  w.lse.poison();

  TensorView heads_alias = w.output.view;  // every head of a token at one address
  heads_alias.stride[1] = 0;
  expect_value_error([&] { impl->execute(*plan, w.q.view, w.kv_c.view, w.k_pe.view, w.cache.view, heads_alias, {}); },
                     "output is written, but its strides make elements share memory");
  TensorView rows_alias = w.latent_out.view;  // tokens interleaved with the heads of the one before
  rows_alias.stride[0] = rows_alias.stride[1];
  expect_value_error([&] { impl->decode_latent(*plan, w.q_latent.view, w.cache.view, rows_alias, {}, &w.lse.view); },
                     "out is written, but its strides make elements share memory");
  TensorView lse_alias = w.lse.view;  // each token's row one element after the last one's
  lse_alias.stride[0] = 1;
  expect_value_error([&] { impl->decode_latent(*plan, w.q_latent.view, w.cache.view, w.latent_out.view, {}, &lse_alias); },
                     "lse is written, but its strides make elements share memory");
  for (const testing::Buffer* b : {&w.output, &w.latent_out, &w.lse})
    for (std::size_t i = 0; i < b->bytes.size() / element_size(b->view.dtype); ++i)
      ASSERT_TRUE(std::isnan(kernel::reference::load(b->bytes.data(), b->view.dtype, static_cast<std::int64_t>(i))));

  // The cache write's cache: token rows that overlap their neighbours (in this plan's geometry
  // or not, it is refused as the cache it is).
  std::vector<std::int64_t> slots(static_cast<std::size_t>(w.md.num_actual_tokens));
  std::iota(slots.begin(), slots.end(), 0);
  AttentionMetadata writing = w.md;
  writing.slot_mapping = slots;
  const auto write_plan = impl->plan(writing, w.cache.view, {}, w.plan_options(false));
  TensorView tokens_alias = w.cache.view;
  tokens_alias.stride[1] = 64;
  expect_value_error([&] { impl->write_cache(*write_plan, w.kv_c.view, w.k_pe.view, tokens_alias, {}); },
                     "cache rows overlap");
}

}  // namespace
}  // namespace attnsel::kernel::mla
