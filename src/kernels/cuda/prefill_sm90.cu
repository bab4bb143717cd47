// Prefill over the paged cache on Hopper (sm_90a): TMA loads in a producer warpgroup,
// wgmma in two consumer warpgroups, mbarrier pipelines between them.
//
// One CTA = 128 query rows of one query head (64 per consumer warpgroup). The producer's
// single thread loads Q once and K/V tiles into a two-stage ring, page by page through the
// block table (one TMA box per page slice and 64-column chunk, 128-byte swizzled). Each
// consumer computes S = Q·Kᵀ with both operands in shared memory, applies the score
// modifiers and the online softmax in registers, and accumulates O += P·V with P taken
// straight from registers and V read transposed from shared memory.
//
// Every head size up to 256 (bf16/fp16 cache) takes this path, computed as 64, 128 or 256
// with the columns past the real size read as zeros by TMA. Ping-pong scheduling between
// the consumers and intra-warpgroup overlap of softmax with the next S are the next steps
// (docs/KERNELS.md).
#include <cuda.h>
#include "kernels/cuda/async_copy_sm90.cuh"
#include "kernels/cuda/dispatch.cuh"
#include "kernels/cuda/tile_common.cuh"
#include "kernels/cuda/wgmma_ops.cuh"

namespace attnsel::kernel::cuda {
namespace {

template <class T, int D>
struct HopperConfig {
  static constexpr int kThreads = 384;  // producer warpgroup + two consumer warpgroups
  static constexpr int kRows = kHopperRows;
  static constexpr int kKeys = hopper_key_tile(D);
  static constexpr int kNT = kKeys / 8;
  static_assert(kKeys % 16 == 0, "P·V steps over 16 keys");
  static constexpr int kStages = 2;
  static constexpr int kChunks = D / 64;  // 64-column (128-byte) swizzle atoms per row
  static constexpr std::uint32_t kQBytes = kRows * D * 2;
  static constexpr std::uint32_t kKVBytes = kKeys * D * 2;
  static constexpr std::uint32_t kBarOffset = kQBytes + 2 * kStages * kKVBytes;
  static constexpr std::uint32_t kNumBars = 1 + 4 * kStages;
  static constexpr std::size_t kSmemBytes = kBarOffset + 8 * kNumBars + 1024;  // + alignment slack
  static_assert(kSmemBytes <= 232448, "more shared memory than a Hopper CTA may have");
};

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ATTNSEL_SM90A 1
#endif

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
template <int NT> __device__ __forceinline__ void fence_operand(float (&a)[NT][4]) {
#pragma unroll
  for (int i = 0; i < NT; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(a[i][e])::"memory");
}
/// Barrier waits: at d=256 the consumers need their full setmaxnreg budget, which ptxas
/// grants only around the asm-loop wait; at d≤128 the C++-loop wait measured 6–15 % faster.
template <int D> __device__ __forceinline__ void wait_phase(std::uint32_t bar, std::uint32_t parity) {
  if constexpr (D > 128) mbar_wait_in_asm(bar, parity);
  else mbar_wait(bar, parity);
}
__device__ __forceinline__ void named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

/// Shared-memory matrix descriptor, 128-byte swizzle. lbo/sbo in bytes.
__device__ __forceinline__ std::uint64_t smem_desc(std::uint32_t addr, std::uint32_t lbo, std::uint32_t sbo) {
  std::uint64_t d = 0;
  d |= std::uint64_t((addr & 0x3FFFF) >> 4);
  d |= std::uint64_t((lbo >> 4) & 0x3FFF) << 16;
  d |= std::uint64_t((sbo >> 4) & 0x3FFF) << 32;
  d |= std::uint64_t(1) << 62;
  return d;
}

template <class T, int D>
__global__ void __launch_bounds__(384, 1)
    prefill_sm90_kernel(const __grid_constant__ AttnParams p, const __grid_constant__ CUtensorMap tm_q,
                        const __grid_constant__ CUtensorMap tm_k, const __grid_constant__ CUtensorMap tm_v,
                        const int box_rows) {
#ifdef ATTNSEL_SM90A
  using C = HopperConfig<T, D>;
  extern __shared__ unsigned char smem_raw[];
  const std::uint32_t raw = smem_addr(smem_raw);
  const std::uint32_t base = (raw + 1023u) & ~1023u;
  unsigned char* base_ptr = smem_raw + (base - raw);
  const std::uint32_t q_s = base;
  auto k_s = [&](int s) { return base + C::kQBytes + s * C::kKVBytes; };
  auto v_s = [&](int s) { return base + C::kQBytes + (C::kStages + s) * C::kKVBytes; };
  const std::uint32_t bars = base + C::kBarOffset;
  const std::uint32_t q_full = bars;
  auto k_full = [&](int s) { return bars + 8 * (1 + s); };
  auto v_full = [&](int s) { return bars + 8 * (1 + C::kStages + s); };
  auto k_empty = [&](int s) { return bars + 8 * (1 + 2 * C::kStages + s); };
  auto v_empty = [&](int s) { return bars + 8 * (1 + 3 * C::kStages + s); };

  const PrefillWork w = static_cast<const PrefillWork*>(p.work)[blockIdx.x];
  const int seq = w.seq, head = w.head, kvh = head / p.group;
  const int q_begin = p.query_start_loc[seq];
  const int q_len = p.query_start_loc[seq + 1] - q_begin;
  const int seq_len = p.seq_lens[seq];
  const int ctx = seq_len - q_len;
  const int q0 = w.row_tile * C::kRows;
  const int rows_valid = min(C::kRows, q_len - q0);
  const KeyRange cta_first = visible_keys(p, ctx + q0, seq_len);
  const KeyRange cta_last = visible_keys(p, ctx + q0 + rows_valid - 1, seq_len);
  const int kv_begin = cta_first.lo / C::kKeys * C::kKeys;
  const int kv_end = cta_last.hi;
  const int ntiles = kv_end > kv_begin ? (kv_end - kv_begin + C::kKeys - 1) / C::kKeys : 0;

  if (threadIdx.x == 0) {
    mbar_init(q_full, 1);
    for (int s = 0; s < C::kStages; ++s) {
      mbar_init(k_full(s), 1);
      mbar_init(v_full(s), 1);
      mbar_init(k_empty(s), 8);  // one arrival per consumer warp
      mbar_init(v_empty(s), 8);
    }
    mbar_fence_init();
  }
  __syncthreads();

  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    // ---------------- producer ----------------
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
    // Warp 0 produces: lane b fetches the page of box b (one coalesced load per tile, ahead
    // of the wait) and issues that box's copies, so no lane walks the block table serially.
    if (threadIdx.x < 32 && ntiles > 0) {
      const int lane = threadIdx.x;
      if (lane == 0) {
        mbar_arrive_expect_tx(q_full, C::kQBytes);
        for (int c = 0; c < C::kChunks; ++c)
          tma_load_3d(q_s + c * C::kRows * 128, &tm_q, q_full, c * 64, head, q_begin + q0);
      }
      const std::int32_t* block_row = p.block_table + std::int64_t(seq) * p.block_table_stride;
      const int boxes_per_tile = C::kKeys / box_rows;
      for (int t = 0; t < ntiles; ++t) {
        const int s = t % C::kStages;
        const std::uint32_t par = (t / C::kStages) & 1;
        const int key0 = kv_begin + t * C::kKeys;
        const int nbox = min(boxes_per_tile, (seq_len - key0 + box_rows - 1) / box_rows);
        const std::uint32_t bytes = std::uint32_t(nbox) * box_rows * 128 * C::kChunks;
        int page = 0, off = 0;
        if (lane < nbox) {
          const int key = key0 + lane * box_rows;
          page = block_row[key / p.block_size];
          off = key % p.block_size;
        }
        if (lane == 0) {
          wait_phase<D>(k_empty(s), par ^ 1);
          mbar_arrive_expect_tx(k_full(s), bytes);
        }
        __syncwarp();
        if (lane < nbox)
          for (int c = 0; c < C::kChunks; ++c)
            tma_load_4d(k_s(s) + c * C::kKeys * 128 + lane * box_rows * 128, &tm_k, k_full(s), c * 64, kvh, off, page);
        if (lane == 0) {
          wait_phase<D>(v_empty(s), par ^ 1);
          mbar_arrive_expect_tx(v_full(s), bytes);
        }
        __syncwarp();
        if (lane < nbox)
          for (int c = 0; c < C::kChunks; ++c)
            tma_load_4d(v_s(s) + c * C::kKeys * 128 + lane * box_rows * 128, &tm_v, v_full(s), c * 64, kvh, off, page);
      }
    }
  } else {
    // ---------------- consumers ----------------
    asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");
    const int cw = wg - 1;
    const int ctid = threadIdx.x - 128;
    const int warp_in = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    const int wg_row0 = cw * 64;
    RowInfo ri;
    const bool has_alibi = p.alibi_slopes != nullptr;
    const float slope = has_alibi ? p.alibi_slopes[head] * kLog2e : 0.0f;
    // 16-bit caches only (the planner sends fp8 to the portable kernel): no per-head scales.
    const ScoreScale score_sc = score_scale(p, kvh);
  #pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = min(wg_row0 + warp_in * 16 + lane / 4 + 8 * h, rows_valid - 1);
      ri.pos[h] = ctx + q0 + r;
      ri.vis[h] = visible_keys(p, ri.pos[h], seq_len);
      ri.alibi[h] = slope;
    }
    const KeyRange wg_first = visible_keys(p, ctx + q0 + min(wg_row0, rows_valid - 1), seq_len);
    const KeyRange wg_last = visible_keys(p, ctx + q0 + min(wg_row0 + 63, rows_valid - 1), seq_len);
    const int full_lo = wg_last.lo, full_hi = wg_first.hi;

    WarpState<D> st;
    st.init();
    float sacc[C::kNT][4];
    if (ntiles > 0) wait_phase<D>(q_full, 0);

    for (int t = 0; t < ntiles; ++t) {
      const int s = t % C::kStages;
      const std::uint32_t par = (t / C::kStages) & 1;
      const int key0 = kv_begin + t * C::kKeys;

      wait_phase<D>(k_full(s), par);
      fence_operand<C::kNT>(sacc);
      wgmma_fence();
  #pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        const std::uint64_t da =
            smem_desc(q_s + (kk / 4) * C::kRows * 128 + wg_row0 * 128 + (kk % 4) * 32, 16, 1024);
        const std::uint64_t db = smem_desc(k_s(s) + (kk / 4) * C::kKeys * 128 + (kk % 4) * 32, 16, 1024);
        WgmmaSS<T, C::kKeys>::run(sacc, da, db, kk > 0 ? 1 : 0);
      }
      wgmma_commit();
      wgmma_wait<0>();
      fence_operand<C::kNT>(sacc);
      __syncwarp();
      if (lane == 0) mbar_arrive(k_empty(s));

      const bool masked = key0 < full_lo || key0 + C::kKeys > full_hi;
      score_tile<C::kNT>(p, score_sc, sacc, key0, ri.pos, ri.vis, ri.alibi, masked);
      softmax_tile<D, C::kNT>(st, sacc);

      wait_phase<D>(v_full(s), par);
      if (key0 + C::kKeys > seq_len) {
        // Rows past the sequence hold stale or unloaded data (maybe NaN): zero them, so
        // that P = 0 there contributes exactly nothing.
        const int first_bad = seq_len - key0;
        const int n16 = (C::kKeys - first_bad) * C::kChunks * 8;
        for (int idx = ctid; idx < n16; idx += 256) {
          const int row = first_bad + idx / (C::kChunks * 8);
          const int c = (idx / 8) % C::kChunks;
          uint4* dst = reinterpret_cast<uint4*>(base_ptr + (v_s(s) - base) + c * C::kKeys * 128 + row * 128 +
                                                (idx % 8) * 16);
          *dst = make_uint4(0, 0, 0, 0);
        }
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        named_barrier(1, 256);
      }
      // P as register A-fragments, all packed before the first wgmma so the compiler need
      // not fence between them.
      std::uint32_t pa[C::kKeys / 16][4];
  #pragma unroll
      for (int kb = 0; kb < C::kKeys / 16; ++kb) {
        pa[kb][0] = pack2<T>(sacc[2 * kb][0], sacc[2 * kb][1]);
        pa[kb][1] = pack2<T>(sacc[2 * kb][2], sacc[2 * kb][3]);
        pa[kb][2] = pack2<T>(sacc[2 * kb + 1][0], sacc[2 * kb + 1][1]);
        pa[kb][3] = pack2<T>(sacc[2 * kb + 1][2], sacc[2 * kb + 1][3]);
      }
      fence_operand<D / 8>(st.o);
      wgmma_fence();
  #pragma unroll
      for (int kb = 0; kb < C::kKeys / 16; ++kb) {
        const std::uint64_t dv = smem_desc(v_s(s) + kb * 16 * 128, C::kKeys * 128, 1024);
        WgmmaRS<T, D>::run(st.o, pa[kb], dv, 1);
      }
      wgmma_commit();
      wgmma_wait<0>();
      fence_operand<D / 8>(st.o);
      __syncwarp();
      if (lane == 0) mbar_arrive(v_empty(s));
    }

    // ---- epilogue: normalise, stage in this warpgroup's Q rows (swizzled), store --------
    named_barrier(2 + cw, 128);  // every warp of this warpgroup is done reading its Q rows
    const bool has_sink = p.sinks != nullptr;
    const float sink = has_sink ? p.sinks[head] * kLog2e : 0.0f;
  #pragma unroll
    for (int h = 0; h < 2; ++h) {
      st.l[h] += __shfl_xor_sync(0xffffffffu, st.l[h], 1);
      st.l[h] += __shfl_xor_sync(0xffffffffu, st.l[h], 2);
      const float sc = finish_scale(st.m[h], st.l[h], sink, has_sink);
      const int r = wg_row0 + warp_in * 16 + lane / 4 + 8 * h;
  #pragma unroll
      for (int j = 0; j < D / 8; ++j) {
        const int d = 8 * j + 2 * (lane % 4);
        const int c = d / 64, chunk = (d % 64) / 8;
        unsigned char* dst = base_ptr + c * C::kRows * 128 + r * 128 + ((chunk ^ (r % 8)) * 16) + (d % 8) * 2;
        *reinterpret_cast<std::uint32_t*>(dst) = pack2<T>(st.o[j][2 * h] * sc, st.o[j][2 * h + 1] * sc);
      }
    }
    named_barrier(2 + cw, 128);
    T* out = static_cast<T*>(p.o);
    constexpr int CH = D / 8;
    for (int idx = ctid % 128; idx < 64 * CH; idx += 128) {
      const int rl = idx / CH, d = (idx % CH) * 8;
      const int r = wg_row0 + rl;
      if (r >= rows_valid || d >= p.head_size) continue;  // padded rows and columns
      const int c = d / 64, chunk = (d % 64) / 8;
      const uint4 v = *reinterpret_cast<const uint4*>(base_ptr + c * C::kRows * 128 + r * 128 + ((chunk ^ (r % 8)) * 16));
      *reinterpret_cast<uint4*>(out + std::int64_t(q_begin + q0 + r) * p.o_stride_tok + head * p.o_stride_head + d) = v;
    }
  }
#endif
}

}  // namespace

void launch_prefill_sm90(const AttnParams& p, Elem e, int head_size, const void* tma, int box_rows, void* stream) {
  if (p.num_work == 0) return;
  const CUtensorMap* maps = static_cast<const CUtensorMap*>(tma);
  dispatch_elem(e, [&]<class T>() {
    auto go = [&]<int D>() {
      using C = HopperConfig<T, D>;
      auto kernel = prefill_sm90_kernel<T, D>;
      auto cfg = [&] {
        return cfg_string("elem={} head_size={} (as {}) heads={}/{} work={} box_rows={} block_size={} smem={}",
                          e == Elem::bf16 ? "bf16" : "f16", head_size, D, p.num_heads, p.num_kv_heads, p.num_work,
                          box_rows, p.block_size, C::kSmemBytes);
      };
      static std::atomic<std::uint64_t> smem_set{0};
      set_max_smem_once(smem_set, kernel, int(C::kSmemBytes), "prefill_sm90_kernel: cudaFuncSetAttribute", cfg);
      kernel<<<p.num_work, C::kThreads, C::kSmemBytes, static_cast<cudaStream_t>(stream)>>>(p, maps[0], maps[1],
                                                                                              maps[2], box_rows);
      check_launch_lazy("prefill_sm90_kernel", cfg);
    };
    switch (hopper_head_dim(head_size)) {
      case 64: go.template operator()<64>(); break;
      case 128: go.template operator()<128>(); break;
      case 256: go.template operator()<256>(); break;
      default:
        throw_cuda_error(static_cast<int>(cudaErrorInvalidValue), "prefill_sm90_kernel",
                         cfg_string("head size {} is above 256", head_size));
    }
  });
}

}  // namespace attnsel::kernel::cuda
