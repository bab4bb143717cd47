#include "runtime/paged_workload.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "attnsel/errors.hpp"
#include "kernels/fp8.hpp"
#include "kernels/half.hpp"
#include "kernels/attention/semantics.hpp"
#include "runtime/host_batch.hpp"

namespace attnsel::runtime {

using kernel::ScalarType;

namespace {

struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [-r, r).
  float uniform(float r) { return (static_cast<float>(next() >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f) * r; }
};

// Encodes `x` as `t` at element `i` of `buf`.
void put(std::uint8_t* buf, ScalarType t, std::size_t i, float x) {
  switch (t) {
    case ScalarType::f32: std::memcpy(buf + 4 * i, &x, 4); break;
    case ScalarType::bf16: {
      const std::uint16_t h = kernel::float_to_bf16(x);
      std::memcpy(buf + 2 * i, &h, 2);
      break;
    }
    case ScalarType::f16: {
      const std::uint16_t h = kernel::float_to_half(x);
      std::memcpy(buf + 2 * i, &h, 2);
      break;
    }
    case ScalarType::fp8_e4m3: buf[i] = kernel::float_to_fp8(x, kernel::ScalarType::fp8_e4m3); break;
    case ScalarType::fp8_e5m2: buf[i] = kernel::float_to_fp8(x, kernel::ScalarType::fp8_e5m2); break;
    default: throw ValueError("PagedWorkload: unsupported element type " + std::string(kernel::to_string(t)));
  }
}

void fill_random(std::vector<std::uint8_t>& buf, ScalarType t, float range, SplitMix64& rng) {
  const std::size_t n = buf.size() / kernel::element_size(t);
  for (std::size_t i = 0; i < n; ++i) put(buf.data(), t, i, rng.uniform(range));
}

}  // namespace

void fill_uniform(std::span<std::uint8_t> bytes, ScalarType type, float range, std::uint64_t seed) {
  SplitMix64 rng{seed};
  const std::size_t n = bytes.size() / kernel::element_size(type);
  for (std::size_t i = 0; i < n; ++i) put(bytes.data(), type, i, rng.uniform(range));
}

kernel::LayerParams layer_params_for(const WorkloadShape& shape) {
  kernel::LayerParams p;
  p.num_heads = shape.num_heads;
  p.num_kv_heads = shape.num_kv_heads;
  p.head_size = shape.head_size;
  p.scale = 1.0f / std::sqrt(static_cast<float>(shape.head_size));
  p.kv_cache_dtype = shape.kv_cache_dtype;
  p.k_scale = shape.k_scale;
  p.v_scale = shape.v_scale;
  p.k_scales = shape.k_scales;
  p.v_scales = shape.v_scales;
  return p;
}

std::vector<std::int64_t> cache_strides(CacheLayout layout, int block_size, int num_kv_heads, int head_size) {
  const std::int64_t D = head_size, H = num_kv_heads, N = block_size;
  if (layout == CacheLayout::nhd) return {N * H * D, H * D, D, 1};
  return {N * H * D, D, N * D, 1};  // HND: [block][head][token][dim]
}

PagedWorkload::PagedWorkload(WorkloadSpec spec) : spec_(std::move(spec)) {
  const auto& s = spec_;
  if (s.block_size < 1) throw ValueError("PagedWorkload: block_size must be at least 1");
  if (s.num_heads < 1 || s.num_kv_heads < 1 || s.head_size < 1)
    throw ValueError("PagedWorkload: heads and head_size must be at least 1");
  for (const auto* scales : {&s.k_scales, &s.v_scales})
    if (!scales->empty() && scales->size() != static_cast<std::size_t>(s.num_kv_heads))
      throw ValueError("PagedWorkload: per-head k_scales/v_scales need one entry per KV head (or none)");
  cache_type_ = kernel::cache_encoding(s.kv_cache_dtype, s.dtype).stored;
  const bool quantized = kernel::cache_encoding(s.kv_cache_dtype, s.dtype).quantized;

  query_start_loc_.push_back(0);
  int used_blocks = 0;
  for (const SequenceShape& q : s.sequences) {
    if (q.seq_len < 0 || q.query_len < 0) throw ValueError("PagedWorkload: negative sequence length");
    num_tokens_ += q.query_len;
    query_start_loc_.push_back(num_tokens_);
    seq_lens_.push_back(q.seq_len);
    const int blocks = (q.seq_len + s.block_size - 1) / s.block_size;
    max_blocks_per_seq_ = std::max(max_blocks_per_seq_, blocks);
    used_blocks += blocks;
  }
  max_blocks_per_seq_ = std::max(max_blocks_per_seq_, 1);
  num_blocks_ = used_blocks + std::max(s.spare_blocks, 0);
  if (num_blocks_ == 0) num_blocks_ = 1;

  SplitMix64 rng{s.seed};
  // A shuffled block assignment: sequences do not own contiguous memory.
  std::vector<std::int32_t> ids(static_cast<std::size_t>(num_blocks_));
  std::iota(ids.begin(), ids.end(), 0);
  for (std::size_t i = ids.size(); i > 1; --i) std::swap(ids[i - 1], ids[rng.next() % i]);
  block_table_.assign(s.sequences.size() * static_cast<std::size_t>(max_blocks_per_seq_), 0);
  std::size_t next_id = 0;
  for (std::size_t q = 0; q < s.sequences.size(); ++q) {
    const int blocks = (s.sequences[q].seq_len + s.block_size - 1) / s.block_size;
    for (int b = 0; b < blocks; ++b)
      block_table_[q * static_cast<std::size_t>(max_blocks_per_seq_) + static_cast<std::size_t>(b)] = ids[next_id++];
  }
  for (std::size_t q = 0; q < s.sequences.size(); ++q) {
    const int seq_len = s.sequences[q].seq_len, q_len = s.sequences[q].query_len;
    for (int i = 0; i < q_len; ++i) {
      const int pos = std::max(0, seq_len - q_len + i);
      const std::int64_t block = block_table_[q * static_cast<std::size_t>(max_blocks_per_seq_) +
                                              static_cast<std::size_t>(pos / s.block_size)];
      slot_mapping_.push_back(pos < seq_len ? block * s.block_size + pos % s.block_size : -1);
    }
  }

  const std::size_t act = kernel::element_size(s.dtype);
  const std::size_t tok_q = static_cast<std::size_t>(num_tokens_) * static_cast<std::size_t>(s.num_heads) *
                            static_cast<std::size_t>(s.head_size);
  const std::size_t tok_kv = static_cast<std::size_t>(num_tokens_) * static_cast<std::size_t>(s.num_kv_heads) *
                             static_cast<std::size_t>(s.head_size);
  query_.resize(tok_q * act);
  output_.resize(tok_q * act);
  new_keys_.resize(tok_kv * act);
  new_values_.resize(tok_kv * act);
  fill_random(query_, s.dtype, s.query_range, rng);
  fill_random(new_keys_, s.dtype, s.value_range, rng);
  fill_random(new_values_, s.dtype, s.value_range, rng);

  const std::size_t cache_elems = static_cast<std::size_t>(num_blocks_) * static_cast<std::size_t>(s.block_size) *
                                  static_cast<std::size_t>(s.num_kv_heads) * static_cast<std::size_t>(s.head_size);
  const std::size_t ce = kernel::element_size(cache_type_);
  // Every slot starts as NaN: a kernel that reads a slot outside its sequences shows it.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  key_cache_ = HugeBuffer(cache_elems * ce);
  value_cache_ = HugeBuffer(cache_elems * ce);
  for (std::size_t i = 0; i < cache_elems; ++i) {
    put(key_cache_.data(), cache_type_, i, nan);
    put(value_cache_.data(), cache_type_, i, nan);
  }
  if (!s.fill_cache) return;
  const auto strides = cache_strides(s.layout, s.block_size, s.num_kv_heads, s.head_size);
  // The cache holds x * (1 / scale), the KV head's scale when the spec has per-head scales.
  auto inverse = [&](const std::vector<float>& per_head, float scalar, int h) {
    if (!quantized) return 1.0f;
    return 1.0f / (per_head.empty() ? scalar : per_head[static_cast<std::size_t>(h)]);
  };
  for (std::size_t q = 0; q < s.sequences.size(); ++q) {
    for (int pos = 0; pos < s.sequences[q].seq_len; ++pos) {
      const std::int64_t block = block_table_[q * static_cast<std::size_t>(max_blocks_per_seq_) +
                                              static_cast<std::size_t>(pos / s.block_size)];
      for (int h = 0; h < s.num_kv_heads; ++h) {
        const float k_inv = inverse(s.k_scales, s.k_scale, h), v_inv = inverse(s.v_scales, s.v_scale, h);
        const std::int64_t base = block * strides[0] + (pos % s.block_size) * strides[1] + h * strides[2];
        for (int d = 0; d < s.head_size; ++d) {
          const auto at = static_cast<std::size_t>(base + d);
          put(key_cache_.data(), cache_type_, at, rng.uniform(s.value_range) * k_inv);
          put(value_cache_.data(), cache_type_, at, rng.uniform(s.value_range) * v_inv);
        }
      }
    }
  }
}

kernel::TensorView PagedWorkload::view3(std::vector<std::uint8_t>& buf, int heads) {
  return kernel::TensorView::contiguous(buf.data(), spec_.dtype, {num_tokens_, heads, spec_.head_size});
}

kernel::KVCacheView PagedWorkload::cache() {
  const auto strides = cache_strides(spec_.layout, spec_.block_size, spec_.num_kv_heads, spec_.head_size);
  const std::int64_t shape[4] = {num_blocks_, spec_.block_size, spec_.num_kv_heads, spec_.head_size};
  return {kernel::TensorView::strided(key_cache_.data(), cache_type_, shape, strides),
          kernel::TensorView::strided(value_cache_.data(), cache_type_, shape, strides)};
}

kernel::AttentionMetadata PagedWorkload::metadata() const {
  return batch_metadata(query_start_loc_, seq_lens_, block_table_, max_blocks_per_seq_, slot_mapping_);
}

std::int64_t PagedWorkload::kv_bytes_read() const {
  std::int64_t tokens = 0;
  for (const SequenceShape& q : spec_.sequences) tokens += q.seq_len;
  return 2 * tokens * spec_.num_kv_heads * spec_.head_size * static_cast<std::int64_t>(kernel::element_size(cache_type_));
}

double PagedWorkload::attention_flops(bool causal) const {
  double flops = 0.0;
  for (const SequenceShape& q : spec_.sequences) {
    double keys = 0.0;
    for (int i = 0; i < q.query_len; ++i)
      keys += causal ? static_cast<double>(q.seq_len - q.query_len + i + 1) : static_cast<double>(q.seq_len);
    flops += 4.0 * keys * spec_.head_size * spec_.num_heads;
  }
  return flops;
}

void PagedWorkload::poison_output() {
  const std::size_t n = output_.size() / kernel::element_size(spec_.dtype);
  for (std::size_t i = 0; i < n; ++i) put(output_.data(), spec_.dtype, i, std::numeric_limits<float>::quiet_NaN());
}

}  // namespace attnsel::runtime
