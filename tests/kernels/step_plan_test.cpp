// The step-level API on the CPU kernel and on implementations that only have the one-call
// form: a plan built once serves many layers, each equal to the reference; plans refuse
// what they were not built for; execute allocates nothing; the log-sum-exp output.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <numeric>
#include <vector>

#include "allocation_count.hpp"
#include "attnsel/errors.hpp"
#include "kernel_test_util.hpp"
#include "kernels/attention/cpu/cpu_attention.hpp"

// ---- counting operator new (replaces the global one for the whole test program) --------------
namespace {
std::atomic<bool> g_counting{false};
std::atomic<std::int64_t> g_allocations{0};
// Out of line: a debugger's breakpoint here shows who allocated.
[[gnu::noinline]] void note_allocation() { g_allocations.fetch_add(1, std::memory_order_relaxed); }
void* counted(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) note_allocation();
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* counted_aligned(std::size_t n, std::align_val_t al) {
  if (g_counting.load(std::memory_order_relaxed)) note_allocation();
  const auto a = static_cast<std::size_t>(al);
  if (void* p = std::aligned_alloc(a, (n + a - 1) / a * a)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t n) { return counted(n); }
void* operator new[](std::size_t n) { return counted(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new(std::size_t n, std::align_val_t a) { return counted_aligned(n, a); }
void* operator new[](std::size_t n, std::align_val_t a) { return counted_aligned(n, a); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace attnsel::kernel::testing {
std::int64_t allocations_during(const std::function<void()>& f) {
  g_allocations.store(0);
  g_counting.store(true);
  try {
    f();
  } catch (...) {
    g_counting.store(false);
    throw;
  }
  g_counting.store(false);
  return g_allocations.load();
}
}  // namespace attnsel::kernel::testing

namespace attnsel::kernel {
namespace {

using runtime::PagedWorkload;
using runtime::SequenceShape;
using runtime::WorkloadSpec;

// Decode and prefill mixed, odd and prime lengths; one long sequence so the plan splits.
const std::vector<SequenceShape> kBatch = {{1, 1}, {61, 1}, {17, 17}, {131, 3}, {7, 1}, {1031, 1}};

WorkloadSpec spec_for(std::vector<SequenceShape> seqs, std::uint64_t seed = 7) {
  WorkloadSpec s;
  s.num_heads = 8;
  s.num_kv_heads = 2;
  s.head_size = 64;
  s.dtype = ScalarType::bf16;
  s.sequences = std::move(seqs);
  s.seed = seed;
  return s;
}

/// One layer's own memory: its cache (random contents), query and output, with the
/// geometry of the workload every layer shares.
struct Layer {
  std::vector<std::uint8_t> k, v, q, o;
  KVCacheView cache;
  TensorView query, output;
  LayerParams params;
};

Layer make_layer(PagedWorkload& w, const LayerParams& base, int index) {
  Layer l;
  const KVCacheView c = w.cache();
  const std::size_t kv_bytes = static_cast<std::size_t>(c.key.stride[0] * c.key.shape[0]) * element_size(c.key.dtype);
  l.k.resize(kv_bytes);
  l.v.resize(kv_bytes);
  runtime::fill_uniform(l.k, c.key.dtype, 1.0f, 100 + 2 * index);
  runtime::fill_uniform(l.v, c.key.dtype, 1.0f, 101 + 2 * index);
  l.cache = c;
  l.cache.key.data = l.k.data();
  l.cache.value.data = l.v.data();
  const TensorView q = w.query();
  l.q.resize(static_cast<std::size_t>(q.numel()) * element_size(q.dtype));
  l.o.assign(l.q.size(), 0xFF);  // NaN in bf16: rows a kernel skips fail the comparison
  runtime::fill_uniform(l.q, q.dtype, 1.0f, 300 + index);
  l.query = q;
  l.query.data = l.q.data();
  l.output = q;
  l.output.data = l.o.data();
  // Layers of one group share the shape; scale, soft cap and sinks are their own.
  l.params = base;
  l.params.scale = base.scale * (0.75f + 0.05f * static_cast<float>(index));
  if (index % 3 == 1) l.params.logits_soft_cap = 20.0f;
  if (index % 3 == 2) {
    l.params.sinks.resize(static_cast<std::size_t>(base.num_heads));
    for (int h = 0; h < base.num_heads; ++h) l.params.sinks[static_cast<std::size_t>(h)] = 0.3f * static_cast<float>(h % 4);
  }
  return l;
}

void expect_layer_matches(const Layer& l, const AttentionMetadata& md, const std::string& what) {
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(md.num_actual_tokens));
  std::iota(tokens.begin(), tokens.end(), 0);
  const std::vector<double> want = reference::attend(l.params, l.query, l.cache, md, tokens);
  const runtime::Comparison c =
      runtime::compare_with_reference(l.output, tokens, want, runtime::tolerance_for(l.output.dtype));
  EXPECT_TRUE(c.passed()) << what << ": worst " << c.worst_ratio << " of the tolerance";
  for (const runtime::Mismatch& m : c.first_failures)
    ADD_FAILURE() << what << " token " << m.token << " head " << m.head << " dim " << m.dim << ": got " << m.got
                  << ", reference " << m.want;
}

cpu::CpuAttentionOptions two_threads() {
  cpu::CpuAttentionOptions o;
  o.num_threads = 2;
  return o;
}

TEST(StepPlan, OnePlanServesManyLayersEachEqualToTheReference) {
  PagedWorkload w(spec_for(kBatch));
  const LayerParams base = runtime::layer_params_for(w.spec());
  const AttentionMetadata md = w.metadata();
  std::vector<Layer> layers;
  std::vector<std::unique_ptr<AttentionImpl>> impls;
  for (int i = 0; i < 9; ++i) {
    layers.push_back(make_layer(w, base, i));
    impls.push_back(cpu::make_cpu_attention_impl(layers.back().params, two_threads()));
  }
  // The plan is built by one layer's implementation and serves the whole group.
  const auto plan = impls[0]->plan(md, layers[0].cache, ScalarType::bf16, Stream{});
  EXPECT_EQ(plan->shape().num_seqs, static_cast<int>(kBatch.size()));
  EXPECT_GT(plan->workspace_bytes(), 0u);
  for (std::size_t i = 0; i < layers.size(); ++i)
    impls[i]->execute(*plan, layers[i].query, layers[i].cache, layers[i].output, Stream{});
  for (std::size_t i = 0; i < layers.size(); ++i) expect_layer_matches(layers[i], md, fmt::format("layer {}", i));
}

TEST(StepPlan, UpdatedPlanServesTheNextStep) {
  PagedWorkload first(spec_for(kBatch, 3));
  // The next step: other sequences, the same cache geometry (as many blocks).
  const std::vector<SequenceShape> next_seqs = {{2, 2}, {300, 1}, {45, 9}};
  WorkloadSpec next_spec = spec_for(next_seqs, 4);
  int needed = 0;
  for (const SequenceShape& q : next_seqs) needed += (q.seq_len + 15) / 16;
  next_spec.spare_blocks = first.num_blocks() - needed;
  ASSERT_GE(next_spec.spare_blocks, 0);
  PagedWorkload next(next_spec);
  ASSERT_EQ(next.num_blocks(), first.num_blocks());
  const LayerParams p = runtime::layer_params_for(first.spec());
  const auto impl = cpu::make_cpu_attention_impl(p, two_threads());
  auto plan = impl->plan(first.metadata(), first.cache(), ScalarType::bf16, Stream{});
  impl->update(*plan, next.metadata(), Stream{});
  EXPECT_EQ(plan->shape().num_seqs, 3);
  next.poison_output();
  impl->execute(*plan, next.query(), next.cache(), next.output(), Stream{});
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(next.num_tokens()));
  std::iota(tokens.begin(), tokens.end(), 0);
  const auto want = reference::attend(p, next.query(), next.cache(), next.metadata(), tokens);
  EXPECT_TRUE(runtime::compare_with_reference(next.output(), tokens, want, runtime::tolerance_for(ScalarType::bf16))
                  .passed());
}

TEST(StepPlan, RefusesWhatItWasNotBuiltFor) {
  PagedWorkload w(spec_for(kBatch));
  const LayerParams p = runtime::layer_params_for(w.spec());
  const auto impl = cpu::make_cpu_attention_impl(p, two_threads());
  const AttentionMetadata md = w.metadata();
  const auto plan = impl->plan(md, w.cache(), ScalarType::bf16, Stream{});
  auto expect_refusal = [](const std::function<void()>& f, const std::string& needle) {
    try {
      f();
      ADD_FAILURE() << "expected an error containing '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  // A query of another batch (fewer tokens than the plan's).
  TensorView short_query = w.query();
  short_query.shape[0] = md.num_actual_tokens - 1;
  expect_refusal([&] { impl->execute(*plan, short_query, w.cache(), w.output(), Stream{}); },
                 "the plan's batch needs at least");
  // A cache of another geometry (fewer blocks).
  KVCacheView small = w.cache();
  small.key.shape[0] -= 1;
  small.value.shape[0] -= 1;
  expect_refusal([&] { impl->execute(*plan, w.query(), small, w.output(), Stream{}); },
                 "differs from the plan's cache geometry");
  // A layer of another group.
  LayerParams other = p;
  other.sliding_window = 32;
  const auto other_impl = cpu::make_cpu_attention_impl(other, two_threads());
  expect_refusal([&] { other_impl->execute(*plan, w.query(), w.cache(), w.output(), Stream{}); },
                 "is not in the plan's group");
  // Another implementation's plan.
  const auto ref = reference::make_reference_impl(p);
  expect_refusal([&] { ref->execute(*plan, w.query(), w.cache(), w.output(), Stream{}); },
                 "another kind of kernel implementation");
  // Another dtype.
  TensorView f16_query = w.query();
  f16_query.dtype = ScalarType::f16;
  expect_refusal([&] { impl->execute(*plan, f16_query, w.cache(), w.output(), Stream{}); },
                 "differs from the plan's dtype");
  // The batch itself is checked once, at plan time.
  AttentionMetadata bad = md;
  std::vector<std::int32_t> lens(md.seq_lens.begin(), md.seq_lens.end());
  lens[1] = 1 << 20;
  bad.seq_lens = lens;
  bad.max_seq_len = 1 << 20;
  expect_refusal([&] { (void)impl->plan(bad, w.cache(), ScalarType::bf16, Stream{}); }, "seq_lens[1]");
  // Host kernels cannot be captured; lse needs a plan built for it.
  PlanOptions capture;
  capture.graph_capturable = true;
  expect_refusal([&] { (void)impl->plan(md, w.cache(), ScalarType::bf16, Stream{}, capture); }, "'never'");
  std::vector<float> lse(static_cast<std::size_t>(md.num_actual_tokens) * 8);
  const TensorView lse_view = TensorView::contiguous(lse.data(), ScalarType::f32, {md.num_actual_tokens, 8});
  expect_refusal([&] { impl->execute(*plan, w.query(), w.cache(), w.output(), Stream{}, &lse_view); },
                 "PlanOptions::lse");
}

TEST(StepPlan, ExecuteAndCacheWriteAllocateNothing) {
  PagedWorkload w(spec_for(kBatch));
  const LayerParams p = runtime::layer_params_for(w.spec());
  const AttentionMetadata md = w.metadata();
  for (bool lse : {false, true}) {
    const auto impl = cpu::make_cpu_attention_impl(p, two_threads());
    PlanOptions o;
    o.lse = lse;
    const auto plan = impl->plan(md, w.cache(), ScalarType::bf16, Stream{}, o);
    std::vector<float> lse_buf(static_cast<std::size_t>(md.num_actual_tokens) * 8);
    const TensorView lse_view = TensorView::contiguous(lse_buf.data(), ScalarType::f32, {md.num_actual_tokens, 8});
    const TensorView* lse_out = lse ? &lse_view : nullptr;
    // The views are made outside the counted region (making them allocates).
    const KVCacheView cache = w.cache();
    const TensorView query = w.query(), output = w.output(), keys = w.new_keys(), values = w.new_values();
    impl->execute(*plan, query, cache, output, Stream{}, lse_out);  // the team's first use
    const std::int64_t n = testing::allocations_during([&] {
      for (int i = 0; i < 20; ++i) {
        impl->write_kv_cache(*plan, keys, values, cache, Stream{});
        impl->execute(*plan, query, cache, output, Stream{}, lse_out);
      }
    });
    EXPECT_EQ(n, 0) << "execute/write_kv_cache allocated" << (lse ? " (with lse)" : "");
  }
  // The counter sees allocations (so the zero above means something).
  EXPECT_GE(testing::allocations_during([] { std::vector<int> v(100); v[3] = 1; }), 1);
  // And planning does allocate (it is where the memory is taken).
  const auto impl = cpu::make_cpu_attention_impl(p, two_threads());
  EXPECT_GE(testing::allocations_during([&] { (void)impl->plan(md, w.cache(), ScalarType::bf16, Stream{}); }), 1);
}

TEST(StepPlan, ExecuteWithNewKeysEqualsWriteThenExecute) {
  // Two identical workloads: one written then attended in two calls, one in a single execute
  // with the new keys and values. Caches and outputs must agree byte for byte, also with
  // padding slots (-1) and an fp8 cache.
  for (CacheDType kv : {CacheDType::auto_, CacheDType::fp8_e4m3}) {
    for (bool padding : {false, true}) {
      WorkloadSpec spec = spec_for(kBatch, 13);
      spec.kv_cache_dtype = kv;
      PagedWorkload a(spec), b(spec);
      const LayerParams p = runtime::layer_params_for(spec);
      const auto impl = cpu::make_cpu_attention_impl(p, two_threads());
      AttentionMetadata md = a.metadata();
      std::vector<std::int64_t> slots(md.slot_mapping.begin(), md.slot_mapping.end());
      if (padding)
        for (std::size_t i = 0; i < slots.size(); i += 3) slots[i] = -1;
      md.slot_mapping = slots;
      const auto plan = impl->plan(md, a.cache(), ScalarType::bf16, Stream{});
      impl->write_kv_cache(*plan, a.new_keys(), a.new_values(), a.cache(), Stream{});
      impl->execute(*plan, a.query(), a.cache(), a.output(), Stream{});
      impl->execute(*plan, b.query(), NewKeysValues{b.new_keys(), b.new_values()}, b.cache(), b.output(), Stream{});
      const std::string what = fmt::format("{} cache{}", cache_dtype_name(kv), padding ? ", padding slots" : "");
      auto bytes = [](const TensorView& t) {
        const auto* d = static_cast<const std::uint8_t*>(t.data);
        return std::vector<std::uint8_t>(d, d + static_cast<std::size_t>(t.numel()) * element_size(t.dtype));
      };
      auto cache_bytes = [](const TensorView& t) {
        const auto* d = static_cast<const std::uint8_t*>(t.data);
        return std::vector<std::uint8_t>(d, d + static_cast<std::size_t>(t.stride[0] * t.shape[0]) * element_size(t.dtype));
      };
      EXPECT_EQ(cache_bytes(a.cache().key), cache_bytes(b.cache().key)) << what;
      EXPECT_EQ(cache_bytes(a.cache().value), cache_bytes(b.cache().value)) << what;
      EXPECT_EQ(bytes(a.output()), bytes(b.output())) << what;
      // And the pair is right: the reference over the cache the writes produced.
      Layer l;
      l.params = p;
      l.query = b.query();
      l.output = b.output();
      l.cache = b.cache();
      expect_layer_matches(l, md, what);
    }
  }
}

TEST(StepPlan, ExecuteWithNewKeysRefusesMisshapenOnesByName) {
  PagedWorkload w(spec_for(kBatch));
  const LayerParams p = runtime::layer_params_for(w.spec());
  const auto impl = cpu::make_cpu_attention_impl(p, two_threads());
  const AttentionMetadata md = w.metadata();
  const auto plan = impl->plan(md, w.cache(), ScalarType::bf16, Stream{});
  auto expect_value_error = [](const std::function<void()>& f, const std::string& needle) {
    try {
      f();
      ADD_FAILURE() << "expected a ValueError containing '" << needle << "'";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  TensorView heads = w.new_keys();
  heads.shape[1] = 3;  // the layer has 2 KV heads
  expect_value_error([&] { impl->execute(*plan, w.query(), {heads, w.new_values()}, w.cache(), w.output(), Stream{}); },
                     "new_kv.key");
  TensorView few = w.new_values();
  few.shape[0] = md.num_actual_tokens - 1;
  expect_value_error([&] { impl->execute(*plan, w.query(), {w.new_keys(), few}, w.cache(), w.output(), Stream{}); },
                     "new_kv.value");
  TensorView f16 = w.new_keys();
  f16.dtype = ScalarType::f16;
  expect_value_error([&] { impl->execute(*plan, w.query(), {f16, w.new_values()}, w.cache(), w.output(), Stream{}); },
                     "new_kv.key dtype");
  // A batch without a slot mapping has nowhere to write them.
  AttentionMetadata no_slots = md;
  no_slots.slot_mapping = {};
  const auto bare = impl->plan(no_slots, w.cache(), ScalarType::bf16, Stream{});
  expect_value_error(
      [&] { impl->execute(*bare, w.query(), {w.new_keys(), w.new_values()}, w.cache(), w.output(), Stream{}); },
      "slot_mapping");
  // Nothing was written by the refused calls: the output is still the poison it started as.
  w.poison_output();
  const std::vector<std::uint8_t> poisoned = w.output_bytes();
  expect_value_error([&] { impl->execute(*plan, w.query(), {heads, w.new_values()}, w.cache(), w.output(), Stream{}); },
                     "new_kv.key");
  EXPECT_EQ(w.output_bytes(), poisoned);
}

TEST(StepPlan, LogSumExpMatchesTheReference) {
  for (bool sinks : {false, true}) {
    PagedWorkload w(spec_for(kBatch, sinks ? 11 : 5));
    LayerParams p = runtime::layer_params_for(w.spec());
    if (sinks)
      for (int h = 0; h < p.num_heads; ++h) p.sinks.push_back(0.25f * static_cast<float>(h % 5) - 0.5f);
    const auto impl = cpu::make_cpu_attention_impl(p, two_threads());
    const AttentionMetadata md = w.metadata();
    PlanOptions o;
    o.lse = true;
    const auto plan = impl->plan(md, w.cache(), ScalarType::bf16, Stream{}, o);
    const std::int64_t tokens = md.num_actual_tokens;
    std::vector<float> got(static_cast<std::size_t>(tokens) * 8, std::nanf("")), want(got.size());
    const TensorView got_v = TensorView::contiguous(got.data(), ScalarType::f32, {tokens, 8});
    const TensorView want_v = TensorView::contiguous(want.data(), ScalarType::f32, {tokens, 8});
    w.poison_output();
    impl->execute(*plan, w.query(), w.cache(), w.output(), Stream{}, &got_v);
    std::vector<std::uint8_t> ref_out(w.output_bytes().size());
    TensorView ref_view = w.output();
    ref_view.data = ref_out.data();
    reference::forward(p, w.query(), w.cache(), md, ref_view, &want_v);
    for (std::size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(std::isfinite(got[i])) << "row " << i / 8 << " head " << i % 8;
      EXPECT_NEAR(got[i], want[i], 2e-3 * std::max(1.0f, std::abs(want[i]))) << "row " << i / 8 << " head " << i % 8;
    }
    // The outputs are those of a plan without lse.
    std::vector<std::int32_t> all(static_cast<std::size_t>(tokens));
    std::iota(all.begin(), all.end(), 0);
    const auto ref = reference::attend(p, w.query(), w.cache(), md, all);
    EXPECT_TRUE(runtime::compare_with_reference(w.output(), all, ref, runtime::tolerance_for(ScalarType::bf16)).passed());
  }
}

TEST(StepPlan, OneCallImplementationsGetThePlanToo) {
  // The reference (like a plugin's kernel) has only forward(); plan/execute serve it.
  PagedWorkload w(spec_for(kBatch));
  const LayerParams p = runtime::layer_params_for(w.spec());
  const auto impl = reference::make_reference_impl(p);
  EXPECT_EQ(impl->kernel_info().graph_support, GraphSupport::never);
  const auto plan = impl->plan(w.metadata(), w.cache(), ScalarType::bf16, Stream{});
  w.poison_output();
  impl->execute(*plan, w.query(), w.cache(), w.output(), Stream{});
  std::vector<std::int32_t> all(static_cast<std::size_t>(w.num_tokens()));
  std::iota(all.begin(), all.end(), 0);
  const auto ref = testing::reference_outputs(p, w);
  EXPECT_TRUE(runtime::compare_with_reference(w.output(), all, ref, runtime::tolerance_for(ScalarType::bf16)).passed());
}

TEST(StepPlan, GraphSupportNames) {
  EXPECT_EQ(to_string(GraphSupport::never), "never");
  EXPECT_EQ(to_string(GraphSupport::uniform_single_token_decode), "uniform_single_token_decode");
  EXPECT_EQ(to_string(GraphSupport::uniform_batch), "uniform_batch");
  EXPECT_EQ(to_string(GraphSupport::always), "always");
}

}  // namespace
}  // namespace attnsel::kernel
