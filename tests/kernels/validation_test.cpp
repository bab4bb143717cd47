// Bad input: every check names the value and the valid range, and fires before a kernel
// touches memory (the caches here are poisoned, so a read past a check would show).
#include <gtest/gtest.h>

#include <limits>

#include "attnsel/errors.hpp"
#include "kernel_test_util.hpp"
#include "kernels/attention/cpu/cpu_attention.hpp"
#include "kernels/attention/reference.hpp"
#include "runtime/paged_workload.hpp"

namespace attnsel::kernel {
namespace {

using testing::expect_value_error;

// A valid batch: 2 sequences, 4 query / 2 KV heads, head size 64, block size 16.
struct Fixture {
  runtime::WorkloadSpec spec;
  std::unique_ptr<runtime::PagedWorkload> w;
  LayerParams p;
  std::vector<std::int32_t> qsl, seq_lens, table;
  std::vector<std::int64_t> slots;
  AttentionMetadata md;
  KVCacheView cache;
  TensorView query, output, keys, values;

  Fixture() {
    spec.num_heads = 4;
    spec.num_kv_heads = 2;
    spec.head_size = 64;
    spec.dtype = ScalarType::bf16;
    spec.sequences = {{20, 2}, {5, 1}};
    w = std::make_unique<runtime::PagedWorkload>(spec);
    p.num_heads = 4;
    p.num_kv_heads = 2;
    p.head_size = 64;
    p.scale = 0.125f;
    const AttentionMetadata m = w->metadata();
    qsl.assign(m.query_start_loc.begin(), m.query_start_loc.end());
    seq_lens.assign(m.seq_lens.begin(), m.seq_lens.end());
    table.assign(m.block_table.begin(), m.block_table.end());
    slots.assign(m.slot_mapping.begin(), m.slot_mapping.end());
    md = m;
    rebind();
    cache = w->cache();
    query = w->query();
    output = w->output();
    keys = w->new_keys();
    values = w->new_values();
  }
  void rebind() {
    md.query_start_loc = qsl;
    md.seq_lens = seq_lens;
    md.block_table = table;
    md.slot_mapping = slots;
  }
  void forward() { cpu::make_cpu_attention_impl(p)->forward(query, cache, md, output); }
  void write() { cpu::make_cpu_attention_impl(p)->write_kv_cache(keys, values, cache, md); }
};

TEST(KernelValidation, TheFixtureIsValid) {
  Fixture f;
  EXPECT_NO_THROW(f.forward());
  EXPECT_NO_THROW(f.write());
}

TEST(KernelValidation, BlockTableEntryOutsideTheCache) {
  Fixture f;
  f.table[1] = f.w->num_blocks();
  f.rebind();
  expect_value_error([&] { f.forward(); },
                     "block_table[0][1] = " + std::to_string(f.w->num_blocks()) +
                         " is outside the KV cache: valid block ids are [0, " + std::to_string(f.w->num_blocks()) +
                         ")");
  f.table[1] = -3;
  f.rebind();
  expect_value_error([&] { f.forward(); }, "block_table[0][1] = -3 is outside the KV cache");
}

TEST(KernelValidation, SequenceLongerThanItsBlocks) {
  Fixture f;
  f.seq_lens[0] = 33;  // two blocks of 16 per sequence
  f.rebind();
  expect_value_error([&] { f.forward(); },
                     "seq_lens[0] = 33 is longer than its blocks hold: max_blocks_per_seq x block_size = 2 x 16 = 32 "
                     "tokens");
}

TEST(KernelValidation, FewerContextTokensThanQueries) {
  Fixture f;
  f.seq_lens[1] = 0;
  f.rebind();
  expect_value_error([&] { f.forward(); }, "sequence 1 has 1 new tokens but seq_lens[1] = 0");
}

TEST(KernelValidation, SlotOutsideTheCache) {
  Fixture f;
  const std::int64_t slots = static_cast<std::int64_t>(f.w->num_blocks()) * 16;
  f.slots[2] = slots;
  f.rebind();
  expect_value_error([&] { f.write(); }, "slot_mapping[2] = " + std::to_string(slots) +
                                             " is outside the KV cache: valid slots are [0, " + std::to_string(slots) +
                                             ")");
  f.slots[2] = -2;
  f.rebind();
  expect_value_error([&] { f.write(); }, "slot_mapping[2] = -2 is outside the KV cache");
}

TEST(KernelValidation, QueryStartLocMustBeMonotoneAndMatchTheTokenCount) {
  Fixture f;
  f.qsl[1] = 3;
  f.qsl[2] = 2;
  f.rebind();
  expect_value_error([&] { f.forward(); }, "query_start_loc must be non-decreasing: query_start_loc[2] = 2 < "
                                           "query_start_loc[1] = 3");
  Fixture g;
  g.md.num_actual_tokens = 2;
  expect_value_error([&] { g.forward(); }, "query_start_loc[num_seqs] = 3 but num_actual_tokens = 2");
  Fixture h;
  h.qsl[0] = 1;
  h.rebind();
  expect_value_error([&] { h.forward(); }, "query_start_loc[0] = 1; it must be 0");
}

TEST(KernelValidation, MetadataArraysTooShort) {
  Fixture f;
  f.md.seq_lens = std::span<const std::int32_t>(f.seq_lens.data(), 1);
  expect_value_error([&] { f.forward(); }, "seq_lens has 1 entries; num_seqs = 2 needs 2");
  Fixture g;
  g.md.block_table = std::span<const std::int32_t>(g.table.data(), 3);
  expect_value_error([&] { g.forward(); }, "block_table has 3 entries; num_seqs x max_blocks_per_seq = 2 x 2 needs 4");
  Fixture h;
  h.md.max_seq_len = 5;
  expect_value_error([&] { h.forward(); }, "max_seq_len = 5 is smaller than the longest sequence (20 tokens)");
}

TEST(KernelValidation, WrongShapesDtypesAndStrides) {
  {
    Fixture f;
    f.query.shape[1] = 3;
    expect_value_error([&] { f.forward(); }, "query has 3 heads (dimension 1) but the layer has num_heads = 4");
  }
  {
    Fixture f;
    f.output.shape[2] = 32;
    expect_value_error([&] { f.forward(); }, "output has head size 32 (dimension 2) but the layer has head_size = 64");
  }
  {
    Fixture f;
    f.query.shape[0] = 2;
    expect_value_error([&] { f.forward(); }, "query holds 2 tokens but the batch has num_actual_tokens = 3");
  }
  {
    Fixture f;
    f.query.ndim = 2;
    expect_value_error([&] { f.forward(); }, "query must have 3 dimensions");
  }
  {
    Fixture f;
    f.query.stride[2] = 2;
    expect_value_error([&] { f.forward(); }, "query must be contiguous in its last dimension (stride 1)");
  }
  {
    Fixture f;
    f.output.dtype = ScalarType::f16;
    expect_value_error([&] { f.forward(); }, "output dtype f16 must equal the query dtype bf16");
  }
  {
    Fixture f;
    f.query.dtype = ScalarType::i32;
    expect_value_error([&] { f.forward(); }, "query dtype i32 is not supported; supported: f32, f16, bf16");
  }
  {
    Fixture f;
    f.cache.key.dtype = ScalarType::f16;
    expect_value_error([&] { f.forward(); }, "key_cache dtype f16 does not match kv_cache_dtype 'auto' (expected bf16)");
  }
  {
    Fixture f;
    f.p.kv_cache_dtype = CacheDType::fp8;
    expect_value_error([&] { f.forward(); },
                       "key_cache dtype bf16 does not match kv_cache_dtype 'fp8' (expected fp8_e4m3 or u8)");
  }
  {
    Fixture f;
    f.cache.value.shape[2] = 1;
    expect_value_error([&] { f.forward(); }, "value_cache has 1 KV heads (dimension 2");
  }
  {
    Fixture f;
    f.cache.value.stride[3] = 4;
    expect_value_error([&] { f.forward(); }, "value_cache must be contiguous in its last dimension");
  }
  {
    Fixture f;
    f.keys.shape[1] = 4;
    expect_value_error([&] { f.write(); }, "key has 4 heads (dimension 1) but the layer has num_kv_heads = 2");
  }
  {
    Fixture f;
    f.values.dtype = ScalarType::f32;
    expect_value_error([&] { f.write(); }, "key dtype bf16 and value dtype f32 differ");
  }
}

TEST(KernelValidation, UnsupportedLayers) {
  LayerParams p;
  p.num_heads = 4;
  p.num_kv_heads = 2;
  p.scale = 0.1f;
  p.head_size = 72;
  expect_value_error([&] { cpu::make_cpu_attention_impl(p); },
                     "head_size 72 is not supported by CPU_ATTN; supported head sizes: 32, 64, 80, 96, 112, 128, 160, "
                     "192, 224, 256, 512");
  p.head_size = 64;
  p.num_kv_heads = 3;
  expect_value_error([&] { cpu::make_cpu_attention_impl(p); }, "num_heads = 4 is not a multiple of num_kv_heads = 3");
  p.num_kv_heads = 2;
  p.kv_cache_dtype = CacheDType::nvfp4;
  expect_value_error([&] { cpu::make_cpu_attention_impl(p); },
                     "kv_cache_dtype 'nvfp4' is not supported by the kernels; supported: auto, float16, bfloat16, fp8, "
                     "fp8_e4m3, fp8_e5m2");
  p.kv_cache_dtype = CacheDType::fp8;
  p.k_scale = 0.0f;
  expect_value_error([&] { cpu::make_cpu_attention_impl(p); }, "fp8 caches need positive finite scales");
  p.k_scale = 1.0f;
  p.alibi_slopes = {1.0f};
  expect_value_error([&] { cpu::make_cpu_attention_impl(p); }, "alibi_slopes has 1 entries; it must be empty or have "
                                                               "num_heads = 4");
  p.alibi_slopes.clear();
  p.batch_invariant = true;  // CPU_ATTN does not declare batch invariance: refused, not ignored
  expect_value_error([&] { cpu::make_cpu_attention_impl(p); },
                     "CPU_ATTN does not support batch-invariant mode (LayerParams::batch_invariant)");
  p.batch_invariant = false;
  p.sliding_window = 0;
  expect_value_error([&] { cpu::make_cpu_attention_impl(p); }, "sliding_window = 0; it must be at least 1");
  p.sliding_window = 8;
  p.attn_type = AttentionType::encoder_decoder;
  expect_value_error([&] { cpu::make_cpu_attention_impl(p); },
                     "sliding_window is not defined for encoder_decoder (cross) attention");
  p.sliding_window.reset();
  p.scale = std::numeric_limits<float>::quiet_NaN();
  expect_value_error([&] { cpu::make_cpu_attention_impl(p); }, "it must be a positive finite number");
}

TEST(KernelValidation, BlockSizeMustBeAMultipleOf16) {
  runtime::WorkloadSpec spec;
  spec.num_heads = 2;
  spec.num_kv_heads = 1;
  spec.head_size = 32;
  spec.block_size = 8;
  spec.sequences = {{9, 1}};
  runtime::PagedWorkload w(spec);
  LayerParams p;
  p.num_heads = 2;
  p.num_kv_heads = 1;
  p.head_size = 32;
  p.scale = 0.1f;
  expect_value_error([&] { cpu::make_cpu_attention_impl(p)->forward(w.query(), w.cache(), w.metadata(), w.output()); },
                     "block_size 8 is not supported by CPU_ATTN: it must be a multiple of 16");
  // The reference has no such limit.
  EXPECT_NO_THROW(reference::forward(p, w.query(), w.cache(), w.metadata(), w.output()));
}

TEST(KernelValidation, TensorsOnAnotherDevice) {
  Fixture f;
  f.query.device = DeviceKind::cuda;
  expect_value_error([&] { f.forward(); }, "query, output and the KV cache must be on the same device");
  Fixture g;
  g.query.device = g.output.device = g.cache.key.device = g.cache.value.device = DeviceKind::cuda;
  expect_value_error([&] { g.forward(); }, "CPU_ATTN needs tensors in host memory, got one on cuda:0");
}

TEST(TensorView, FromDlpack) {
  float data[6] = {};
  std::int64_t shape[2] = {2, 3};
  DLTensor t{data, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 4};
  const TensorView v = from_dlpack(t);
  EXPECT_EQ(v.dtype, ScalarType::f32);
  EXPECT_EQ(v.data, static_cast<void*>(data + 1));
  EXPECT_EQ(v.stride[0], 3);
  EXPECT_TRUE(v.is_contiguous());
  EXPECT_EQ(v.describe(), "f32[2, 3] strides [3, 1]");
  t.dtype = {kDLBfloat, 16, 1};
  EXPECT_EQ(from_dlpack(t).dtype, ScalarType::bf16);
  t.dtype = {kDLComplex, 64, 1};
  expect_value_error([&] { from_dlpack(t); }, "unsupported DLPack dtype (code 5, bits 64)");
  t.dtype = {kDLFloat, 32, 1};
  t.device = {kDLVulkan, 0};
  expect_value_error([&] { from_dlpack(t); }, "unsupported DLPack device type 7");
  t.device = {kDLCUDA, 1};
  EXPECT_EQ(from_dlpack(t).describe(), "f32[2, 3] strides [3, 1] on cuda:1");
}

}  // namespace
}  // namespace attnsel::kernel
