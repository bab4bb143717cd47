// The pieces of a synthetic MLA workload shared by `attnsel run` and `attnsel bench`: one
// layer's shape, its kv_b_proj and step inputs filled with FlashMLA-like magnitudes, and a
// batch of requests over a paged latent cache with a shuffled block table.
//
// Magnitudes (those of the MLA kernel tests, docs/DECISIONS.md "MLA kernels"): latents,
// rope keys and queries uniform with a standard deviation of 0.1; kv_b_proj's key rows with
// 4 and its value rows with 0.2, so that each head's logits and values are O(1) — the regime
// where a misplaced key or a wrong scale shows in the outputs.
// Thread-safety: plain values; a LatentBatch is not synchronised.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "attnsel/cache_dtype.hpp"
#include "attnsel/kernel.hpp"
#include "attnsel/mla.hpp"

namespace attnsel::runtime {

/// One MLA layer as a workload runs it: its dimensions on this rank, softmax scale,
/// activation and cache dtypes, fp8 scale and the cache's block size.
struct MlaLayerShape {
  kernel::MlaDims dims;
  float scale = 0.0f;
  kernel::ScalarType dtype = kernel::ScalarType::bf16;
  CacheDType kv_cache_dtype = CacheDType::auto_;
  int block_size = 16;

  /// The type the cache stores: the activation dtype, or e4m3 bytes for fp8.
  kernel::ScalarType cache_type() const;
  bool fp8() const;
  /// fp8 caches: the per-tensor k_scale the workload writes with (the latents' bound over
  /// e4m3's largest value, so the largest latent maps near 448); 1 otherwise.
  float k_scale() const;
  /// The layer's parameters with `kv_b_proj` (its data may be null: decode_latent only).
  kernel::MlaLayerParams params(const kernel::TensorView& kv_b_proj) const;
};

/// The bound of the uniform latents, rope keys and queries: std 0.1.
inline constexpr float kMlaInputRange = 0.17320508f;

/// A seed for stream `part` of a workload seeded with `seed` (SplitMix64's finaliser: nearby
/// seeds do not give shifted copies of each other's streams).
std::uint64_t mla_stream_seed(std::uint64_t seed, std::uint64_t part);

/// kv_b_proj, [num_heads · (qk_nope + v_head), kv_lora_rank] of the activation dtype:
/// key rows with std 4, value rows with std 0.2 (deterministic in `seed`).
void fill_kv_b_proj(std::span<std::uint8_t> bytes, const MlaLayerShape& shape, std::uint64_t seed);

/// A batch of `num_seqs` requests over a paged latent cache whose blocks are shuffled (a
/// request does not own contiguous memory, as in a serving engine). Each step, every
/// request has `done` tokens cached and adds `q` new ones.
class LatentBatch {
 public:
  /// Room for `max_tokens` positions per request (its blocks are allocated up front).
  LatentBatch(int num_seqs, std::int64_t max_tokens, int block_size, std::uint64_t seed);

  int num_seqs() const { return num_seqs_; }
  int num_blocks() const { return num_seqs_ * blocks_per_seq_; }
  int blocks_per_seq() const { return blocks_per_seq_; }
  int block_size() const { return block_size_; }

  /// The next step: `done` cached and `q` new tokens for every request.
  void set_step(int done, int q);
  /// Explicit per-request lengths (bench cases): seq_lens[i] tokens, query_lens[i] of them new.
  void set_requests(std::span<const int> seq_lens, std::span<const int> query_lens);
  kernel::AttentionMetadata metadata() const;
  int num_tokens() const { return qsl_.back(); }
  int query_start(int seq) const { return qsl_[static_cast<std::size_t>(seq)]; }
  int query_len(int seq) const { return qsl_[static_cast<std::size_t>(seq) + 1] - qsl_[static_cast<std::size_t>(seq)]; }
  int seq_len(int seq) const { return seq_lens_[static_cast<std::size_t>(seq)]; }
  /// Σ seq_len and Σ over requests of the (query, key) pairs a causal attention of the
  /// step's new tokens sees.
  double sum_seq_lens() const;
  double causal_pairs() const;

  /// The same batch with request `seq` alone (its table row, lengths and slots): views into
  /// this batch, valid until its next step.
  kernel::AttentionMetadata single(int seq) const;

 private:
  int num_seqs_ = 0, blocks_per_seq_ = 0, block_size_ = 16;
  std::vector<std::int32_t> block_table_, qsl_, seq_lens_;
  std::vector<std::int64_t> slots_;
  // single()'s arrays.
  mutable std::vector<std::int32_t> one_qsl_;
};

/// FlashMLA's accounting of MLA attention (printed beside every figure).
struct MlaCounts {
  /// Absorbed decode: 2 · N · s_q · Σ L · (latent_size + kv_lora_rank) FLOPs.
  static double decode_flops(const kernel::MlaDims& d, int s_q, double sum_seq_lens);
  /// Absorbed decode: Σ L · latent_size · e_kv + b · s_q · N · (latent_size + kv_lora_rank) · e_act bytes.
  static double decode_bytes(const kernel::MlaDims& d, int num_seqs, int s_q, double sum_seq_lens,
                             std::size_t cache_element, std::size_t activation_element);
  /// The 192/128 MHA of the prefill: 2 · N · (qk_head_size + v_head_dim) · (unmasked (q, k) pairs) FLOPs.
  static double prefill_flops(const kernel::MlaDims& d, double causal_pairs);
};

}  // namespace attnsel::runtime
