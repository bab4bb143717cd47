// CPU_MLA's write_cache (vLLM's concat_and_cache_mla): exactly the listed slots change,
// latent first and rope key last, -1 skipped, only num_actual_tokens rows read; fp8 bytes
// are e4m3(x / k_scale) with saturation; an out-of-range slot is refused before anything
// is written.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>

#include "attnsel/errors.hpp"
#include "kernels/fp8.hpp"
#include "kernels/mla/cpu/cpu_mla.hpp"
#include "mla_test_util.hpp"

namespace attnsel::kernel::mla::cpu {
namespace {

using testing::Buffer;

struct WriteCase {
  MlaLayerParams params;
  Buffer kv_c, k_pe, cache;
  std::vector<std::int64_t> slots;
  std::vector<std::int32_t> qsl, lens, table;
  AttentionMetadata md;
};

// `tokens` tokens (kv_c / k_pe hold 3 more rows, never read) to random distinct slots of a
// 7-block cache, every fourth one -1; the cache starts as a sentinel (NaN).
void make_case(WriteCase& c, ScalarType dtype, CacheDType kv, float k_scale, int tokens, double magnitude) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(tokens) * 7 + static_cast<std::uint64_t>(dtype));
  std::normal_distribution<double> normal(0.0, magnitude);
  c.params.dims.num_heads = 4;
  c.params.dtype = dtype;
  c.params.scale = 0.07f;
  c.params.kv_cache_dtype = kv;
  c.params.k_scale = k_scale;
  const bool fp8 = kv == CacheDType::fp8 || kv == CacheDType::fp8_e4m3;
  c.kv_c = Buffer(dtype, {tokens + 3, 512});
  c.k_pe = Buffer(dtype, {tokens + 3, 64});
  for (Buffer* b : {&c.kv_c, &c.k_pe})
    for (std::size_t i = 0; i < b->bytes.size() / element_size(dtype); ++i)
      kernel::reference::store(b->bytes.data(), dtype, static_cast<std::int64_t>(i), normal(rng));
  c.cache = Buffer(fp8 ? ScalarType::u8 : dtype, {7, 16, 576});
  std::fill(c.cache.bytes.begin(), c.cache.bytes.end(), std::uint8_t{0x7F});  // NaN in every format's high byte
  std::vector<std::int64_t> all(7 * 16);
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  for (int t = 0; t < tokens; ++t) c.slots.push_back(t % 4 == 3 ? -1 : all[static_cast<std::size_t>(t)]);
  // One prefill request of `tokens` tokens (the batch only carries the slots here).
  c.qsl = {0, tokens};
  c.lens = {tokens};
  c.table = {0, 1, 2, 3, 4, 5, 6};
  c.md.num_seqs = 1;
  c.md.num_actual_tokens = tokens;
  c.md.query_start_loc = c.qsl;
  c.md.seq_lens = c.lens;
  c.md.block_table = c.table;
  c.md.max_blocks_per_seq = 7;
  c.md.max_query_len = tokens;
  c.md.max_seq_len = tokens;
  c.md.slot_mapping = c.slots;
}

// What slot s must hold, entry by entry, as bytes of the cache's element type.
std::vector<std::uint8_t> expected_cache(const WriteCase& c) {
  std::vector<std::uint8_t> want = c.cache.bytes;
  const bool fp8 = c.cache.view.dtype == ScalarType::u8;
  const std::size_t elem = fp8 ? 1 : element_size(c.params.dtype);
  for (std::size_t t = 0; t < c.slots.size(); ++t) {
    if (c.slots[t] < 0) continue;
    for (int e = 0; e < 576; ++e) {
      const double x = e < 512 ? kernel::reference::load(c.kv_c.bytes.data(), c.params.dtype, static_cast<std::int64_t>(t) * 512 + e)
                               : kernel::reference::load(c.k_pe.bytes.data(), c.params.dtype, static_cast<std::int64_t>(t) * 64 + e - 512);
      const std::size_t at = static_cast<std::size_t>(c.slots[t] * 576 + e) * elem;
      if (fp8)
        want[at] = float_to_fp8(static_cast<float>(x) / c.params.k_scale, ScalarType::fp8_e4m3);
      else
        std::memcpy(&want[at], static_cast<const std::uint8_t*>(e < 512 ? c.kv_c.view.data : c.k_pe.view.data) +
                                   (e < 512 ? t * 512 + static_cast<std::size_t>(e) : t * 64 + static_cast<std::size_t>(e - 512)) * elem,
                    elem);
    }
  }
  return want;
}

TEST(MlaCpuCacheWrite, ExactlyTheListedSlotsLatentFirstRopeLast) {
  for (ScalarType dtype : {ScalarType::bf16, ScalarType::f16, ScalarType::f32}) {
    WriteCase c;
    make_case(c, dtype, CacheDType::auto_, 1.0f, 37, 0.3);
    const auto impl = make_cpu_mla_impl(c.params);
    const auto plan = impl->plan(c.md, c.cache.view, {});
    const std::vector<std::uint8_t> want = expected_cache(c);
    impl->write_cache(*plan, c.kv_c.view, c.k_pe.view, c.cache.view, {});
    EXPECT_EQ(c.cache.bytes, want) << to_string(dtype);
    // The reference writer agrees.
    WriteCase r;
    make_case(r, dtype, CacheDType::auto_, 1.0f, 37, 0.3);
    mla::reference::write_cache(r.params, r.kv_c.view, r.k_pe.view, r.cache.view, r.slots, 37);
    EXPECT_EQ(r.cache.bytes, want) << to_string(dtype);
  }
}

TEST(MlaCpuCacheWrite, Fp8BytesAreE4m3OfXOverScaleSaturated) {
  for (float k_scale : {0.37f, 1.0f, 3.0f})
    for (CacheDType kv : {CacheDType::fp8, CacheDType::fp8_e4m3}) {
      WriteCase c;
      make_case(c, ScalarType::bf16, kv, k_scale, 50, 700.0);  // many beyond 448 · k_scale: saturated
      const auto impl = make_cpu_mla_impl(c.params);
      const auto plan = impl->plan(c.md, c.cache.view, {});
      const std::vector<std::uint8_t> want = expected_cache(c);
      impl->write_cache(*plan, c.kv_c.view, c.k_pe.view, c.cache.view, {});
      EXPECT_EQ(c.cache.bytes, want) << k_scale;
      int saturated = 0;
      for (std::uint8_t b : c.cache.bytes) saturated += (b & 0x7F) == 0x7E;
      EXPECT_GT(saturated, 0) << "the case must reach ±448";
    }
}

TEST(MlaCpuCacheWrite, OutOfRangeSlotIsRefusedBeforeAnythingIsWritten) {
  WriteCase c;
  make_case(c, ScalarType::bf16, CacheDType::auto_, 1.0f, 9, 0.3);
  c.slots[5] = 7 * 16;  // one past the last slot
  const auto impl = make_cpu_mla_impl(c.params);
  const std::vector<std::uint8_t> before = c.cache.bytes;
  try {
    impl->plan(c.md, c.cache.view, {});
    FAIL() << "an out-of-range slot was accepted";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("slot_mapping[5] = 112"), std::string::npos) << e.what();
  }
  EXPECT_EQ(c.cache.bytes, before);
  c.slots[5] = -2;
  EXPECT_THROW(impl->plan(c.md, c.cache.view, {}), ValueError);
}

TEST(MlaCpuCacheWrite, NeedsAPlanWithSlots) {
  WriteCase c;
  make_case(c, ScalarType::bf16, CacheDType::auto_, 1.0f, 9, 0.3);
  c.md.slot_mapping = {};
  const auto impl = make_cpu_mla_impl(c.params);
  const auto plan = impl->plan(c.md, c.cache.view, {});
  EXPECT_THROW(impl->write_cache(*plan, c.kv_c.view, c.k_pe.view, c.cache.view, {}), ValueError);
}

}  // namespace
}  // namespace attnsel::kernel::mla::cpu
