#include "runtime/mla_workload.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "attnsel/errors.hpp"
#include "runtime/host_batch.hpp"
#include "runtime/paged_workload.hpp"

namespace attnsel::runtime {

namespace {
constexpr float kE4m3Max = 448.0f;
// kv_b_proj's rows: key rows with std 4, value rows with std 0.2 (uniform: bound = std · √3).
constexpr float kKeyRowRange = 6.9282032f;
constexpr float kValueRowRange = 0.34641016f;
}  // namespace

std::uint64_t mla_stream_seed(std::uint64_t seed, std::uint64_t part) {
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + part + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

kernel::ScalarType MlaLayerShape::cache_type() const { return fp8() ? kernel::ScalarType::fp8_e4m3 : dtype; }

bool MlaLayerShape::fp8() const { return kv_cache_dtype == CacheDType::fp8 || kv_cache_dtype == CacheDType::fp8_e4m3; }

float MlaLayerShape::k_scale() const { return fp8() ? kMlaInputRange / kE4m3Max : 1.0f; }

kernel::MlaLayerParams MlaLayerShape::params(const kernel::TensorView& kv_b_proj) const {
  kernel::MlaLayerParams p;
  p.dims = dims;
  p.dtype = dtype;
  p.scale = scale;
  p.kv_cache_dtype = kv_cache_dtype;
  p.k_scale = k_scale();
  p.kv_b_proj = kv_b_proj;
  return p;
}

void fill_kv_b_proj(std::span<std::uint8_t> bytes, const MlaLayerShape& shape, std::uint64_t seed) {
  const kernel::MlaDims& d = shape.dims;
  const std::size_t row_bytes = static_cast<std::size_t>(d.kv_lora_rank) * kernel::element_size(shape.dtype);
  const int head_rows = d.qk_nope_head_dim + d.v_head_dim;
  const std::size_t rows = static_cast<std::size_t>(d.num_heads) * static_cast<std::size_t>(head_rows);
  if (bytes.size() < rows * row_bytes)
    throw ValueError(fmt::format("kv_b_proj needs {} bytes, the buffer has {}", rows * row_bytes, bytes.size()));
  // One run of rows per head part (its key rows, then its value rows), each with its own stream.
  for (std::size_t r = 0; r < rows; r += static_cast<std::size_t>(head_rows)) {
    const std::size_t keys = static_cast<std::size_t>(d.qk_nope_head_dim);
    const std::size_t values = static_cast<std::size_t>(d.v_head_dim);
    fill_uniform(bytes.subspan(r * row_bytes, keys * row_bytes), shape.dtype, kKeyRowRange, mla_stream_seed(seed, 2 * r));
    fill_uniform(bytes.subspan((r + keys) * row_bytes, values * row_bytes), shape.dtype, kValueRowRange,
                 mla_stream_seed(seed, 2 * r + 1));
  }
}

LatentBatch::LatentBatch(int num_seqs, std::int64_t max_tokens, int block_size, std::uint64_t seed)
    : num_seqs_(num_seqs), block_size_(block_size) {
  if (num_seqs < 1 || block_size < 1 || max_tokens < 0)
    throw ValueError(fmt::format("a latent batch needs at least one request and a positive block size (requests {}, "
                                 "block size {}, tokens {})",
                                 num_seqs, block_size, max_tokens));
  const std::int64_t blocks = std::max<std::int64_t>(1, (max_tokens + block_size - 1) / block_size);
  if (blocks * num_seqs > std::numeric_limits<std::int32_t>::max())
    throw ValueError(fmt::format("{} requests × {} blocks exceed the 2^31 block ids a block table holds", num_seqs,
                                 blocks));
  blocks_per_seq_ = static_cast<int>(blocks);
  block_table_ = shuffled_block_ids(static_cast<std::size_t>(num_blocks()), seed);
  qsl_.assign(1, 0);
}

void LatentBatch::set_step(int done, int q) {
  std::vector<int> lens(static_cast<std::size_t>(num_seqs_), done + q), queries(static_cast<std::size_t>(num_seqs_), q);
  set_requests(lens, queries);
}

void LatentBatch::set_requests(std::span<const int> seq_lens, std::span<const int> query_lens) {
  if (seq_lens.size() != static_cast<std::size_t>(num_seqs_) || query_lens.size() != seq_lens.size())
    throw ValueError(fmt::format("a step of this batch has {} requests, got {} lengths and {} query lengths", num_seqs_,
                                 seq_lens.size(), query_lens.size()));
  qsl_.assign(1, 0);
  seq_lens_.clear();
  slots_.clear();
  for (int seq = 0; seq < num_seqs_; ++seq) {
    const int len = seq_lens[static_cast<std::size_t>(seq)], q = query_lens[static_cast<std::size_t>(seq)];
    if (q < 0 || len < q || len > static_cast<std::int64_t>(blocks_per_seq_) * block_size_)
      throw ValueError(fmt::format("request {}: {} tokens with {} new do not fit its {} blocks of {}", seq, len, q,
                                   blocks_per_seq_, block_size_));
    qsl_.push_back(qsl_.back() + q);
    seq_lens_.push_back(len);
    for (int pos = len - q; pos < len; ++pos) {
      const std::int64_t block =
          block_table_[static_cast<std::size_t>(seq) * static_cast<std::size_t>(blocks_per_seq_) +
                       static_cast<std::size_t>(pos / block_size_)];
      slots_.push_back(block * block_size_ + pos % block_size_);
    }
  }
}

kernel::AttentionMetadata LatentBatch::metadata() const {
  return batch_metadata(qsl_, seq_lens_, block_table_, blocks_per_seq_, slots_);
}

kernel::AttentionMetadata LatentBatch::single(int seq) const {
  const auto s = static_cast<std::size_t>(seq);
  one_qsl_ = {0, query_len(seq)};
  kernel::AttentionMetadata md;
  md.num_seqs = 1;
  md.num_actual_tokens = query_len(seq);
  md.query_start_loc = one_qsl_;
  md.seq_lens = std::span<const std::int32_t>(seq_lens_).subspan(s, 1);
  md.block_table = std::span<const std::int32_t>(block_table_)
                       .subspan(s * static_cast<std::size_t>(blocks_per_seq_), static_cast<std::size_t>(blocks_per_seq_));
  md.max_blocks_per_seq = blocks_per_seq_;
  md.slot_mapping = std::span<const std::int64_t>(slots_).subspan(static_cast<std::size_t>(query_start(seq)),
                                                                   static_cast<std::size_t>(query_len(seq)));
  md.max_query_len = query_len(seq);
  md.max_seq_len = seq_len(seq);
  return md;
}

double LatentBatch::sum_seq_lens() const {
  double sum = 0.0;
  for (int l : seq_lens_) sum += l;
  return sum;
}

double LatentBatch::causal_pairs() const {
  double pairs = 0.0;
  for (int seq = 0; seq < num_seqs_; ++seq) {
    const double L = seq_len(seq), q = query_len(seq);
    pairs += q * (L - q) + q * (q + 1) / 2.0;  // query i of q sees L - q + i + 1 keys
  }
  return pairs;
}

double MlaCounts::decode_flops(const kernel::MlaDims& d, int s_q, double sum_seq_lens) {
  return 2.0 * d.num_heads * s_q * sum_seq_lens * (d.latent_size() + d.kv_lora_rank);
}

double MlaCounts::decode_bytes(const kernel::MlaDims& d, int num_seqs, int s_q, double sum_seq_lens,
                               std::size_t cache_element, std::size_t activation_element) {
  return sum_seq_lens * d.latent_size() * static_cast<double>(cache_element) +
         static_cast<double>(num_seqs) * s_q * d.num_heads * (d.latent_size() + d.kv_lora_rank) *
             static_cast<double>(activation_element);
}

double MlaCounts::prefill_flops(const kernel::MlaDims& d, double causal_pairs) {
  return 2.0 * d.num_heads * (d.qk_head_size() + d.v_head_dim) * causal_pairs;
}

}  // namespace attnsel::runtime
