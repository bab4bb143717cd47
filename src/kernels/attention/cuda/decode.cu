// Split-KV decode over the paged cache (mma.sync, sm_80+).
//
// One CTA = 16 packed query rows (query tokens × the query heads sharing one KV head, so
// K and V are read once per group) against one slice of the keys. Four warps take 16 keys
// each of every 64-key tile; tiles stream through a 2–3 stage pipeline, filled by cp.async
// (sm_80+), by one bulk copy per key row, or by TMA boxes of a page slice × 64 columns
// (sm_90; 128-byte swizzled, so ldmatrix reads them through Swizzled128) — at head sizes
// 128 and 256 one box per warp's 16 keys holding all their columns (kLoadsTmaPages). The warps'
// partial softmax states are combined in shared memory; a CTA that owns a whole sequence
// writes the output, otherwise it writes its normalised partial output and log2-sum-exp,
// and the last slice of each row tile to finish merges them all (an arrival counter per row
// tile, reset by that CTA), so a split decode is one launch. Whoever writes a row's output
// also writes its log-sum-exp when the caller asks for it (natural log, sinks included).
// An fp8 (e4m3) cache is copied raw (TMA boxes of 128 byte columns on sm_90, cp.async
// otherwise) in 128-key tiles, never widened in shared memory: each warp converts the bytes
// of its mma fragments in registers and computes S^T = K·Q^T and O^T = V^T·P^T in f16, the
// keys in the mma's M dimension (decode_fp8_keys.cuh; 0.60x bf16's time at 64 x 4096 on
// the H200, where products with the rows in the M dimension took 0.85x); its scales act in
// fp32 (k_scale in the score scale, v_scale on the output; per-KV-head scales are read once
// per CTA, whose rows all share one KV head).
// An execute that appends the step's new keys and values passes them in: each CTA whose key
// slice holds new tokens writes them (its KV head) into their cache slots before it copies
// any tile, and every other CTA starts streaming at once — one launch per layer where a
// separate cache write and its completion sat on the critical path.
#include <cstring>
#include <string>
#include <type_traits>

#include "kernels/attention/cuda/cache_store.cuh"
#include "kernels/device/cuda/async_copy_sm90.cuh"
#include "kernels/attention/cuda/decode_fp8_keys.cuh"
#include "kernels/attention/cuda/dispatch.cuh"
#include "kernels/device/cuda/programmatic_launch.cuh"
#include "kernels/attention/cuda/tile_common.cuh"

namespace attnsel::kernel::cuda {
namespace {

/// A deeper pipeline with one CTA per SM (5 stages) measured slower on the H200 (2.0 against
/// 3.7 TB/s at 64 x 4096); two CTAs of 2-3 stages each it is. An fp8 cache's tiles are 128
/// keys (32 per warp, in the mma's M dimension: decode_fp8_keys.cuh), as many bytes as 64
/// keys of a 16-bit cache.
template <class T, int DP, int LOADS, bool FP8>
struct DecodeConfig {
  static constexpr int kThreads = 128;
  static constexpr int kWarps = 4;
  static constexpr int kKeys = FP8 ? 2 * kDecodeKeyTile : kDecodeKeyTile;
  static constexpr int kWarpKeys = kKeys / kWarps;
  static constexpr int kRS = kRowStride<DP>;
  static constexpr int kQElems = kDecodeRows * kRS;
  static constexpr bool kTma = LOADS == kLoadsTma || LOADS == kLoadsTmaPages;
  static constexpr bool kPages = LOADS == kLoadsTmaPages;
  static_assert(!kTma || DP % (FP8 ? 128 : 64) == 0, "TMA tiles are made of 128-byte column chunks");
  static_assert(!kPages || (!FP8 && kWarpKeys == 16), "page boxes: 16-bit tiles, one box per warp's keys");
  // TMA tiles are dense 128-byte column chunks (Swizzled128): of the whole tile, or page
  // boxes of 16 keys, one warp's, one after another; the others padded rows.
  using KVLayout =
      std::conditional_t<kPages, Swizzled128<16>, std::conditional_t<kTma, Swizzled128<kKeys>, PaddedRows<DP>>>;
  using RawLayout = std::conditional_t<kTma, RawSwizzled128<kKeys>, RawPadded<DP>>;
  static constexpr int kTileElems = kTma ? kKeys * DP : kKeys * kRS;
  // An fp8 cache's stages hold the raw bytes (K then V).
  static constexpr int kRawTileBytes = kTma ? kKeys * DP : kKeys * RawPadded<DP>::kRowBytes;
  static constexpr int kStageBytes = FP8 ? 2 * kRawTileBytes : 2 * kTileElems * int(sizeof(T));
  static constexpr int kStages = DP <= 128 ? 3 : 2;
  static constexpr std::size_t kPipeBytes = std::size_t(kStages) * kStageBytes;
  static constexpr std::size_t kRedBytes = std::size_t(kWarps) * kDecodeRows * (DP + 2) * sizeof(float);
  static_assert(kRedBytes <= kPipeBytes, "reduction buffer must fit in the pipeline buffers");
  static constexpr std::size_t kQBytes = kQElems * sizeof(T);  // a multiple of 16
  // TMA's swizzle pattern repeats every 1024 bytes: its stages start on such a boundary.
  static constexpr std::size_t kAlignSlack = kTma ? 1024 : 0;
  static constexpr std::size_t kSmemBytes = kQBytes + kAlignSlack + kPipeBytes + 8 * kStages;
};

/// Hopper loading: one bulk copy per key row (K and V), completing on the stage's mbarrier;
/// rows past the slice are zeroed with ordinary stores instead.
template <class T, int DP, int NKEYS, int NTHREADS>
__device__ __forceinline__ void issue_kv_tile_bulk(const AttnParams& p, const std::int32_t* block_row, int kv_head,
                                                   int t0, int kv_end, T* ks, T* vs, std::uint32_t bar) {
  const int row_bytes = p.head_size * 2;
  const int valid = max(0, min(kv_end - t0, NKEYS));
  if (threadIdx.x == 0) mbar_arrive_expect_tx(bar, std::uint32_t(valid) * row_bytes * 2);
  const T* kb = static_cast<const T*>(p.k) + kv_head * p.k_stride_head;
  const T* vb = static_cast<const T*>(p.v) + kv_head * p.v_stride_head;
  for (int r = threadIdx.x; r < 2 * NKEYS; r += NTHREADS) {
    const bool is_v = r >= NKEYS;
    const int row = r % NKEYS;
    const int key = t0 + row;
    T* dst = (is_v ? vs : ks) + row * kRowStride<DP>;
    if (row < valid) {
      const std::int64_t page = block_row[key / p.block_size];
      const int off = key % p.block_size;
      const T* src = is_v ? vb + page * p.v_stride_block + off * p.v_stride_tok
                          : kb + page * p.k_stride_block + off * p.k_stride_tok;
      bulk_copy_g2s(smem_addr(dst), src, row_bytes, bar);
    } else {
      for (int c = 0; c < p.head_size / 8; ++c) reinterpret_cast<uint4*>(dst)[c] = make_uint4(0, 0, 0, 0);
    }
  }
}

__device__ __forceinline__ int ceil_div(int a, int b) { return (a + b - 1) / b; }

/// Hopper TMA loading: one box per (page slice of box_rows keys, 64-column chunk, K or V) —
/// 16 boxes of 2 KB for a 64-key tile at d=128 and block 16, where row copies take 128
/// requests of 256 bytes. t0 is a multiple of box_rows, which divides the page size, so
/// every box lies in one page. A box's keys past kv_end arrive too (cache rows of another
/// slice, or unwritten slots): the kernel masks them and zeroes their V.
/// The first ISSUERS threads issue the boxes. A warp issues its TMA copies one lane at a
/// time, each after its page id's load: the fp8 tiles, whose computing is the longer, spread
/// them over every warp (one warp issuing them all held the others at the next tile's
/// barrier: 64 × 4096 0.160 → 0.146 ms on an H200); the 16-bit tiles keep warp 0 issuing
/// (spread, they measured 1 % slower).
template <int DP, int NKEYS, int COLS, int ISSUERS>
__device__ __forceinline__ void issue_kv_tile_tma(const AttnParams& p, const std::int32_t* block_row, int kv_head,
                                                  int t0, int kv_end, std::uint32_t ks, std::uint32_t vs,
                                                  std::uint32_t bar, int box_rows, const CUtensorMap* tm_k,
                                                  const CUtensorMap* tm_v) {
  constexpr int kChunks = DP / COLS;  // COLS columns = 128 bytes
  constexpr int kWarps = ISSUERS / 32;
  if (threadIdx.x >= ISSUERS) return;
  const int nbox = ceil_div(min(kv_end - t0, NKEYS), box_rows);
  const int requests = nbox * kChunks * 2;
  // The one arrival; copies that complete before it leave the barrier's byte count below
  // zero, which the arrival's expected bytes bring back.
  if (threadIdx.x == 0) mbar_arrive_expect_tx(bar, std::uint32_t(requests * box_rows * 128));
  // Request r to lane r / kWarps of warp r % kWarps.
  for (int r = (threadIdx.x % 32) * kWarps + threadIdx.x / 32; r < requests; r += ISSUERS) {
    const int b = r % nbox, c = (r / nbox) % kChunks;
    const bool is_v = r >= nbox * kChunks;
    const int key = t0 + b * box_rows;
    const int page = block_row[key / p.block_size];
    const std::uint32_t dst = (is_v ? vs : ks) + std::uint32_t(c * NKEYS * 128 + b * box_rows * 128);
    tma_load_4d(dst, is_v ? tm_v : tm_k, bar, c * COLS, kv_head, key % p.block_size, page);
  }
}

/// Hopper TMA loading by page boxes (kLoadsTmaPages): one 5-D box per 16-key page slice and
/// K or V, holding every 64-column chunk of those keys ([chunk][16 keys][128 bytes]), the
/// slice one warp reads — 8 boxes of 4 KB for a 64-key tile at d=128, where kLoadsTma issues
/// 16 of 2 KB. Warp 0 issues them, as for kLoadsTma's 16-bit tiles.
/// A prologue tile's page ids come from `held` (lane held_at + b of warp 0 holds box b's,
/// loaded before the kernel waited for the ones before it); held_at < 0 reads the block table.
template <int DP, int NKEYS>
__device__ __forceinline__ void issue_kv_tile_tma_pages(const AttnParams& p, const std::int32_t* block_row,
                                                        int kv_head, int t0, int kv_end, std::uint32_t ks,
                                                        std::uint32_t vs, std::uint32_t bar, const CUtensorMap* tm_k,
                                                        const CUtensorMap* tm_v, int held, int held_at) {
  constexpr std::uint32_t kBoxBytes = 16 * DP * 2;
  static_assert(2 * (NKEYS / 16) <= 32, "one lane per box of K or V");
  if (threadIdx.x >= 32) return;
  const int nbox = ceil_div(min(kv_end - t0, NKEYS), 16);
  if (threadIdx.x == 0) mbar_arrive_expect_tx(bar, std::uint32_t(2 * nbox) * kBoxBytes);
  const int r = threadIdx.x, b = nbox > 0 ? r % nbox : 0;
  const bool is_v = r >= nbox;
  const int key = t0 + b * 16;
  const int held_page = __shfl_sync(0xffffffffu, held, max(held_at, 0) + b);
  if (r < 2 * nbox) {
    const int page = held_at >= 0 ? held_page : block_row[key / p.block_size];
    tma_load_5d((is_v ? vs : ks) + b * kBoxBytes, is_v ? tm_v : tm_k, bar, 0, key % p.block_size, 0, kv_head, page);
  }
}

/// A row's log-sum-exp in natural-log units from its log2-domain state: maximum m, sum l
/// of exp2(score - m), and the sink (log2 domain) when there is one. -inf for a row that
/// sees no key and has no sink.
__device__ __forceinline__ float row_lse(float m, float l, float sink_log2, bool has_sink) {
  constexpr float kLn2 = 0.6931471805599453f;
  if (has_sink) {
    const float mm = fmaxf(m, sink_log2);
    const float a = m == -INFINITY ? 0.0f : fast_exp2(m - mm);
    return (mm + __log2f(l * a + fast_exp2(sink_log2 - mm))) * kLn2;
  }
  return l > 0.0f ? (m + __log2f(l)) * kLn2 : -INFINITY;
}

/// Adds one to a counter in global memory, as a release of everything this thread wrote or
/// saw written before (the CTA's writes, after a barrier) and an acquire of what the earlier
/// arrivals released; returns the count before.
__device__ __forceinline__ int arrive_acq_rel(int* counter) {
  int before;
  asm volatile("atom.add.acq_rel.gpu.global.s32 %0, [%1], 1;" : "=r"(before) : "l"(counter) : "memory");
  return before;
}

/// Orders this thread's generic-proxy global writes before later async-proxy reads of them
/// (TMA and bulk copies; cp.async reads through the generic proxy and needs none).
__device__ __forceinline__ void fence_proxy_async_global() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.global;" ::: "memory");
#endif
}

/// The fused append: writes the step's new tokens at positions [first, last) (inside this
/// CTA's key slice) of one KV head into their slots — an fp8 cache gets them quantised as
/// the cache writer stores them — and fences them for the async proxy. The caller's barrier
/// then makes them visible to the CTA's own copies. Slot -1 is skipped (the cache keeps what
/// it held, as after a separate write). The planner guarantees every other slot is the
/// token's position in the block table, so the copies of [first, last) read these bytes.
template <class T, bool FP8>
__device__ __forceinline__ void append_new_tokens(const AttnParams& p, const PackedRows& pr, int kvh, int first,
                                                  int last) {
  const int chunks = p.head_size / 8;
  const T* nk = static_cast<const T*>(p.new_k);
  const T* nv = static_cast<const T*>(p.new_v);
  void* kc = const_cast<void*>(p.k);
  void* vc = const_cast<void*>(p.v);
  for (int idx = threadIdx.x; idx < (last - first) * chunks; idx += blockDim.x) {
    const int tok = pr.q_begin + (first - pr.ctx) + idx / chunks;
    const int c = (idx % chunks) * 8;
    const std::int64_t slot = p.slot_mapping[tok];
    if (slot < 0) continue;
    const std::int64_t page = slot / p.block_size;
    const int off = static_cast<int>(slot % p.block_size);
    const uint4 k = *reinterpret_cast<const uint4*>(nk + tok * p.new_k_stride_tok + kvh * p.new_k_stride_head + c);
    const uint4 v = *reinterpret_cast<const uint4*>(nv + tok * p.new_v_stride_tok + kvh * p.new_v_stride_head + c);
    store_kv_chunk<T, FP8>(p, kc, vc, page, off, kvh, c, k, v);
  }
  fence_proxy_async_global();
}

template <class T, int DP, int LOADS, bool FP8>
__global__ void __launch_bounds__(128)
    decode_kernel(const __grid_constant__ AttnParams p, const __grid_constant__ CUtensorMap tm_k,
                  const __grid_constant__ CUtensorMap tm_v, const int box_rows) {
  // Devices below sm_90 copy 16-bit caches with cp.async only: there the other instances
  // are empty, which keeps the build from compiling bodies that cannot run.
  if constexpr ((LOADS != kLoadsCpAsync || FP8) && !kHopperDeviceCode) {
    return;
  } else {
    using C = DecodeConfig<T, DP, LOADS, FP8>;
    constexpr bool kBulk = LOADS == kLoadsBulk;
    constexpr bool kMbar = LOADS != kLoadsCpAsync;  // bulk and TMA copies complete on mbarriers
    static_assert(!(kBulk && FP8), "fp8 caches are copied by TMA boxes or cp.async (the planner picks)");
    extern __shared__ __align__(16) unsigned char smem_raw[];
    T* qs = reinterpret_cast<T*>(smem_raw);
    const std::uint32_t q_end = smem_addr(smem_raw) + std::uint32_t(C::kQBytes);
    const std::uint32_t pipe_pad = C::kTma ? ((q_end + 1023u) & ~1023u) - q_end : 0u;
    T* pipe = reinterpret_cast<T*>(smem_raw + C::kQBytes + pipe_pad);
    const StagedTiles<T, C> tiles{pipe};

    const DecodeWork w = static_cast<const DecodeWork*>(p.work)[blockIdx.x];
    const int seq = w.seq, kvh = w.kv_head;
    PackedRows pr;
    pr.q_begin = w.q_begin;
    pr.q_len = w.q_len;
    const int seq_len = w.seq_len;
    pr.ctx = seq_len - pr.q_len;
    pr.rows = pr.q_len * p.group;
    const int row0 = w.row_tile * kDecodeRows;
    const int last_row = min(row0 + kDecodeRows - 1, pr.rows - 1);
    const int pos_min = pr.ctx + row0 / p.group, pos_max = pr.ctx + last_row / p.group;
    const KeyRange vis_first = visible_keys(p, pos_min, seq_len), vis_last = visible_keys(p, pos_max, seq_len);
    const int num_splits = w.num_splits;
    const int lo = vis_first.lo & ~(p.split_align - 1);  // slices and TMA boxes start aligned
    const int hi = vis_last.hi;                           // (union of the rows' visible keys)
    const int span = max(hi - lo, 0);
    const int chunk = num_splits == 1 ? span : ceil_div(ceil_div(span, num_splits), p.split_align) * p.split_align;
    const int kv_begin = lo + w.split * chunk;
    const int kv_end = min(hi, kv_begin + chunk);
    const int ntiles = kv_end > kv_begin ? ceil_div(kv_end - kv_begin, C::kKeys) : 0;
    const std::int32_t* block_row = p.block_table + std::int64_t(seq) * p.block_table_stride;

    const std::uint32_t bars = smem_addr(pipe) + std::uint32_t(C::kPipeBytes);
    // Page boxes: warp 0 loads the prologue tiles' page ids (lane t * boxes + b: tile t's box
    // b) in one round trip now, from the plan's block table, so that no copy waits for a
    // dependent load once the kernels ahead have finished.
    constexpr int kPrologueTiles = C::kStages - 1, kTileBoxes = C::kKeys / 16;
    int held_page = 0;
    if constexpr (C::kPages) {
      static_assert(kPrologueTiles * kTileBoxes <= 32, "one lane per prologue box");
      const int key = kv_begin + (threadIdx.x / kTileBoxes) * C::kKeys + (threadIdx.x % kTileBoxes) * 16;
      if (threadIdx.x < kPrologueTiles * kTileBoxes && key < kv_end) held_page = block_row[key / p.block_size];
    }
    auto issue = [&](int t) {
      const int s = t % C::kStages;
      if constexpr (FP8 && C::kTma)
        issue_kv_tile_tma<DP, C::kKeys, 128, C::kThreads>(p, block_row, kvh, kv_begin + t * C::kKeys, kv_end,
                                                          smem_addr(tiles.raw_k(s)), smem_addr(tiles.raw_v(s)),
                                                          bars + 8 * s, box_rows, &tm_k, &tm_v);
      else if constexpr (FP8)
        load_kv_tile_e4m3_raw<DP, C::kKeys, C::kThreads, RawPadded<DP>::kRowBytes>(
            p, block_row, kvh, kv_begin + t * C::kKeys, kv_end, tiles.raw_k(s), tiles.raw_v(s));
      else if constexpr (kBulk)
        issue_kv_tile_bulk<T, DP, C::kKeys, C::kThreads>(p, block_row, kvh, kv_begin + t * C::kKeys, kv_end,
                                                         tiles.k(s), tiles.v(s), bars + 8 * s);
      else if constexpr (C::kPages)
        issue_kv_tile_tma_pages<DP, C::kKeys>(p, block_row, kvh, kv_begin + t * C::kKeys, kv_end, smem_addr(tiles.k(s)),
                                              smem_addr(tiles.v(s)), bars + 8 * s, &tm_k, &tm_v, held_page,
                                              t < kPrologueTiles ? t * kTileBoxes : -1);
      else if constexpr (C::kTma)
        issue_kv_tile_tma<DP, C::kKeys, 64, 32>(p, block_row, kvh, kv_begin + t * C::kKeys, kv_end,
                                                smem_addr(tiles.k(s)), smem_addr(tiles.v(s)), bars + 8 * s, box_rows,
                                                &tm_k, &tm_v);
      else
        load_kv_tile<T, DP, C::kKeys, C::kThreads>(p, block_row, kvh, kv_begin + t * C::kKeys, kv_end, tiles.k(s),
                                                   tiles.v(s));
    };

    // The new tokens in this slice, when the kernel appends them (a CTA-uniform condition).
    // Tiles wholly before the first of them are issued first, so their copies are in flight
    // while the tokens are written; the rest wait for the append and a barrier.
    const int new_first = max(kv_begin, pr.ctx), new_last = min(kv_end, seq_len);
    const bool appends = p.new_k != nullptr && new_first < new_last;
    const int early = appends ? min(C::kStages - 1, (new_first - kv_begin) / C::kKeys) : C::kStages - 1;
    auto append = [&] {
      append_new_tokens<T, FP8>(p, pr, kvh, new_first, new_last);  // fenced for the async proxy
      __syncthreads();  // every thread's rows written before any thread copies them
    };
    // Prologue tiles issued before waiting for the kernels ahead: with the caller's promise
    // (p.early_kv_reads) that nothing still running writes the positions before the step's
    // new tokens, the tiles wholly before them (all of a slice that ends before them).
    const int before_new = kv_end <= pr.ctx ? ntiles : max(0, (pr.ctx - kv_begin) / C::kKeys);
    const int pre = kMbar && p.early_kv_reads ? min(min(C::kStages - 1, ntiles), before_new) : 0;
    if constexpr (kMbar) {
      // Bulk copies write only head_size columns: zero the padding columns once (TMA boxes
      // read the columns past the head size as zeros).
      if (kBulk && DP > p.head_size) {
        const int pad_chunks = (DP - p.head_size) / 8;
        for (int idx = threadIdx.x; idx < C::kStages * 2 * C::kKeys * pad_chunks; idx += C::kThreads) {
          T* row = pipe + (idx / pad_chunks) * C::kRS;
          reinterpret_cast<uint4*>(row + p.head_size)[idx % pad_chunks] = make_uint4(0, 0, 0, 0);
        }
      }
      if (threadIdx.x == 0) {
        for (int s = 0; s < C::kStages; ++s) mbar_init(bars + 8 * s, 1);
        mbar_fence_init();
      }
      __syncthreads();
      for (int s = 0; s < pre; ++s) issue(s);
    }
    // Everything above read only the plan (uploaded by a copy, never by a kernel) and, with
    // the promise, cache positions nothing running writes. The query, the rest of the cache
    // (this layer's write may still be running), the output and the workspace (the previous
    // layer's attention may still be running) wait for the kernels before.
    wait_for_prior_grids();
    allow_dependent_grids();
    load_q_rows<T, DP, kDecodeRows, C::kThreads>(p, pr, kvh, row0, qs);
    if constexpr (kMbar) {
      cp_async_commit();
      for (int s = pre; s < C::kStages - 1; ++s) {
        if (appends && s == early) append();
        if (s < ntiles) issue(s);
      }
    } else {
#pragma unroll
      for (int s = 0; s < C::kStages - 1; ++s) {
        if (appends && s == early) append();
        if (s < ntiles) issue(s);
        cp_async_commit();
      }
    }
    // Every prologue tile lay before the new tokens: they are written before the main loop
    // issues the tiles that hold them.
    if (appends && early == C::kStages - 1) append();

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    std::conditional_t<FP8, KeysWarpState<DP>, WarpState<DP>> st;
    st.init();
    RowInfo ri = row_info(p, pr, kvh, row0, seq_len);
    // fp8: its rows' facts in the keys form, and whether the second n8 tile of rows has any.
    [[maybe_unused]] KeysRowInfo kri;
    if constexpr (FP8) kri = keys_row_info(p, pr, kvh, row0, seq_len, kv_begin, kv_end);
    const bool two = pr.rows - row0 > 8;
    // The CTA's rows share one KV head: its fp8 scales (per head or per layer) apply to all.
    // Partials are stored without the value scale; whoever writes the output applies it, so
    // every slice of a row tile (same KV head) is merged consistently.
    const ScoreScale score_sc = score_scale(p, kvh);
    const float out_sc = output_scale(p, kvh);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      ri.vis[h].lo = max(ri.vis[h].lo, kv_begin);
      ri.vis[h].hi = min(ri.vis[h].hi, kv_end);
    }
    // Keys every row of the CTA sees (no mask needed inside).
    const int full_lo = max(vis_last.lo, kv_begin), full_hi = min(vis_first.hi, kv_end);
    std::conditional_t<FP8, std::uint32_t[2][DP / 16][2], std::uint32_t[DP / 16][4]> qf;
    // fp8: the power of two each of this thread's rows was scaled by
    std::conditional_t<FP8, float[2][2], float[2]> q_undo;

    for (int it = 0; it < ntiles; ++it) {
      if constexpr (kMbar) {
        mbar_wait(bars + 8 * (it % C::kStages), (it / C::kStages) & 1);
        if (it == 0) cp_async_wait<0>();
      } else {
        cp_async_wait<C::kStages - 2>();
      }
      __syncthreads();
      if (it == 0) {
        if constexpr (FP8) load_q_frags_keys<T, DP>(qf, qs, q_undo);
        else load_q_frags<DP>(qf, qs);
      }
      const int nxt = it + C::kStages - 1;
      if (nxt < ntiles) issue(nxt);  // into the stage every warp finished with at it - 1
      if constexpr (!kMbar) cp_async_commit();

      const int key0 = kv_begin + it * C::kKeys + warp * C::kWarpKeys;
      if (key0 >= kv_end) continue;  // this warp's keys are past the slice (last tile)
      const bool masked = key0 < full_lo || key0 + C::kWarpKeys > full_hi;
      if constexpr (FP8) {  // keys in the mma's M dimension (decode_fp8_keys.cuh)
        constexpr int kKB = C::kWarpKeys / 16;
        const std::uint8_t* kraw = tiles.raw_k(it % C::kStages);
        std::uint8_t* vraw = tiles.raw_v(it % C::kStages);
        if constexpr (C::kTma)
          if (key0 + C::kWarpKeys > kv_end) {  // a box's rows past the slice: P is 0 there, but 0 × NaN is not
            const int first = kv_end - key0;
            for (int i = lane; i < (C::kWarpKeys - first) * (DP / 16); i += 32) {
              const std::uint32_t at =
                  C::RawLayout::offset(warp * C::kWarpKeys + first + i / (DP / 16), 16 * (i % (DP / 16)));
              *reinterpret_cast<uint4*>(vraw + at) = make_uint4(0, 0, 0, 0);
            }
            __syncwarp();
          }
        float sk[kKB][2][4];
        qk_tile_fp8_keys<DP, kKB, typename C::RawLayout, false>(sk, qf, kraw, warp * C::kWarpKeys, two);
        score_tile_keys<kKB>(p, score_sc, sk, key0, q_undo, kri, masked);
        softmax_tile_keys<DP, kKB>(st, sk, two);
        pv_tile_fp8_keys<DP, kKB, typename C::RawLayout, false>(st, sk, vraw, warp * C::kWarpKeys, two);
        continue;
      } else {
        // A warp's 16 keys in a tile: a page box, rows of the tile's chunks, or padded rows.
        constexpr int kWarpSliceElems = C::kPages ? 16 * DP : C::kTma ? 16 * 64 : 16 * C::kRS;
        float s[2][4];
        const T* ks = tiles.k(it % C::kStages) + warp * kWarpSliceElems;
        T* vs = tiles.v(it % C::kStages) + warp * kWarpSliceElems;
        if constexpr (C::kTma)
          if (key0 + 16 > kv_end) {  // P is 0 past the slice, but 0 × an unwritten slot's NaN is not
            const int first = kv_end - key0;
            for (int i = lane; i < (16 - first) * (DP / 8); i += 32)
              *reinterpret_cast<uint4*>(reinterpret_cast<unsigned char*>(vs) +
                                        C::KVLayout::offset(first + i / (DP / 8), i % (DP / 8))) =
                  make_uint4(0, 0, 0, 0);
            __syncwarp();
          }
        qk_tile<T, DP, 2, typename C::KVLayout>(s, qf, ks);
        score_tile<2>(p, score_sc, s, key0, ri.pos, ri.vis, ri.alibi, masked);
        softmax_tile<DP, 2>(st, s);
        pv_tile<T, DP, 2, typename C::KVLayout>(st, s, vs);
      }
    }

    // ---- combine the four warps' states ------------------------------------------------
    float* red = reinterpret_cast<float*>(pipe);        // [warp][row][DP]
    float* m_s = red + C::kWarps * kDecodeRows * DP;     // [warp][row]
    float* l_s = m_s + C::kWarps * kDecodeRows;          // [warp][row]
    if constexpr (FP8) {  // rows 8n + 2t + e; the l partials are reduced over the key lanes
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          st.l[n][e] += __shfl_xor_sync(0xffffffffu, st.l[n][e], 4);
          st.l[n][e] += __shfl_xor_sync(0xffffffffu, st.l[n][e], 8);
          st.l[n][e] += __shfl_xor_sync(0xffffffffu, st.l[n][e], 16);
        }
      cp_async_wait<0>();
      __syncthreads();
      if (lane < 4) {
#pragma unroll
        for (int n = 0; n < 2; ++n)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            m_s[warp * kDecodeRows + 8 * n + 2 * lane + e] = st.m[n][e];
            l_s[warp * kDecodeRows + 8 * n + 2 * lane + e] = st.l[n][e];
          }
      }
      __syncthreads();
      const int g = lane / 4, t = lane % 4;
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int r = 8 * n + 2 * t + e;
          float mx = -INFINITY;
#pragma unroll
          for (int w2 = 0; w2 < C::kWarps; ++w2) mx = fmaxf(mx, m_s[w2 * kDecodeRows + r]);
          const float ref = mx == -INFINITY ? 0.0f : mx;
          const float f = fast_exp2(st.m[n][e] - ref);
          float* dst = red + (warp * kDecodeRows + r) * DP;
#pragma unroll
          for (int j = 0; j < DP / 16; ++j) {
            dst[keys_out_dim(j, g, 0)] = st.o[n][j][e] * f;
            dst[keys_out_dim(j, g, 1)] = st.o[n][j][2 + e] * f;
          }
        }
    } else {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      st.l[h] += __shfl_xor_sync(0xffffffffu, st.l[h], 1);
      st.l[h] += __shfl_xor_sync(0xffffffffu, st.l[h], 2);
    }
    cp_async_wait<0>();
    __syncthreads();
    if (lane % 4 == 0) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        m_s[warp * kDecodeRows + lane / 4 + 8 * h] = st.m[h];
        l_s[warp * kDecodeRows + lane / 4 + 8 * h] = st.l[h];
      }
    }
    __syncthreads();
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = lane / 4 + 8 * h;
      float mx = -INFINITY;
#pragma unroll
      for (int w2 = 0; w2 < C::kWarps; ++w2) mx = fmaxf(mx, m_s[w2 * kDecodeRows + r]);
      const float ref = mx == -INFINITY ? 0.0f : mx;
      const float f = fast_exp2(st.m[h] - ref);
      float* dst = red + (warp * kDecodeRows + r) * DP;
#pragma unroll
      for (int j = 0; j < DP / 8; ++j) {
        dst[8 * j + 2 * (lane % 4)] = st.o[j][2 * h] * f;
        dst[8 * j + 2 * (lane % 4) + 1] = st.o[j][2 * h + 1] * f;
      }
    }
    }
    __syncthreads();

    const bool split_mode = num_splits > 1;
    T* out = static_cast<T*>(p.o);
    for (int idx = threadIdx.x; idx < kDecodeRows * (DP / 4); idx += C::kThreads) {
      const int r = idx / (DP / 4), d = (idx % (DP / 4)) * 4;
      const int row = row0 + r;
      if (row >= pr.rows || d >= p.head_size) continue;
      float mx = -INFINITY;
#pragma unroll
      for (int w2 = 0; w2 < C::kWarps; ++w2) mx = fmaxf(mx, m_s[w2 * kDecodeRows + r]);
      const float ref = mx == -INFINITY ? 0.0f : mx;
      float L = 0.0f;
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int w2 = 0; w2 < C::kWarps; ++w2) {
        L += l_s[w2 * kDecodeRows + r] * fast_exp2(m_s[w2 * kDecodeRows + r] - ref);
        const float4 v = *reinterpret_cast<const float4*>(red + (w2 * kDecodeRows + r) * DP + d);
        acc[0] += v.x;
        acc[1] += v.y;
        acc[2] += v.z;
        acc[3] += v.w;
      }
      const int tok = pr.q_begin + row / p.group;
      const int head = kvh * p.group + row % p.group;
      if (!split_mode) {
        const bool has_sink = p.sinks != nullptr;
        const float sink = has_sink ? p.sinks[head] * kLog2e : 0.0f;
        const float sc = finish_scale(mx, L, sink, has_sink) * out_sc;
        if (p.lse != nullptr && d == 0) p.lse[tok * p.lse_stride_tok + head] = row_lse(mx, L, sink, has_sink);
        uint2 packed;
        packed.x = pack2<T>(acc[0] * sc, acc[1] * sc);
        packed.y = pack2<T>(acc[2] * sc, acc[3] * sc);
        *reinterpret_cast<uint2*>(out + tok * p.o_stride_tok + head * p.o_stride_head + d) = packed;
      } else {
        const float inv = L > 0.0f ? 1.0f / L : 0.0f;
        const std::int64_t prow =
            (std::int64_t(w.split) * p.num_part_tokens + w.part_base + row / p.group) * p.num_heads + head;
        *reinterpret_cast<float4*>(p.part_o + prow * p.head_size + d) =
            make_float4(acc[0] * inv, acc[1] * inv, acc[2] * inv, acc[3] * inv);
        if (d == 0) p.part_lse[prow] = L > 0.0f ? mx + __log2f(L) : -INFINITY;
      }
    }
    if (!split_mode) return;

    // ---- the last slice of a row tile to finish merges every slice (no second launch) ----
    // One thread's acquire-release arrival after the CTA's barrier publishes every thread's
    // partial (as cooperative groups' grid barrier does), where a fence in every thread
    // before and after it waited for the stores twice.
    __shared__ int last_slice;
    __syncthreads();
    if (threadIdx.x == 0) last_slice = arrive_acq_rel(p.split_counters + w.counter) == num_splits - 1;
    __syncthreads();
    if (!last_slice) return;
    for (int idx = threadIdx.x; idx < kDecodeRows * (DP / 4); idx += C::kThreads) {
      const int r = idx / (DP / 4), d = (idx % (DP / 4)) * 4;
      const int row = row0 + r;
      if (row >= pr.rows || d >= p.head_size) continue;
      const int tok = pr.q_begin + row / p.group;
      const int head = kvh * p.group + row % p.group;
      auto prow = [&](int sp) {
        return (std::int64_t(sp) * p.num_part_tokens + w.part_base + row / p.group) * p.num_heads + head;
      };
      const bool has_sink = p.sinks != nullptr;
      const float sink = has_sink ? p.sinks[head] * kLog2e : -INFINITY;
      // The partials come from L2. One pass with a running maximum (each slice's log-sum-exp
      // and partial output are loaded together), unrolled so that sixteen slices' loads are
      // in flight per round trip: a 32-slice merge waits for two round trips, where a pass
      // for the maximum and a second for the sum waited for eight.
      float mx = sink;
      float denom = has_sink ? 1.0f : 0.0f;
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 16
      for (int sp = 0; sp < num_splits; ++sp) {
        const float lse = __ldcg(p.part_lse + prow(sp));
        const float4 v = __ldcg(reinterpret_cast<const float4*>(p.part_o + prow(sp) * p.head_size + d));
        if (lse == -INFINITY) continue;  // an empty slice adds nothing
        const float m_new = fmaxf(mx, lse);
        const float keep = fast_exp2(mx - m_new);  // 0 while mx is -inf
        const float wgt = fast_exp2(lse - m_new);
        mx = m_new;
        denom = denom * keep + wgt;
        acc[0] = acc[0] * keep + wgt * v.x;
        acc[1] = acc[1] * keep + wgt * v.y;
        acc[2] = acc[2] * keep + wgt * v.z;
        acc[3] = acc[3] * keep + wgt * v.w;
      }
      const float inv = denom > 0.0f ? out_sc / denom : 0.0f;
      if (p.lse != nullptr && d == 0)  // the sink, when there is one, is in mx and denom already
        p.lse[tok * p.lse_stride_tok + head] = row_lse(mx, denom, -INFINITY, false);
      uint2 packed;
      packed.x = pack2<T>(acc[0] * inv, acc[1] * inv);
      packed.y = pack2<T>(acc[2] * inv, acc[3] * inv);
      *reinterpret_cast<uint2*>(out + tok * p.o_stride_tok + head * p.o_stride_head + d) = packed;
    }
    if (threadIdx.x == 0) p.split_counters[w.counter] = 0;  // every slice has arrived: ready for the next run
  }
}

}  // namespace

void launch_decode(const AttnParams& p, ScalarType e, int head_dim_pad, DecodeLoads loads, bool kv_fp8,
                   const void* kv_maps, int box_rows, bool programmatic, void* stream) {
  if (p.num_work == 0) return;
  CUtensorMap maps[2] = {};
  if (loads == kLoadsTma || loads == kLoadsTmaPages) std::memcpy(maps, kv_maps, sizeof(maps));
  dispatch_elem(e, [&]<class T>() {
    dispatch_decode_head_dim_pad(head_dim_pad, [&]<int DP>() {
      auto go = [&]<int LOADS, bool FP8>() {
        using C = DecodeConfig<T, DP, LOADS, FP8>;
        auto kernel = decode_kernel<T, DP, LOADS, FP8>;
        const char* how = FP8                      ? (LOADS == kLoadsTma ? "fp8 tma" : "fp8 cp.async")
                          : LOADS == kLoadsCpAsync ? "cp.async"
                          : LOADS == kLoadsBulk    ? "bulk"
                          : LOADS == kLoadsTma     ? "tma"
                                                   : "tma page boxes";
        auto cfg = [&] {
          return cfg_string(
              "elem={} kv={} head_size={} pad={} heads={}/{} work={} smem={} loads={} stages={} box_rows={}",
              to_string(e), FP8 ? "fp8_e4m3" : "same", p.head_size, DP, p.num_heads, p.num_kv_heads, p.num_work,
              C::kSmemBytes, how, C::kStages, box_rows);
        };
        static std::atomic<std::uint64_t> smem_set{0};
        set_max_smem_once(smem_set, kernel, int(C::kSmemBytes), "decode_kernel: cudaFuncSetAttribute", cfg);
        const cudaError_t err = launch_kernel(kernel, dim3(p.num_work), dim3(C::kThreads), C::kSmemBytes,
                                              static_cast<cudaStream_t>(stream), programmatic, p, maps[0], maps[1],
                                              box_rows);
        if (err != cudaSuccess) throw_cuda_error(static_cast<int>(err), "decode_kernel", cfg());
        check_launch_lazy("decode_kernel", cfg);
      };
      if (kv_fp8) {
        if constexpr (DP % 128 == 0) {  // fp8 heads are padded to whole 128-column boxes
          if (loads == kLoadsTma) go.template operator()<kLoadsTma, true>();
          else go.template operator()<kLoadsCpAsync, true>();
        } else {
          throw_cuda_error(static_cast<int>(cudaErrorInvalidValue), "decode_kernel",
                           cfg_string("an fp8 cache's head is padded to a multiple of 128 columns, not {}", DP));
        }
      } else if (loads == kLoadsBulk) go.template operator()<kLoadsBulk, false>();
      else if (loads == kLoadsTmaPages) {
        if constexpr (DP == 128 || DP == 256) go.template operator()<kLoadsTmaPages, false>();
        else
          throw_cuda_error(static_cast<int>(cudaErrorInvalidValue), "decode_kernel",
                           cfg_string("TMA page boxes take head sizes 128 and 256, not {}", DP));
      } else if (loads == kLoadsTma) go.template operator()<kLoadsTma, false>();
      else go.template operator()<kLoadsCpAsync, false>();
    });
  });
}

}  // namespace attnsel::kernel::cuda
