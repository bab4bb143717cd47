// The plain reference: paged attention and the cache writer, one query and one head at a
// time, accumulated in double precision. Obviously correct rather than fast; used by the
// tests, by `attnsel run --check` and by the CUDA kernels' tests. Semantics: semantics.hpp.
// Thread-safety: all functions are reentrant.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "attnsel/kernel.hpp"

namespace attnsel::kernel::reference {

/// The element at `offset` (in elements) of a buffer of type `t`, decoded to double
/// (fp8 without its scale).
double load(const void* base, ScalarType t, std::int64_t offset);
/// Encodes `v` as type `t` (round to nearest even; fp8 saturates) at `offset`.
void store(void* base, ScalarType t, std::int64_t offset, double v);

/// vLLM's reshape_and_cache: validates, then writes token i's key and value to
/// slot_mapping[i] (fp8 caches store value / scale, the scale of the
/// value's KV head when the layer has per-head scales).
void write_kv_cache(const LayerParams& p, const TensorView& key, const TensorView& value, const KVCacheView& cache,
                    const AttentionMetadata& md);

/// Validates, then writes every query token's attention output into `output` (its dtype).
void forward(const LayerParams& p, const TensorView& query, const KVCacheView& cache, const AttentionMetadata& md,
             const TensorView& output);

/// The same, and the natural log of each row's softmax denominator (sinks included; the
/// sink alone, or -inf, for a row that sees no key) into lse: f32 [num_tokens, num_heads].
void forward(const LayerParams& p, const TensorView& query, const KVCacheView& cache, const AttentionMetadata& md,
             const TensorView& output, const TensorView* lse);

/// Validates, then returns the exact (double) outputs of the given query tokens, laid out
/// [tokens.size(), num_heads, head_size]. Lets a checker sample a large batch cheaply.
std::vector<double> attend(const LayerParams& p, const TensorView& query, const KVCacheView& cache,
                           const AttentionMetadata& md, std::span<const std::int32_t> tokens);

/// The reference as an AttentionImpl (for code that runs any backend's impl).
std::unique_ptr<AttentionImpl> make_reference_impl(const LayerParams& p);

}  // namespace attnsel::kernel::reference
