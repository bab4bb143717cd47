// Prefill over the paged cache, FlashAttention-2 style (mma.sync, sm_80+): the portable
// path, and the one every head size and variant can take.
//
// One CTA = 64 packed query rows (4 warps × 16) of one KV head's group; keys stream in
// tiles of 64 (32 for head dimensions above 128) through a double-buffered cp.async
// pipeline; each warp keeps its rows' online-softmax state in registers and skips tiles
// its rows cannot see (causal, sliding window). On Hopper it also takes the fp8 (e4m3)
// batches the sm_90 prefill leaves: raw cp.async stages, widened in shared memory before
// each tile.
#include "kernels/attention/cuda/dispatch.cuh"
#include "kernels/attention/cuda/tile_common.cuh"

namespace attnsel::kernel::cuda {
namespace {

template <class T, int DP, bool FP8>
struct PrefillConfig {
  static constexpr int kThreads = 128;
  static constexpr int kRows = kPrefillRows;
  static constexpr int kKeys = DP <= 128 ? 64 : 32;
  static constexpr int kStages = 2;
  static constexpr int kRS = kRowStride<DP>;
  static constexpr int kQElems = kRows * kRS;
  static constexpr int kTileElems = kKeys * kRS;
  // An fp8 cache's stages hold raw e4m3 bytes (K then V); one widened T pair follows.
  static constexpr int kRawTileBytes = kKeys * DP;
  static constexpr std::size_t kStageBytes = FP8 ? 2 * kRawTileBytes : 2 * kTileElems * sizeof(T);
  static constexpr std::size_t kWideOffset = kStages * kStageBytes;
  static constexpr std::size_t kSmemBytes =
      kQElems * sizeof(T) + kWideOffset + (FP8 ? 2 * kTileElems * sizeof(T) : 0);
};

template <class T, int DP, bool FP8>
__device__ __forceinline__ void prefill_rows(const AttnParams& p) {
  using C = PrefillConfig<T, DP, FP8>;
  constexpr int kNT = C::kKeys / 8;  // 8-key mma tiles per key tile
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* qs = reinterpret_cast<T*>(smem_raw);
  T* pipe = qs + C::kQElems;
  const StagedTiles<T, C> tiles{pipe};

  const PrefillWork w = static_cast<const PrefillWork*>(p.work)[blockIdx.x];
  const int seq = w.seq, kvh = w.head;
  PackedRows pr;
  pr.q_begin = p.query_start_loc[seq];
  pr.q_len = p.query_start_loc[seq + 1] - pr.q_begin;
  const int seq_len = p.seq_lens[seq];
  pr.ctx = seq_len - pr.q_len;
  pr.rows = pr.q_len * p.group;
  const int row0 = w.row_tile * C::kRows;
  const int last_row = min(row0 + C::kRows - 1, pr.rows - 1);
  const KeyRange cta_first = visible_keys(p, pr.ctx + row0 / p.group, seq_len);
  const KeyRange cta_last = visible_keys(p, pr.ctx + last_row / p.group, seq_len);
  // Tiles are aligned to the key tile so they never straddle more pages than needed.
  const int kv_begin = cta_first.lo / C::kKeys * C::kKeys;
  const int kv_end = cta_last.hi;
  const int ntiles = kv_end > kv_begin ? (kv_end - kv_begin + C::kKeys - 1) / C::kKeys : 0;
  const std::int32_t* block_row = p.block_table + std::int64_t(seq) * p.block_table_stride;

  // fp8 caches land raw (cp.async) and are widened in shared memory before each tile.
  auto load_tile = [&](int t0, int stage) {
    if constexpr (FP8)
      load_kv_tile_e4m3_raw<DP, C::kKeys, C::kThreads>(p, block_row, kvh, t0, kv_end, tiles.raw_k(stage),
                                                       tiles.raw_v(stage));
    else
      load_kv_tile<T, DP, C::kKeys, C::kThreads>(p, block_row, kvh, t0, kv_end, tiles.k(stage), tiles.v(stage));
  };
  load_q_rows<T, DP, C::kRows, C::kThreads>(p, pr, kvh, row0, qs);
  if (ntiles > 0) load_tile(kv_begin, 0);
  cp_async_commit();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warp_row0 = row0 + warp * 16;
  const bool warp_active = warp_row0 < pr.rows;
  const int warp_last = min(warp_row0 + 15, pr.rows - 1);
  const KeyRange w_first = visible_keys(p, pr.ctx + min(warp_row0, pr.rows - 1) / p.group, seq_len);
  const KeyRange w_last = visible_keys(p, pr.ctx + warp_last / p.group, seq_len);
  WarpState<DP> st;
  st.init();
  const RowInfo ri = row_info(p, pr, kvh, warp_row0, seq_len);
  // The CTA's rows share one KV head: its fp8 scales (per head or per layer) apply to all.
  const ScoreScale score_sc = score_scale(p, kvh);
  const float out_sc = output_scale(p, kvh);
  std::uint32_t qf[DP / 16][4];

  for (int it = 0; it < ntiles; ++it) {
    cp_async_wait<0>();
    __syncthreads();
    if (it == 0) load_q_frags<DP>(qf, qs + warp * 16 * C::kRS);
    if constexpr (FP8) {  // every warp is past tile it - 1: the widened pair is free
      widen_e4m3_tile<T, DP, C::kKeys, C::kThreads>(tiles.raw_k(it % 2), tiles.wide_k(), threadIdx.x);
      widen_e4m3_tile<T, DP, C::kKeys, C::kThreads>(tiles.raw_v(it % 2), tiles.wide_v(), threadIdx.x);
    }
    if (it + 1 < ntiles) load_tile(kv_begin + (it + 1) * C::kKeys, (it + 1) % 2);  // into the stage widened at it - 1
    cp_async_commit();
    if constexpr (FP8) __syncthreads();  // the widened tile is complete

    const int key0 = kv_begin + it * C::kKeys;
    // Skip tiles none of this warp's rows can see.
    if (!warp_active || key0 >= w_last.hi || key0 + C::kKeys <= w_first.lo) continue;
    float s[kNT][4];
    qk_tile<T, DP, kNT>(s, qf, FP8 ? tiles.wide_k() : tiles.k(it % 2));
    const bool masked = key0 < w_last.lo || key0 + C::kKeys > w_first.hi;
    score_tile<kNT>(p, score_sc, s, key0, ri.pos, ri.vis, ri.alibi, masked);
    softmax_tile<DP, kNT>(st, s);
    pv_tile<T, DP, kNT>(st, s, FP8 ? tiles.wide_v() : tiles.v(it % 2));
  }
  cp_async_wait<0>();

  // ---- normalise and write: stage through this warp's own query rows -----------------
  __syncwarp();
  T* stage = qs + warp * 16 * C::kRS;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    st.l[h] += __shfl_xor_sync(0xffffffffu, st.l[h], 1);
    st.l[h] += __shfl_xor_sync(0xffffffffu, st.l[h], 2);
    const int row = min(warp_row0 + lane / 4 + 8 * h, pr.rows - 1);
    const int head = kvh * p.group + row % p.group;
    const bool has_sink = p.sinks != nullptr;
    const float sink = has_sink ? p.sinks[head] * kLog2e : 0.0f;
    const float sc = finish_scale(st.m[h], st.l[h], sink, has_sink) * out_sc;
    T* dst = stage + (lane / 4 + 8 * h) * C::kRS + 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < DP / 8; ++j)
      *reinterpret_cast<std::uint32_t*>(dst + 8 * j) = pack2<T>(st.o[j][2 * h] * sc, st.o[j][2 * h + 1] * sc);
  }
  __syncwarp();
  if (!warp_active) return;
  T* out = static_cast<T*>(p.o);
  constexpr int CH = DP / 8;
  for (int idx = lane; idx < 16 * CH; idx += 32) {
    const int r = idx / CH, c = idx % CH;
    const int row = warp_row0 + r;
    if (row >= pr.rows || c * 8 >= p.head_size) continue;
    const int tok = pr.q_begin + row / p.group;
    const int head = kvh * p.group + row % p.group;
    *reinterpret_cast<uint4*>(out + tok * p.o_stride_tok + head * p.o_stride_head + c * 8) =
        *reinterpret_cast<const uint4*>(stage + r * C::kRS + c * 8);
  }
}

template <class T, int DP, bool FP8>
__global__ void __launch_bounds__(128) prefill_sm80_kernel(const __grid_constant__ AttnParams p) {
  // fp8 caches run here on Hopper only: below sm_90 their instances are left empty.
  if constexpr (FP8 && !kHopperDeviceCode) return;
  else prefill_rows<T, DP, FP8>(p);
}

}  // namespace

void launch_prefill_sm80(const AttnParams& p, ScalarType e, int head_dim_pad, bool kv_fp8, void* stream) {
  if (p.num_work == 0) return;
  dispatch_elem(e, [&]<class T>() {
    dispatch_prefill_sm80_head_dim_pad(head_dim_pad, [&]<int DP>() {
      auto go = [&]<bool FP8>() {
        using C = PrefillConfig<T, DP, FP8>;
        auto kernel = prefill_sm80_kernel<T, DP, FP8>;
        auto cfg = [&] {
          return cfg_string("elem={} kv={} head_size={} pad={} heads={}/{} work={} smem={}",
                            to_string(e), FP8 ? "fp8_e4m3" : "same", p.head_size, DP, p.num_heads,
                            p.num_kv_heads, p.num_work, C::kSmemBytes);
        };
        static std::atomic<std::uint64_t> smem_set{0};
        set_max_smem_once(smem_set, kernel, int(C::kSmemBytes), "prefill_sm80_kernel: cudaFuncSetAttribute", cfg);
        kernel<<<p.num_work, C::kThreads, C::kSmemBytes, static_cast<cudaStream_t>(stream)>>>(p);
        check_launch_lazy("prefill_sm80_kernel", cfg);
      };
      if (kv_fp8) go.template operator()<true>();
      else go.template operator()<false>();
    });
  });
}

}  // namespace attnsel::kernel::cuda
