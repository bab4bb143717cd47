// The CPU MLA decode kernel (latent_decode.hpp), compiled for Highway's AVX-512 target in a
// region that also enables AVX-512-BF16 and VBMI (chosen at run time when the CPU has both);
// other targets have no body and leave the items to the CPU attention kernel.
//
// An item walks its keys in runs of 16 consecutive cache rows, two runs to a tile:
//   Q·Kᵀ     per run, S[key][row] with rows across lanes: the packed query pairs of a dim
//            pair are loaded once and meet 16 / NV keys' pairs, broadcast from the rows at
//            fixed offsets of one base pointer (a run is contiguous: 16 rows of 1152 bytes
//            in one cache block, or staged so), 16 accumulators in registers.
//   softmax  in base 2 (log2(e) folded into the scale) with a lazy maximum: a row's running
//            maximum moves only when a tile exceeds it by more than 2^8, so that most tiles
//            rescale nothing; probabilities up to 256 are exact enough in fp32 and bf16.
//   P·V      per 16-dim chunk of the 512 values, 16 rows' accumulators in registers; each key
//            pair's chunk is interleaved in registers (two 32-byte loads, one vpermt2w) and
//            meets the rows' probability pairs, broadcast from scratch.
// A run that is not 16 whole rows of one block (the last of an item, small blocks) or that
// lives in an fp8 cache is staged first: bf16 rows in scratch, zeros past the item's keys.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/mla/cpu/latent_decode_kernels.cpp"
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS HWY_SSSE3
#endif
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

#ifndef ATTNSEL_MLA_LATENT_ONCE
#define ATTNSEL_MLA_LATENT_ONCE
namespace attnsel::kernel::mla::cpu::latent_detail {

using kernel::cpu::kMaxRows;

constexpr int kD = 576;                 // query and key width: the latent
constexpr int kDV = 512;                // value width: the latent's first entries
constexpr int kPairs = kD / 2;          // bf16 pairs of a latent row
constexpr int kRowBytes = kD * 2;       // a bf16 latent row
constexpr int kRunKeys = 16;            // keys of a run: a block of 16, or a 16-row slice of a larger one
constexpr int kTileRuns = 2;            // runs per online-softmax step
constexpr int kTileKeys = kRunKeys * kTileRuns;
constexpr int kPrefetchRuns = 1;        // how far ahead of the run being computed its lines are prefetched
constexpr int kL1Ahead = 2;            // steps of 64 bytes a run's own lines are fetched into L1 ahead of use
constexpr float kLazyMaxGap = 8.0f;     // log2 units a running maximum may lag behind

// Per-thread scratch, 64-byte aligned pieces.
struct Scratch {
  std::uint32_t* qp;  // query pairs [kPairs][rp]
  float* s;           // logits, then probabilities [kTileKeys][rp]
  std::uint32_t* pp;  // probability pairs [kTileKeys / 2][rp]
  float* o;           // accumulators [rp][kDV]
  float* m;           // running maximum (log2 units) [kMaxRows]
  float* l;           // running sum [kMaxRows]
  float* alpha;       // this tile's rescale factors [kMaxRows]
  float* pos;         // each row's position [kMaxRows]
  std::uint16_t* stage;  // staged runs [kTileRuns][kRunKeys][kD]
};

constexpr std::size_t kQpBytes = std::size_t{kPairs} * kMaxRows * 4;
constexpr std::size_t kSBytes = std::size_t{kTileKeys} * kMaxRows * 4;
constexpr std::size_t kPpBytes = std::size_t{kTileKeys / 2} * kMaxRows * 4;
constexpr std::size_t kOBytes = std::size_t{kMaxRows} * kDV * 4;
constexpr std::size_t kRowStateBytes = std::size_t{kMaxRows} * 4;
constexpr std::size_t kStageBytes = std::size_t{kTileRuns} * kRunKeys * kRowBytes;
constexpr std::size_t kScratchBytes = kQpBytes + kSBytes + kPpBytes + kOBytes + 4 * kRowStateBytes + kStageBytes;

inline Scratch carve(void* base) {
  auto* b = static_cast<std::uint8_t*>(base);
  Scratch s;
  s.qp = reinterpret_cast<std::uint32_t*>(b), b += kQpBytes;
  s.s = reinterpret_cast<float*>(b), b += kSBytes;
  s.pp = reinterpret_cast<std::uint32_t*>(b), b += kPpBytes;
  s.o = reinterpret_cast<float*>(b), b += kOBytes;
  s.m = reinterpret_cast<float*>(b), b += kRowStateBytes;
  s.l = reinterpret_cast<float*>(b), b += kRowStateBytes;
  s.alpha = reinterpret_cast<float*>(b), b += kRowStateBytes;
  s.pos = reinterpret_cast<float*>(b), b += kRowStateBytes;
  s.stage = reinterpret_cast<std::uint16_t*>(b);
  return s;
}

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

HWY_INLINE __m512 Dot(__m512 acc, __m512i a, __m512i b) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(a), reinterpret_cast<__m512bh>(b));
}
HWY_INLINE __m512i Broadcast32(const std::uint8_t* p) {
  std::int32_t x;
  std::memcpy(&x, p, 4);
  return _mm512_set1_epi32(x);
}

// 2^x for x <= 0 (-inf included), exactly 0 below -150: 2^round(x) by vscalefps times a
// degree-6 polynomial of the remainder (relative error ~2e-7).
HWY_INLINE __m512 Exp2(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-200.0f));
  const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(x, n);
  __m512 p = _mm512_set1_ps(1.5403530393381609e-4f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.3333558146428443e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.6181291076284772e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5504108664821580e-2f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022650695910071e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9314718055994531e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

// ---- fp8 e4m3 -> bfloat16 -------------------------------------------------------------
// Every e4m3 value is exactly a bfloat16. Its 7 magnitude bits index two 128-entry byte
// tables (vpermi2b): the low and the high byte of the bfloat16 of value / 256 (the driver
// folds the 256 into the scales, as the CPU attention kernel reads e4m3); the sign goes back
// on the high byte and a byte interleave makes the words. A vpermb first orders the 64
// input bytes so that the in-lane interleaves come out in natural order.
struct Fp8Tables {
  __m512i lo0, lo1, hi0, hi1, order, sign;
};

HWY_INLINE const Fp8Tables& E4m3Tables() {
  static const Fp8Tables tables = [] {
    HWY_ALIGN std::uint8_t lo[128], hi[128], order[64];
    for (int b = 0; b < 128; ++b) {
      const float v = fp8_to_float(static_cast<std::uint8_t>(b), ScalarType::fp8_e4m3) / 256.0f;
      const auto bits = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(v) >> 16);  // exact
      lo[b] = static_cast<std::uint8_t>(bits & 0xFF);
      hi[b] = static_cast<std::uint8_t>(bits >> 8);
    }
    // unpack{lo,hi}_epi8 read bytes 0-7 / 8-15 of each 128-bit lane L: word w of lane L of
    // the first result must be element 8L + w, of the second 32 + 8L + w.
    for (int L = 0; L < 4; ++L)
      for (int w = 0; w < 8; ++w) {
        order[16 * L + w] = static_cast<std::uint8_t>(8 * L + w);
        order[16 * L + 8 + w] = static_cast<std::uint8_t>(32 + 8 * L + w);
      }
    Fp8Tables t;
    t.lo0 = _mm512_load_si512(lo);
    t.lo1 = _mm512_load_si512(lo + 64);
    t.hi0 = _mm512_load_si512(hi);
    t.hi1 = _mm512_load_si512(hi + 64);
    t.order = _mm512_load_si512(order);
    t.sign = _mm512_set1_epi8(static_cast<char>(0x80));
    return t;
  }();
  return tables;
}

// One latent row of e4m3 bytes -> kD bfloat16 words.
HWY_INLINE void WidenE4m3Row(const Fp8Tables& t, const std::uint8_t* src, std::uint16_t* dst) {
  for (int d = 0; d < kD; d += 64) {
    const __m512i x = _mm512_permutexvar_epi8(t.order, _mm512_loadu_si512(src + d));
    const __m512i lo = _mm512_permutex2var_epi8(t.lo0, x, t.lo1);
    const __m512i hi = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(t.hi0, x, t.hi1), x, t.sign, 0xF8);
    _mm512_storeu_si512(dst + d, _mm512_unpacklo_epi8(lo, hi));
    _mm512_storeu_si512(dst + d + 32, _mm512_unpackhi_epi8(lo, hi));
  }
}

// ---- the item's pieces ------------------------------------------------------------------

// Query pairs qp[dp][r] of rows r < rp (zeros past the item's rows).
HWY_INLINE void PackQuery(const LayerCtx& c, const WorkItem& it, int heads, int rows, int rp, std::uint32_t* qp) {
  for (int r = 0; r < rp; ++r) {
    if (r >= rows) {
      for (int dp = 0; dp < kPairs; ++dp) qp[static_cast<std::size_t>(dp) * rp + r] = 0;
      continue;
    }
    const int token = it.token_begin + r / heads, head = it.head_begin + r % heads;
    const auto* q = reinterpret_cast<const std::uint16_t*>(c.query) + token * c.q_stride[0] + head * c.q_stride[1];
    for (int dp = 0; dp < kPairs; ++dp) {
      std::uint32_t w;
      std::memcpy(&w, q + 2 * dp, 4);
      qp[static_cast<std::size_t>(dp) * rp + r] = w;
    }
  }
}

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
// key row) also prefetch the next 64 bytes of the group's rows of a run ahead.
template <int NV>
HWY_INLINE void QkRun(const std::uint16_t* keys, const std::uint32_t* qp, float scale, const RunPrefetch& pf,
                      float* s) {
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
          if (g * KG + k < pf.n) _mm_prefetch(reinterpret_cast<const char*>(pf.rows[g * KG + k] + 64 * step), _MM_HINT_T1);
      const std::uint8_t* kb = base + 64 * step;
      if (step + kL1Ahead < kPairs / 16)
        for (int k = 0; k < KG; ++k) _mm_prefetch(reinterpret_cast<const char*>(kb + k * kRowBytes + 64 * kL1Ahead), _MM_HINT_T0);
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

// The online softmax of a tile of `keys` logits (nk of them real; masked ones and the
// causal future of each row -> -inf when need_mask): S becomes P in place, the probability
// pairs go to pp, and m, l, alpha are updated. Returns whether any accumulator row must be
// rescaled (alpha != 1 for a row that already holds something).
template <int NV>
HWY_INLINE bool SoftmaxTile(int keys, int nk, bool need_mask, float key0, Scratch& sc) {
  constexpr int RP = NV * 16;
  const __m512 ninf = _mm512_set1_ps(-HUGE_VALF);
  __m512 tmax[NV], pos[NV];
  for (int v = 0; v < NV; ++v) {
    tmax[v] = ninf;
    pos[v] = _mm512_load_ps(sc.pos + v * 16);
  }
  for (int n = 0; n < keys; ++n) {
    float* row = sc.s + static_cast<std::size_t>(n) * RP;
    const __m512 kp = _mm512_set1_ps(key0 + static_cast<float>(n));
    for (int v = 0; v < NV; ++v) {
      __m512 x = _mm512_load_ps(row + v * 16);
      if (need_mask) {
        const __mmask16 ok = n < nk ? _mm512_cmp_ps_mask(kp, pos[v], _CMP_LE_OQ) : __mmask16{0};
        x = _mm512_mask_blend_ps(ok, ninf, x);
        _mm512_store_ps(row + v * 16, x);
      }
      tmax[v] = _mm512_max_ps(tmax[v], x);
    }
  }
  bool rescale = false;
  __m512 m_use[NV], lsum[NV];
  for (int v = 0; v < NV; ++v) {
    const __m512 m_old = _mm512_load_ps(sc.m + v * 16);
    const __mmask16 grow = _mm512_cmp_ps_mask(tmax[v], _mm512_add_ps(m_old, _mm512_set1_ps(kLazyMaxGap)), _CMP_GT_OQ);
    const __m512 m_new = _mm512_mask_blend_ps(grow, m_old, tmax[v]);
    const __mmask16 live = _mm512_cmp_ps_mask(m_old, ninf, _CMP_NEQ_OQ);
    rescale |= (grow & live) != 0;
    m_use[v] = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(m_new, ninf, _CMP_EQ_OQ), m_new, _mm512_setzero_ps());
    const __m512 alpha = Exp2(_mm512_sub_ps(m_old, m_use[v]));
    _mm512_store_ps(sc.alpha + v * 16, alpha);
    _mm512_store_ps(sc.m + v * 16, m_new);
    lsum[v] = _mm512_mul_ps(_mm512_load_ps(sc.l + v * 16), alpha);
  }
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22,
                                              6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  for (int n = 0; n < keys; n += 2) {
    float* a = sc.s + static_cast<std::size_t>(n) * RP;
    float* b = a + RP;
    for (int v = 0; v < NV; ++v) {
      const __m512 pa = Exp2(_mm512_sub_ps(_mm512_load_ps(a + v * 16), m_use[v]));
      const __m512 pb = Exp2(_mm512_sub_ps(_mm512_load_ps(b + v * 16), m_use[v]));
      lsum[v] = _mm512_add_ps(lsum[v], _mm512_add_ps(pa, pb));
      const __m512i both = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(pb, pa));  // low: a, high: b
      _mm512_store_si512(sc.pp + static_cast<std::size_t>(n / 2) * RP + v * 16, _mm512_permutexvar_epi16(interleave, both));
    }
  }
  for (int v = 0; v < NV; ++v) _mm512_store_ps(sc.l + v * 16, lsum[v]);
  return rescale;
}

// O[r][...] (r < R of the row block) = alpha · O + P · V over the tile's runs, 32 value dims
// at a time with the R rows' two accumulators each in registers. A key pair's 32 dims are
// interleaved in registers by vpunpck{l,h}wd, which work within 128-bit lanes: the first
// accumulator gets dims 8L..8L+3 of lane L, the second 8L+4..8L+7 (StoredOrderToNatural
// puts them back once per item).
template <int R, int NV>
HWY_INLINE void PvRows(const std::uint16_t* const* runs, int nruns, const std::uint32_t* pp, float* o,
                       const float* alpha, bool rescale) {
  constexpr int RP = NV * 16;
  for (int chunk = 0; chunk < kDV / 32; ++chunk) {
    __m512 acc[R][2];
    for (int r = 0; r < R; ++r)
      for (int h = 0; h < 2; ++h) {
        acc[r][h] = _mm512_load_ps(o + static_cast<std::size_t>(r) * kDV + 32 * chunk + 16 * h);
        if (rescale) acc[r][h] = _mm512_mul_ps(acc[r][h], _mm512_set1_ps(alpha[r]));
      }
    for (int run = 0; run < nruns; ++run) {
      const auto* vb = reinterpret_cast<const std::uint8_t*>(runs[run] + 32 * chunk);
      const std::uint32_t* prow = pp + static_cast<std::size_t>(run) * (kRunKeys / 2) * RP;
      for (int j = 0; j < kRunKeys / 2; ++j) {
        const __m512i k0 = _mm512_loadu_si512(vb + (2 * j) * kRowBytes);
        const __m512i k1 = _mm512_loadu_si512(vb + (2 * j + 1) * kRowBytes);
        const __m512i lo = _mm512_unpacklo_epi16(k0, k1), hi = _mm512_unpackhi_epi16(k0, k1);
        for (int r = 0; r < R; ++r) {
          const __m512i p = _mm512_set1_epi32(static_cast<int>(prow[j * RP + r]));
          acc[r][0] = Dot(acc[r][0], p, lo);
          acc[r][1] = Dot(acc[r][1], p, hi);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int h = 0; h < 2; ++h) _mm512_store_ps(o + static_cast<std::size_t>(r) * kDV + 32 * chunk + 16 * h, acc[r][h]);
  }
}

// One accumulator row from PvRows' order to natural dim order: in each 32-dim chunk, lane L
// of the first vector holds dims 8L..8L+3 and of the second 8L+4..8L+7.
HWY_INLINE void StoredOrderToNatural(float* o) {
  const __m512i first = _mm512_set_epi32(23, 22, 21, 20, 7, 6, 5, 4, 19, 18, 17, 16, 3, 2, 1, 0);
  const __m512i second = _mm512_set_epi32(31, 30, 29, 28, 15, 14, 13, 12, 27, 26, 25, 24, 11, 10, 9, 8);
  for (int d = 0; d < kDV; d += 32) {
    const __m512 a = _mm512_load_ps(o + d), b = _mm512_load_ps(o + d + 16);
    _mm512_store_ps(o + d, _mm512_permutex2var_ps(a, first, b));
    _mm512_store_ps(o + d + 16, _mm512_permutex2var_ps(a, second, b));
  }
}

// Writes the item's rows: normalised output and LSE, or the unnormalised partial of a split.
HWY_INLINE void Finish(const LayerCtx& c, const WorkItem& it, int heads, int rows, float* partial_slot,
                       Scratch& sc) {
  constexpr float kLn2 = 0.6931471805599453f;
  kernel::cpu::PartialView part;
  if (partial_slot) part = kernel::cpu::partial_for(partial_slot, kDV, 0);
  for (int r = 0; r < rows; ++r) {
    float* o = sc.o + static_cast<std::size_t>(r) * kDV;
    StoredOrderToNatural(o);
    const float l = sc.l[r], m = sc.m[r] * kLn2;
    if (partial_slot) {
      const __m512 f = _mm512_set1_ps(c.v_scale);
      float* po = part.o + static_cast<std::size_t>(r) * kDV;
      for (int d = 0; d < kDV; d += 16) _mm512_storeu_ps(po + d, _mm512_mul_ps(_mm512_load_ps(o + d), f));
      part.m[r] = m;
      part.l[r] = l;
      continue;
    }
    const int token = it.token_begin + r / heads, head = it.head_begin + r % heads;
    if (c.lse) c.lse[token * c.lse_stride + head] = l > 0.0f ? m + std::log(l) : -HUGE_VALF;
    const float factor = l > 0.0f ? c.v_scale / l : 0.0f;
    const __m512 f = _mm512_set1_ps(factor);
    const std::int64_t at = token * c.o_stride[0] + head * c.o_stride[1];
    switch (c.out_type) {
      case ScalarType::f32:
        for (int d = 0; d < kDV; d += 16)
          _mm512_storeu_ps(reinterpret_cast<float*>(c.out) + at + d, _mm512_mul_ps(_mm512_load_ps(o + d), f));
        break;
      case ScalarType::bf16:
        for (int d = 0; d < kDV; d += 16)
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(reinterpret_cast<std::uint16_t*>(c.out) + at + d),
                              reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_mul_ps(_mm512_load_ps(o + d), f))));
        break;
      default: {
        auto* out = reinterpret_cast<std::uint16_t*>(c.out) + at;
        for (int d = 0; d < kDV; ++d) out[d] = float_to_half(o[d] * factor);
        break;
      }
    }
  }
}

template <ScalarType K, int NV>
HWY_NOINLINE void Item(const LayerCtx& c, const WorkItem& it, float* partial_slot, void* scratch) {
  constexpr int RP = NV * 16;
  constexpr float kLog2e = 1.4426950408889634f;
  Scratch sc = carve(scratch);
  const int heads = it.head_end - it.head_begin, rows = it.num_rows();
  PackQuery(c, it, heads, rows, RP, sc.qp);
  for (int r = 0; r < RP; ++r) {
    sc.pos[r] = static_cast<float>(it.pos_begin + std::min(r, rows - 1) / heads);
    sc.m[r] = -HUGE_VALF;
    sc.l[r] = 0.0f;
  }
  std::memset(sc.o, 0, static_cast<std::size_t>(RP) * kDV * sizeof(float));
  const float min_pos = static_cast<float>(it.pos_begin);
  const float scale = c.qk_scale * kLog2e;
  const std::int64_t keys = it.key_end - it.key_begin;
  const std::int64_t runs = (keys + kRunKeys - 1) / kRunKeys;
  RunPrefetch pf;
  for (std::int64_t a = 0; a < kPrefetchRuns; ++a) {  // the first runs: prefetched up front
    LocatePrefetch<K>(c, it, a, pf);
    for (int i = 0; i < pf.n; ++i)
      for (int line = 0; line < pf.lines; ++line)
        _mm_prefetch(reinterpret_cast<const char*>(pf.rows[i] + 64 * line), _MM_HINT_T1);
  }
  for (std::int64_t run0 = 0; run0 < runs; run0 += kTileRuns) {
    const int nruns = static_cast<int>(std::min<std::int64_t>(kTileRuns, runs - run0));
    const std::int64_t key0 = it.key_begin + run0 * kRunKeys;
    const int nk = static_cast<int>(std::min<std::int64_t>(kTileKeys, it.key_end - key0));
    const std::uint16_t* run_rows[kTileRuns];
    for (int i = 0; i < nruns; ++i) {
      const std::int64_t k0 = key0 + i * kRunKeys;
      const int run_keys = static_cast<int>(std::min<std::int64_t>(kRunKeys, it.key_end - k0));
      LocatePrefetch<K>(c, it, run0 + i + kPrefetchRuns, pf);
      run_rows[i] = RunRows<K>(c, it, k0, run_keys, sc.stage + static_cast<std::size_t>(i) * kRunKeys * kD);
      QkRun<NV>(run_rows[i], sc.qp, scale, pf, sc.s + static_cast<std::size_t>(i) * kRunKeys * RP);
    }
    const bool need_mask = nk < nruns * kRunKeys || static_cast<float>(key0 + nk - 1) > min_pos;
    const bool rescale = SoftmaxTile<NV>(nruns * kRunKeys, nk, need_mask, static_cast<float>(key0), sc);
    for (int rb = 0; rb * 8 < rows; ++rb)
      PvRows<8, NV>(run_rows, nruns, sc.pp + rb * 8, sc.o + static_cast<std::size_t>(rb) * 8 * kDV, sc.alpha + rb * 8,
                    rescale);
  }
  Finish(c, it, heads, rows, partial_slot, sc);
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
