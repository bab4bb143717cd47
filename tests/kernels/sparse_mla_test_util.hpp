// Shared by the sparse MLA kernel tests: a step's batch with permuted block tables (garbage
// past the used blocks) over caches whose rows nobody wrote are poisoned (NaN bytes), the
// indexer's inputs (queries, head weights, keys written by the reference writer), the
// sparse attention's inputs (FlashMLA-like latents and queries, kv_b_proj as the MLA tests
// scale it) and index rows with -1 scattered and trailing; DeepGEMM's calc_diff; the check
// that a call is refused with a ValueError naming the problem; the checks, bounds and cases
// the CPU and GPU kernels' tests have in common.
#pragma once

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "attnsel/errors.hpp"
#include "attnsel/sparse_mla.hpp"
#include "kernels/attention/reference.hpp"
#include "kernels/sparse_mla/reference.hpp"
#include "kernel_test_util.hpp"
#include "mla_test_util.hpp"

namespace attnsel::kernel::sparse_mla::testing {

using kernel::testing::expect_value_error;
using mla::testing::Buffer;
using mla::testing::compare;
using mla::testing::Request;
using mla::testing::Tolerance;

/// −∞ as the tests compare it: a score past its row's positions, the log-sum-exp of a row
/// with no entry.
inline constexpr double kNegInf = -std::numeric_limits<double>::infinity();

/// DeepGEMM's calc_diff (vLLM's indexer tests): 1 - 2Σxy / Σ(x² + y²) over the cells where
/// the reference is finite (a cell where only one side is finite counts as a difference of 1).
inline double calc_diff(const std::vector<double>& got, const std::vector<double>& ref) {
  double xy = 0.0, sq = 0.0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(ref[i])) {
      if (std::isfinite(got[i])) return 1.0;
      continue;
    }
    if (!std::isfinite(got[i])) return 1.0;
    xy += got[i] * ref[i];
    sq += got[i] * got[i] + ref[i] * ref[i];
  }
  return sq > 0.0 ? 1.0 - 2.0 * xy / sq : 0.0;
}

/// A batch over a paged cache: query_start_loc, seq_lens, a permuted block table with holes
/// and garbage past each request's blocks, slots of the new tokens.
struct Batch {
  std::vector<std::int32_t> query_start_loc{0}, seq_lens, block_table;
  std::vector<std::int64_t> slot_mapping;
  AttentionMetadata md;
  int num_blocks = 0, block_size = 0, tokens = 0;

  Batch(const std::vector<Request>& requests, int bs, std::mt19937_64& rng) : block_size(bs) {
    int max_blocks = 1, total = 0, max_q = 0, max_s = 0;
    for (const Request& r : requests) {
      query_start_loc.push_back(query_start_loc.back() + r.query_len);
      seq_lens.push_back(r.seq_len);
      const int used = (r.seq_len + bs - 1) / bs;
      max_blocks = std::max(max_blocks, used + 2);
      total += used;
      max_q = std::max(max_q, r.query_len);
      max_s = std::max(max_s, r.seq_len);
    }
    tokens = query_start_loc.back();
    num_blocks = 2 * total + 3;
    std::vector<std::int32_t> ids(static_cast<std::size_t>(num_blocks));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    const int n = static_cast<int>(requests.size());
    block_table.assign(static_cast<std::size_t>(n) * static_cast<std::size_t>(max_blocks), 2147480000);
    std::size_t next = 0;
    for (int i = 0; i < n; ++i)
      for (int b = 0; b < (requests[static_cast<std::size_t>(i)].seq_len + bs - 1) / bs; ++b)
        block_table[static_cast<std::size_t>(i * max_blocks + b)] = ids[next++];
    md.num_seqs = n;
    md.num_actual_tokens = tokens;
    md.max_blocks_per_seq = max_blocks;
    md.max_query_len = max_q;
    md.max_seq_len = max_s;
    for (int i = 0; i < n; ++i) {
      const Request& r = requests[static_cast<std::size_t>(i)];
      for (int j = 0; j < r.query_len; ++j)
        slot_mapping.push_back(r.seq_len == 0 ? -1 : slot_of(i, r.seq_len - r.query_len + j));
    }
    bind();
  }
  Batch(const Batch& o) : query_start_loc(o.query_start_loc), seq_lens(o.seq_lens), block_table(o.block_table),
                          slot_mapping(o.slot_mapping), md(o.md), num_blocks(o.num_blocks),
                          block_size(o.block_size), tokens(o.tokens) {
    bind();
  }
  void bind() {
    md.query_start_loc = query_start_loc;
    md.seq_lens = seq_lens;
    md.block_table = block_table;
    md.slot_mapping = slot_mapping;
  }
  std::int64_t slot_of(int seq, std::int64_t pos) const {
    return static_cast<std::int64_t>(
               block_table[static_cast<std::size_t>(seq * md.max_blocks_per_seq + pos / block_size)]) *
               block_size +
           pos % block_size;
  }
  int seq_of(int token) const {
    int s = 0;
    while (query_start_loc[static_cast<std::size_t>(s) + 1] <= token) ++s;
    return s;
  }
};

// ---------------------------------------------------------------------------------------
// The indexer

struct IndexerSetup {
  int heads = 64;
  int block_size = 64;
  int topk = 2048;
  ScalarType dtype = ScalarType::bf16;
  ScalarType weights_dtype = ScalarType::f32;
  std::vector<Request> requests;
  std::uint64_t seed = 1;
  double q_sigma = 1.0, k_sigma = 1.0, w_sigma = 0.3;
};

inline std::string describe(const IndexerSetup& s) {
  std::string reqs;
  for (const Request& r : s.requests) reqs += fmt::format("({},{})", r.seq_len, r.query_len);
  return fmt::format("heads={} block={} topk={} dtype={} weights={} requests={}", s.heads, s.block_size, s.topk,
                     to_string(s.dtype), to_string(s.weights_dtype), reqs);
}

/// An indexer step: every cached position of every request holds a key written by the
/// reference writer (the context as earlier steps left it, the new tokens from `k`); every
/// other byte of the cache is 0xFF (e4m3 NaN values, NaN scales).
class IndexerWorkload {
 public:
  explicit IndexerWorkload(const IndexerSetup& s);

  void poison_outputs() {
    logits.poison();
    std::fill(indices.bytes.begin(), indices.bytes.end(), 0x5A);
  }
  template <class Dist>
  void fill(Buffer& b, double sigma, Dist& normal) {
    const std::size_t n = b.bytes.size() / element_size(b.view.dtype);
    for (std::size_t i = 0; i < n; ++i)
      kernel::reference::store(b.bytes.data(), b.view.dtype, static_cast<std::int64_t>(i), normal(rng) * sigma);
  }
  /// The kernel's index rows [tokens][topk].
  std::vector<std::int32_t> index_rows() const {
    std::vector<std::int32_t> out(static_cast<std::size_t>(batch.tokens) * static_cast<std::size_t>(setup.topk));
    std::memcpy(out.data(), indices.bytes.data(), out.size() * sizeof(std::int32_t));
    return out;
  }
  /// The kernel's scores [tokens][width] as double.
  std::vector<double> scores() const {
    std::vector<double> out(static_cast<std::size_t>(batch.tokens) * static_cast<std::size_t>(width));
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = reinterpret_cast<const float*>(logits.bytes.data())[i];
    return out;
  }
  std::vector<double> reference_scores() const {
    return reference::logits(params, batch.md, q.view, weights.view, key_cache.view, width);
  }

  IndexerSetup setup;
  std::mt19937_64 rng;
  Batch batch;
  IndexerLayerParams params;
  Buffer q, weights, k, key_cache, logits, indices;
  std::int64_t width = 0;
};

/// Rows of a top-k against the reference top-k of the same scores: identical.
inline void expect_top_k_of_scores(const IndexerWorkload& w, const std::vector<std::int32_t>& got,
                                   const std::string& what) {
  const std::vector<std::int64_t> lengths = reference::row_lengths(w.batch.md);
  const std::vector<std::int32_t> want = reference::top_k(w.scores(), w.width, lengths, w.setup.topk);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i], want[i]) << "row " << i / static_cast<std::size_t>(w.setup.topk) << " entry "
                               << i % static_cast<std::size_t>(w.setup.topk) << ", " << what;
}

// ---------------------------------------------------------------------------------------
// The sparse attention

struct SparseSetup {
  int heads = 16;
  int block_size = 64;
  int topk = 64;
  ScalarType dtype = ScalarType::bf16;
  CacheDType kv_cache_dtype = CacheDType::auto_;
  std::vector<Request> requests;
  std::uint64_t seed = 1;
  double invalid = 0.15;     ///< share of an index row's entries that are -1 (scattered)
  int trailing = 3;          ///< -1 entries at the end of each row (at least)
  float latent_scale = 1.0f;
};

inline std::string describe(const SparseSetup& s) {
  std::string reqs;
  for (const Request& r : s.requests) reqs += fmt::format("({},{})", r.seq_len, r.query_len);
  return fmt::format("heads={} block={} topk={} dtype={} kv={} requests={}", s.heads, s.block_size, s.topk,
                     to_string(s.dtype), cache_dtype_name(s.kv_cache_dtype), reqs);
}

/// A sparse attention step: the layer (kv_b_proj key rows ~ N(0, 4²), value rows ~ N(0,
/// 0.2²)), queries and latents ~ N(0, 0.1²) clamped to ±1, a cache where every position of
/// every request was written by the reference writer and every other byte is NaN (0xFF),
/// and index rows: each token's positions it sees in random order, a share replaced by -1,
/// the rest of the row -1.
class SparseWorkload {
 public:
  explicit SparseWorkload(const SparseSetup& s);

  Buffer indices_buffer(const std::vector<std::int32_t>& rows) const {
    Buffer b(ScalarType::i32, {batch.tokens + 2, setup.topk});
    std::fill(b.bytes.begin(), b.bytes.end(), 0xEE);  // rows past the batch: garbage, never read
    std::memcpy(b.bytes.data(), rows.data(), rows.size() * sizeof(std::int32_t));
    return b;
  }
  void set_physical(const std::vector<std::int32_t>& rows) {
    physical = rows;
    physical_buf = indices_buffer(rows);
  }
  void poison_outputs() {
    output.poison();
    latent_out.poison();
    lse.poison();
  }

  reference::Result latent_reference() const {
    return reference::attend_latent(params, q_latent.view, physical, cache.view, batch.tokens);
  }
  reference::Result reference() const { return reference::attend(params, q.view, physical, cache.view, batch.tokens); }

  SparseSetup setup;
  std::mt19937_64 rng;
  Batch batch;
  SparseMlaLayerParams params;
  Buffer weights, q, q_latent, kv_c, k_pe, cache, output, latent_out, lse, local_buf, physical_buf;
  std::vector<std::int32_t> local, physical;
};

/// A plan that writes the log-sum-exp, with decode requests of up to 4 query tokens.
inline SparseMlaPlanOptions with_lse() {
  SparseMlaPlanOptions o;
  o.lse = true;
  o.decode_query_len = 4;
  return o;
}

// The layer's output after W_UV (bf16): three roundings to bf16 on the way — the absorbed
// query, the latent output, the output — each worth a cosine distance of about 1.3e-6 (a
// relative error uniform within half a bf16 ulp), measured 3.4e-6 to 5.5e-6 on the CPU
// kernel; FlashMLA's 5e-6 bounds its latent output alone.
inline constexpr Tolerance kLayerOutput{4e-3, 2.01 / 128, 1e-5};

/// A layer (absorbed) against the un-absorbed reference: its heads, cache, requests, top-k.
struct LayerCase {
  int heads;
  CacheDType kv;
  std::vector<Request> requests;
  int topk;
};

}  // namespace attnsel::kernel::sparse_mla::testing
