// The CPU MLA kernel's step plan: the batch (MlaBatch), the work items of each attention
// pass (the decode over the latent cache; the prefill's new tokens; each context chunk),
// which cached rows each chunk gathers, and every buffer the step's layers use — made in
// plan()/update(), so that execute() allocates nothing.
// Thread-safety: as StepPlan (executes only read it; update() must not overlap them).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attnsel/mla.hpp"
#include "kernels/attention/cpu/work_plan.hpp"
#include "kernels/mla/cpu/decode_work.hpp"
#include "kernels/mla/step_plan.hpp"

namespace attnsel::kernel::mla::cpu {

/// 64-byte aligned host memory that only grows.
class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  ~HostBuffer() { release(); }
  void reserve(std::size_t bytes);
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  std::size_t size() const { return bytes_; }

 private:
  void release();
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

/// One attention pass of the prefill, in the CPU attention kernel's terms: every prefill
/// request's query tokens (rows relative to the first prefill token) against keys and values
/// in a workspace, request i's key k at workspace row table[i][k].
struct PrefillPass {
  std::vector<std::int32_t> query_start_loc, seq_lens, table;
  int max_keys = 0;  ///< the table's row length
  kernel::cpu::WorkPlan work;
};

/// Cached positions [begin, end) of request `seq`, gathered into workspace rows from `row`.
struct ContextGather {
  int seq = 0;
  std::int64_t begin = 0, end = 0, row = 0;
};

struct ContextChunkPass {
  std::vector<ContextGather> gathers;
  std::int64_t rows = 0;  ///< workspace rows the chunk fills
  PrefillPass pass;
};

class CpuMlaPlan final : public MlaStepPlan {
 public:
  MlaPlanOptions options;
  int threads = 1;  ///< the cores the work is split for, and the most threads that run it

  kernel::cpu::WorkPlan decode;
  PrefillPass prefill;                   ///< the new tokens, causal
  std::vector<ContextChunkPass> chunks;  ///< the cached context, chunk by chunk, not causal
  std::int64_t max_chunk_rows = 0;

  std::size_t scratch_stride = 0;
  HostBuffer scratch, partials;
  /// One counter per split group of the pass with the most (run_items' merge bookkeeping).
  std::unique_ptr<std::atomic<int>[]> split_parts_left;
  std::size_t split_counters = 0;
  HostBuffer decode_query, decode_latent_out;  ///< [decode tokens, heads, 576] / [.., 512], activation dtype
  HostBuffer new_keys, new_values;             ///< [heads, prefill tokens, 192] / [.., 128], activation dtype
  HostBuffer suffix, suffix_lse;               ///< the new tokens' result, f32 [tokens, heads, 128] / [tokens, heads]
  HostBuffer prefix, prefix_lse;               ///< the context folded so far, likewise
  HostBuffer chunk_out, chunk_lse;             ///< one chunk's result, likewise
  HostBuffer gathered;                         ///< a chunk's latents, [rows, 576] activation dtype
  HostBuffer chunk_keys, chunk_values;         ///< their up-projection, [heads, rows, 192] / [.., 128]

  std::size_t workspace_bytes() const override;
  std::string describe() const override;
};

/// Fills `plan` for the checked batch in plan.batch: the decode items (split for plan.threads
/// cores, or into decode_splits key ranges when > 0), the prefill passes and the buffers.
void build_work(CpuMlaPlan& plan, const MlaLayerParams& p, int decode_splits);

}  // namespace attnsel::kernel::mla::cpu
