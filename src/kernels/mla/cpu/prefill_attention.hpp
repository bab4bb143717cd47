// The CPU MLA prefill's attention kernel for machines with AVX-512-BF16: multi-head
// attention of q/k width 192 and value width 128 over the up-projected keys and values of a
// workspace (the new tokens, causal; a chunk of cached context, without a mask). Per item
// (up to 64 query tokens of one head) and tile of 32 keys, Q·Kᵀ holds the rows across SIMD
// lanes and the keys' dim pairs broadcast from their rows; the softmax and P·V are the
// decode kernel's (tile_steps-inl.h). Other layers and machines run the CPU attention kernel.
// Thread-safety: reentrant; each call needs its own scratch.
#pragma once

#include <cstddef>

#include "kernels/attention/cpu/work.hpp"

namespace attnsel::kernel::mla::cpu {

/// True when run_prefill_item runs this pass's items on this machine: bf16 queries, keys and
/// values with AVX-512-BF16 dot products, widths 192 / 128, one workspace row per "block"
/// (block size 1), one KV head per query head, none of ALiBi, soft-cap, window, sinks or
/// per-head scales.
bool prefill_kernel_runs(const kernel::cpu::LayerCtx& c);

/// Bytes of per-thread scratch run_prefill_item needs.
std::size_t prefill_scratch_bytes();

/// One item (kernel::cpu::process_item's contract) of a pass prefill_kernel_runs accepts.
/// Items whose keys are not consecutive workspace rows, or that cover several KV heads, run
/// the CPU attention kernel.
void run_prefill_item(const kernel::cpu::LayerCtx& c, const kernel::cpu::WorkItem& item, float* partial_slot,
                      void* scratch);

}  // namespace attnsel::kernel::mla::cpu
