// The CPU MLA decode's own attention kernel for machines with AVX-512-BF16 and VBMI: the
// absorbed queries of up to 64 rows (tokens × heads of one request) against the 576-wide
// latent cache, the values being each latent's first 512 entries. It reads every latent row
// once per item for all the item's rows: per 16-key run of the cache, Q·Kᵀ holds the rows
// across SIMD lanes and 16 / (rows / 16) keys in registers (one query load feeds 16 dot
// products, the keys are broadcast straight from the cache); P·V interleaves key pairs in
// registers and feeds each to 8 rows' accumulators of 32 value dims. An fp8 cache is widened
// to bfloat16 once per run (a table lookup per byte), shared by both products, during the
// Q·Kᵀ of the run before.
// Items of at most 8 rows, and layers this kernel does not cover, run the CPU attention
// kernel (kernels/attention/cpu) instead.
// Thread-safety: reentrant; each call needs its own scratch.
#pragma once

#include <cstddef>

#include "kernels/attention/cpu/work.hpp"

namespace attnsel::kernel::mla::cpu {

/// True when run_latent_item runs this layer's decode items on this machine: bf16
/// queries with AVX-512-BF16 dot products, a bf16 or fp8 e4m3 latent cache of 576-entry
/// rows whose values are the keys' first 512 entries, one KV head, none of ALiBi, soft-cap,
/// window, sinks or per-head scales.
bool latent_kernel_runs(const kernel::cpu::LayerCtx& c);

/// Bytes of per-thread scratch run_latent_item needs (at most kernel::cpu::scratch_bytes(576)).
std::size_t latent_scratch_bytes();

/// One decode item (the CPU attention kernel's contract: kernel::cpu::process_item) for a
/// layer latent_kernel_runs accepts.
void run_latent_item(const kernel::cpu::LayerCtx& c, const kernel::cpu::WorkItem& item, float* partial_slot,
                     void* scratch);

}  // namespace attnsel::kernel::mla::cpu
