// The CPU MLA decode kernel (latent_decode.hpp), compiled for Highway's AVX-512 target in a
// region that also enables AVX-512-BF16 and VBMI (chosen at run time when the CPU has both);
// other targets have no body and leave the items to the CPU attention kernel.
//
// An item walks its keys in runs of 16 consecutive cache rows, two runs to a tile. Q·Kᵀ
// per run, S[key][row] with rows across lanes: the packed query pairs of a dim pair are
// loaded once and meet 16 / NV keys' pairs, broadcast from the rows at fixed offsets of one
// base pointer (a run is contiguous: 16 rows of 1152 bytes in one cache block, or staged
// so), 16 accumulators in registers; the next run's lines are prefetched meanwhile. The
// softmax and P·V (the values: each row's first 512 entries) are tile_steps-inl.h's.
// A run that is not 16 whole rows of one block (the last of an item, small blocks) or that
// lives in an fp8 cache is staged: bf16 rows in scratch, zeros past the item's keys; a whole
// fp8 run is widened during the Q·Kᵀ of the run before.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/mla/cpu/latent_decode_kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "hwy/highway.h"
#include "kernels/attention/cpu/work.hpp"
#include "kernels/fp8.hpp"
#include "kernels/half.hpp"
#include "kernels/mla/cpu/latent_decode.hpp"
#include "kernels/mla/cpu/tile_state.hpp"

#ifndef ATTNSEL_MLA_LATENT_ONCE
#define ATTNSEL_MLA_LATENT_ONCE
namespace attnsel::kernel::mla::cpu::latent_detail {

constexpr int kD = 576;                 // query and key width: the latent
constexpr int kDV = 512;                // value width: the latent's first entries
constexpr int kPairs = kD / 2;          // bf16 pairs of a latent row
constexpr int kRowBytes = kD * 2;       // a bf16 latent row
constexpr int kRunKeys = 16;            // keys of a run: a block of 16, or a 16-row slice of a larger one
constexpr int kTileRuns = 2;            // runs per online-softmax step
constexpr int kTileKeys = kRunKeys * kTileRuns;
constexpr int kStageSlots = kTileRuns + 1;  // staged runs: a tile's, and the next one being widened
// How far ahead of the run being computed its lines are prefetched: an fp8 run is read one
// run early (widened during the Q·Kᵀ of the run before), so its lines come two runs ahead.
constexpr int prefetch_runs(ScalarType k) { return k == ScalarType::bf16 ? 1 : 2; }
constexpr int kL1Ahead = 2;             // 64-byte steps a run's own lines reach L1 ahead of use

constexpr TileStateBytes kTileStateBytes = tile_state_bytes(kD, kTileKeys, kDV);
constexpr std::size_t kStageBytes = std::size_t{kStageSlots} * kRunKeys * kRowBytes;
constexpr std::size_t kScratchBytes = kTileStateBytes.total() + kStageBytes;

// Cache rows of keys [key0, key0 + n) of the item's request, located without a division per key.
inline void locate_rows(const kernel::cpu::LayerCtx& c, int seq, std::int64_t key0, int n, std::size_t elem,
                        const std::uint8_t** rows) {
  const std::int32_t* table = c.block_table + static_cast<std::int64_t>(seq) * c.max_blocks_per_seq;
  std::int64_t blk = key0 / c.block_size, off = key0 % c.block_size;
  for (int i = 0; i < n; ++i) {
    rows[i] = c.key_cache + (table[blk] * c.k_stride[0] + off * c.k_stride[1]) * static_cast<std::int64_t>(elem);
    if (++off == c.block_size) {
      off = 0;
      ++blk;
    }
  }
}

}  // namespace attnsel::kernel::mla::cpu::latent_detail
#endif

#if HWY_TARGET == HWY_AVX3
#include <immintrin.h>

HWY_PUSH_ATTRIBUTES(HWY_TARGET_STR ",avx512bf16,avx512vbmi")
namespace attnsel::kernel::mla::cpu::HWY_NAMESPACE::latent {

using namespace latent_detail;  // NOLINT(google-build-using-namespace): the kernel's constants
using kernel::cpu::LayerCtx;
using kernel::cpu::WorkItem;

#include "kernels/mla/cpu/tile_steps-inl.h"

// Scratch: the tile state, then the staged runs [kStageSlots][kRunKeys][kD].
HWY_INLINE TileState CarveScratch(void* base, std::uint16_t*& stage) {
  auto* b = static_cast<std::uint8_t*>(base);
  const TileState t = CarveTileState(b, kTileStateBytes);
  stage = reinterpret_cast<std::uint16_t*>(b);
  return t;
}

// ---- fp8 e4m3 -> bfloat16 -------------------------------------------------------------
// Every e4m3 value is exactly a bfloat16, widened as the CPU attention kernel widens it
// (two 128-entry byte tables, the sign put back, an in-lane interleave), as value / 256 (the
// driver folds the 256 into the scales).
#include "kernels/attention/cpu/fp8_bf16_tables-inl.h"

HWY_INLINE const Fp8Bf16& E4m3Tables() { return Fp8Bf16Tables<ScalarType::fp8_e4m3>(); }

// One latent row of e4m3 bytes -> kD bfloat16 words.
HWY_INLINE void WidenE4m3Row(const Fp8Bf16& t, const std::uint8_t* src, std::uint16_t* dst) {
  for (int d = 0; d < kD; d += 64) {
    const __m512i x = _mm512_permutexvar_epi8(t.perm_k, _mm512_loadu_si512(src + d));
    const __m512i lo = _mm512_permutex2var_epi8(t.lo0, x, t.lo1);
    const __m512i hi = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(t.hi0, x, t.hi1), x, t.sign, 0xF8);
    _mm512_storeu_si512(dst + d, _mm512_unpacklo_epi8(lo, hi));
    _mm512_storeu_si512(dst + d + 32, _mm512_unpackhi_epi8(lo, hi));
  }
}

// ---- the item's pieces ------------------------------------------------------------------

// Rows of a run: the cache's own when they are 16 whole bf16 rows of one block, else staged.
template <ScalarType K>
HWY_INLINE const std::uint16_t* RunRows(const LayerCtx& c, const WorkItem& it, std::int64_t key0, int nk,
                                        std::uint16_t* stage) {
  const std::uint8_t* rows[kRunKeys];
  if constexpr (K == ScalarType::bf16) {
    if (nk == kRunKeys && c.k_stride[1] == kD && key0 % c.block_size + kRunKeys <= c.block_size) {
      locate_rows(c, it.seq, key0, 1, 2, rows);
      return reinterpret_cast<const std::uint16_t*>(rows[0]);
    }
  }
  locate_rows(c, it.seq, key0, nk, K == ScalarType::bf16 ? 2 : 1, rows);
  for (int i = 0; i < kRunKeys; ++i) {
    std::uint16_t* dst = stage + static_cast<std::size_t>(i) * kD;
    if (i >= nk) {
      std::memset(dst, 0, kRowBytes);
    } else if constexpr (K == ScalarType::bf16) {
      std::memcpy(dst, rows[i], kRowBytes);
    } else {
      WidenE4m3Row(E4m3Tables(), rows[i], dst);
    }
  }
  return stage;
}

// The cache lines of a run to prefetch while another is computed: its rows and their bytes.
struct RunPrefetch {
  const std::uint8_t* rows[kRunKeys];
  int n = 0;           // rows
  int lines = 0;       // 64-byte lines per row
};

template <ScalarType K>
HWY_INLINE void LocatePrefetch(const LayerCtx& c, const WorkItem& it, std::int64_t run, RunPrefetch& pf) {
  const std::int64_t key0 = it.key_begin + run * kRunKeys;
  pf.n = key0 < it.key_end ? static_cast<int>(std::min<std::int64_t>(kRunKeys, it.key_end - key0)) : 0;
  constexpr std::size_t kElem = K == ScalarType::bf16 ? 2 : 1;
  pf.lines = static_cast<int>(kD * kElem / 64);
  if (pf.n > 0) locate_rows(c, it.seq, key0, pf.n, kElem, pf.rows);
}

// S[key][row] · scale of one run (16 rows of kD bf16 at `keys`), rows across NV vectors.
// KG keys at a time stay in registers with the NV query vectors of each dim pair; a key's
// pair is at a fixed offset from one base pointer. Every 16 dim pairs (64 bytes of each
// key row) also prefetch the next 64 bytes of the group's rows of a run ahead. `widen`
// (fp8 caches, NV <= 2): the next run's 16 rows, widened one per 16 dim pairs of the first
// group into `widened`, so that the widening's shuffles overlap the dot products (a burst of
// them before the run measured ~10 % of an fp8 decode).
template <int NV>
HWY_INLINE void QkRun(const std::uint16_t* keys, const std::uint32_t* qp, float scale, const RunPrefetch& pf,
                      const std::uint8_t* const* widen, std::uint16_t* widened, float* s) {
  constexpr int KG = kRunKeys / NV;
  constexpr int RP = NV * 16;
  const __m512 sc = _mm512_set1_ps(scale);
  for (int g = 0; g < NV; ++g) {
    const auto* base = reinterpret_cast<const std::uint8_t*>(keys + static_cast<std::size_t>(g) * KG * kD);
    __m512 acc[KG][NV];
    for (int k = 0; k < KG; ++k)
      for (int v = 0; v < NV; ++v) acc[k][v] = _mm512_setzero_ps();
    for (int step = 0; step < kPairs / 16; ++step) {
      if (step < pf.lines)
        for (int k = 0; k < KG; ++k)
          if (g * KG + k < pf.n) PrefetchToL2(pf.rows[g * KG + k] + 64 * step);
      if (widen != nullptr && g == 0 && step < kRunKeys)
        WidenE4m3Row(E4m3Tables(), widen[step], widened + static_cast<std::size_t>(step) * kD);
      const std::uint8_t* kb = base + 64 * step;
      if (step + kL1Ahead < kPairs / 16)
        for (int k = 0; k < KG; ++k) PrefetchToL1(kb + k * kRowBytes + 64 * kL1Ahead);
      const std::uint32_t* q = qp + static_cast<std::size_t>(step) * 16 * RP;
      for (int i = 0; i < 16; ++i) {
        __m512i qv[NV];
        for (int v = 0; v < NV; ++v) qv[v] = _mm512_load_si512(q + i * RP + v * 16);
        for (int k = 0; k < KG; ++k) {
          const __m512i kv = Broadcast32(kb + k * kRowBytes + 4 * i);
          for (int v = 0; v < NV; ++v) acc[k][v] = Dot(acc[k][v], qv[v], kv);
        }
      }
    }
    for (int k = 0; k < KG; ++k)
      for (int v = 0; v < NV; ++v)
        _mm512_store_ps(s + static_cast<std::size_t>(g * KG + k) * RP + v * 16, _mm512_mul_ps(acc[k][v], sc));
  }
}

template <ScalarType K, int NV>
HWY_NOINLINE void Item(const LayerCtx& c, const WorkItem& it, float* partial_slot, void* scratch) {
  constexpr int RP = NV * 16;
  std::uint16_t* stage;
  TileState sc = CarveScratch(scratch, stage);
  const int heads = it.head_end - it.head_begin, rows = it.num_rows();
  StartItem<kD, kDV>(c, it, heads, rows, RP, sc);
  const float min_pos = static_cast<float>(it.pos_begin);
  const float scale = c.qk_scale * kLog2e;
  const std::int64_t keys = it.key_end - it.key_begin;
  const std::int64_t runs = (keys + kRunKeys - 1) / kRunKeys;
  constexpr int kAhead = prefetch_runs(K);
  // fp8 runs of 16 keys are widened during the Q·Kᵀ of the run before (rows of up to 32).
  constexpr bool kWidenAhead = K != ScalarType::bf16 && NV <= 2;
  RunPrefetch pf;
  for (std::int64_t a = 0; a < std::min<std::int64_t>(kAhead, runs); ++a) {  // the first runs: prefetched up front
    LocatePrefetch<K>(c, it, a, pf);
    for (int i = 0; i < pf.n; ++i)
      for (int line = 0; line < pf.lines; ++line)
        PrefetchToL2(pf.rows[i] + 64 * line);
  }
  auto slot = [&](std::int64_t run) { return stage + static_cast<std::size_t>(run % kStageSlots) * kRunKeys * kD; };
  std::int64_t widened = -1;  // the run widened ahead, if any
  for (std::int64_t run0 = 0; run0 < runs; run0 += kTileRuns) {
    const int nruns = static_cast<int>(std::min<std::int64_t>(kTileRuns, runs - run0));
    const std::int64_t key0 = it.key_begin + run0 * kRunKeys;
    const int nk = static_cast<int>(std::min<std::int64_t>(kTileKeys, it.key_end - key0));
    const std::uint16_t* run_rows[kTileRuns];
    for (int i = 0; i < nruns; ++i) {
      const std::int64_t run = run0 + i, k0 = key0 + i * kRunKeys;
      const int run_keys = static_cast<int>(std::min<std::int64_t>(kRunKeys, it.key_end - k0));
      run_rows[i] = run == widened ? slot(run) : RunRows<K>(c, it, k0, run_keys, slot(run));
      const std::uint8_t* widen_rows[kRunKeys];
      const std::uint8_t* const* widen = nullptr;
      if constexpr (kWidenAhead) {
        if (it.key_end - (k0 + kRunKeys) >= kRunKeys) {  // the next run is whole
          locate_rows(c, it.seq, k0 + kRunKeys, kRunKeys, 1, widen_rows);
          widen = widen_rows;
          widened = run + 1;
        }
      }
      LocatePrefetch<K>(c, it, run + kAhead, pf);
      float* logits = sc.s + static_cast<std::size_t>(i) * kRunKeys * RP;
      QkRun<NV>(run_rows[i], sc.qp, scale, pf, widen, slot(run + 1), logits);
    }
    const bool need_mask = nk < nruns * kRunKeys || static_cast<float>(key0 + nk - 1) > min_pos;
    const bool rescale = SoftmaxTile<NV>(nruns * kRunKeys, nk, need_mask, true, static_cast<float>(key0), sc);
    ValueRows v;
    v.segments = nruns;
    v.pairs_per_segment = kRunKeys / 2;
    v.stride = kRowBytes;
    for (int i = 0; i < nruns; ++i) v.base[i] = reinterpret_cast<const std::uint8_t*>(run_rows[i]);
    PvTile<NV, kDV>(v, rows, rescale, sc);
  }
  FinishItem<kDV>(c, it, heads, rows, partial_slot, sc);
}

template <ScalarType K>
HWY_INLINE void ItemRows(const LayerCtx& c, const WorkItem& it, float* partial_slot, void* scratch) {
  const int rows = it.num_rows();
  if (rows <= 16) return Item<K, 1>(c, it, partial_slot, scratch);
  if (rows <= 32) return Item<K, 2>(c, it, partial_slot, scratch);
  Item<K, 4>(c, it, partial_slot, scratch);
}

void RunItem(const LayerCtx& c, const WorkItem& it, float* partial_slot, void* scratch) {
  if (c.kv == ScalarType::bf16) return ItemRows<ScalarType::bf16>(c, it, partial_slot, scratch);
  ItemRows<ScalarType::fp8_e4m3>(c, it, partial_slot, scratch);
}

}  // namespace attnsel::kernel::mla::cpu::HWY_NAMESPACE::latent
HWY_POP_ATTRIBUTES
#endif

HWY_BEFORE_NAMESPACE();
namespace attnsel::kernel::mla::cpu::HWY_NAMESPACE {

bool LatentRuns() {
#if HWY_TARGET == HWY_AVX3
  static const bool has = __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512vbmi");
  return has;
#else
  return false;
#endif
}

void LatentItem(const kernel::cpu::LayerCtx& c, const kernel::cpu::WorkItem& it, float* partial_slot, void* scratch) {
#if HWY_TARGET == HWY_AVX3
  latent::RunItem(c, it, partial_slot, scratch);
#else
  kernel::cpu::process_item(c, it, partial_slot, scratch);  // (never chosen: LatentRuns() is false)
#endif
}

}  // namespace attnsel::kernel::mla::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnsel::kernel::mla::cpu {

HWY_EXPORT(LatentRuns);
HWY_EXPORT(LatentItem);

bool latent_kernel_runs(const kernel::cpu::LayerCtx& c) {
  using latent_detail::kD;
  using latent_detail::kDV;
  const bool layer = c.bf16_dot && c.q_type == ScalarType::bf16 &&
                     (c.kv == ScalarType::bf16 || c.kv == ScalarType::fp8_e4m3) && c.head_size == kD &&
                     c.value_size() == kDV && c.key_cache == c.value_cache && c.k_stride[0] == c.v_stride[0] &&
                     c.k_stride[1] == c.v_stride[1] && c.num_kv_heads == 1 && c.group <= kernel::cpu::kMaxRows &&
                     c.alibi == nullptr && c.sinks == nullptr && c.soft_cap == 0.0f && c.window < 0 &&
                     c.k_head_scales == nullptr && c.v_head_scales == nullptr && c.causal;
  return layer && HWY_DYNAMIC_DISPATCH(LatentRuns)();
}

std::size_t latent_scratch_bytes() { return latent_detail::kScratchBytes; }

void run_latent_item(const kernel::cpu::LayerCtx& c, const kernel::cpu::WorkItem& item, float* partial_slot,
                     void* scratch) {
  // Few rows leave most lanes of this kernel empty: the CPU attention kernel's few-row form
  // spreads the dims across lanes instead.
  if (item.num_rows() <= kernel::cpu::kFewRows) return kernel::cpu::process_item(c, item, partial_slot, scratch);
  HWY_DYNAMIC_DISPATCH(LatentItem)(c, item, partial_slot, scratch);
}

}  // namespace attnsel::kernel::mla::cpu
#endif
