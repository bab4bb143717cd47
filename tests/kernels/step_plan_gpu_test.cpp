// The step-level API on FLASH_ATTN's CUDA kernels: two streams at once, a decode step
// captured in a CUDA graph and replayed with new batch contents, executes that take no
// memory, and consecutive layers whose launches overlap (programmatic dependent launch)
// each seeing their own cache write. Suites named *Gpu* skip without a device; the host suite runs everywhere.
#include <gtest/gtest.h>
#include <fmt/format.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/gpu_test_util.hpp"
#include "kernels/output_error.hpp"
#include "allocation_count.hpp"
#include "attnsel/errors.hpp"
#include "kernels/device/cuda/device_memory.hpp"
#include "kernels/attention/cuda/flash_attn_cuda.hpp"
#include "kernels/attention/reference.hpp"
#include "runtime/paged_workload.hpp"

namespace attnsel::kernel::cuda {
namespace {

using runtime::PagedWorkload;
using runtime::SequenceShape;
using runtime::WorkloadSpec;
using testing::spec_for;

/// Every output element of `out` (a device tensor) against the reference for `query` (host)
/// over `cache` (host) and `md`: no NaN, relative L2 and largest error within bf16's bounds.
void expect_matches(const LayerParams& lp, const TensorView& query, const KVCacheView& cache,
                    const AttentionMetadata& md, const DeviceTensor& out, const std::string& what) {
  const kernel::testing::OutputError e = testing::device_output_error(lp, query, cache, md, out);
  EXPECT_EQ(e.not_finite, 0) << what;
  EXPECT_LT(e.rel_l2, 1.6e-2) << what;
  EXPECT_LT(e.max_abs, 0.4) << what;
}

TEST(StepPlanHost, FlashAttnDeclaresItsKernel) {
  const KernelInfo k = flash_attn_cuda_kernel_info();
  EXPECT_EQ(k.device, DeviceKind::cuda);
  EXPECT_EQ(k.graph_support, GraphSupport::uniform_batch);
  EXPECT_TRUE(k.lse_output);
  EXPECT_FALSE(k.lse_prefill);
  EXPECT_EQ(k.available, testing::gpu_available());
}

TEST(StepPlanGpu, TwoStreamsDoNotInterfere) {
  REQUIRE_GPU();
  PagedWorkload a(spec_for({{1, 1}, {4099, 1}, {61, 1}, {700, 1}}, 21));
  PagedWorkload b(spec_for({{37, 37}, {2048, 1}, {131, 3}}, 22));
  const LayerParams lp = runtime::layer_params_for(a.spec());
  FlashAttnCuda impl(lp);
  struct Side {
    PagedWorkload* w;
    DeviceTensor q, k, v, o;
    OwnedStream stream{0};
    std::unique_ptr<StepPlan> plan;
  };
  Side sides[2];
  sides[0].w = &a;
  sides[1].w = &b;
  for (Side& s : sides) {
    s.q = to_device(s.w->query());
    s.k = to_device(s.w->cache().key);
    s.v = to_device(s.w->cache().value);
    s.o = device_like(s.w->output());
    s.o.buffer.fill_bytes(0xFF);
  }
  synchronize("two streams: setup");
  for (Side& s : sides) s.plan = impl.plan(s.w->metadata(), {s.k.view, s.v.view}, ScalarType::bf16, s.stream.get());
  // Interleaved: both streams' kernels (and split-KV merges) run at the same time.
  for (int i = 0; i < 40; ++i)
    for (Side& s : sides) impl.execute(*s.plan, s.q.view, {s.k.view, s.v.view}, s.o.view, s.stream.get());
  for (Side& s : sides) s.stream.synchronize("two streams");
  expect_matches(lp, a.query(), a.cache(), a.metadata(), sides[0].o, "stream A");
  expect_matches(lp, b.query(), b.cache(), b.metadata(), sides[1].o, "stream B");
}

TEST(StepPlanGpu, CapturedDecodeGraphReplaysWithNewBatchContents) {
  REQUIRE_GPU();
  // Four decode sequences; the cache holds every sequence's longest length.
  constexpr int kCapacityTokens = 80 * 16;
  const std::vector<SequenceShape> longest(4, SequenceShape{kCapacityTokens, 1});
  PagedWorkload layer0(spec_for(longest, 31)), layer1(spec_for(longest, 31));
  // Layer 1: the same block table and geometry, other cache contents.
  {
    const KVCacheView c1 = layer1.cache();
    std::span<std::uint8_t> kb(static_cast<std::uint8_t*>(c1.key.data), span_bytes(c1.key));
    std::span<std::uint8_t> vb(static_cast<std::uint8_t*>(c1.value.data), span_bytes(c1.value));
    runtime::fill_uniform(kb, ScalarType::bf16, 1.0f, 77);
    runtime::fill_uniform(vb, ScalarType::bf16, 1.0f, 78);
  }
  PagedWorkload* layers[2] = {&layer0, &layer1};
  LayerParams lp = runtime::layer_params_for(layer0.spec());
  FlashAttnCuda impl(lp);
  LayerParams lp1 = lp;
  lp1.logits_soft_cap = 15.0f;  // another layer of the group, with its own parameters
  FlashAttnCuda impl1(lp1);
  const FlashAttnCuda* impls[2] = {&impl, &impl1};
  const LayerParams* params[2] = {&lp, &lp1};

  DeviceTensor q = to_device(layer0.query());
  DeviceTensor k[2] = {to_device(layer0.cache().key), to_device(layer1.cache().key)};
  DeviceTensor v[2] = {to_device(layer0.cache().value), to_device(layer1.cache().value)};
  DeviceTensor o[2] = {device_like(layer0.output()), device_like(layer0.output())};
  synchronize("graph: setup");
  const AttentionMetadata full = layer0.metadata();
  std::vector<std::int32_t> lens(full.seq_lens.begin(), full.seq_lens.end());
  AttentionMetadata md = full;
  md.seq_lens = lens;

  OwnedStream stream(0);
  PlanOptions options;
  options.graph_capturable = true;
  options.max_blocks_per_seq = full.max_blocks_per_seq;
  const auto plan = impl.plan(md, {k[0].view, v[0].view}, ScalarType::bf16, stream.get(), options);
  EXPECT_TRUE(plan->graph_capturable());
  // Once as is (kernels load and are configured outside the capture), then captured.
  for (int l = 0; l < 2; ++l) impls[l]->execute(*plan, q.view, {k[l].view, v[l].view}, o[l].view, stream.get());
  stream.synchronize("graph: warm-up");
  CudaGraph graph;
  graph.begin_capture(stream.get());
  for (int l = 0; l < 2; ++l) impls[l]->execute(*plan, q.view, {k[l].view, v[l].view}, o[l].view, stream.get());
  graph.end_capture(stream.get());
  EXPECT_GE(graph.nodes(), 2);

  // Each replay: new lengths (short, long, one block, the capacity), new queries.
  const std::vector<std::vector<std::int32_t>> rounds = {
      {kCapacityTokens, 17, 1, 600}, {5, 1031, kCapacityTokens - 3, 64}, {1, 1, 2, 3}, {900, 901, 902, 1279}};
  std::vector<std::uint8_t> host_q(span_bytes(q.view));
  TensorView host_query = layer0.query();
  host_query.data = host_q.data();
  for (std::size_t r = 0; r < rounds.size(); ++r) {
    lens = rounds[r];
    md.seq_lens = lens;
    md.max_seq_len = *std::max_element(lens.begin(), lens.end());
    runtime::fill_uniform(host_q, ScalarType::bf16, 1.0f, 500 + r);
    q.buffer.upload(host_q.data(), host_q.size());
    for (DeviceTensor& out : o) out.buffer.fill_bytes(0xFF);
    synchronize("graph: new batch contents");
    impl.update(*plan, md, stream.get());
    graph.launch(stream.get());
    stream.synchronize("graph replay");
    for (int l = 0; l < 2; ++l)
      expect_matches(*params[l], host_query, layers[l]->cache(), md, o[l],
                     fmt::format("replay {} layer {} ({})", r, l, plan->describe()));
  }
  // A batch of another shape cannot reuse the captured launches.
  AttentionMetadata three = md;
  three.num_seqs = 3;
  three.num_actual_tokens = 3;
  three.query_start_loc = three.query_start_loc.first(4);
  EXPECT_THROW(impl.update(*plan, three, stream.get()), ValueError);
}

TEST(StepPlanGpu, ExecuteTakesNoMemory) {
  REQUIRE_GPU();
  PagedWorkload w(spec_for({{1, 1}, {8191, 1}, {300, 1}, {77, 77}}, 41));
  const LayerParams lp = runtime::layer_params_for(w.spec());
  FlashAttnCuda impl(lp);
  DeviceTensor q = to_device(w.query()), k = to_device(w.cache().key), v = to_device(w.cache().value);
  DeviceTensor nk = to_device(w.new_keys()), nv = to_device(w.new_values());
  DeviceTensor o = device_like(w.output());
  synchronize("no memory: setup");
  OwnedStream stream(0);
  const KVCacheView cache{k.view, v.view};
  const auto plan = impl.plan(w.metadata(), cache, ScalarType::bf16, stream.get());
  impl.write_kv_cache(*plan, nk.view, nv.view, cache, stream.get());
  impl.execute(*plan, q.view, cache, o.view, stream.get());  // first launches: modules load
  stream.synchronize("no memory: warm-up");
  const DeviceMemoryUse before = device_memory_use(0);
  const std::int64_t host_allocations = kernel::testing::allocations_during([&] {
    for (int i = 0; i < 64; ++i) {
      impl.write_kv_cache(*plan, nk.view, nv.view, cache, stream.get());
      impl.execute(*plan, q.view, cache, o.view, stream.get());
    }
  });
  stream.synchronize("no memory");
  const DeviceMemoryUse after = device_memory_use(0);
  EXPECT_EQ(host_allocations, 0);
  EXPECT_EQ(after.pool_used_bytes, before.pool_used_bytes) << "stream-ordered allocations during execute";
  EXPECT_EQ(after.free_bytes, before.free_bytes) << "device memory taken during execute";
  // The device cache now holds the new tokens' keys and values: so must the host's.
  reference::write_kv_cache(lp, w.new_keys(), w.new_values(), w.cache(), w.metadata());
  expect_matches(lp, w.query(), w.cache(), w.metadata(), o, "after 64 executes");
}

/// Consecutive layers that share one cache and write different keys and values into the
/// same slots: each layer's attention must see its own write and not the next layer's,
/// however far the launches of the next kernels overlap the running ones (programmatic
/// dependent launch on sm_90). Eight layers, issued without synchronisation, on a stream
/// and, when `graph`, captured in a CUDA graph and replayed. `padding`: every slot is -1
/// (a padded step writes nothing), and the layers' attentions, which share the plan's
/// split workspace, must still run one after the other.
void expect_layers_see_their_own_writes(const std::vector<SequenceShape>& seqs, bool graph, bool padding = false) {
  const WorkloadSpec spec = spec_for(seqs, 51);
  PagedWorkload sets[2] = {PagedWorkload(spec), PagedWorkload(spec)};
  {  // the second set of new keys and values differs from the first
    std::span<std::uint8_t> kb(static_cast<std::uint8_t*>(sets[1].new_keys().data), span_bytes(sets[1].new_keys()));
    std::span<std::uint8_t> vb(static_cast<std::uint8_t*>(sets[1].new_values().data), span_bytes(sets[1].new_values()));
    runtime::fill_uniform(kb, ScalarType::bf16, 1.0f, 91);
    runtime::fill_uniform(vb, ScalarType::bf16, 1.0f, 92);
  }
  const LayerParams lp = runtime::layer_params_for(spec);
  FlashAttnCuda impl(lp);
  AttentionMetadata md = sets[0].metadata();
  const std::vector<std::int64_t> no_slots(md.slot_mapping.size(), -1);
  if (padding) md.slot_mapping = no_slots;
  DeviceTensor q = to_device(sets[0].query());
  DeviceTensor k = to_device(sets[0].cache().key), v = to_device(sets[0].cache().value);
  DeviceTensor nk[2] = {to_device(sets[0].new_keys()), to_device(sets[1].new_keys())};
  DeviceTensor nv[2] = {to_device(sets[0].new_values()), to_device(sets[1].new_values())};
  constexpr int kLayers = 8;
  std::vector<DeviceTensor> out;
  for (int l = 0; l < kLayers; ++l) out.push_back(device_like(sets[0].output()));
  for (PagedWorkload& w : sets) reference::write_kv_cache(lp, w.new_keys(), w.new_values(), w.cache(), md);
  synchronize("own writes: setup");

  OwnedStream stream(0);
  const KVCacheView cache{k.view, v.view};
  PlanOptions options;
  options.graph_capturable = graph;
  options.max_blocks_per_seq = md.max_blocks_per_seq;
  const auto plan = impl.plan(md, cache, ScalarType::bf16, stream.get(), options);
  auto issue = [&] {
    for (int l = 0; l < kLayers; ++l) {
      impl.write_kv_cache(*plan, nk[l % 2].view, nv[l % 2].view, cache, stream.get());
      impl.execute(*plan, q.view, cache, out[l].view, stream.get());
    }
  };
  issue();  // kernels load and are configured outside any capture
  stream.synchronize("own writes: warm-up");
  CudaGraph g;
  if (graph) {
    g.begin_capture(stream.get());
    issue();
    g.end_capture(stream.get());
  }
  for (int round = 0; round < 3; ++round) {
    for (DeviceTensor& o : out) o.buffer.fill_bytes(0xFF);
    synchronize("own writes: poisoned outputs");
    if (graph) g.launch(stream.get());
    else issue();
    stream.synchronize("own writes");
    for (int l = 0; l < kLayers; ++l)
      expect_matches(lp, sets[0].query(), sets[l % 2].cache(), md, out[l],
                     fmt::format("{} round {} layer {} ({})", graph ? "graph" : "stream", round, l, plan->describe()));
  }
}

TEST(StepPlanGpu, ConsecutiveLayersOnOneCacheSeeTheirOwnWrites) {
  REQUIRE_GPU();
  expect_layers_see_their_own_writes({{1, 1}, {4099, 1}, {700, 1}, {8191, 1}, {77, 77}, {33, 1}}, false);
}

TEST(StepPlanGpu, ConsecutiveLayersOnOneCacheSeeTheirOwnWritesInAGraph) {
  REQUIRE_GPU();
  expect_layers_see_their_own_writes({{1, 1}, {4099, 1}, {700, 1}, {8191, 1}, {33, 1}}, true);
}

TEST(StepPlanGpu, ConsecutiveLayersStayOrderedWhenEveryWriteIsPadding) {
  REQUIRE_GPU();
  expect_layers_see_their_own_writes({{8191, 1}, {4099, 1}, {16001, 1}}, false, true);
  expect_layers_see_their_own_writes({{8191, 1}, {4099, 1}, {16001, 1}}, true, true);
}

}  // namespace
}  // namespace attnsel::kernel::cuda
