// The indexer's top-k on the GPU, with the CPU kernel's order exactly: a position's key is
// its score's order (NaN lowest, −0 as +0) above the complement of the position, so a larger
// key is a higher score, then a lower position, and every key of a row is distinct. One CTA
// per query token:
//   * a row of at most k positions takes all of them;
//   * a longer row finds the order T of its k-th highest score by a radix select (four
//     passes of 8 bits over the 32-bit orders), takes every position scoring above T and,
//     in position order, the lowest positions scoring T until it holds k;
// then sorts the k keys descending (CUB's block radix sort) and writes their positions,
// −1 after them. Deterministic: no result depends on the order of the atomics.
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>

#include "kernels/device/cuda/cuda_check.cuh"
#include "kernels/device/cuda/programmatic_launch.cuh"
#include "kernels/sparse_mla/cuda/launch.hpp"
#include "kernels/sparse_mla/cuda/sparse_device.cuh"

namespace attnsel::kernel::cuda::sparse_mla {
namespace {

constexpr int kBins = 256;

using Sort = cub::BlockRadixSort<unsigned long long, kTopKThreads, kTopKItems>;
using Scan = cub::BlockScan<int, kTopKThreads>;

__global__ void __launch_bounds__(kTopKThreads) top_k_kernel(const __grid_constant__ TopKParams p) {
  // The chosen keys live where the sort's scratch will: they are in registers by then.
  __shared__ union {
    typename Sort::TempStorage sort;
    unsigned long long chosen[kMaxTopK];
  } keys_smem;
  __shared__ typename Scan::TempStorage scan_smem;
  __shared__ int histogram[kBins];
  __shared__ int selected_bin, selected_rank, above;

  const int t = static_cast<int>(blockIdx.x);
  const int tid = static_cast<int>(threadIdx.x);
  const int len = p.row_len[p.token_begin + t];
  const float* row = p.logits + std::int64_t(t) * p.logits_stride;
  std::int32_t* out = p.indices + std::int64_t(t) * p.indices_stride;
  const int k = p.topk;
  const int take = min(len, k);

  // The threshold: every position when the row fits, else the order of its k-th highest
  // score (`threshold`) and how many positions scoring exactly that to take (`ties`).
  const bool all = len <= k;
  std::uint32_t threshold = 0;
  int ties = 0;
  if (!all) {
    std::uint32_t mask = 0;
    int rank = k;  // the rank sought among the positions matching the prefix so far
    for (int shift = 24; shift >= 0; shift -= 8) {
      for (int b = tid; b < kBins; b += kTopKThreads) histogram[b] = 0;
      __syncthreads();
      for (int s = tid; s < len; s += kTopKThreads) {
        const std::uint32_t o = score_order(row[s]);
        if ((o & mask) == threshold) atomicAdd(&histogram[(o >> shift) & 0xFFu], 1);
      }
      __syncthreads();
      if (tid == 0) {
        int seen = 0;
        for (int b = kBins - 1; b >= 0; --b) {
          if (seen + histogram[b] >= rank) {
            selected_bin = b;
            selected_rank = rank - seen;
            break;
          }
          seen += histogram[b];
        }
      }
      __syncthreads();
      threshold |= std::uint32_t(selected_bin) << shift;
      mask |= 0xFFu << shift;
      rank = selected_rank;
      __syncthreads();  // every thread has read them before thread 0 writes the next pass's
    }
    ties = rank;
  }

  // Collect: every position above the threshold (any order: the sort orders them), then the
  // lowest `ties` positions scoring the threshold, in position order.
  if (tid == 0) above = 0;
  __syncthreads();
  for (int s = tid; s < len; s += kTopKThreads) {
    const std::uint32_t o = score_order(row[s]);
    if (all || o > threshold) keys_smem.chosen[atomicAdd(&above, 1)] = rank_key(o, s);
  }
  __syncthreads();
  if (!all) {
    const int base = above;  // == k - ties
    int taken = 0;
    for (int s0 = 0; s0 < len && taken < ties; s0 += kTopKThreads) {
      const int s = s0 + tid;
      const int tie = s < len && score_order(row[s]) == threshold ? 1 : 0;
      int before = 0, total = 0;
      Scan(scan_smem).ExclusiveSum(tie, before, total);
      if (tie && taken + before < ties) keys_smem.chosen[base + taken + before] = rank_key(threshold, s);
      taken += total;
      __syncthreads();  // the scan's scratch is reused
    }
  }
  __syncthreads();

  unsigned long long keys[kTopKItems];
#pragma unroll
  for (int i = 0; i < kTopKItems; ++i) {
    const int slot = tid * kTopKItems + i;
    keys[i] = slot < take ? keys_smem.chosen[slot] : 0ull;  // 0 ranks below every position's key
  }
  __syncthreads();
  Sort(keys_smem.sort).SortDescendingBlockedToStriped(keys);
#pragma unroll
  for (int i = 0; i < kTopKItems; ++i) {
    const int rank = i * kTopKThreads + tid;
    if (rank < k) out[rank] = rank < take ? key_position(keys[i]) : -1;
  }
}

}  // namespace

void launch_top_k(const TopKParams& p, void* stream) {
  if (p.tokens == 0) return;
  check_cuda(launch_kernel(top_k_kernel, dim3(static_cast<unsigned>(p.tokens)), dim3(kTopKThreads), 0,
                           static_cast<cudaStream_t>(stream), false, p),
             "indexer top-k", cfg_string("{} tokens, topk {}", p.tokens, p.topk));
}

}  // namespace attnsel::kernel::cuda::sparse_mla
