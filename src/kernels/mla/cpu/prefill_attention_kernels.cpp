// The CPU MLA prefill's attention kernel (prefill_attention.hpp), compiled for Highway's
// AVX-512 target in a region that also enables AVX-512-BF16 (chosen at run time when the
// CPU has it); other targets have no body and leave the items to the CPU attention kernel.
//
// An item (up to 64 query tokens of one head) walks its keys in tiles of 32 consecutive
// workspace rows. Q·Kᵀ: per group of 16 / NV keys, the NV packed query vectors of a dim
// pair meet each key's pair broadcast from its row, 16 accumulators in registers; every 16
// dim pairs also prefetch a line of the group's rows of the next tile (keys and values).
// The softmax and P·V are tile_steps-inl.h's. The tile that reaches past the item's keys is
// staged first (its real rows copied to scratch, zeros after), so nothing past them is read.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/mla/cpu/prefill_attention_kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "hwy/highway.h"
#include "kernels/attention/cpu/work.hpp"
#include "kernels/half.hpp"
#include "kernels/mla/cpu/prefill_attention.hpp"
#include "kernels/mla/cpu/tile_state.hpp"

#ifndef ATTNSEL_MLA_PREFILL_ONCE
#define ATTNSEL_MLA_PREFILL_ONCE
namespace attnsel::kernel::mla::cpu::prefill_detail {

constexpr int kD = 192;         // query and key width: [k_nope | k_pe]
constexpr int kDV = 128;        // value width
constexpr int kTileKeys = 32;   // keys per online-softmax step

constexpr TileStateBytes kTileStateBytes = tile_state_bytes(kD, kTileKeys, kDV);
constexpr std::size_t kStageBytes = std::size_t{kTileKeys} * (kD + kDV) * 2;
constexpr std::size_t kScratchBytes = kTileStateBytes.total() + kStageBytes;

// Whether the item's keys are consecutive workspace rows (the passes' tables make them so).
inline bool consecutive_rows(const kernel::cpu::LayerCtx& c, const kernel::cpu::WorkItem& it) {
  const std::int32_t* table = c.block_table + static_cast<std::int64_t>(it.seq) * c.max_blocks_per_seq;
  for (std::int64_t k = it.key_begin + 1; k < it.key_end; ++k)
    if (table[k] != table[k - 1] + 1) return false;
  return true;
}

}  // namespace attnsel::kernel::mla::cpu::prefill_detail
#endif

#if HWY_TARGET == HWY_AVX3
#include <immintrin.h>

HWY_PUSH_ATTRIBUTES(HWY_TARGET_STR ",avx512bf16")
namespace attnsel::kernel::mla::cpu::HWY_NAMESPACE::prefill {

using namespace prefill_detail;  // NOLINT(google-build-using-namespace): the kernel's constants
using kernel::cpu::LayerCtx;
using kernel::cpu::WorkItem;

#include "kernels/mla/cpu/tile_steps-inl.h"

// Scratch: the tile state, then the staged keys [kTileKeys][kD] and values [kTileKeys][kDV].
HWY_INLINE TileState CarveScratch(void* base, std::uint16_t*& stage_k, std::uint16_t*& stage_v) {
  auto* b = static_cast<std::uint8_t*>(base);
  const TileState t = CarveTileState(b, kTileStateBytes);
  stage_k = reinterpret_cast<std::uint16_t*>(b);
  stage_v = stage_k + std::size_t{kTileKeys} * kD;
  return t;
}

// Rows of a tile: key k at k_base + k · k_stride bytes, its value at v_base + k · v_stride.
struct TileRows {
  const std::uint8_t* k_base;
  const std::uint8_t* v_base;
  std::ptrdiff_t k_stride, v_stride;
};

// S[key][row] · scale of a tile, rows across NV vectors, KG = 16 / NV keys per group. Every
// 16 dim pairs prefetch one more line of the group's key rows (and value rows) in `next`.
template <int NV>
HWY_INLINE void QkTile(const TileRows& t, const TileRows* next, const std::uint32_t* qp, float scale, float* s) {
  constexpr int KG = 16 / NV, RP = NV * 16;
  constexpr int kSteps = kD / 2 / 16;  // 64-byte lines of a key row
  const __m512 sc = _mm512_set1_ps(scale);
  for (int g = 0; g < kTileKeys / KG; ++g) {
    const std::uint8_t* kr[KG];
    for (int k = 0; k < KG; ++k) kr[k] = t.k_base + (g * KG + k) * t.k_stride;
    __m512 acc[KG][NV];
    for (int k = 0; k < KG; ++k)
      for (int v = 0; v < NV; ++v) acc[k][v] = _mm512_setzero_ps();
    for (int step = 0; step < kSteps; ++step) {
      if (next) {
        for (int k = 0; k < KG; ++k) {
          PrefetchToL2(next->k_base + (g * KG + k) * next->k_stride + 64 * step);
          if (step < kDV * 2 / 64) PrefetchToL2(next->v_base + (g * KG + k) * next->v_stride + 64 * step);
        }
      }
      const std::uint32_t* q = qp + static_cast<std::size_t>(step) * 16 * RP;
      for (int i = 0; i < 16; ++i) {
        __m512i qv[NV];
        for (int v = 0; v < NV; ++v) qv[v] = _mm512_load_si512(q + i * RP + v * 16);
        for (int k = 0; k < KG; ++k) {
          const __m512i kv = Broadcast32(kr[k] + 64 * step + 4 * i);
          for (int v = 0; v < NV; ++v) acc[k][v] = Dot(acc[k][v], qv[v], kv);
        }
      }
    }
    for (int k = 0; k < KG; ++k)
      for (int v = 0; v < NV; ++v)
        _mm512_store_ps(s + static_cast<std::size_t>(g * KG + k) * RP + v * 16, _mm512_mul_ps(acc[k][v], sc));
  }
}

template <int NV>
HWY_NOINLINE void Item(const LayerCtx& c, const WorkItem& it, float* partial_slot, void* scratch) {
  constexpr int RP = NV * 16;
  std::uint16_t *stage_k, *stage_v;
  TileState st = CarveScratch(scratch, stage_k, stage_v);
  const int heads = it.head_end - it.head_begin, rows = it.num_rows();
  StartItem<kD, kDV>(c, it, heads, rows, RP, st);
  const float scale = c.qk_scale * kLog2e;
  const float min_pos = static_cast<float>(it.pos_begin);
  const std::int32_t* table = c.block_table + static_cast<std::int64_t>(it.seq) * c.max_blocks_per_seq;
  auto tile_rows = [&](std::int64_t key0) {
    const std::int64_t row = table[key0];
    TileRows t;
    t.k_base = c.key_cache + (row * c.k_stride[0] + it.kv_head * c.k_stride[2]) * 2;
    t.v_base = c.value_cache + (row * c.v_stride[0] + it.kv_head * c.v_stride[2]) * 2;
    t.k_stride = c.k_stride[0] * 2;
    t.v_stride = c.v_stride[0] * 2;
    return t;
  };
  for (std::int64_t key0 = it.key_begin; key0 < it.key_end; key0 += kTileKeys) {
    const int nk = static_cast<int>(std::min<std::int64_t>(kTileKeys, it.key_end - key0));
    TileRows t = tile_rows(key0);
    if (nk < kTileKeys) {  // the item's last keys: staged, zeros after them
      for (int k = 0; k < kTileKeys; ++k) {
        std::uint16_t* dk = stage_k + static_cast<std::size_t>(k) * kD;
        std::uint16_t* dv = stage_v + static_cast<std::size_t>(k) * kDV;
        if (k < nk) {
          std::memcpy(dk, t.k_base + k * t.k_stride, kD * 2);
          std::memcpy(dv, t.v_base + k * t.v_stride, kDV * 2);
        } else {
          std::memset(dk, 0, kD * 2);
          std::memset(dv, 0, kDV * 2);
        }
      }
      t = {reinterpret_cast<const std::uint8_t*>(stage_k), reinterpret_cast<const std::uint8_t*>(stage_v), kD * 2,
           kDV * 2};
    }
    TileRows next;
    const bool has_next = key0 + 2 * kTileKeys <= it.key_end;  // the next tile is a whole one in place
    if (has_next) next = tile_rows(key0 + kTileKeys);
    QkTile<NV>(t, has_next ? &next : nullptr, st.qp, scale, st.s);
    const bool need_mask = nk < kTileKeys || (c.causal && static_cast<float>(key0 + nk - 1) > min_pos);
    const bool rescale = SoftmaxTile<NV>(kTileKeys, nk, need_mask, c.causal, static_cast<float>(key0), st);
    ValueRows v;
    v.segments = 1;
    v.pairs_per_segment = kTileKeys / 2;
    v.stride = t.v_stride;
    v.base[0] = t.v_base;
    PvTile<NV, kDV>(v, rows, rescale, st);
  }
  FinishItem<kDV>(c, it, heads, rows, partial_slot, st);
}

void RunItem(const LayerCtx& c, const WorkItem& it, float* partial_slot, void* scratch) {
  const int rows = it.num_rows();
  if (rows <= 16) return Item<1>(c, it, partial_slot, scratch);
  if (rows <= 32) return Item<2>(c, it, partial_slot, scratch);
  Item<4>(c, it, partial_slot, scratch);
}

}  // namespace attnsel::kernel::mla::cpu::HWY_NAMESPACE::prefill
HWY_POP_ATTRIBUTES
#endif

HWY_BEFORE_NAMESPACE();
namespace attnsel::kernel::mla::cpu::HWY_NAMESPACE {

bool PrefillRuns() {
#if HWY_TARGET == HWY_AVX3
  static const bool has = __builtin_cpu_supports("avx512bf16");
  return has;
#else
  return false;
#endif
}

void PrefillItem(const kernel::cpu::LayerCtx& c, const kernel::cpu::WorkItem& it, float* partial_slot, void* scratch) {
#if HWY_TARGET == HWY_AVX3
  prefill::RunItem(c, it, partial_slot, scratch);
#else
  kernel::cpu::process_item(c, it, partial_slot, scratch);  // (never chosen: PrefillRuns() is false)
#endif
}

}  // namespace attnsel::kernel::mla::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnsel::kernel::mla::cpu {

HWY_EXPORT(PrefillRuns);
HWY_EXPORT(PrefillItem);

bool prefill_kernel_runs(const kernel::cpu::LayerCtx& c) {
  using prefill_detail::kD;
  using prefill_detail::kDV;
  const bool layer = c.bf16_dot && c.q_type == ScalarType::bf16 && c.kv == ScalarType::bf16 && c.head_size == kD &&
                     c.value_size() == kDV && c.block_size == 1 && c.group == 1 && c.alibi == nullptr &&
                     c.sinks == nullptr && c.soft_cap == 0.0f && c.window < 0 && c.k_head_scales == nullptr &&
                     c.v_head_scales == nullptr;
  return layer && HWY_DYNAMIC_DISPATCH(PrefillRuns)();
}

std::size_t prefill_scratch_bytes() { return prefill_detail::kScratchBytes; }

void run_prefill_item(const kernel::cpu::LayerCtx& c, const kernel::cpu::WorkItem& item, float* partial_slot,
                      void* scratch) {
  if (item.kv_heads != 1 || !prefill_detail::consecutive_rows(c, item))
    return kernel::cpu::process_item(c, item, partial_slot, scratch);
  HWY_DYNAMIC_DISPATCH(PrefillItem)(c, item, partial_slot, scratch);
}

}  // namespace attnsel::kernel::mla::cpu
#endif
