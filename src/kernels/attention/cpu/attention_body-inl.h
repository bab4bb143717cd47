// The CPU attention kernel body. No include guard: attention_kernels.cpp includes it once
// per Highway target (fp32-accumulating path, ATTNSEL_BF16_VARIANT == 0) and, on AVX-512,
// once more in a region compiled with AVX-512-BF16 (ATTNSEL_BF16_VARIANT == 1).
//
// One work item = up to kMaxRows query rows (tokens × heads sharing a KV head) against a
// key range, streamed in tiles of kTileKeys keys:
//   QK:      S^T[key][row] with rows across SIMD lanes: each key element is broadcast
//            against a packed query column, so no horizontal sums are needed and the
//            online-softmax max/sum are lane-wise.
//   softmax: soft-cap, ALiBi, mask, running max/sum per row (lane).
//   PV:      O[row][dim] with dims across lanes, the probabilities broadcast; the
//            rescale by exp(m_old - m_new) is folded into the accumulator load.
// fp32 path: K/V converted to fp32 in registers (a tile at a time into L1 scratch).
// BF16 path: vdpbf16ps for both products (query pairs × key pairs, probability pairs ×
// value pairs); fp8 KV converts exactly to bf16.

namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// exp(x) for x <= 0 (Cephes expf polynomial, ~1 ulp); x below -87 gives exactly 0.
HWY_INLINE VF ExpNonPositive(DF df, VF x) {
  const hn::RebindToSigned<DF> di;
  const VF lo = hn::Set(df, -87.0f);
  const auto underflow = hn::Lt(x, lo);
  x = hn::Max(x, lo);
  const VF n = hn::Round(hn::Mul(x, hn::Set(df, 1.44269504088896341f)));
  VF r = hn::NegMulAdd(n, hn::Set(df, 0.693359375f), x);
  r = hn::NegMulAdd(n, hn::Set(df, -2.12194440e-4f), r);
  VF p = hn::Set(df, 1.9875691500E-4f);
  p = hn::MulAdd(p, r, hn::Set(df, 1.3981999507E-3f));
  p = hn::MulAdd(p, r, hn::Set(df, 8.3334519073E-3f));
  p = hn::MulAdd(p, r, hn::Set(df, 4.1665795894E-2f));
  p = hn::MulAdd(p, r, hn::Set(df, 1.6666665459E-1f));
  p = hn::MulAdd(p, r, hn::Set(df, 5.0000001201E-1f));
  const VF y = hn::Add(hn::MulAdd(p, hn::Mul(r, r), r), hn::Set(df, 1.0f));
  const auto e = hn::ShiftLeft<23>(hn::Add(hn::ConvertTo(di, n), hn::Set(di, 127)));
  return hn::IfThenZeroElse(underflow, hn::Mul(y, hn::BitCast(df, e)));
}

// ---------------------------------------------------------------------------------------
// KV element types: load L elements of a cache row as fp32 (converted in registers).
template <ScalarType K>
struct Kv;
template <>
struct Kv<ScalarType::f32> {
  static constexpr std::size_t kBytes = 4;
  static HWY_INLINE VF Load(DF df, const std::uint8_t* p) { return hn::LoadU(df, reinterpret_cast<const float*>(p)); }
};
// 16-bit elements widen exactly.
template <class H>
struct Kv16 {
  static constexpr std::size_t kBytes = 2;
  static HWY_INLINE VF Load(DF df, const std::uint8_t* p) {
    const hn::Rebind<H, DF> d;
    return hn::PromoteTo(df, hn::LoadU(d, reinterpret_cast<const H*>(p)));
  }
};
template <>
struct Kv<ScalarType::bf16> : Kv16<hwy::bfloat16_t> {};
template <>
struct Kv<ScalarType::f16> : Kv16<hwy::float16_t> {};
// fp8 elements: each byte widened to 16 bits, moved into a half's bit layout by
// Format::HalfBits, and read as a half.
template <class Format>
struct KvFp8 {
  static constexpr std::size_t kBytes = 1;
  static HWY_INLINE VF Load(DF df, const std::uint8_t* p) {
    const hn::Rebind<std::uint8_t, DF> d8;
    const hn::Rebind<std::uint16_t, DF> d16;
    const hn::Rebind<hwy::float16_t, DF> dh;
    const auto b = hn::PromoteTo(d16, hn::LoadU(d8, p));
    return hn::PromoteTo(df, hn::BitCast(dh, Format::HalfBits(d16, b)));
  }
};
// E5M2 is the upper byte of an IEEE half.
struct E5m2HalfBits {
  template <class D16, class V16>
  static HWY_INLINE V16 HalfBits(D16, V16 b) {
    return hn::ShiftLeft<8>(b);
  }
};
// E4M3 placed in a half's bit layout reads as value / 256 (subnormals included); the
// driver folds the 256 into the dequantisation scale.
struct E4m3HalfBits {
  template <class D16, class V16>
  static HWY_INLINE V16 HalfBits(D16 d16, V16 b) {
    return hn::Or(hn::ShiftLeft<7>(hn::And(b, hn::Set(d16, 0x7F))), hn::ShiftLeft<8>(hn::And(b, hn::Set(d16, 0x80))));
  }
};
template <>
struct Kv<ScalarType::fp8_e5m2> : KvFp8<E5m2HalfBits> {};
template <>
struct Kv<ScalarType::fp8_e4m3> : KvFp8<E4m3HalfBits> {};

// ---------------------------------------------------------------------------------------
// Per-thread scratch, carved from one aligned buffer (sizes in ScratchLayout, HWY_ONCE part).
// Cache lines of an upcoming step still to prefetch, issued a few at a time from inside
// the computation so that the loads overlap it (a burst of hundreds would stall once the
// miss buffers are full). Walks one byte range (a run) of consecutive blocks of the
// sequence (K and V alike), in address order: whole blocks, or one head's rows of each
// block (HND). Each step's lines are spread evenly over all the issue points of the step
// before (counted as they happen: every step of an item has the same shape); small, even
// issues measured 5-10 points of read bandwidth better than bursts of 4-6 lines.
struct PrefetchCursor {
  const std::uint8_t* key_cache = nullptr;
  const std::uint8_t* value_cache = nullptr;
  const std::int32_t* table = nullptr;  // this sequence's block ids
  std::int64_t block_bytes = 0;
  std::int64_t run_begin = 0, run_end = 0;  // the bytes of each block to fetch
  std::int64_t block = 0;               // index into table of the current block
  std::int64_t offset = 0;              // byte offset within it
  std::int64_t remaining = 0;           // lines left
  std::int64_t step_lines = 0;          // lines of the current step
  int calls = 0;                        // issue points seen in the current step
  int expected = 0;                     // issue points of the previous step (0: not known yet)
  const std::uint8_t* k = nullptr;
  const std::uint8_t* v = nullptr;

  // Starts a step of `lines` lines from byte `first_offset` of block `first_block`, each
  // block contributing bytes [begin, end).
  void start(std::int64_t first_block, std::int64_t first_offset, std::int64_t begin, std::int64_t end,
             std::int64_t lines) {
    flush();  // whatever the previous step left
    if (calls > 0) expected = calls;
    calls = 0;
    remaining = lines;
    step_lines = lines;
    run_begin = begin;
    run_end = end;
    block = first_block;
    offset = first_offset;
    k = key_cache + table[block] * block_bytes;
    v = value_cache + table[block] * block_bytes;
  }
  // One issue point: brings the lines issued so far to the same fraction of the step as
  // the issue points passed (4 lines a point until the first step has been counted).
  HWY_INLINE void issue() {
    ++calls;
    const std::int64_t target =
        expected > 0 ? (static_cast<std::int64_t>(calls) * step_lines + expected - 1) / expected : 4 * calls;
    const std::int64_t n = target - (step_lines - remaining);
    if (n > 0) issue_lines(n);
  }
  HWY_INLINE void issue_lines(std::int64_t n) {
    n = std::min(n, remaining);
    remaining -= n;
    while (n > 0) {
      if (offset == run_end) {
        offset = run_begin;
        ++block;
        k = key_cache + table[block] * block_bytes;
        v = value_cache + table[block] * block_bytes;
      }
      const std::int64_t run = std::min(n, (run_end - offset) / 64);
      for (std::int64_t i = 0; i < run; ++i) {
        __builtin_prefetch(k + offset + 64 * i, 0, 3);
        __builtin_prefetch(v + offset + 64 * i, 0, 3);
      }
      offset += 64 * run;
      n -= run;
    }
  }
  void flush() { issue_lines(remaining); }
};

struct Scratch {
  PrefetchCursor* pf = nullptr;  // the next step's lines, when trickled (decode items)
  float* qp;      // packed queries: fp32 [D][RP] or bf16 pairs [D/2][RP][2]
  float* s;       // logits S^T [kTileKeys][RP]
  float* p;       // probabilities P^T [kTileKeys][RP]
  std::uint32_t* pp;  // bf16 probability pairs [kTileKeys/2][RP]
  float* kf;      // K tile converted: fp32 [kTileKeys][D] or bf16 [kTileKeys][D]
  float* vf;      // V tile converted: fp32 [kTileKeys][D] or bf16 pairs [kTileKeys/2][D][2]
  float* o;       // accumulators [kMaxRows][D]
  float* m;       // running max [kMaxRows]
  float* l;       // running sum [kMaxRows]
  float* alpha;   // rescale factors of the current tile [kMaxRows]
  std::uint8_t* zero;  // a zero row (any element type) for keys past the end of a tile
  float qk_scale = 1.0f;  // this KV head's LayerCtx::qk_scale (× its per-head key scale)
  float v_scale = 1.0f;   // this KV head's LayerCtx::v_scale (× its per-head value scale)
};

// Layout: shared tile buffers, then kMaxItemKvHeads per-head blocks (queries, accumulators,
// running max/sum, rescale factors). Must match scratch_bytes().
HWY_INLINE Scratch CarveScratch(void* base, int D) {
  auto* b = static_cast<std::uint8_t*>(base);
  const std::size_t rows_d = static_cast<std::size_t>(kMaxRows) * static_cast<std::size_t>(D) * 4;
  const std::size_t tile_d = static_cast<std::size_t>(kTileKeys) * static_cast<std::size_t>(D) * 4;
  const std::size_t tile_r = static_cast<std::size_t>(kTileKeys) * kMaxRows * 4;
  Scratch s;
  s.s = reinterpret_cast<float*>(b), b += tile_r;
  s.p = reinterpret_cast<float*>(b), b += tile_r;
  s.pp = reinterpret_cast<std::uint32_t*>(b), b += tile_r;
  s.kf = reinterpret_cast<float*>(b), b += tile_d;
  s.vf = reinterpret_cast<float*>(b), b += tile_d;
  s.zero = b, b += static_cast<std::size_t>(D) * 4;
  std::memset(s.zero, 0, static_cast<std::size_t>(D) * 4);
  s.qp = reinterpret_cast<float*>(b), b += kMaxItemKvHeads * rows_d;
  s.o = reinterpret_cast<float*>(b), b += kMaxItemKvHeads * rows_d;
  s.m = reinterpret_cast<float*>(b), b += kMaxItemKvHeads * kMaxRows * 4;
  s.l = reinterpret_cast<float*>(b), b += kMaxItemKvHeads * kMaxRows * 4;
  s.alpha = reinterpret_cast<float*>(b);
  return s;
}

// The scratch of the item's j-th KV head: its own queries, accumulators and softmax state.
HWY_INLINE Scratch HeadScratch(const Scratch& base, int j, int D) {
  const std::size_t rows_d = static_cast<std::size_t>(kMaxRows) * static_cast<std::size_t>(D);
  Scratch s = base;
  s.qp += static_cast<std::size_t>(j) * rows_d;
  s.o += static_cast<std::size_t>(j) * rows_d;
  s.m += static_cast<std::size_t>(j) * kMaxRows;
  s.l += static_cast<std::size_t>(j) * kMaxRows;
  s.alpha += static_cast<std::size_t>(j) * kMaxRows;
  return s;
}

// Reads element d of query row (token, head) as float.
HWY_INLINE float QueryElement(const LayerCtx& c, int token, int head, int d) {
  const std::int64_t off = token * c.q_stride[0] + head * c.q_stride[1] + d;
  switch (c.q_type) {
    case ScalarType::f32: return reinterpret_cast<const float*>(c.query)[off];
    case ScalarType::bf16: return bf16_to_float(reinterpret_cast<const std::uint16_t*>(c.query)[off]);
    default: return half_to_float(reinterpret_cast<const std::uint16_t*>(c.query)[off]);
  }
}
HWY_INLINE std::uint16_t QueryBits(const LayerCtx& c, int token, int head, int d) {
  const std::int64_t off = token * c.q_stride[0] + head * c.q_stride[1] + d;
  return reinterpret_cast<const std::uint16_t*>(c.query)[off];
}

// The rows of one item, and the key tile being processed.
struct ItemGeometry {
  int rows;        // real rows
  int rp;          // padded rows (NV lanes-vectors)
  int heads;       // heads per token in the item
  std::int64_t min_pos, max_pos;
};

struct KeyTile {
  std::int64_t key0;
  int nk;  // real keys in the tile (the rest point at the zero row)
  const std::uint8_t* k[kTileKeys];
  const std::uint8_t* v[kTileKeys];
};

// Fills the row pointers of the tile starting at key0 without a division per key.
HWY_INLINE void LocateTile(const LayerCtx& c, const WorkItem& it, std::int64_t key0, std::int64_t key_end,
                           std::size_t kv_bytes, const std::uint8_t* zero, KeyTile& t) {
  t.key0 = key0;
  t.nk = static_cast<int>(std::min<std::int64_t>(kTileKeys, key_end - key0));
  const std::int32_t* table = c.block_table + static_cast<std::int64_t>(it.seq) * c.max_blocks_per_seq;
  std::int64_t blk = key0 / c.block_size;
  std::int64_t off = key0 % c.block_size;
  for (int n = 0; n < t.nk; ++n) {
    const std::int64_t block = table[blk];
    t.k[n] = c.key_cache + (block * c.k_stride[0] + off * c.k_stride[1] + it.kv_head * c.k_stride[2]) *
                               static_cast<std::int64_t>(kv_bytes);
    t.v[n] = c.value_cache + (block * c.v_stride[0] + off * c.v_stride[1] + it.kv_head * c.v_stride[2]) *
                                 static_cast<std::int64_t>(kv_bytes);
    if (++off == c.block_size) {
      off = 0;
      ++blk;
    }
  }
  for (int n = t.nk; n < kTileKeys; ++n) t.k[n] = t.v[n] = zero;
}

// The tile of the KV head `shift` heads after the one `t0` was located for: the same keys,
// rows moved by whole head strides (keys past the end keep pointing at the zero row).
HWY_INLINE void ShiftTile(const KeyTile& t0, std::int64_t k_shift, std::int64_t v_shift, KeyTile& t) {
  t.key0 = t0.key0;
  t.nk = t0.nk;
  for (int n = 0; n < kTileKeys; ++n) {
    const bool real = n < t0.nk;
    t.k[n] = t0.k[n] + (real ? k_shift : 0);
    t.v[n] = t0.v[n] + (real ? v_shift : 0);
  }
}

// Into L2 (prefetcht1): the lines are used two tiles later, by when L1 would have evicted them.
// Values that are the keys' own rows (MLA's latent: V is the first entries of K) are not
// fetched twice.
HWY_INLINE void PrefetchTile(const KeyTile& t, std::size_t k_row_bytes, std::size_t v_row_bytes) {
  for (int n = 0; n < t.nk; ++n) {
    for (std::size_t b = 0; b < k_row_bytes; b += 64) __builtin_prefetch(t.k[n] + b, 0, 2);
    if (t.v[n] == t.k[n]) continue;
    for (std::size_t b = 0; b < v_row_bytes; b += 64) __builtin_prefetch(t.v[n] + b, 0, 2);
  }
}

// Softmax of one tile: transforms S in place into P^T (scratch p), updates m, l, alpha.
template <int NV>
HWY_INLINE void SoftmaxTile(const LayerCtx& c, const ItemGeometry& g, const KeyTile& t, const VF* qpos,
                            const VF* slope, bool need_mask, Scratch& s) {
  const DF df;
  const std::size_t L = hn::Lanes(df);
  const std::size_t RP = NV * L;
  const VF neg_inf = hn::Set(df, -HUGE_VALF);
  VF tile_max[NV];
  for (int v = 0; v < NV; ++v) tile_max[v] = neg_inf;
  const bool cap = c.soft_cap > 0.0f;
  const VF cap_v = hn::Set(df, c.soft_cap), inv_cap = hn::Set(df, cap ? 1.0f / c.soft_cap : 0.0f);
  const VF win = hn::Set(df, static_cast<float>(c.window));
  for (int n = 0; n < kTileKeys; ++n) {
    float* row = s.s + static_cast<std::size_t>(n) * RP;
    if (n >= t.nk) {
      for (int v = 0; v < NV; ++v) hn::Store(neg_inf, df, row + v * L);
      continue;
    }
    const VF kp = hn::Set(df, static_cast<float>(t.key0 + n));
    for (int v = 0; v < NV; ++v) {
      VF x = hn::Load(df, row + v * L);
      if (cap) x = hn::Mul(cap_v, hn::Tanh(df, hn::Mul(x, inv_cap)));
      if (c.alibi) x = hn::MulAdd(slope[v], hn::Sub(kp, qpos[v]), x);
      if (need_mask) {
        auto ok = c.causal ? hn::Le(kp, qpos[v]) : hn::Eq(kp, kp);
        if (c.window >= 0) {
          ok = hn::And(ok, hn::Le(hn::Sub(qpos[v], kp), win));
          if (!c.causal) ok = hn::And(ok, hn::Le(hn::Sub(kp, qpos[v]), win));
        }
        x = hn::IfThenElse(ok, x, neg_inf);
      }
      hn::Store(x, df, row + v * L);
      tile_max[v] = hn::Max(tile_max[v], x);
    }
  }
  VF m_use[NV], lsum[NV];
  for (int v = 0; v < NV; ++v) {
    const VF m_old = hn::Load(df, s.m + v * L);
    const VF m_new = hn::Max(m_old, tile_max[v]);
    m_use[v] = hn::IfThenZeroElse(hn::Eq(m_new, neg_inf), m_new);
    const VF alpha = ExpNonPositive(df, hn::Sub(m_old, m_use[v]));
    hn::Store(alpha, df, s.alpha + v * L);
    hn::Store(m_new, df, s.m + v * L);
    lsum[v] = hn::Mul(hn::Load(df, s.l + v * L), alpha);
  }
  for (int n = 0; n < kTileKeys; ++n) {
    const float* row = s.s + static_cast<std::size_t>(n) * RP;
    float* prow = s.p + static_cast<std::size_t>(n) * RP;
    for (int v = 0; v < NV; ++v) {
      const VF pv = ExpNonPositive(df, hn::Sub(hn::Load(df, row + v * L), m_use[v]));
      hn::Store(pv, df, prow + v * L);
      lsum[v] = hn::Add(lsum[v], pv);
    }
  }
  for (int v = 0; v < NV; ++v) hn::Store(lsum[v], df, s.l + v * L);
  (void)g;
}

// Writes the item's rows: normalised output (and the log-sum-exp when asked), or the
// unnormalised partial for a merge.
HWY_INLINE void FinishItem(const LayerCtx& c, const WorkItem& it, const ItemGeometry& g, const PartialView& part,
                           Scratch& s) {
  const int D = c.value_size();
  for (int r = 0; r < g.rows; ++r) {
    const int token = it.token_begin + r / g.heads;
    const int head = it.head_begin + r % g.heads;
    const float* o = s.o + static_cast<std::size_t>(r) * static_cast<std::size_t>(D);
    if (it.partial >= 0) {
      float* po = part.o + static_cast<std::size_t>(r) * static_cast<std::size_t>(D);
      for (int d = 0; d < D; ++d) po[d] = o[d] * s.v_scale;
      part.m[r] = s.m[r];
      part.l[r] = s.l[r];
      continue;
    }
    // Normalise; a sink adds exp(sink) to the denominator only.
    const float m = s.m[r], l = s.l[r];
    float factor = l > 0.0f ? s.v_scale / l : 0.0f;
    float lse = l > 0.0f ? m + std::log(l) : -HUGE_VALF;
    if (c.sinks) {
      const float sink = c.sinks[head];
      const float m2 = l > 0.0f ? std::max(m, sink) : sink;
      const float w = l > 0.0f ? std::exp(m - m2) : 0.0f;
      factor = w * s.v_scale / (l * w + std::exp(sink - m2));
      lse = m2 + std::log(l * w + std::exp(sink - m2));
    }
    if (c.lse) c.lse[token * c.lse_stride + head] = lse;
    const std::int64_t base = token * c.o_stride[0] + head * c.o_stride[1];
    switch (c.out_type) {
      case ScalarType::f32: {
        float* out = reinterpret_cast<float*>(c.out) + base;
        for (int d = 0; d < D; ++d) out[d] = o[d] * factor;
        break;
      }
      case ScalarType::bf16: {
        auto* out = reinterpret_cast<std::uint16_t*>(c.out) + base;
        for (int d = 0; d < D; ++d) out[d] = float_to_bf16(o[d] * factor);
        break;
      }
      default: {
        auto* out = reinterpret_cast<std::uint16_t*>(c.out) + base;
        for (int d = 0; d < D; ++d) out[d] = float_to_half(o[d] * factor);
        break;
      }
    }
  }
}

// Queries row-major [R][D] (fp32 or bf16 bits), zero-padded to R rows: the few-row layout.
template <int R>
HWY_INLINE void PackQueryRows(const LayerCtx& c, const WorkItem& it, const ItemGeometry& g, Scratch& s, bool bf16) {
  for (int r = 0; r < R; ++r)
    for (int d = 0; d < c.head_size; ++d) {
      const std::size_t at = static_cast<std::size_t>(r) * static_cast<std::size_t>(c.head_size) + d;
      const int token = it.token_begin + r / g.heads, head = it.head_begin + r % g.heads;
      if (bf16)
        reinterpret_cast<std::uint16_t*>(s.qp)[at] = r < g.rows ? QueryBits(c, token, head, d) : 0;
      else
        s.qp[at] = r < g.rows ? QueryElement(c, token, head, d) : 0.0f;
    }
}

#if HWY_TARGET == HWY_AVX3
// ---------------------------------------------------------------------------------------
// Few rows (decode): dims across lanes. Each (key, row) dot product accumulates in its own
// vector; 16 of them are summed at once by a transpose-add tree (45 shuffles/adds), so a
// K row is loaded once for all rows and no lane is wasted on padding rows.

// Lane i of the result is the sum of the lanes of v[i].
HWY_INLINE __m512 ReduceAdd16(const __m512* v) {
  // The tree leaves u[{0,8,4,12}[L/4] + {0,2,1,3}[L%4]] in lane L; that index map is its
  // own inverse, so feeding it u[m] = v[map(m)] puts lane i at i with no final permute.
  constexpr int kMap[16] = {0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15};
  __m512 w[8], x[4], y[2];
  for (int i = 0; i < 8; ++i) {
    const __m512 a = v[kMap[i]], b = v[kMap[i + 8]];
    w[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
  }
  for (int i = 0; i < 4; ++i)
    x[i] = _mm512_add_ps(_mm512_shuffle_f32x4(w[i], w[i + 4], 0x88), _mm512_shuffle_f32x4(w[i], w[i + 4], 0xDD));
  for (int i = 0; i < 2; ++i)
    y[i] = _mm512_add_ps(_mm512_shuffle_ps(x[i], x[i + 2], 0x44), _mm512_shuffle_ps(x[i], x[i + 2], 0xEE));
  return _mm512_add_ps(_mm512_shuffle_ps(y[0], y[1], 0x88), _mm512_shuffle_ps(y[0], y[1], 0xDD));
}

// Few-row logits stay in the reduction's layout: lane k*R + r of vector kg/KB holds key
// kg + k of row r, i.e. S[key][row] with row stride R, all 16 lanes useful.
template <int R>
HWY_INLINE void StoreFewRowLogits(__m512 z, int kg, Scratch& s) {
  _mm512_store_ps(s.s + static_cast<std::size_t>(kg) * R, z);
}

// op over the lanes of each row (lanes r, r+R, r+2R, ...), the result in all of them.
template <int R, class Op>
HWY_INLINE __m512 RowReduce(__m512 v, Op op) {
  for (int sh = R; sh < 16; sh *= 2) {
    const __m512i rot = _mm512_and_si512(_mm512_add_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3,
                                                                            2, 1, 0),
                                                          _mm512_set1_epi32(sh)),
                                         _mm512_set1_epi32(15));
    v = op(v, _mm512_permutexvar_ps(rot, v));
  }
  return v;
}

// The online softmax of one tile in the few-row layout: S (scratch s) becomes P (scratch
// p, same layout), and m, l, alpha of rows 0..R-1 are updated. Lanes replicate each row's
// state R apart, so exp runs on 16 useful lanes.
template <int R>
HWY_INLINE void SoftmaxFewRows(const LayerCtx& c, const KeyTile& t, const float* row_pos, const float* row_slope,
                               bool need_mask, Scratch& s) {
  constexpr int KB = 16 / R;
  constexpr int NZ = kTileKeys / KB;
  const int nz = std::min(NZ, (t.nk + KB - 1) / KB);  // vectors holding real keys (later steps read no others)
  const DF df;
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i row_idx = _mm512_and_si512(lane, _mm512_set1_epi32(R - 1));
  const __m512 key_in_vec = _mm512_cvtepi32_ps(_mm512_srli_epi32(lane, __builtin_ctz(R)));
  const __m512 qpos = _mm512_permutexvar_ps(row_idx, _mm512_loadu_ps(row_pos));
  const __m512 slope = _mm512_permutexvar_ps(row_idx, _mm512_loadu_ps(row_slope));
  const __m512 neg_inf = _mm512_set1_ps(-HUGE_VALF);
  const __m512 win = _mm512_set1_ps(static_cast<float>(c.window));
  const bool cap = c.soft_cap > 0.0f;
  __m512 tile_max = neg_inf;
  for (int i = 0; i < nz; ++i) {
    __m512 x = _mm512_load_ps(s.s + i * 16);
    const __m512 local = _mm512_add_ps(key_in_vec, _mm512_set1_ps(static_cast<float>(i * KB)));
    const __m512 kp = _mm512_add_ps(local, _mm512_set1_ps(static_cast<float>(t.key0)));
    if (cap) {
      const VF xv{x};
      x = hn::Mul(hn::Set(df, c.soft_cap), hn::Tanh(df, hn::Mul(xv, hn::Set(df, 1.0f / c.soft_cap)))).raw;
    }
    if (c.alibi) x = _mm512_fmadd_ps(slope, _mm512_sub_ps(kp, qpos), x);
    if (need_mask) {
      __mmask16 ok = _mm512_cmp_ps_mask(local, _mm512_set1_ps(static_cast<float>(t.nk)), _CMP_LT_OQ);
      if (c.causal) ok &= _mm512_cmp_ps_mask(kp, qpos, _CMP_LE_OQ);
      if (c.window >= 0) {
        ok &= _mm512_cmp_ps_mask(_mm512_sub_ps(qpos, kp), win, _CMP_LE_OQ);
        if (!c.causal) ok &= _mm512_cmp_ps_mask(_mm512_sub_ps(kp, qpos), win, _CMP_LE_OQ);
      }
      x = _mm512_mask_blend_ps(ok, neg_inf, x);
    }
    _mm512_store_ps(s.s + i * 16, x);
    tile_max = _mm512_max_ps(tile_max, x);
  }
  tile_max = RowReduce<R>(tile_max, [](__m512 a, __m512 b) { return _mm512_max_ps(a, b); });
  const __m512 m_old = _mm512_permutexvar_ps(row_idx, _mm512_loadu_ps(s.m));
  const __m512 m_new = _mm512_max_ps(m_old, tile_max);
  const __m512 m_use = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(m_new, neg_inf, _CMP_EQ_OQ), m_new, _mm512_setzero_ps());
  const __m512 alpha = ExpNonPositive(df, VF{_mm512_sub_ps(m_old, m_use)}).raw;
  __m512 lsum = _mm512_setzero_ps();
  for (int i = 0; i < nz; ++i) {
    const __m512 p = ExpNonPositive(df, VF{_mm512_sub_ps(_mm512_load_ps(s.s + i * 16), m_use)}).raw;
    _mm512_store_ps(s.p + i * 16, p);
    lsum = _mm512_add_ps(lsum, p);
  }
  lsum = RowReduce<R>(lsum, [](__m512 a, __m512 b) { return _mm512_add_ps(a, b); });
  const __m512 l_new = _mm512_fmadd_ps(_mm512_permutexvar_ps(row_idx, _mm512_loadu_ps(s.l)), alpha, lsum);
  const auto rows = static_cast<__mmask16>((1u << R) - 1u);  // lane r < R is row r
  _mm512_mask_storeu_ps(s.alpha, rows, alpha);
  _mm512_mask_storeu_ps(s.m, rows, m_new);
  _mm512_mask_storeu_ps(s.l, rows, l_new);
}
#endif

#if !ATTNSEL_BF16_VARIANT
// ---------------------------------------------------------------------------------------
// fp32 path.

template <int NV>
HWY_INLINE void PackQueryF32(const LayerCtx& c, const WorkItem& it, const ItemGeometry& g, Scratch& s) {
  const std::size_t RP = static_cast<std::size_t>(g.rp);
  for (int d = 0; d < c.head_size; ++d) {
    float* col = s.qp + static_cast<std::size_t>(d) * RP;
    for (int r = 0; r < g.rp; ++r)
      col[r] = r < g.rows ? QueryElement(c, it.token_begin + r / g.heads, it.head_begin + r % g.heads, d) : 0.0f;
  }
}

// K rows of the tile as fp32 pointers (converted into scratch unless the cache is fp32).
template <ScalarType K>
HWY_INLINE void ConvertTileF32(const DF df, const KeyTile& t, int D, const std::uint8_t* const* rows, float* dst,
                               const float** out_rows) {
  const std::size_t L = hn::Lanes(df);
  for (int n = 0; n < kTileKeys; ++n) {
    if constexpr (K == ScalarType::f32) {
      out_rows[n] = reinterpret_cast<const float*>(rows[n]);
    } else {
      float* row = dst + static_cast<std::size_t>(n) * static_cast<std::size_t>(D);
      if (n < t.nk) {
        for (int d = 0; d < D; d += static_cast<int>(L)) hn::Store(Kv<K>::Load(df, rows[n] + d * Kv<K>::kBytes), df, row + d);
      } else {
        for (int d = 0; d < D; d += static_cast<int>(L)) hn::Store(hn::Zero(df), df, row + d);
      }
      out_rows[n] = row;
    }
  }
}

template <int NV>
HWY_INLINE void QkF32(const LayerCtx& c, const KeyTile& t, const float* const* krow, Scratch& s) {
  const DF df;
  const std::size_t L = hn::Lanes(df);
  const std::size_t RP = NV * L;
  constexpr int KG = NV >= 16 ? 1 : 16 / NV;
  const VF scale = hn::Set(df, s.qk_scale);
  for (int kg = 0; kg < t.nk; kg += KG) {
    VF acc[KG][NV];
    for (int k = 0; k < KG; ++k)
      for (int v = 0; v < NV; ++v) acc[k][v] = hn::Zero(df);
    const float* kr[KG];
    for (int k = 0; k < KG; ++k) kr[k] = krow[kg + k < kTileKeys ? kg + k : kTileKeys - 1];
    for (int d = 0; d < c.head_size; ++d) {
      VF q[NV];
      for (int v = 0; v < NV; ++v) q[v] = hn::Load(df, s.qp + static_cast<std::size_t>(d) * RP + v * L);
      for (int k = 0; k < KG; ++k) {
        const VF kb = hn::Set(df, kr[k][d]);
        for (int v = 0; v < NV; ++v) acc[k][v] = hn::MulAdd(q[v], kb, acc[k][v]);
      }
    }
    for (int k = 0; k < KG && kg + k < kTileKeys; ++k)
      for (int v = 0; v < NV; ++v)
        hn::Store(hn::Mul(acc[k][v], scale), df, s.s + static_cast<std::size_t>(kg + k) * RP + v * L);
  }
}

#if HWY_TARGET == HWY_AVX3
template <ScalarType K, int R>
HWY_INLINE void QkF32FewRows(const LayerCtx& c, const KeyTile& t, Scratch& s) {
  constexpr int KB = 16 / R;
  const DF df;
  const int D = c.head_size;
  const __m512 scale = _mm512_set1_ps(s.qk_scale);
  for (int kg = 0; kg < t.nk; kg += KB) {
    __m512 acc[16];
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
    for (int d = 0; d < D; d += 16) {
      __m512 kv[KB];
      for (int k = 0; k < KB; ++k) kv[k] = Kv<K>::Load(df, t.k[kg + k] + d * Kv<K>::kBytes).raw;
      for (int r = 0; r < R; ++r) {
        const __m512 qv = _mm512_load_ps(s.qp + static_cast<std::size_t>(r) * D + d);
        for (int k = 0; k < KB; ++k) acc[k * R + r] = _mm512_fmadd_ps(qv, kv[k], acc[k * R + r]);
      }
    }
    StoreFewRowLogits<R>(_mm512_mul_ps(ReduceAdd16(acc), scale), kg, s);
    if (s.pf) s.pf->issue();
  }
}
#endif

// O[rb..rb+NR)[chunks cb..cb+NC) = alpha * O + P^T · V for one block of accumulators.
template <int NC, int NR = 4>
HWY_INLINE void PvBlockF32(const DF df, int rb, int cb, int nk, std::size_t RP, int D, const float* const* vrow,
                           Scratch& s) {
  const std::size_t L = hn::Lanes(df);
  VF acc[NR][NC];
  for (int r = 0; r < NR; ++r) {
    const VF a = hn::Set(df, s.alpha[rb + r]);
    for (int j = 0; j < NC; ++j)
      acc[r][j] = hn::Mul(a, hn::Load(df, s.o + static_cast<std::size_t>(rb + r) * D + (cb + j) * L));
  }
  for (int n = 0; n < nk; ++n) {
    if (s.pf) s.pf->issue();
    VF vv[NC];
    for (int j = 0; j < NC; ++j) vv[j] = hn::LoadU(df, vrow[n] + (cb + j) * L);
    const float* prow = s.p + static_cast<std::size_t>(n) * RP + rb;
    for (int r = 0; r < NR; ++r) {
      const VF pb = hn::Set(df, prow[r]);
      for (int j = 0; j < NC; ++j) acc[r][j] = hn::MulAdd(pb, vv[j], acc[r][j]);
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < NC; ++j) hn::Store(acc[r][j], df, s.o + static_cast<std::size_t>(rb + r) * D + (cb + j) * L);
}

// rp: the row stride of P (padded rows for the wide layout, R for the few-row layout).
template <int NR = 4>
HWY_INLINE void PvF32(const ItemGeometry& g, int D, int nk, std::size_t rp, const float* const* vrow, Scratch& s) {
  const DF df;
  const int L = static_cast<int>(hn::Lanes(df));
  const int chunks = D / L;
  const int rows = (g.rows + NR - 1) / NR * NR;
  for (int rb = 0; rb < rows; rb += NR) {
    int cb = 0;
    for (; cb + 4 <= chunks; cb += 4) PvBlockF32<4, NR>(df, rb, cb, nk, rp, D, vrow, s);
    for (; cb < chunks; ++cb) PvBlockF32<1, NR>(df, rb, cb, nk, rp, D, vrow, s);
  }
}

#else
// ---------------------------------------------------------------------------------------
// AVX-512-BF16 path (compiled only for the AVX3 target, with avx512bf16 enabled).

HWY_INLINE __m512 Dot(__m512 acc, __m512i a, __m512i b) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(a), reinterpret_cast<__m512bh>(b));
}
HWY_INLINE __m512i Broadcast32(const void* p) {
  std::int32_t x;
  std::memcpy(&x, p, 4);
  return _mm512_set1_epi32(x);
}

template <int NV>
HWY_INLINE void PackQueryBf16(const LayerCtx& c, const WorkItem& it, const ItemGeometry& g, Scratch& s) {
  auto* qp = reinterpret_cast<std::uint32_t*>(s.qp);
  const std::size_t RP = static_cast<std::size_t>(g.rp);
  for (int dp = 0; dp < c.head_size / 2; ++dp) {
    std::uint32_t* col = qp + static_cast<std::size_t>(dp) * RP;
    for (int r = 0; r < g.rp; ++r) {
      if (r >= g.rows) {
        col[r] = 0;
        continue;
      }
      const int token = it.token_begin + r / g.heads, head = it.head_begin + r % g.heads;
      col[r] = static_cast<std::uint32_t>(QueryBits(c, token, head, 2 * dp)) |
               (static_cast<std::uint32_t>(QueryBits(c, token, head, 2 * dp + 1)) << 16);
    }
  }
}

// ---- fp8 -> bfloat16 in registers -------------------------------------------------------
// Every fp8 value (e4m3 and e5m2, NaN and infinities included) is exactly a bfloat16. Its
// 7 magnitude bits index two 128-entry byte tables, one vpermi2b each: the low and the high
// byte of that bfloat16 (e4m3 as value / 256, as Kv<e4m3> reads it; the driver folds the
// 256 into the scales); the sign bit is put back on the high byte and an in-lane byte
// interleave makes the words. A vpermb of the 64 input bytes first puts them in the order
// that makes the interleaves come out in natural order. 64 elements cost 6 instructions
// (the widening through fp32 and back took ~20). Decode items' keys skip that permute
// (their queries are packed in the order the interleaves leave the key dims:
// Fp8KeyWords), and V pairs skip it everywhere (dims transposed until the item ends:
// Fp8PairsToBf16Transposed). vpermb/vpermi2b are AVX512-VBMI, which
// this region is not compiled for (a CPU with AVX-512-BF16 but no VBMI would fault on
// anything the compiler chose to emit): they are written as asm, and fp8 items reach this
// variant only on CPUs that have VBMI (ProcessItem checks).
#include "kernels/attention/cpu/fp8_bf16_tables-inl.h"

// vpermb: byte i of the result is x[idx[i] % 64].
HWY_INLINE __m512i PermuteBytes(__m512i idx, __m512i x) {
  __m512i r;
  asm("vpermb %2, %1, %0" : "=v"(r) : "v"(idx), "v"(x));
  return r;
}
// vpermi2b: byte i of the result is entry idx[i] % 128 of the 128-byte table (t0, t1).
HWY_INLINE __m512i Lookup128(__m512i idx, __m512i t0, __m512i t1) {
  asm("vpermi2b %2, %1, %0" : "+v"(idx) : "v"(t0), "v"(t1));
  return idx;
}

// 64 fp8 bytes, already in `perm` order -> the low and high bytes of their bfloat16s.
HWY_INLINE void Fp8Bytes(const Fp8Bf16& t, __m512i x, __m512i& lo, __m512i& hi) {
  lo = Lookup128(x, t.lo0, t.lo1);
  hi = _mm512_ternarylogic_epi32(Lookup128(x, t.hi0, t.hi1), x, t.sign, 0xF8);  // hi | (x & 0x80)
}

HWY_INLINE __m512i LoadBytes(const std::uint8_t* p, int n) {
  return n >= 64 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8((__mmask64{1} << n) - 1, p);
}

// n (<= 64, a multiple of 16) fp8 values -> bfloat16 words 0-31 (w0) and 32-63 (w1), zeros
// past n.
HWY_INLINE void Fp8ToBf16(const Fp8Bf16& t, const std::uint8_t* p, int n, __m512i& w0, __m512i& w1) {
  __m512i lo, hi;
  Fp8Bytes(t, PermuteBytes(t.perm_k, LoadBytes(p, n)), lo, hi);
  w0 = _mm512_unpacklo_epi8(lo, hi);
  w1 = _mm512_unpackhi_epi8(lo, hi);
}

// Two keys' n fp8 values -> (a[d], b[d]) bfloat16 pairs for d in 16j .. 16j + 15, j < 4.
HWY_INLINE void Fp8PairsToBf16(const Fp8Bf16& t, const std::uint8_t* a, const std::uint8_t* b, int n,
                               __m512i (&out)[4]) {
  __m512i la, ha, lb, hb;
  Fp8Bytes(t, PermuteBytes(t.perm_v, LoadBytes(a, n)), la, ha);
  Fp8Bytes(t, PermuteBytes(t.perm_v, LoadBytes(b, n)), lb, hb);
  const __m512i a0 = _mm512_unpacklo_epi8(la, ha), a1 = _mm512_unpackhi_epi8(la, ha);
  const __m512i b0 = _mm512_unpacklo_epi8(lb, hb), b1 = _mm512_unpackhi_epi8(lb, hb);
  out[0] = _mm512_unpacklo_epi16(a0, b0);
  out[1] = _mm512_unpackhi_epi16(a0, b0);
  out[2] = _mm512_unpacklo_epi16(a1, b1);
  out[3] = _mm512_unpackhi_epi16(a1, b1);
}

// Two keys' 64 fp8 values -> their (a, b) bfloat16 pairs with no input permute: the raw
// bytes are interleaved first (a0 b0 a1 b1 ...), so each table lookup yields the low (or
// high) bytes of both keys at once and one more byte interleave makes (a, b) dwords.
// Dword 16i + 4L + j of the result (out[i], lane L, j < 4) holds dim 16L + 4i + j: the
// chunk's 4 × 4 groups of 4 dims transposed, an order the P·V accumulators keep until
// Fp8OutputToNaturalOrder. 12 instructions per 64 pairs (the natural order took 16).
HWY_INLINE void Fp8PairsToBf16Transposed(const Fp8Bf16& t, const std::uint8_t* a, const std::uint8_t* b,
                                         __m512i (&out)[4]) {
  const __m512i va = _mm512_loadu_si512(a), vb = _mm512_loadu_si512(b);
  const __m512i x[2] = {_mm512_unpacklo_epi8(va, vb), _mm512_unpackhi_epi8(va, vb)};
  for (int h = 0; h < 2; ++h) {
    __m512i lo, hi;
    Fp8Bytes(t, x[h], lo, hi);
    out[2 * h] = _mm512_unpacklo_epi8(lo, hi);
    out[2 * h + 1] = _mm512_unpackhi_epi8(lo, hi);
  }
}

// Puts each full 64-dim chunk of the first `rows` accumulator rows back in natural dim
// order (the transposition of Fp8PairsToBf16Transposed is its own inverse): once per item.
HWY_INLINE void Fp8OutputToNaturalOrder(int rows, int D, Scratch& s) {
  for (int r = 0; r < rows; ++r)
    for (int d = 0; d + 64 <= D; d += 64) {
      float* o = s.o + static_cast<std::size_t>(r) * D + d;
      const __m512 a = _mm512_load_ps(o), b = _mm512_load_ps(o + 16), c = _mm512_load_ps(o + 32),
                   e = _mm512_load_ps(o + 48);
      // 4 × 4 transpose of 128-bit lanes.
      const __m512 ab0 = _mm512_shuffle_f32x4(a, b, 0x44), ab1 = _mm512_shuffle_f32x4(a, b, 0xEE);
      const __m512 ce0 = _mm512_shuffle_f32x4(c, e, 0x44), ce1 = _mm512_shuffle_f32x4(c, e, 0xEE);
      _mm512_store_ps(o, _mm512_shuffle_f32x4(ab0, ce0, 0x88));
      _mm512_store_ps(o + 16, _mm512_shuffle_f32x4(ab0, ce0, 0xDD));
      _mm512_store_ps(o + 32, _mm512_shuffle_f32x4(ab1, ce1, 0x88));
      _mm512_store_ps(o + 48, _mm512_shuffle_f32x4(ab1, ce1, 0xDD));
    }
}

// K rows as bf16: the cache itself when it is bf16, else converted (exactly) into scratch.
template <ScalarType K>
HWY_INLINE void ConvertKeysBf16(const KeyTile& t, int D, const std::uint16_t** out_rows, Scratch& s) {
  for (int n = 0; n < kTileKeys; ++n) {
    if constexpr (K == ScalarType::bf16) {
      out_rows[n] = reinterpret_cast<const std::uint16_t*>(t.k[n]);
    } else {
      const Fp8Bf16& cv = Fp8Bf16Tables<K>();
      auto* row = reinterpret_cast<std::uint16_t*>(s.kf) + static_cast<std::size_t>(n) * D;
      for (int d = 0; d < D; d += 64) {
        const int m = std::min(64, D - d);
        __m512i w0, w1;
        Fp8ToBf16(cv, t.k[n] + d, m, w0, w1);
        const __mmask32 m0 = m >= 32 ? ~__mmask32{0} : (__mmask32{1} << m) - 1;
        const __mmask32 m1 = m == 64 ? ~__mmask32{0} : m > 32 ? (__mmask32{1} << (m - 32)) - 1 : 0;
        _mm512_mask_storeu_epi16(row + d, m0, w0);
        _mm512_mask_storeu_epi16(row + d + 32, m1, w1);
      }
      out_rows[n] = row;
    }
  }
}

// V tile as bf16 pairs: vp[pair][d] = (V[2 pair][d], V[2 pair + 1][d]).
template <ScalarType K>
HWY_INLINE void PackValuesBf16(const KeyTile& t, int D, Scratch& s) {
  const __m512i idx = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6, 37,
                                       5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
  auto* vp = reinterpret_cast<std::uint32_t*>(s.vf);
  const int pairs = (t.nk + 1) / 2;
  for (int pr = 0; pr < pairs; ++pr) {
    if (s.pf) s.pf->issue();
    if constexpr (K == ScalarType::bf16) {
      for (int d = 0; d < D; d += 16) {
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.v[2 * pr] + 2 * d));
        const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.v[2 * pr + 1] + 2 * d));
        const __m512i inter = _mm512_permutex2var_epi16(_mm512_castsi256_si512(a), idx, _mm512_castsi256_si512(b));
        _mm512_store_si512(vp + static_cast<std::size_t>(pr) * D + d, inter);
      }
    } else {
      const Fp8Bf16& cv = Fp8Bf16Tables<K>();  // (a static: initialised once)
      int d = 0;
      for (; d + 64 <= D; d += 64) {  // full chunks: transposed order
        __m512i out[4];
        Fp8PairsToBf16Transposed(cv, t.v[2 * pr] + d, t.v[2 * pr + 1] + d, out);
        for (int j = 0; j < 4; ++j) _mm512_store_si512(vp + static_cast<std::size_t>(pr) * D + d + 16 * j, out[j]);
      }
      if (d < D) {  // a 16-48 dim tail: natural order
        const int m = D - d;
        __m512i out[4];
        Fp8PairsToBf16(cv, t.v[2 * pr] + d, t.v[2 * pr + 1] + d, m, out);
        for (int j = 0; j < m / 16; ++j) _mm512_store_si512(vp + static_cast<std::size_t>(pr) * D + d + 16 * j, out[j]);
      }
    }
  }
}

template <int NV>
HWY_INLINE void QkBf16(const LayerCtx& c, const KeyTile& t, const std::uint16_t* const* krow, Scratch& s) {
  constexpr std::size_t RP = NV * 16;
  constexpr int KG = 16 / NV;
  const auto* qp = reinterpret_cast<const std::uint32_t*>(s.qp);
  const __m512 scale = _mm512_set1_ps(s.qk_scale);
  for (int kg = 0; kg < t.nk; kg += KG) {
    __m512 acc[KG][NV];
    for (int k = 0; k < KG; ++k)
      for (int v = 0; v < NV; ++v) acc[k][v] = _mm512_setzero_ps();
    const std::uint16_t* kr[KG];
    for (int k = 0; k < KG; ++k) kr[k] = krow[kg + k < kTileKeys ? kg + k : kTileKeys - 1];
    for (int dp = 0; dp < c.head_size / 2; ++dp) {
      __m512i q[NV];
      for (int v = 0; v < NV; ++v) q[v] = _mm512_load_si512(qp + static_cast<std::size_t>(dp) * RP + v * 16);
      for (int k = 0; k < KG; ++k) {
        const __m512i kb = Broadcast32(kr[k] + 2 * dp);
        for (int v = 0; v < NV; ++v) acc[k][v] = Dot(acc[k][v], q[v], kb);
      }
    }
    for (int k = 0; k < KG && kg + k < kTileKeys; ++k)
      for (int v = 0; v < NV; ++v)
        _mm512_store_ps(s.s + static_cast<std::size_t>(kg + k) * RP + v * 16, _mm512_mul_ps(acc[k][v], scale));
  }
}

template <int R>
HWY_INLINE void QkBf16FewRows(const LayerCtx& c, const KeyTile& t, const std::uint16_t* const* krow, Scratch& s) {
  constexpr int KB = 16 / R;
  const int D = c.head_size;
  const auto* q = reinterpret_cast<const std::uint16_t*>(s.qp);
  const __m512 scale = _mm512_set1_ps(s.qk_scale);
  for (int kg = 0; kg < t.nk; kg += KB) {
    __m512 acc[16];
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
    int d = 0;
    for (; d + 32 <= D; d += 32) {
      if (s.pf) s.pf->issue();  // fine-grained: many small issues keep the misses flowing
      __m512i kv[KB];
      for (int k = 0; k < KB; ++k) kv[k] = _mm512_loadu_si512(krow[kg + k] + d);
      for (int r = 0; r < R; ++r) {
        const __m512i qv = _mm512_loadu_si512(q + static_cast<std::size_t>(r) * D + d);
        for (int k = 0; k < KB; ++k) acc[k * R + r] = Dot(acc[k * R + r], qv, kv[k]);
      }
    }
    if (d < D) {  // head sizes are multiples of 16: a half-vector tail
      const __mmask32 m = 0xFFFFu;
      __m512i kv[KB];
      for (int k = 0; k < KB; ++k) kv[k] = _mm512_maskz_loadu_epi16(m, krow[kg + k] + d);
      for (int r = 0; r < R; ++r) {
        const __m512i qv = _mm512_maskz_loadu_epi16(m, q + static_cast<std::size_t>(r) * D + d);
        for (int k = 0; k < KB; ++k) acc[k * R + r] = Dot(acc[k * R + r], qv, kv[k]);
      }
    }
    StoreFewRowLogits<R>(_mm512_mul_ps(ReduceAdd16(acc), scale), kg, s);
    if (s.pf) s.pf->issue();
  }
}

// The order in which Fp8KeyWords leaves the dims of a 64-dim chunk: word 32h + 8L + j of
// the chunk (h: which of the two vectors, L: 128-bit lane, j < 8) holds dim 16L + 8h + j.
// Q·Kᵀ sums over the dims, so the queries are packed in that order instead of the keys
// being permuted into natural order (one vpermb per 64 dims saved).
HWY_INLINE int Fp8KeyWordDim(int w) { return 16 * ((w % 32) / 8) + 8 * (w / 32) + w % 8; }

// Row stride (bf16 words) of the queries packed for an fp8 cache: D rounded up to 64.
HWY_INLINE int Fp8QueryStride(int D) { return (D + 63) / 64 * 64; }

// Queries as bf16 [R][Fp8QueryStride(D)] in the Fp8KeyWordDim order of each 64-dim chunk,
// zeros past D and for padding rows (the queries' words occupy at most half of s.qp).
template <int R>
HWY_INLINE void PackQueryRowsFp8(const LayerCtx& c, const WorkItem& it, const ItemGeometry& g, Scratch& s) {
  const int D = c.head_size, DP = Fp8QueryStride(D);
  auto* q = reinterpret_cast<std::uint16_t*>(s.qp);
  for (int r = 0; r < R; ++r)
    for (int at = 0; at < DP; ++at) {
      const int d = at / 64 * 64 + Fp8KeyWordDim(at % 64);
      const int token = it.token_begin + r / g.heads, head = it.head_begin + r % g.heads;
      q[static_cast<std::size_t>(r) * DP + at] = r < g.rows && d < D ? QueryBits(c, token, head, d) : 0;
    }
}

// n (<= 64) fp8 values of a K row -> bfloat16 words in Fp8KeyWordDim order, zeros past n:
// two table lookups, the sign, two in-lane byte interleaves.
HWY_INLINE void Fp8KeyWords(const Fp8Bf16& t, const std::uint8_t* p, int n, __m512i& w0, __m512i& w1) {
  __m512i lo, hi;
  Fp8Bytes(t, LoadBytes(p, n), lo, hi);
  w0 = _mm512_unpacklo_epi8(lo, hi);
  w1 = _mm512_unpackhi_epi8(lo, hi);
}

// QkBf16FewRows on an fp8 cache: each K row is widened in registers (Fp8KeyWords), 64
// dims at a time, and used at once by every row against queries packed in the same dim
// order (PackQueryRowsFp8); nothing goes through scratch. A tail of 16-48 dims is a masked
// load: its zeros widen to +0 and meet zero queries.
template <ScalarType K, int R>
HWY_INLINE void QkFp8FewRows(const LayerCtx& c, const KeyTile& t, Scratch& s) {
  constexpr int KB = 16 / R;
  const int D = c.head_size, DP = Fp8QueryStride(D);
  const Fp8Bf16& cv = Fp8Bf16Tables<K>();
  const auto* q = reinterpret_cast<const std::uint16_t*>(s.qp);
  const __m512 scale = _mm512_set1_ps(s.qk_scale);
  for (int kg = 0; kg < t.nk; kg += KB) {
    __m512 acc[16];
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
    for (int d = 0; d < D; d += 64) {
      if (s.pf) s.pf->issue();
      const int m = std::min(64, D - d);
      if constexpr (R <= 4) {  // the rows' queries stay in registers while the keys stream
        __m512i qv[R][2];
        for (int r = 0; r < R; ++r) {
          const std::uint16_t* qr = q + static_cast<std::size_t>(r) * DP + d;
          qv[r][0] = _mm512_load_si512(qr);
          qv[r][1] = _mm512_load_si512(qr + 32);
        }
        for (int k = 0; k < KB; ++k) {
          __m512i w0, w1;
          Fp8KeyWords(cv, t.k[kg + k] + d, m, w0, w1);
          for (int r = 0; r < R; ++r) {
            acc[k * R + r] = Dot(acc[k * R + r], qv[r][0], w0);
            acc[k * R + r] = Dot(acc[k * R + r], qv[r][1], w1);
          }
        }
      } else {  // 8 rows, 2 keys: the keys stay in registers while the rows stream
        __m512i kw[KB][2];
        for (int k = 0; k < KB; ++k) Fp8KeyWords(cv, t.k[kg + k] + d, m, kw[k][0], kw[k][1]);
        for (int r = 0; r < R; ++r) {
          const std::uint16_t* qr = q + static_cast<std::size_t>(r) * DP + d;
          const __m512i q0 = _mm512_load_si512(qr), q1 = _mm512_load_si512(qr + 32);
          for (int k = 0; k < KB; ++k) {
            acc[k * R + r] = Dot(acc[k * R + r], q0, kw[k][0]);
            acc[k * R + r] = Dot(acc[k * R + r], q1, kw[k][1]);
          }
        }
      }
    }
    StoreFewRowLogits<R>(_mm512_mul_ps(ReduceAdd16(acc), scale), kg, s);
    if (s.pf) s.pf->issue();
  }
}

// P^T (fp32, rows across lanes) -> bf16 pairs of consecutive keys per row.
template <int NV>
HWY_INLINE void PackProbabilitiesBf16(int nk, Scratch& s) {
  constexpr std::size_t RP = NV * 16;
  const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21,
                                       5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const int pairs = (nk + 1) / 2;
  for (int pr = 0; pr < pairs; ++pr)
    for (int v = 0; v < NV; ++v) {
      const __m512 a = _mm512_load_ps(s.p + static_cast<std::size_t>(2 * pr) * RP + v * 16);
      const __m512 b = _mm512_load_ps(s.p + static_cast<std::size_t>(2 * pr + 1) * RP + v * 16);
      const __m512i both = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(b, a));  // low: a, high: b
      _mm512_store_si512(s.pp + static_cast<std::size_t>(pr) * RP + v * 16, _mm512_permutexvar_epi16(idx, both));
    }
}

// Few-row P (S[key][row] layout) -> bf16 pairs pp[pair][row] (row stride R): one convert
// and one word permutation per vector of KB keys × R rows.
template <int R>
HWY_INLINE void PackProbabilitiesFewRows(int nk, Scratch& s) {
  constexpr int KB = 16 / R;
  HWY_ALIGN std::uint16_t idx_words[16];
  for (int w = 0; w < 16; ++w) {
    const int j = w / (2 * R), r = (w / 2) % R, which = w % 2;
    idx_words[w] = static_cast<std::uint16_t>((2 * j + which) * R + r);
  }
  const __m256i idx = _mm256_load_si256(reinterpret_cast<const __m256i*>(idx_words));
  for (int i = 0; i * KB < nk; ++i) {
    const __m256i b = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_load_ps(s.p + i * 16)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(s.pp + i * 8), _mm256_permutexvar_epi16(idx, b));
  }
}

template <int NC, int NR = 4>
HWY_INLINE void PvBlockBf16(int rb, int cb, int pairs, std::size_t RP, int D, Scratch& s) {
  const auto* vp = reinterpret_cast<const std::uint32_t*>(s.vf);
  __m512 acc[NR][NC];
  for (int r = 0; r < NR; ++r) {
    const __m512 a = _mm512_set1_ps(s.alpha[rb + r]);
    for (int j = 0; j < NC; ++j)
      acc[r][j] = _mm512_mul_ps(a, _mm512_load_ps(s.o + static_cast<std::size_t>(rb + r) * D + (cb + j) * 16));
  }
  for (int pr = 0; pr < pairs; ++pr) {
    if (s.pf) s.pf->issue();
    __m512i vv[NC];
    for (int j = 0; j < NC; ++j) vv[j] = _mm512_load_si512(vp + static_cast<std::size_t>(pr) * D + (cb + j) * 16);
    const std::uint32_t* prow = s.pp + static_cast<std::size_t>(pr) * RP + rb;
    for (int r = 0; r < NR; ++r) {
      const __m512i pb = _mm512_set1_epi32(static_cast<int>(prow[r]));
      for (int j = 0; j < NC; ++j) acc[r][j] = Dot(acc[r][j], pb, vv[j]);
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < NC; ++j) _mm512_store_ps(s.o + static_cast<std::size_t>(rb + r) * D + (cb + j) * 16, acc[r][j]);
}

// P·V of a decode item of NR <= 4 rows on an fp8 cache whose head size is a multiple of 64,
// with the V pairs widened inside the loop (no V scratch pass): a 64-dim chunk of a key
// pair widens into exactly the four pair vectors of one 4-chunk accumulator block, in the
// transposed order of Fp8PairsToBf16Transposed. The next pair is widened before the
// current pair's dot products, so the lookups' latency overlaps them (the widening's
// shuffles and the dot products use different pipes). Same sums, in the same order, as
// PackValuesBf16 + PvBf16.
template <ScalarType K, int NR>
HWY_INLINE void PvFp8FewRows(const KeyTile& t, int D, std::size_t rp, Scratch& s) {
  const Fp8Bf16& cv = Fp8Bf16Tables<K>();
  const int pairs = (t.nk + 1) / 2;
  for (int d = 0; d < D; d += 64) {
    __m512 acc[NR][4];
    for (int r = 0; r < NR; ++r) {
      const __m512 a = _mm512_set1_ps(s.alpha[r]);
      for (int j = 0; j < 4; ++j)
        acc[r][j] = _mm512_mul_ps(a, _mm512_load_ps(s.o + static_cast<std::size_t>(r) * D + d + 16 * j));
    }
    __m512i cur[4];
    Fp8PairsToBf16Transposed(cv, t.v[0] + d, t.v[1] + d, cur);
    for (int pr = 0; pr < pairs; ++pr) {
      if (s.pf) s.pf->issue();
      __m512i nxt[4];
      if (pr + 1 < pairs) Fp8PairsToBf16Transposed(cv, t.v[2 * pr + 2] + d, t.v[2 * pr + 3] + d, nxt);
      const std::uint32_t* prow = s.pp + static_cast<std::size_t>(pr) * rp;
      for (int r = 0; r < NR; ++r) {
        const __m512i pb = _mm512_set1_epi32(static_cast<int>(prow[r]));
        for (int j = 0; j < 4; ++j) acc[r][j] = Dot(acc[r][j], pb, cur[j]);
      }
      if (pr + 1 < pairs)
        for (int j = 0; j < 4; ++j) cur[j] = nxt[j];
    }
    for (int r = 0; r < NR; ++r)
      for (int j = 0; j < 4; ++j) _mm512_store_ps(s.o + static_cast<std::size_t>(r) * D + d + 16 * j, acc[r][j]);
  }
}

// NR: rows per accumulator block (fewer than 4 only for items with fewer rows); rp: the
// row stride of the probability pairs.
template <int NR = 4>
HWY_INLINE void PvBf16(const ItemGeometry& g, int D, int nk, std::size_t rp, Scratch& s) {
  const int chunks = D / 16;
  const int pairs = (nk + 1) / 2;
  const int rows = (g.rows + NR - 1) / NR * NR;
  for (int rb = 0; rb < rows; rb += NR) {
    int cb = 0;
    for (; cb + 4 <= chunks; cb += 4) PvBlockBf16<4, NR>(rb, cb, pairs, rp, D, s);
    for (; cb < chunks; ++cb) PvBlockBf16<1, NR>(rb, cb, pairs, rp, D, s);
  }
}

#endif

// ---------------------------------------------------------------------------------------
// One work item, for a KV type and NV row vectors.
// FR > 0: the few-row (decode) form with rows padded to FR; FR == 0: rows across lanes.
// The item's KV heads share the tile walk: a decode item reads each block of the cache
// (all its heads) in one pass. D is the keys' width, DV the values' (the same but for MLA).
template <ScalarType K, int NV, int FR = 0>
HWY_NOINLINE void RunItem(const LayerCtx& c, const WorkItem& it, float* partial_slot, void* scratch) {
  const DF df;
  const std::size_t L = hn::Lanes(df);
  const int D = c.head_size;
  const int DV = c.value_size();
  const int H = it.kv_heads;
  const Scratch base = CarveScratch(scratch, D);
  ItemGeometry g;
  g.heads = it.head_end - it.head_begin;
  g.rows = it.num_rows();
  g.rp = static_cast<int>(NV * L);
  g.min_pos = it.pos_begin;
  g.max_pos = it.pos_begin + (it.token_end - it.token_begin) - 1;

  Scratch hs[kMaxItemKvHeads];
  WorkItem sub[kMaxItemKvHeads];
  VF qpos[NV], slope[kMaxItemKvHeads][NV];
  HWY_ALIGN float pos_rows[kMaxRows];
  HWY_ALIGN float slope_rows[kMaxItemKvHeads][kMaxRows];
  for (int v = 0; v < NV; ++v) {
    qpos[v] = hn::Zero(df);
    for (int j = 0; j < kMaxItemKvHeads; ++j) slope[j][v] = hn::Zero(df);
  }
  for (int j = 0; j < H; ++j) {
    hs[j] = HeadScratch(base, j, D);
    sub[j] = it.head(j, c.group);
    hs[j].qk_scale = c.qk_scale * (c.k_head_scales ? c.k_head_scales[sub[j].kv_head] : 1.0f);
    hs[j].v_scale = c.v_scale * (c.v_head_scales ? c.v_head_scales[sub[j].kv_head] : 1.0f);
    if constexpr (FR > 0) {
#if ATTNSEL_BF16_VARIANT
      if constexpr (is_fp8(K)) PackQueryRowsFp8<FR>(c, sub[j], g, hs[j]);
      else PackQueryRows<FR>(c, sub[j], g, hs[j], true);
#else
      PackQueryRows<FR>(c, sub[j], g, hs[j], false);
#endif
    } else {
#if ATTNSEL_BF16_VARIANT
      PackQueryBf16<NV>(c, sub[j], g, hs[j]);
#else
      PackQueryF32<NV>(c, sub[j], g, hs[j]);
#endif
    }
    // Per-row constants (padded rows repeat the last real row).
    float* slope_tmp = slope_rows[j];
    for (int r = 0; r < kMaxRows; ++r) {
      const int rr = std::min(r, g.rows - 1);
      pos_rows[r] = static_cast<float>(it.pos_begin + rr / g.heads);
      slope_tmp[r] = c.alibi ? c.alibi[sub[j].head_begin + rr % g.heads] : 0.0f;
    }
    for (int v = 0; v < NV; ++v) {
      qpos[v] = hn::Load(df, pos_rows + v * L);
      slope[j][v] = hn::Load(df, slope_tmp + v * L);
    }
    for (int r = 0; r < kMaxRows; ++r) {
      hs[j].m[r] = -HUGE_VALF;
      hs[j].l[r] = 0.0f;
    }
    std::memset(hs[j].o, 0, static_cast<std::size_t>(kMaxRows) * static_cast<std::size_t>(DV) * sizeof(float));
  }

  const std::size_t row_bytes = static_cast<std::size_t>(D) * Kv<K>::kBytes;
  const std::size_t v_row_bytes = static_cast<std::size_t>(DV) * Kv<K>::kBytes;
  // The walk is (tile, KV head) steps; each step prefetches the rows of the step two ahead,
  // so prefetches are spread between the computations instead of issued in bursts.
  constexpr std::int64_t kAhead = 2;
  // An item that covers every KV head consumes whole blocks: prefetch them as contiguous
  // regions in address order (what the hardware prefetchers continue best), a 1/H share
  // of the tile's blocks per step.
  const bool whole_blocks = c.block_bytes > 0 && H == c.num_kv_heads;
  // Such a decode item on a 16-bit cache with blocks shorter than a tile steps one block at
  // a time: each step then streams one run of K and one of V (HND) instead of interleaving
  // two blocks, which measured ~3 points of read bandwidth better. fp8 caches keep whole tiles: a step's fixed costs (the softmax's bookkeeping,
  // the accumulators' rescale, the start of the P·V widening) weigh more against half the
  // bytes (docs/kernels-fp8.md).
  const int tile_keys =
      FR > 0 && whole_blocks && c.block_size < kTileKeys && !is_fp8(K) ? c.block_size : kTileKeys;
  const std::int64_t num_tiles = (it.key_end - it.key_begin + tile_keys - 1) / tile_keys;
  const std::int64_t num_steps = num_tiles * H;
  KeyTile t;
  const std::int32_t* table = c.block_table + static_cast<std::int64_t>(it.seq) * c.max_blocks_per_seq;
  PrefetchCursor cursor;
  cursor.key_cache = c.key_cache;
  cursor.value_cache = c.value_cache;
  cursor.table = table;
  cursor.block_bytes = c.block_bytes;
  if (whole_blocks)
    for (int j = 0; j < H; ++j) hs[j].pf = &cursor;
  // HND caches keep each head's rows of a block contiguous: a step then prefetches exactly
  // the rows of the next step (a run per block, K and V in step), one step ahead: 10 %
  // faster than whole blocks a tile ahead, and two steps ahead overflows L1.
  const std::int64_t head_bytes =
      static_cast<std::int64_t>(c.block_size) * D * static_cast<std::int64_t>(Kv<K>::kBytes);
  const bool head_runs = whole_blocks && c.k_stride[1] == D && c.v_stride[1] == D &&
                         c.k_stride[2] == static_cast<std::int64_t>(c.block_size) * D && c.v_stride[2] == c.k_stride[2];
  auto prefetch_step = [&](std::int64_t step) {
    if (step >= num_steps) return;
    const std::int64_t key0 = it.key_begin + (step / H) * tile_keys;
    if (!whole_blocks) {
      LocateTile(c, sub[step % H], key0, it.key_end, Kv<K>::kBytes, base.zero, t);
      PrefetchTile(t, row_bytes, v_row_bytes);
      return;
    }
    const std::int64_t last = std::min<std::int64_t>(key0 + tile_keys, it.key_end) - 1;
    const std::int64_t first_block = key0 / c.block_size, last_block = last / c.block_size;
    const std::int64_t part = step % H;
    // Blocks longer than a tile: a step reads a slice of one block, and prefetches only
    // that slice of the next step (whole blocks fetched 4x the lines at block 128 and
    // overflowed L1).
    const bool in_one_block = c.block_size > tile_keys;
    const std::int64_t rb = static_cast<std::int64_t>(row_bytes);
    if (head_runs) {
      const std::int64_t begin = (it.kv_head + part) * head_bytes;
      if (in_one_block) {
        const std::int64_t b = begin + (key0 % c.block_size) * rb, e = begin + (last % c.block_size + 1) * rb;
        cursor.start(first_block, b, b, e, (e - b) / 64);
        return;
      }
      cursor.start(first_block, begin, begin, begin + head_bytes, (last_block - first_block + 1) * (head_bytes / 64));
      return;
    }
    if (in_one_block) {  // NHD: the step's tokens are one contiguous range of the block; a 1/H share of it
      const std::int64_t token_bytes = c.k_stride[1] * static_cast<std::int64_t>(Kv<K>::kBytes);
      const std::int64_t b = (key0 % c.block_size) * token_bytes, e = (last % c.block_size + 1) * token_bytes;
      const std::int64_t lines = (e - b) / 64;
      const std::int64_t first = b + 64 * (lines * part / H);
      cursor.start(first_block, first, b, e, lines * (part + 1) / H - lines * part / H);
      return;
    }
    const std::int64_t per_block = c.block_bytes / 64;
    const std::int64_t lines = (last_block - first_block + 1) * per_block;
    const std::int64_t first_line = first_block * per_block + lines * part / H;
    cursor.start(first_line / per_block, (first_line % per_block) * 64, 0, c.block_bytes,
                 lines * (part + 1) / H - lines * part / H);
  };
  // Whole blocks: one tile ahead; head runs: as many steps ahead as make the bytes of one
  // bf16 step of 16 keys at d=128 (8 KiB of K and V): one step for bf16 and for fp8's
  // 32-key steps at d=128 (the bytes in flight that measured best for bf16; twice them
  // overflowed L1).
  constexpr std::int64_t kHeadRunAheadBytes = 8192;
  const std::int64_t step_bytes = 2 * static_cast<std::int64_t>(tile_keys) * static_cast<std::int64_t>(row_bytes);
  const std::int64_t ahead =
      head_runs ? std::max<std::int64_t>(1, kHeadRunAheadBytes / step_bytes) : whole_blocks ? H : kAhead;
  for (std::int64_t step = 0; step < ahead; ++step) prefetch_step(step);
  cursor.flush();
  // The tile's rows are located once (for the first KV head) and shifted for the others.
  KeyTile t0;
  const std::int64_t k_head_bytes = c.k_stride[2] * static_cast<std::int64_t>(Kv<K>::kBytes);
  const std::int64_t v_head_bytes = c.v_stride[2] * static_cast<std::int64_t>(Kv<K>::kBytes);
  for (std::int64_t ti = 0; ti < num_tiles; ++ti) {
    const std::int64_t key0 = it.key_begin + ti * tile_keys;
    const std::int64_t last = std::min<std::int64_t>(key0 + tile_keys, it.key_end) - 1;
    bool need_mask = last - key0 + 1 < tile_keys;
    if (c.causal && last > g.min_pos) need_mask = true;
    if (c.window >= 0) {
      if (g.max_pos - key0 > c.window) need_mask = true;
      if (!c.causal && last - g.min_pos > c.window) need_mask = true;
    }
    LocateTile(c, sub[0], key0, std::min<std::int64_t>(key0 + tile_keys, it.key_end), Kv<K>::kBytes, base.zero, t0);
    for (int j = 0; j < H; ++j) {
      Scratch& s = hs[j];
      prefetch_step(ti * H + j + ahead);  // (may use t as its own scratch)
      ShiftTile(t0, j * k_head_bytes, j * v_head_bytes, t);
#if ATTNSEL_BF16_VARIANT
      const std::uint16_t* krow[kTileKeys];
      if constexpr (FR > 0) {
        if constexpr (K == ScalarType::bf16) {
          ConvertKeysBf16<K>(t, D, krow, s);
          QkBf16FewRows<FR>(c, t, krow, s);
        } else {
          QkFp8FewRows<K, FR>(c, t, s);
        }
        SoftmaxFewRows<FR>(c, t, pos_rows, slope_rows[j], need_mask, s);
        PackProbabilitiesFewRows<FR>(t.nk, s);
        bool fused_v = false;
        if constexpr (is_fp8(K) && FR <= 4) {
          fused_v = DV % 64 == 0;
          if (fused_v) PvFp8FewRows<K, FR>(t, DV, FR, s);
        }
        if (!fused_v) {
          PackValuesBf16<K>(t, DV, s);
          PvBf16<(FR < 4 ? FR : 4)>(g, DV, t.nk, FR, s);
        }
      } else {
        ConvertKeysBf16<K>(t, D, krow, s);
        QkBf16<NV>(c, t, krow, s);
        SoftmaxTile<NV>(c, g, t, qpos, slope[j], need_mask, s);
        PackProbabilitiesBf16<NV>(t.nk, s);
        PackValuesBf16<K>(t, DV, s);
        PvBf16(g, DV, t.nk, static_cast<std::size_t>(g.rp), s);
      }
#else
      const float* vrow[kTileKeys];
#if HWY_TARGET == HWY_AVX3
      if constexpr (FR > 0) {
        QkF32FewRows<K, FR>(c, t, s);
        SoftmaxFewRows<FR>(c, t, pos_rows, slope_rows[j], need_mask, s);
        ConvertTileF32<K>(df, t, DV, t.v, s.vf, vrow);
        PvF32<(FR < 4 ? FR : 4)>(g, DV, t.nk, FR, vrow, s);
        continue;
      }
#endif
      const float* krow[kTileKeys];
      ConvertTileF32<K>(df, t, D, t.k, s.kf, krow);
      QkF32<NV>(c, t, krow, s);
      SoftmaxTile<NV>(c, g, t, qpos, slope[j], need_mask, s);
      ConvertTileF32<K>(df, t, DV, t.v, s.vf, vrow);
      PvF32(g, DV, t.nk, static_cast<std::size_t>(g.rp), vrow, s);
#endif
    }
  }
#if ATTNSEL_BF16_VARIANT
  if constexpr (is_fp8(K))
    for (int j = 0; j < H; ++j) Fp8OutputToNaturalOrder(g.rows, DV, hs[j]);
#endif
  for (int j = 0; j < H; ++j) {
    PartialView part;
    if (partial_slot) part = partial_for(partial_slot, DV, j);
    FinishItem(c, sub[j], g, part, hs[j]);
  }
}

// Dispatch on KV type and the number of row vectors.
template <ScalarType K>
HWY_INLINE void RunItemRows(const LayerCtx& c, const WorkItem& it, float* part, void* scratch) {
  const DF df;
  const int L = static_cast<int>(hn::Lanes(df));
  const int nv = (it.num_rows() + L - 1) / L;
  constexpr int kLanes = static_cast<int>(HWY_LANES(float));
  constexpr int kMaxNV = kMaxRows / kLanes > 0 ? kMaxRows / kLanes : 1;
#if HWY_TARGET == HWY_AVX3
  {
    const int rows = it.num_rows();
    if (rows <= 1) return RunItem<K, 1, 1>(c, it, part, scratch);
    if (rows <= 2) return RunItem<K, 1, 2>(c, it, part, scratch);
    if (rows <= 4) return RunItem<K, 1, 4>(c, it, part, scratch);
    if (rows <= kFewRows) return RunItem<K, 1, 8>(c, it, part, scratch);
  }
#endif
  if (nv <= 1) return RunItem<K, 1>(c, it, part, scratch);
  // The portable target (CPUs without AVX2: EMU128, or SCALAR where the compiler's EMU128 is
  // broken, as GCC's before 12.3) compiles every other width: its rows run in the next one
  // up, and the build spends less on a fallback.
  constexpr bool kEveryWidth = HWY_TARGET != HWY_EMU128 && HWY_TARGET != HWY_SCALAR;
  if constexpr (kMaxNV >= 2 && kEveryWidth)
    if (nv <= 2) return RunItem<K, 2>(c, it, part, scratch);
  if constexpr (kMaxNV >= 4)
    if (nv <= 4) return RunItem<K, 4>(c, it, part, scratch);
  if constexpr (kMaxNV >= 8 && kEveryWidth)
    if (nv <= 8) return RunItem<K, 8>(c, it, part, scratch);
  if constexpr (kMaxNV >= 16)
    if (nv <= 16) return RunItem<K, 16>(c, it, part, scratch);
  if constexpr (kMaxNV >= 32)
    if (nv <= 32) return RunItem<K, 32>(c, it, part, scratch);
  if constexpr (kMaxNV >= 64) RunItem<K, 64>(c, it, part, scratch);
}

HWY_NOINLINE void RunItemAnyKv(const LayerCtx& c, const WorkItem& it, float* part, void* scratch) {
  switch (c.kv) {
#if ATTNSEL_BF16_VARIANT
    case ScalarType::bf16: return RunItemRows<ScalarType::bf16>(c, it, part, scratch);
    case ScalarType::fp8_e4m3: return RunItemRows<ScalarType::fp8_e4m3>(c, it, part, scratch);
    case ScalarType::fp8_e5m2: return RunItemRows<ScalarType::fp8_e5m2>(c, it, part, scratch);
    default: return;  // the driver never asks the BF16 path for other caches
#else
    case ScalarType::f32: return RunItemRows<ScalarType::f32>(c, it, part, scratch);
    case ScalarType::f16: return RunItemRows<ScalarType::f16>(c, it, part, scratch);
    case ScalarType::bf16: return RunItemRows<ScalarType::bf16>(c, it, part, scratch);
    case ScalarType::fp8_e4m3: return RunItemRows<ScalarType::fp8_e4m3>(c, it, part, scratch);
    case ScalarType::fp8_e5m2: return RunItemRows<ScalarType::fp8_e5m2>(c, it, part, scratch);
    default: return;  // cache_encoding stores no other element type
#endif
  }
}

