// The execute that appends the step's new keys and values (AttentionImpl::execute with
// NewKeysValues) on FLASH_ATTN's CUDA kernels: its cache and output must be those of
// write_kv_cache followed by execute, byte for byte, whether the decode launch appends the
// tokens itself (every sequence decode, slots at their block-table positions) or the plan
// falls back to the separate write (prefill sequences, slots elsewhere); and both must match
// the host reference. The suite skips without a device.
#include <gtest/gtest.h>
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <set>
#include <vector>

#include "attnsel/errors.hpp"
#include "kernels/device/cuda/device_memory.hpp"
#include "kernels/attention/cuda/flash_attn_cuda.hpp"
#include "kernels/gpu_test_util.hpp"
#include "kernels/output_error.hpp"
#include "kernels/attention/reference.hpp"
#include "runtime/paged_workload.hpp"

namespace attnsel::kernel::cuda {
namespace {

using runtime::PagedWorkload;
using runtime::SequenceShape;
using runtime::WorkloadSpec;
using testing::spec_for;

std::vector<std::uint8_t> download(const DeviceTensor& t) {
  std::vector<std::uint8_t> host(span_bytes(t.view));
  t.buffer.download(host.data(), host.size());
  return host;
}

std::vector<std::uint8_t> host_bytes(const TensorView& t) {
  const auto* p = static_cast<const std::uint8_t*>(t.data);
  return {p, p + span_bytes(t)};
}

/// The device output against the reference (bf16 bounds; fp8 caches are compared with the
/// reference of the same quantised cache, so the same bounds hold).
void expect_matches_reference(const LayerParams& lp, const TensorView& query, const KVCacheView& cache,
                              const AttentionMetadata& md, const DeviceTensor& out, const std::string& what) {
  const kernel::testing::OutputError e = testing::device_output_error(lp, query, cache, md, out);
  EXPECT_EQ(e.not_finite, 0) << what;
  EXPECT_LT(e.rel_l2, 1.6e-2) << what;
  EXPECT_LT(e.max_abs, 0.4) << what;
}

struct FusedCase {
  FusedCase(std::vector<SequenceShape> s, CacheDType kv = CacheDType::auto_) : seqs(std::move(s)), kv_cache_dtype(kv) {}
  std::vector<SequenceShape> seqs;
  CacheDType kv_cache_dtype = CacheDType::auto_;
  int head_size = 128;
  bool sm90_kernels = true;  // false: cp.async copies, as on sm_80
  std::optional<int> window;
  /// Rewrites the batch's slot mapping (padding, slots elsewhere); null = as built.
  std::function<void(std::vector<std::int64_t>&, const PagedWorkload&)> slots;
  /// Rewrites the batch's block table (max_blocks_per_seq entries a row); null = as built.
  std::function<void(std::vector<std::int32_t>&, int)> table;
  bool expect_fused = true;
  /// Non-zero: one KV head, whose (never stepped) head stride in the caches is this one,
  /// which no tensor map can express, so the decode copies rows (bulk; fp8: cp.async).
  std::int64_t cache_head_stride = 0;
};

/// Runs `c` both ways on two device copies of one cache and compares everything.
void expect_fused_equals_write_then_execute(const FusedCase& c, std::uint64_t seed) {
  runtime::WorkloadSpec spec = spec_for(c.seqs, seed, c.kv_cache_dtype, c.head_size);
  if (c.cache_head_stride != 0) {
    spec.num_heads = 4;
    spec.num_kv_heads = 1;
    if (!spec.k_scales.empty()) {
      spec.k_scales.resize(1);
      spec.v_scales.resize(1);
    }
  }
  PagedWorkload w(spec);
  LayerParams lp = runtime::layer_params_for(w.spec());
  lp.sliding_window = c.window;
  CudaTuning tuning;
  tuning.sm90_kernels = c.sm90_kernels;
  FlashAttnCuda impl(lp, tuning);
  AttentionMetadata md = w.metadata();
  std::vector<std::int64_t> slots(md.slot_mapping.begin(), md.slot_mapping.end());
  if (c.slots) c.slots(slots, w);
  md.slot_mapping = slots;
  std::vector<std::int32_t> table(md.block_table.begin(), md.block_table.end());
  if (c.table) c.table(table, md.max_blocks_per_seq);
  md.block_table = table;

  DeviceTensor q = to_device(w.query());
  DeviceTensor nk = to_device(w.new_keys()), nv = to_device(w.new_values());
  DeviceTensor ka = to_device(w.cache().key), va = to_device(w.cache().value);
  DeviceTensor kb = to_device(w.cache().key), vb = to_device(w.cache().value);
  if (c.cache_head_stride != 0)
    for (DeviceTensor* t : {&ka, &va, &kb, &vb}) t->view.stride[2] = c.cache_head_stride;
  DeviceTensor oa = device_like(w.output()), ob = device_like(w.output());
  oa.buffer.fill_bytes(0xFF);
  ob.buffer.fill_bytes(0xFF);
  synchronize("fused append: setup");
  OwnedStream stream(0);
  const KVCacheView cache_a{ka.view, va.view}, cache_b{kb.view, vb.view};
  const auto plan = impl.plan(md, cache_a, ScalarType::bf16, stream.get());
  const PlanSummary sum = FlashAttnCuda::summary(*plan);
  EXPECT_EQ(sum.fused_append, c.expect_fused) << plan->describe();
  impl.write_kv_cache(*plan, nk.view, nv.view, cache_a, stream.get());
  impl.execute(*plan, q.view, cache_a, oa.view, stream.get());
  impl.execute(*plan, q.view, NewKeysValues{nk.view, nv.view}, cache_b, ob.view, stream.get());
  stream.synchronize("fused append");

  const std::string what = fmt::format("{} cache, {} ({})", cache_dtype_name(c.kv_cache_dtype), plan->describe(),
                                       c.expect_fused ? "fused" : "write, then attention");
  EXPECT_TRUE(download(ka) == download(kb)) << "key caches differ: " << what;
  EXPECT_TRUE(download(va) == download(vb)) << "value caches differ: " << what;
  EXPECT_TRUE(download(oa) == download(ob)) << "outputs differ: " << what;
  // And both are right: the host reference writes the same tokens (quantised alike), then attends.
  reference::write_kv_cache(lp, w.new_keys(), w.new_values(), w.cache(), md);
  EXPECT_TRUE(download(kb) == host_bytes(w.cache().key)) << "key cache differs from the reference writer's: " << what;
  EXPECT_TRUE(download(vb) == host_bytes(w.cache().value)) << "value cache differs from the reference writer's: " << what;
  expect_matches_reference(lp, w.query(), w.cache(), md, ob, what);
}

// Odd and prime lengths, a sequence of one token, long sequences split over many CTAs.
const std::vector<SequenceShape> kDecode = {{1, 1}, {4099, 1}, {61, 1}, {8191, 1}, {700, 1}, {17, 1}};

TEST(FusedAppendGpu, DecodeBf16EqualsWriteThenExecute) {
  REQUIRE_GPU();
  expect_fused_equals_write_then_execute({kDecode}, 61);
}

TEST(FusedAppendGpu, DecodeFp8E4m3EqualsWriteThenExecute) {
  REQUIRE_GPU();
  expect_fused_equals_write_then_execute({kDecode, CacheDType::fp8_e4m3}, 62);
}

TEST(FusedAppendGpu, EveryCopyPathReadsTheAppendedTokens) {
  REQUIRE_GPU();
  // TMA boxes and bulk copies read through the async proxy, cp.async through the generic one.
  // On sm_90 head size 128 takes page boxes, 96 and 192 64-column boxes (fp8 caches:
  // 128-column boxes), and a cache no tensor map can address bulk copies (fp8: cp.async).
  struct Path {
    int head_size;
    bool sm90_kernels;
    std::int64_t cache_head_stride;
  };
  for (const Path path : {Path{128, false, 0}, Path{96, true, 0}, Path{192, true, 0}, Path{128, true, 0},
                          Path{96, true, 4}}) {
    SCOPED_TRACE(fmt::format("head size {}{}{}", path.head_size, path.sm90_kernels ? "" : " as on sm_80",
                             path.cache_head_stride != 0 ? ", no tensor map" : ""));
    FusedCase c{kDecode};
    c.head_size = path.head_size;
    c.sm90_kernels = path.sm90_kernels;
    c.cache_head_stride = path.cache_head_stride;
    expect_fused_equals_write_then_execute(c, 63);
    c.kv_cache_dtype = CacheDType::fp8;
    expect_fused_equals_write_then_execute(c, 64);
  }
}

TEST(FusedAppendGpu, SpeculativeDecodeWithSeveralRowTiles) {
  REQUIRE_GPU();
  // 5 tokens x 4 heads = 20 packed rows: two row tiles, each appending the tokens in its slices.
  const std::vector<SequenceShape> spec = {{1031, 5}, {17, 3}, {4099, 4}, {5, 5}, {2053, 2}};
  expect_fused_equals_write_then_execute({spec}, 65);
  expect_fused_equals_write_then_execute({spec, CacheDType::fp8_e4m3}, 66);
  FusedCase windowed{spec};
  windowed.window = 37;
  expect_fused_equals_write_then_execute(windowed, 67);
}

TEST(FusedAppendGpu, PaddingSlotsAreNotWritten) {
  REQUIRE_GPU();
  FusedCase c{{{1031, 5}, {4099, 1}, {61, 1}, {300, 3}}};
  c.slots = [](std::vector<std::int64_t>& s, const PagedWorkload&) {
    for (std::size_t i = 0; i < s.size(); i += 2) s[i] = -1;  // every other token is padding
  };
  expect_fused_equals_write_then_execute(c, 68);
  c.kv_cache_dtype = CacheDType::fp8;
  expect_fused_equals_write_then_execute(c, 69);
}

TEST(FusedAppendGpu, MixedPrefillAndDecodeWriteFirst) {
  REQUIRE_GPU();
  FusedCase c{{{77, 77}, {4099, 1}, {131, 3}, {1, 1}}};
  c.expect_fused = false;  // a prefill sequence: the separate write, then the kernels
  expect_fused_equals_write_then_execute(c, 70);
}

TEST(FusedAppendGpu, SlotsOutsideTheBlockTableWriteFirst) {
  REQUIRE_GPU();
  FusedCase c{kDecode};
  c.slots = [](std::vector<std::int64_t>& s, const PagedWorkload& w) {
    // The first token goes to a block no sequence holds (the workload keeps spare blocks).
    const AttentionMetadata md = w.metadata();
    const std::set<std::int32_t> used(md.block_table.begin(), md.block_table.end());
    for (std::int32_t b = 0; b < w.num_blocks(); ++b)
      if (!used.count(b)) {
        s[0] = std::int64_t(b) * w.spec().block_size + 3;
        return;
      }
  };
  c.expect_fused = false;
  expect_fused_equals_write_then_execute(c, 71);
}

TEST(FusedAppendGpu, BlockReadThroughAnotherEntryWritesFirst) {
  REQUIRE_GPU();
  // The second sequence reads the first one's last block (as its own first block): a CTA of
  // the second could read the block before the first's CTA appends its token there.
  FusedCase c{{{64, 1}, {30, 1}, {4099, 1}}};
  c.table = [](std::vector<std::int32_t>& t, int row) { t[std::size_t(row)] = t[3]; };
  c.expect_fused = false;
  expect_fused_equals_write_then_execute(c, 76);
}

/// Several layers on one cache, each appending its own new keys into the same slots: every
/// layer must see its own tokens, however far the launches overlap; on a stream and
/// captured in a CUDA graph; early: the plan lets each layer read the positions before the
/// new tokens while the layer before it is still running (PlanOptions::early_cache_reads).
void expect_layers_see_their_own_appends(bool graph, bool fp8, bool early = false) {
  const WorkloadSpec spec =
      spec_for({{1, 1}, {4099, 1}, {700, 2}, {8191, 1}, {33, 1}}, 72, fp8 ? CacheDType::fp8 : CacheDType::auto_);
  PagedWorkload sets[2] = {PagedWorkload(spec), PagedWorkload(spec)};
  {
    std::span<std::uint8_t> kb(static_cast<std::uint8_t*>(sets[1].new_keys().data), span_bytes(sets[1].new_keys()));
    std::span<std::uint8_t> vb(static_cast<std::uint8_t*>(sets[1].new_values().data), span_bytes(sets[1].new_values()));
    runtime::fill_uniform(kb, ScalarType::bf16, 1.0f, 93);
    runtime::fill_uniform(vb, ScalarType::bf16, 1.0f, 94);
  }
  const LayerParams lp = runtime::layer_params_for(spec);
  FlashAttnCuda impl(lp);
  const AttentionMetadata md = sets[0].metadata();
  DeviceTensor q = to_device(sets[0].query());
  DeviceTensor k = to_device(sets[0].cache().key), v = to_device(sets[0].cache().value);
  DeviceTensor nk[2] = {to_device(sets[0].new_keys()), to_device(sets[1].new_keys())};
  DeviceTensor nv[2] = {to_device(sets[0].new_values()), to_device(sets[1].new_values())};
  constexpr int kLayers = 6;
  std::vector<DeviceTensor> out;
  for (int l = 0; l < kLayers; ++l) out.push_back(device_like(sets[0].output()));
  for (PagedWorkload& w : sets) reference::write_kv_cache(lp, w.new_keys(), w.new_values(), w.cache(), md);
  synchronize("own appends: setup");
  OwnedStream stream(0);
  const KVCacheView cache{k.view, v.view};
  PlanOptions options;
  options.graph_capturable = graph;
  options.max_blocks_per_seq = md.max_blocks_per_seq;
  options.early_cache_reads = early;
  const auto plan = impl.plan(md, cache, ScalarType::bf16, stream.get(), options);
  EXPECT_TRUE(FlashAttnCuda::summary(*plan).fused_append);
  auto issue = [&] {
    for (int l = 0; l < kLayers; ++l)
      impl.execute(*plan, q.view, NewKeysValues{nk[l % 2].view, nv[l % 2].view}, cache, out[l].view, stream.get());
  };
  issue();
  stream.synchronize("own appends: warm-up");
  CudaGraph g;
  if (graph) {
    g.begin_capture(stream.get());
    issue();
    g.end_capture(stream.get());
    EXPECT_EQ(g.nodes(), kLayers) << "one launch per layer";
  }
  for (int round = 0; round < 2; ++round) {
    for (DeviceTensor& o : out) o.buffer.fill_bytes(0xFF);
    synchronize("own appends: poisoned outputs");
    if (graph) g.launch(stream.get());
    else issue();
    stream.synchronize("own appends");
    for (int l = 0; l < kLayers; ++l)
      expect_matches_reference(lp, sets[0].query(), sets[l % 2].cache(), md, out[l],
                               fmt::format("{}{} round {} layer {}", graph ? "graph" : "stream",
                                           early ? ", early cache reads" : "", round, l));
  }
}

TEST(FusedAppendGpu, LayersOnOneCacheSeeTheirOwnAppends) {
  REQUIRE_GPU();
  expect_layers_see_their_own_appends(false, false);
  expect_layers_see_their_own_appends(false, true);
}

TEST(FusedAppendGpu, LayersOnOneCacheSeeTheirOwnAppendsInAGraph) {
  REQUIRE_GPU();
  expect_layers_see_their_own_appends(true, false);
  expect_layers_see_their_own_appends(true, true);
}

TEST(FusedAppendGpu, LayersOnOneCacheSeeTheirOwnAppendsWithEarlyCacheReads) {
  REQUIRE_GPU();
  for (const bool graph : {false, true})
    for (const bool fp8 : {false, true}) expect_layers_see_their_own_appends(graph, fp8, true);
}

TEST(FusedAppendGpu, CapturedGraphReplaysWithNewTokensAndLengths) {
  REQUIRE_GPU();
  constexpr int kCapacityTokens = 80 * 16;
  PagedWorkload w(spec_for(std::vector<SequenceShape>(4, SequenceShape{kCapacityTokens, 2}), 73));
  const LayerParams lp = runtime::layer_params_for(w.spec());
  FlashAttnCuda impl(lp);
  DeviceTensor q = to_device(w.query()), nk = to_device(w.new_keys()), nv = to_device(w.new_values());
  DeviceTensor k = to_device(w.cache().key), v = to_device(w.cache().value);
  DeviceTensor o = device_like(w.output());
  synchronize("fused graph: setup");
  const AttentionMetadata full = w.metadata();
  std::vector<std::int32_t> lens(full.seq_lens.begin(), full.seq_lens.end());
  std::vector<std::int64_t> slots(full.slot_mapping.begin(), full.slot_mapping.end());
  AttentionMetadata md = full;
  md.seq_lens = lens;
  md.slot_mapping = slots;
  OwnedStream stream(0);
  PlanOptions options;
  options.graph_capturable = true;
  options.max_blocks_per_seq = full.max_blocks_per_seq;
  const KVCacheView cache{k.view, v.view};
  const auto plan = impl.plan(md, cache, ScalarType::bf16, stream.get(), options);
  const NewKeysValues new_kv{nk.view, nv.view};
  impl.execute(*plan, q.view, new_kv, cache, o.view, stream.get());
  stream.synchronize("fused graph: warm-up");
  reference::write_kv_cache(lp, w.new_keys(), w.new_values(), w.cache(), md);
  CudaGraph graph;
  graph.begin_capture(stream.get());
  impl.execute(*plan, q.view, new_kv, cache, o.view, stream.get());
  graph.end_capture(stream.get());
  EXPECT_EQ(graph.nodes(), 1);

  // Each replay: new lengths (so new slots), new queries, new keys and values.
  const std::vector<std::vector<std::int32_t>> rounds = {{kCapacityTokens, 17, 2, 600}, {5, 1031, 1277, 64}};
  std::vector<std::uint8_t> hq(span_bytes(q.view)), hk(span_bytes(nk.view)), hv(span_bytes(nv.view));
  TensorView host_q = w.query(), host_k = w.new_keys(), host_v = w.new_values();
  host_q.data = hq.data();
  host_k.data = hk.data();
  host_v.data = hv.data();
  for (std::size_t r = 0; r < rounds.size(); ++r) {
    lens = rounds[r];
    md.max_seq_len = *std::max_element(lens.begin(), lens.end());
    for (int s = 0; s < 4; ++s)
      for (int i = 0; i < 2; ++i) {
        const int pos = lens[s] - 2 + i;
        const std::int64_t block = full.block_table[std::size_t(s) * full.max_blocks_per_seq + pos / 16];
        slots[std::size_t(s) * 2 + i] = block * 16 + pos % 16;
      }
    runtime::fill_uniform(hq, ScalarType::bf16, 1.0f, 700 + r);
    runtime::fill_uniform(hk, ScalarType::bf16, 1.0f, 710 + r);
    runtime::fill_uniform(hv, ScalarType::bf16, 1.0f, 720 + r);
    q.buffer.upload(hq.data(), hq.size());
    nk.buffer.upload(hk.data(), hk.size());
    nv.buffer.upload(hv.data(), hv.size());
    o.buffer.fill_bytes(0xFF);
    synchronize("fused graph: new contents");
    impl.update(*plan, md, stream.get());
    EXPECT_TRUE(FlashAttnCuda::summary(*plan).fused_append);
    graph.launch(stream.get());
    stream.synchronize("fused graph replay");
    reference::write_kv_cache(lp, host_k, host_v, w.cache(), md);
    EXPECT_TRUE(download(k) == host_bytes(w.cache().key)) << "replay " << r;
    EXPECT_TRUE(download(v) == host_bytes(w.cache().value)) << "replay " << r;
    expect_matches_reference(lp, host_q, w.cache(), md, o, fmt::format("replay {}", r));
  }
  // The captured launch writes each token at its block-table position: a batch whose slot
  // lies elsewhere is refused rather than replayed into the wrong slot.
  slots[0] = slots[1];
  try {
    impl.update(*plan, md, stream.get());
    ADD_FAILURE() << "a batch with a slot elsewhere was accepted by a plan captured with appends";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("slot_mapping"), std::string::npos) << e.what();
  }
}

TEST(FusedAppendGpu, ExecuteWithAppendTakesNoMemory) {
  REQUIRE_GPU();
  PagedWorkload w(spec_for(kDecode, 74));
  const LayerParams lp = runtime::layer_params_for(w.spec());
  FlashAttnCuda impl(lp);
  DeviceTensor q = to_device(w.query()), k = to_device(w.cache().key), v = to_device(w.cache().value);
  DeviceTensor nk = to_device(w.new_keys()), nv = to_device(w.new_values());
  DeviceTensor o = device_like(w.output());
  synchronize("append no memory: setup");
  OwnedStream stream(0);
  const KVCacheView cache{k.view, v.view};
  const auto plan = impl.plan(w.metadata(), cache, ScalarType::bf16, stream.get());
  const NewKeysValues new_kv{nk.view, nv.view};
  impl.execute(*plan, q.view, new_kv, cache, o.view, stream.get());
  stream.synchronize("append no memory: warm-up");
  const DeviceMemoryUse before = device_memory_use(0);
  for (int i = 0; i < 32; ++i) impl.execute(*plan, q.view, new_kv, cache, o.view, stream.get());
  stream.synchronize("append no memory");
  const DeviceMemoryUse after = device_memory_use(0);
  EXPECT_EQ(after.pool_used_bytes, before.pool_used_bytes);
  EXPECT_EQ(after.free_bytes, before.free_bytes);
}

TEST(FusedAppendGpu, MisshapenNewKeysAreRefusedByName) {
  REQUIRE_GPU();
  PagedWorkload w(spec_for({{61, 1}, {7, 1}}, 75));
  const LayerParams lp = runtime::layer_params_for(w.spec());
  FlashAttnCuda impl(lp);
  DeviceTensor q = to_device(w.query()), k = to_device(w.cache().key), v = to_device(w.cache().value);
  DeviceTensor nk = to_device(w.new_keys()), nv = to_device(w.new_values());
  DeviceTensor o = device_like(w.output());
  const KVCacheView cache{k.view, v.view};
  const auto plan = impl.plan(w.metadata(), cache, ScalarType::bf16, Stream{});
  TensorView wrong = nk.view;
  wrong.shape[1] = 3;  // 3 KV heads, the layer has 2
  try {
    impl.execute(*plan, q.view, NewKeysValues{wrong, nv.view}, cache, o.view, Stream{});
    ADD_FAILURE() << "no error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("new_kv.key"), std::string::npos) << e.what();
  }
  synchronize("misshapen new keys");
}

}  // namespace
}  // namespace attnsel::kernel::cuda
