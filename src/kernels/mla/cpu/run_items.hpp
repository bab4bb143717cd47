// Runs work items of the CPU attention kernel (kernels/attention/cpu/work.hpp) for the MLA
// kernel's attention passes — the decode over the latent cache, the prefill's new tokens
// and its context chunks — on the caller's OpenMP team, and merges each group of split-KV
// partials (kernels/attention/cpu/split_merge.hpp) as its last split finishes. The sparse MLA
// attention points its items at its rows with the same function.
// Thread-safety: reentrant on distinct outputs and memory.
#pragma once

#include <atomic>
#include <cstddef>

#include "kernels/attention/cpu/work.hpp"
#include "kernels/attention/cpu/work_plan.hpp"

namespace attnsel::kernel::mla::cpu {

/// Plan-owned memory the items use: one scratch area per thread, the partial slots.
struct ItemMemory {
  std::byte* scratch = nullptr;  ///< `threads` areas of scratch_stride bytes (64-byte aligned)
  std::size_t scratch_stride = 0;
  int threads = 1;               ///< at most this many threads run the items
  float* partials = nullptr;     ///< work.num_partial_slots slots of partial_slot_floats(c.value_size())
  std::atomic<int>* parts_left = nullptr;  ///< one per split group: its splits still to finish
};

/// Points `c` at the rows its items read and write: queries `q` ([tokens, heads, ...], its
/// dtype and strides), outputs `out` (likewise) and the LSE at lse[token · lse_stride + head]
/// (none when lse is null).
void bind_rows(kernel::cpu::LayerCtx& c, const TensorView& q, const TensorView& out, float* lse,
               std::int64_t lse_stride);

/// Computes one item: kernel::cpu::process_item's contract.
using ItemKernel = void (*)(const kernel::cpu::LayerCtx& c, const kernel::cpu::WorkItem& item, float* partial_slot,
                            void* scratch);

/// Each item (computed by `compute`) writes its rows of c.out (and c.lse when set), or its
/// partial slot; each split group is merged into c.out / c.lse by the thread that finishes its
/// last split. The result does not depend on how many threads run it.
void run_items(const kernel::cpu::LayerCtx& c, const kernel::cpu::WorkPlan& work, const ItemMemory& memory,
               ItemKernel compute = kernel::cpu::process_item);

}  // namespace attnsel::kernel::mla::cpu
