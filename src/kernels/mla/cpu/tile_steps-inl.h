// The SIMD steps the CPU MLA kernels share (the decode's latent_decode_kernels.cpp and the
// prefill's prefill_kernels.cpp). No include guard: each kernel file includes it once per
// Highway target, inside its AVX-512-BF16 region and namespace.
//
// An item's rows (query tokens × heads) lie across the lanes of NV vectors. For each tile
// of keys, Q·Kᵀ leaves the logits S[key][row] (already × scale · log2 e); then
//   softmax  base 2, with a lazy maximum: a row's running maximum moves only when a tile
//            exceeds it by more than kLazyMaxGap, so that most tiles rescale nothing
//            (probabilities up to 2^kLazyMaxGap are exact enough in fp32 and bfloat16);
//   P·V      32 value dims at a time, 8 rows' two accumulators in registers; a key pair's
//            dims are interleaved in registers by vpunpck{l,h}wd, which work within 128-bit
//            lanes, so the accumulators hold the dims in a stored order that the item's
//            end puts back.

HWY_INLINE __m512 Dot(__m512 acc, __m512i a, __m512i b) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(a), reinterpret_cast<__m512bh>(b));
}
HWY_INLINE void PrefetchToL1(const std::uint8_t* p) { __builtin_prefetch(p, 0, 3); }
HWY_INLINE void PrefetchToL2(const std::uint8_t* p) { __builtin_prefetch(p, 0, 2); }
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

constexpr float kLazyMaxGap = 8.0f;  // log2 units a running maximum may lag behind
constexpr float kLog2e = 1.4426950408889634f;

// An item's softmax state and buffers in scratch (rp = NV · 16 rows, 64-byte aligned).
struct TileState {
  std::uint32_t* qp;  // query pairs [D / 2][rp]
  float* s;           // logits, then probabilities [tile keys][rp]
  std::uint32_t* pp;  // probability pairs [tile keys / 2][rp]
  float* o;           // accumulators [rp][DV], stored order
  float* m;           // running maximum, log2 units [rp]
  float* l;           // running sum [rp]
  float* alpha;       // this tile's rescale factors [rp]
  float* pos;         // each row's position [rp]
};

// The tile state at `b` (sizes `bytes`, tile_state.hpp); `b` moves past it.
HWY_INLINE TileState CarveTileState(std::uint8_t*& b, const TileStateBytes& bytes) {
  TileState t;
  t.qp = reinterpret_cast<std::uint32_t*>(b), b += bytes.qp;
  t.s = reinterpret_cast<float*>(b), b += bytes.s;
  t.pp = reinterpret_cast<std::uint32_t*>(b), b += bytes.pp;
  t.o = reinterpret_cast<float*>(b), b += bytes.o;
  t.m = reinterpret_cast<float*>(b), b += bytes.row_state;
  t.l = reinterpret_cast<float*>(b), b += bytes.row_state;
  t.alpha = reinterpret_cast<float*>(b), b += bytes.row_state;
  t.pos = reinterpret_cast<float*>(b), b += bytes.row_state;
  return t;
}

// Query pairs qp[dp][r] of rows r < rp (zeros past the item's rows): row r is token
// token_begin + r / heads, head head_begin + r % heads; positions, m, l and O start.
template <int D, int DV>
HWY_INLINE void StartItem(const LayerCtx& c, const WorkItem& it, int heads, int rows, int rp, TileState& t) {
  for (int r = 0; r < rp; ++r) {
    t.pos[r] = static_cast<float>(it.pos_begin + std::min(r, rows - 1) / heads);
    t.m[r] = -HUGE_VALF;
    t.l[r] = 0.0f;
    if (r >= rows) {
      for (int dp = 0; dp < D / 2; ++dp) t.qp[static_cast<std::size_t>(dp) * rp + r] = 0;
      continue;
    }
    const int token = it.token_begin + r / heads, head = it.head_begin + r % heads;
    const auto* q = reinterpret_cast<const std::uint16_t*>(c.query) + token * c.q_stride[0] + head * c.q_stride[1];
    for (int dp = 0; dp < D / 2; ++dp) {
      std::uint32_t w;
      std::memcpy(&w, q + 2 * dp, 4);
      t.qp[static_cast<std::size_t>(dp) * rp + r] = w;
    }
  }
  std::memset(t.o, 0, static_cast<std::size_t>(rp) * DV * sizeof(float));
}

// The online softmax of a tile of `keys` logits (an even count; nk of them real, masked ones
// and the causal future of each row -> -inf when need_mask): S becomes P in place, the
// probability pairs go to pp, and m, l, alpha are updated. Returns whether any accumulator
// row must be rescaled (alpha != 1 for a row that already holds something).
template <int NV>
HWY_INLINE bool SoftmaxTile(int keys, int nk, bool need_mask, bool causal, float key0, TileState& t) {
  constexpr int RP = NV * 16;
  const __m512 ninf = _mm512_set1_ps(-HUGE_VALF);
  __m512 tmax[NV], pos[NV];
  for (int v = 0; v < NV; ++v) {
    tmax[v] = ninf;
    pos[v] = _mm512_load_ps(t.pos + v * 16);
  }
  for (int n = 0; n < keys; ++n) {
    float* row = t.s + static_cast<std::size_t>(n) * RP;
    const __m512 kp = _mm512_set1_ps(key0 + static_cast<float>(n));
    for (int v = 0; v < NV; ++v) {
      __m512 x = _mm512_load_ps(row + v * 16);
      if (need_mask) {
        __mmask16 ok = n < nk ? __mmask16{0xFFFF} : __mmask16{0};
        if (causal) ok &= _mm512_cmp_ps_mask(kp, pos[v], _CMP_LE_OQ);
        x = _mm512_mask_blend_ps(ok, ninf, x);
        _mm512_store_ps(row + v * 16, x);
      }
      tmax[v] = _mm512_max_ps(tmax[v], x);
    }
  }
  bool rescale = false;
  __m512 m_use[NV], lsum[NV];
  for (int v = 0; v < NV; ++v) {
    const __m512 m_old = _mm512_load_ps(t.m + v * 16);
    const __mmask16 grow = _mm512_cmp_ps_mask(tmax[v], _mm512_add_ps(m_old, _mm512_set1_ps(kLazyMaxGap)), _CMP_GT_OQ);
    const __m512 m_new = _mm512_mask_blend_ps(grow, m_old, tmax[v]);
    const __mmask16 live = _mm512_cmp_ps_mask(m_old, ninf, _CMP_NEQ_OQ);
    rescale |= (grow & live) != 0;
    m_use[v] = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(m_new, ninf, _CMP_EQ_OQ), m_new, _mm512_setzero_ps());
    const __m512 alpha = Exp2(_mm512_sub_ps(m_old, m_use[v]));
    _mm512_store_ps(t.alpha + v * 16, alpha);
    _mm512_store_ps(t.m + v * 16, m_new);
    lsum[v] = _mm512_mul_ps(_mm512_load_ps(t.l + v * 16), alpha);
  }
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22,
                                              6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  for (int n = 0; n < keys; n += 2) {
    const float* a = t.s + static_cast<std::size_t>(n) * RP;
    const float* b = a + RP;
    for (int v = 0; v < NV; ++v) {
      const __m512 pa = Exp2(_mm512_sub_ps(_mm512_load_ps(a + v * 16), m_use[v]));
      const __m512 pb = Exp2(_mm512_sub_ps(_mm512_load_ps(b + v * 16), m_use[v]));
      lsum[v] = _mm512_add_ps(lsum[v], _mm512_add_ps(pa, pb));
      const __m512i both = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(pb, pa));  // low: a, high: b
      _mm512_store_si512(t.pp + static_cast<std::size_t>(n / 2) * RP + v * 16,
                         _mm512_permutexvar_epi16(interleave, both));
    }
  }
  for (int v = 0; v < NV; ++v) _mm512_store_ps(t.l + v * 16, lsum[v]);
  return rescale;
}

// A tile's value rows: `segments` runs of pairs_per_segment key pairs, key k of a run at
// base + k · stride bytes (bf16 rows, the values first).
struct ValueRows {
  const std::uint8_t* base[4];
  int segments = 0;
  int pairs_per_segment = 0;
  std::ptrdiff_t stride = 0;
};

// O[r][...] (r < 8 of the row block at `o`, probability pairs from `pp`) = alpha · O + P · V.
template <int NV, int DV>
HWY_INLINE void PvRows(const ValueRows& v, const std::uint32_t* pp, float* o, const float* alpha, bool rescale) {
  constexpr int R = 8, RP = NV * 16;
  for (int chunk = 0; chunk < DV / 32; ++chunk) {
    __m512 acc[R][2];
    for (int r = 0; r < R; ++r)
      for (int h = 0; h < 2; ++h) {
        acc[r][h] = _mm512_load_ps(o + static_cast<std::size_t>(r) * DV + 32 * chunk + 16 * h);
        if (rescale) acc[r][h] = _mm512_mul_ps(acc[r][h], _mm512_set1_ps(alpha[r]));
      }
    for (int seg = 0; seg < v.segments; ++seg) {
      const std::uint8_t* vb = v.base[seg] + 64 * chunk;
      const std::uint32_t* prow = pp + static_cast<std::size_t>(seg) * v.pairs_per_segment * RP;
      for (int j = 0; j < v.pairs_per_segment; ++j) {
        const __m512i k0 = _mm512_loadu_si512(vb + (2 * j) * v.stride);
        const __m512i k1 = _mm512_loadu_si512(vb + (2 * j + 1) * v.stride);
        const __m512i lo = _mm512_unpacklo_epi16(k0, k1), hi = _mm512_unpackhi_epi16(k0, k1);
        for (int r = 0; r < R; ++r) {
          const __m512i p = _mm512_set1_epi32(static_cast<int>(prow[j * RP + r]));
          acc[r][0] = Dot(acc[r][0], p, lo);
          acc[r][1] = Dot(acc[r][1], p, hi);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int h = 0; h < 2; ++h)
        _mm512_store_ps(o + static_cast<std::size_t>(r) * DV + 32 * chunk + 16 * h, acc[r][h]);
  }
}

// P·V of every 8-row block of the item's rows.
template <int NV, int DV>
HWY_INLINE void PvTile(const ValueRows& v, int rows, bool rescale, const TileState& t) {
  for (int rb = 0; rb * 8 < rows; ++rb)
    PvRows<NV, DV>(v, t.pp + rb * 8, t.o + static_cast<std::size_t>(rb) * 8 * DV, t.alpha + rb * 8, rescale);
}

// One accumulator row from PvRows' stored order to natural dim order: in each 32-dim chunk,
// lane L of the first vector holds dims 8L..8L+3 and of the second 8L+4..8L+7.
template <int DV>
HWY_INLINE void StoredOrderToNatural(float* o) {
  const __m512i first = _mm512_set_epi32(23, 22, 21, 20, 7, 6, 5, 4, 19, 18, 17, 16, 3, 2, 1, 0);
  const __m512i second = _mm512_set_epi32(31, 30, 29, 28, 15, 14, 13, 12, 27, 26, 25, 24, 11, 10, 9, 8);
  for (int d = 0; d < DV; d += 32) {
    const __m512 a = _mm512_load_ps(o + d), b = _mm512_load_ps(o + d + 16);
    _mm512_store_ps(o + d, _mm512_permutex2var_ps(a, first, b));
    _mm512_store_ps(o + d + 16, _mm512_permutex2var_ps(a, second, b));
  }
}

// Writes the item's rows: normalised output and LSE, or the unnormalised partial of a split.
template <int DV>
HWY_INLINE void FinishItem(const LayerCtx& c, const WorkItem& it, int heads, int rows, float* partial_slot,
                           const TileState& t) {
  constexpr float kLn2 = 0.6931471805599453f;
  kernel::cpu::PartialView part;
  if (partial_slot) part = kernel::cpu::partial_for(partial_slot, DV, 0);
  for (int r = 0; r < rows; ++r) {
    float* o = t.o + static_cast<std::size_t>(r) * DV;
    StoredOrderToNatural<DV>(o);
    const float l = t.l[r], m = t.m[r] * kLn2;
    if (partial_slot) {
      const __m512 f = _mm512_set1_ps(c.v_scale);
      float* po = part.o + static_cast<std::size_t>(r) * DV;
      for (int d = 0; d < DV; d += 16) _mm512_storeu_ps(po + d, _mm512_mul_ps(_mm512_load_ps(o + d), f));
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
        for (int d = 0; d < DV; d += 16)
          _mm512_storeu_ps(reinterpret_cast<float*>(c.out) + at + d, _mm512_mul_ps(_mm512_load_ps(o + d), f));
        break;
      case ScalarType::bf16:
        for (int d = 0; d < DV; d += 16)
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(reinterpret_cast<std::uint16_t*>(c.out) + at + d),
                              reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_mul_ps(_mm512_load_ps(o + d), f))));
        break;
      default: {
        auto* out = reinterpret_cast<std::uint16_t*>(c.out) + at;
        for (int d = 0; d < DV; ++d) out[d] = float_to_half(o[d] * factor);
        break;
      }
    }
  }
}
