// The CPU sparse MLA kernels (DeepSeek-V3.2) against the dense CPU MLA decode of the same
// shape, measured in the same run: 4 decode requests of 32768 cached tokens, one query token
// each, index rows of top-k 2048 (random distinct positions, what an indexer returns), at
// 128 and 16 heads.
//
// Accounting (FlashMLA's, printed beside the figures):
//   dense  FLOPs = 2 · N · s_q · Σ L_i · (576 + 512)
//   sparse FLOPs = 2 · N · (b · s_q · topk) · (576 + 512)
//   indexer FLOPs = 2 · H_I · 128 · Σ positions scored   (the q8 · k8 products)
// Times are end to end (plans excluded): decode_latent for the dense kernel, attend_latent
// for the sparse one (gathers, split-KV combine included), top_k for the indexer (query
// quantisation, scores, top-k). Each iteration runs the three in a rotating order, so a
// drifting load slows them alike; the ratios are medians of the per-iteration ratios.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "attnsel/mla.hpp"
#include "attnsel/sparse_mla.hpp"
#include "kernels/half.hpp"
#include "kernels/mla/cpu/cpu_mla.hpp"
#include "kernels/sparse_mla/cpu/cpu_indexer.hpp"
#include "kernels/sparse_mla/cpu/cpu_sparse_mla.hpp"
#include "kernels/sparse_mla/reference.hpp"

namespace {

using attnsel::CacheDType;
using attnsel::kernel::AttentionMetadata;
using attnsel::kernel::ScalarType;
using attnsel::kernel::StepPlan;
using attnsel::kernel::TensorView;
namespace sparse_cpu = attnsel::kernel::sparse_mla::cpu;

constexpr int kBatch = 4, kSeqLen = 32768, kTopk = 2048, kBlock = 64, kIndexerHeads = 64;

double seconds(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// One layer's decode step over 4 × 32768 cached tokens: the latent cache (bf16, or
// fp8_ds_mla), the absorbed queries, random index rows, the indexer's key cache and inputs.
struct Step {
  int heads = 128;
  CacheDType kv = CacheDType::auto_;

  std::vector<std::uint8_t> cache, key_cache;
  std::vector<std::uint16_t> q_latent, out, dense_out, q_index;
  std::vector<float> index_weights;
  std::vector<std::int32_t> qsl, lens, table, rows, local_rows;
  std::vector<std::int64_t> slots;
  AttentionMetadata md;
  TensorView cache_view, key_cache_view;
  std::unique_ptr<attnsel::kernel::SparseMlaImpl> sparse;
  std::unique_ptr<attnsel::kernel::MlaImpl> dense;
  std::unique_ptr<attnsel::kernel::IndexerImpl> indexer;
  std::unique_ptr<StepPlan> sparse_plan, dense_plan, indexer_plan;

  void build() {
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const bool ds = kv == CacheDType::fp8_ds_mla;
    const int blocks_per_seq = kSeqLen / kBlock, num_blocks = kBatch * blocks_per_seq;
    for (int s = 0; s <= kBatch; ++s) qsl.push_back(s);
    lens.assign(kBatch, kSeqLen);
    table.resize(static_cast<std::size_t>(num_blocks));
    std::iota(table.begin(), table.end(), 0);
    for (int s = 0; s < kBatch; ++s) slots.push_back(static_cast<std::int64_t>(s) * kSeqLen + kSeqLen - 1);
    md.num_seqs = kBatch;
    md.num_actual_tokens = kBatch;
    md.query_start_loc = qsl;
    md.seq_lens = lens;
    md.block_table = table;
    md.max_blocks_per_seq = blocks_per_seq;
    md.max_query_len = 1;
    md.max_seq_len = kSeqLen;
    md.slot_mapping = slots;

    // The latent cache, written through the sparse kernel's own writer (ds: 656-byte records).
    attnsel::kernel::SparseMlaLayerParams p;
    p.dims.num_heads = heads;
    p.scale = 0.1352337789f;
    p.kv_cache_dtype = kv;
    p.topk = kTopk;
    const std::size_t tokens = static_cast<std::size_t>(num_blocks) * kBlock;
    cache.resize(tokens * (ds ? 656 : 1152));
    cache_view = TensorView::contiguous(cache.data(), ds ? ScalarType::u8 : ScalarType::bf16,
                                        {num_blocks, kBlock, ds ? 656 : 576});
    std::vector<std::uint16_t> latent(tokens * 576);
    for (auto& x : latent) x = attnsel::kernel::float_to_bf16(normal(rng) * 0.1f);
    std::vector<std::int64_t> all(tokens);
    std::iota(all.begin(), all.end(), 0);
    const TensorView kv_c = TensorView::strided(latent.data(), ScalarType::bf16, std::vector<std::int64_t>{static_cast<std::int64_t>(tokens), 512},
                                                std::vector<std::int64_t>{576, 1});
    const TensorView k_pe = TensorView::strided(latent.data() + 512, ScalarType::bf16, std::vector<std::int64_t>{static_cast<std::int64_t>(tokens), 64},
                                                std::vector<std::int64_t>{576, 1});
    attnsel::kernel::sparse_mla::reference::write_latent(p, kv_c, k_pe, cache_view, all, static_cast<int>(tokens));

    // Index rows: 2048 distinct random positions of each request, as cache rows.
    rows.resize(static_cast<std::size_t>(kBatch) * kTopk);
    std::vector<std::int32_t> positions(kSeqLen);
    for (int s = 0; s < kBatch; ++s) {
      std::iota(positions.begin(), positions.end(), 0);
      for (int k = 0; k < kTopk; ++k) {
        std::uniform_int_distribution<int> pick(k, kSeqLen - 1);
        std::swap(positions[static_cast<std::size_t>(k)], positions[static_cast<std::size_t>(pick(rng))]);
        rows[static_cast<std::size_t>(s) * kTopk + static_cast<std::size_t>(k)] = s * kSeqLen + positions[static_cast<std::size_t>(k)];
      }
    }
    q_latent.resize(static_cast<std::size_t>(kBatch) * heads * 576);
    for (auto& x : q_latent) x = attnsel::kernel::float_to_bf16(normal(rng) * 0.1f);
    out.resize(static_cast<std::size_t>(kBatch) * heads * 512);
    dense_out.resize(out.size());

    sparse = sparse_cpu::make_cpu_sparse_mla_impl(p);
    sparse_plan = sparse->plan(md, cache_view, {}, {});
    if (!ds) {
      attnsel::kernel::MlaLayerParams m;
      m.dims.num_heads = heads;
      m.scale = p.scale;
      dense = attnsel::kernel::mla::cpu::make_cpu_mla_impl(m);
      dense_plan = dense->plan(md, cache_view, {}, {});
    }

    // The indexer over the same requests: 64 heads, fp8 keys (block 64), top-k 2048.
    attnsel::kernel::IndexerLayerParams ip;
    ip.num_heads = kIndexerHeads;
    ip.topk = kTopk;
    key_cache.assign(static_cast<std::size_t>(num_blocks) * kBlock * 132, 0);
    key_cache_view = TensorView::contiguous(key_cache.data(), ScalarType::u8, {num_blocks, kBlock, 132});
    std::vector<std::uint16_t> keys(tokens * 128);
    for (auto& x : keys) x = attnsel::kernel::float_to_bf16(normal(rng));
    attnsel::kernel::sparse_mla::reference::write_keys(
        ip, TensorView::contiguous(keys.data(), ScalarType::bf16, {static_cast<std::int64_t>(tokens), 128}), key_cache_view,
        all, static_cast<int>(tokens));
    q_index.resize(static_cast<std::size_t>(kBatch) * kIndexerHeads * 128);
    for (auto& x : q_index) x = attnsel::kernel::float_to_bf16(normal(rng));
    index_weights.resize(static_cast<std::size_t>(kBatch) * kIndexerHeads);
    for (auto& x : index_weights) x = normal(rng) * 0.3f;
    local_rows.resize(static_cast<std::size_t>(kBatch) * kTopk);
    indexer = sparse_cpu::make_cpu_indexer_impl(ip);
    indexer_plan = indexer->plan(md, key_cache_view, {}, {});
  }

  TensorView view(std::vector<std::uint16_t>& v, std::int64_t width) {
    return TensorView::contiguous(v.data(), ScalarType::bf16, {kBatch, heads, width});
  }
  void run_sparse() {
    sparse->attend_latent(*sparse_plan, view(q_latent, 576),
                          TensorView::contiguous(rows.data(), ScalarType::i32, {kBatch, kTopk}), cache_view,
                          view(out, 512), {});
  }
  void run_dense() { dense->decode_latent(*dense_plan, view(q_latent, 576), cache_view, view(dense_out, 512), {}); }
  void run_indexer() {
    indexer->top_k(*indexer_plan, TensorView::contiguous(q_index.data(), ScalarType::bf16, {kBatch, kIndexerHeads, 128}),
                   TensorView::contiguous(index_weights.data(), ScalarType::f32, {kBatch, kIndexerHeads}), key_cache_view,
                   TensorView::contiguous(local_rows.data(), ScalarType::i32, {kBatch, kTopk}), {});
  }
  double dense_flops() const { return 2.0 * heads * kBatch * static_cast<double>(kSeqLen) * (576 + 512); }
  double sparse_flops() const { return 2.0 * heads * kBatch * static_cast<double>(kTopk) * (576 + 512); }
  static double indexer_flops() { return 2.0 * kIndexerHeads * 128 * kBatch * static_cast<double>(kSeqLen); }
};

// Sparse decode (bf16 cache) against the dense CPU MLA decode of the same shape, with the
// indexer's top-k beside them (arg: heads). `sparse_speedup` = dense / sparse time (target >=
// 4), `with_indexer_speedup` = dense / (sparse + indexer).
void BM_SparseDecodeVsDense4x32k(benchmark::State& state) {
  Step s;
  s.heads = static_cast<int>(state.range(0));
  s.build();
  s.run_dense();  // warm-up
  s.run_sparse();
  s.run_indexer();
  std::vector<double> td, ts, ti, speedup, with_indexer;
  const std::function<void()> runs[3] = {[&] { td.push_back(seconds([&] { s.run_dense(); })); },
                                         [&] { ts.push_back(seconds([&] { s.run_sparse(); })); },
                                         [&] { ti.push_back(seconds([&] { s.run_indexer(); })); }};
  for (auto _ : state) {
    const std::size_t first = td.size() % 3;
    for (std::size_t i = 0; i < 3; ++i) runs[(first + i) % 3]();
    state.SetIterationTime(ts.back());
    speedup.push_back(td.back() / ts.back());
    with_indexer.push_back(td.back() / (ts.back() + ti.back()));
  }
  state.counters["dense_ms"] = median(td) * 1e3;
  state.counters["sparse_ms"] = median(ts) * 1e3;
  state.counters["indexer_ms"] = median(ti) * 1e3;
  state.counters["sparse_speedup"] = median(speedup);
  state.counters["with_indexer_speedup"] = median(with_indexer);
  state.counters["target"] = 4.0;
  state.counters["sparse_GFLOP/s"] = s.sparse_flops() / median(ts) / 1e9;
  state.counters["dense_GFLOP/s"] = s.dense_flops() / median(td) / 1e9;
  state.counters["indexer_GFLOP/s"] = Step::indexer_flops() / median(ti) / 1e9;
  state.SetLabel(sparse_cpu::cpu_sparse_mla_isa(ScalarType::bf16) + "  " + s.sparse_plan->describe() +
                 "  FLOPs = 2·N·b·topk·(576+512) vs 2·N·ΣL·(576+512)");
}
BENCHMARK(BM_SparseDecodeVsDense4x32k)
    ->ArgName("heads")
    ->Arg(128)
    ->Arg(16)
    ->Iterations(9)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// The fp8_ds_mla cache against bf16 for the sparse decode (arg: heads): `ds_over_bf16` is the
// median time ratio (the dequantisation's cost against the halved bytes).
void BM_SparseDecodeDsMlaVsBf16(benchmark::State& state) {
  Step ds, bf;
  ds.heads = bf.heads = static_cast<int>(state.range(0));
  ds.kv = CacheDType::fp8_ds_mla;
  ds.build();
  bf.build();
  ds.run_sparse();
  bf.run_sparse();
  std::vector<double> tds, tbf, ratio;
  for (auto _ : state) {
    const bool ds_first = tds.size() % 2 == 0;
    double x = 0.0, y = 0.0;
    if (ds_first) x = seconds([&] { ds.run_sparse(); });
    y = seconds([&] { bf.run_sparse(); });
    if (!ds_first) x = seconds([&] { ds.run_sparse(); });
    state.SetIterationTime(x);
    tds.push_back(x);
    tbf.push_back(y);
    ratio.push_back(x / y);
  }
  state.counters["ds_ms"] = median(tds) * 1e3;
  state.counters["bf16_ms"] = median(tbf) * 1e3;
  state.counters["ds_over_bf16"] = median(ratio);
  state.SetLabel(ds.sparse_plan->describe());
}
BENCHMARK(BM_SparseDecodeDsMlaVsBf16)
    ->ArgName("heads")
    ->Arg(128)
    ->Arg(16)
    ->Iterations(50)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
