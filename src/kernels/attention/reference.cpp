#include "kernels/attention/reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "attnsel/errors.hpp"
#include "kernels/fp8.hpp"
#include "kernels/half.hpp"
#include "kernels/attention/semantics.hpp"

namespace attnsel::kernel::reference {

double load(const void* base, ScalarType t, std::int64_t offset) {
  const auto* b = static_cast<const unsigned char*>(base) + offset * static_cast<std::int64_t>(element_size(t));
  switch (t) {
    case ScalarType::f32: {
      float f;
      std::memcpy(&f, b, 4);
      return f;
    }
    case ScalarType::f16: {
      std::uint16_t h;
      std::memcpy(&h, b, 2);
      return half_to_float(h);
    }
    case ScalarType::bf16: {
      std::uint16_t h;
      std::memcpy(&h, b, 2);
      return bf16_to_float(h);
    }
    case ScalarType::fp8_e4m3: return fp8_to_float(*b, ScalarType::fp8_e4m3);
    case ScalarType::fp8_e5m2: return fp8_to_float(*b, ScalarType::fp8_e5m2);
    default: throw ValueError("reference::load: not a floating-point type: " + std::string(to_string(t)));
  }
}

void store(void* base, ScalarType t, std::int64_t offset, double v) {
  auto* b = static_cast<unsigned char*>(base) + offset * static_cast<std::int64_t>(element_size(t));
  const auto f = static_cast<float>(v);
  switch (t) {
    case ScalarType::f32: std::memcpy(b, &f, 4); return;
    case ScalarType::f16: {
      const std::uint16_t h = float_to_half(f);
      std::memcpy(b, &h, 2);
      return;
    }
    case ScalarType::bf16: {
      const std::uint16_t h = float_to_bf16(f);
      std::memcpy(b, &h, 2);
      return;
    }
    case ScalarType::fp8_e4m3: *b = float_to_fp8(f, ScalarType::fp8_e4m3); return;
    case ScalarType::fp8_e5m2: *b = float_to_fp8(f, ScalarType::fp8_e5m2); return;
    default: throw ValueError("reference::store: not a floating-point type: " + std::string(to_string(t)));
  }
}

namespace {

using std::size_t;

size_t idx(std::int64_t i) { return static_cast<size_t>(i); }

std::int64_t offset3(const TensorView& t, std::int64_t i, std::int64_t j, std::int64_t k) {
  return i * t.stride[0] + j * t.stride[1] + k * t.stride[2];
}

// Reads the paged cache of one layer through the block table.
struct CacheReader {
  const KVCacheView& cache;
  const AttentionMetadata& md;
  ScalarType stored;  // the encoding's type (a u8 view is read as fp8)
  std::vector<double> k_scale, v_scale;  // per KV head (1 for caches that are not fp8)

  std::int64_t offset(const TensorView& t, int s, std::int64_t pos, int h) const {
    const std::int64_t bs = t.shape[1];
    const std::int32_t block = md.block_table[idx(s) * idx(md.max_blocks_per_seq) + idx(pos / bs)];
    return block * t.stride[0] + (pos % bs) * t.stride[1] + h * t.stride[2];
  }
  double key(int s, std::int64_t pos, int h, int d) const {
    return load(cache.key.data, stored, offset(cache.key, s, pos, h) + d) * k_scale[idx(h)];
  }
  double value(int s, std::int64_t pos, int h, int d) const {
    return load(cache.value.data, stored, offset(cache.value, s, pos, h) + d) * v_scale[idx(h)];
  }
};

CacheReader make_reader(const LayerParams& p, const KVCacheView& cache, const AttentionMetadata& md,
                        ScalarType model_dtype) {
  const CacheEncoding enc = cache_encoding(p.kv_cache_dtype, model_dtype);
  CacheReader rd{cache, md, enc.stored, std::vector<double>(idx(p.num_kv_heads), 1.0),
                 std::vector<double>(idx(p.num_kv_heads), 1.0)};
  if (enc.quantized)
    for (int h = 0; h < p.num_kv_heads; ++h) {
      rd.k_scale[idx(h)] = key_scale(p, h);
      rd.v_scale[idx(h)] = value_scale(p, h);
    }
  return rd;
}

// Tokens are independent: large checks (the GPU tests' long sequences) run them on all cores.
// Small ones stay on the calling thread, where an OpenMP team would cost more than it saves.
bool worth_threads(const LayerParams& p, const AttentionMetadata& md, std::int64_t tokens) {
  std::int64_t longest = 0;
  for (const std::int32_t l : md.seq_lens) longest = std::max<std::int64_t>(longest, l);
  return static_cast<double>(tokens) * static_cast<double>(longest) * p.num_heads * p.head_size > 5e7;
}

// Exact attention of one query token, all heads, into out[num_heads * head_size].
// lse (optional): [num_heads] natural-log softmax denominators, sinks included.
void attend_token(const LayerParams& p, const TensorView& query, const CacheReader& rd, const AttentionMetadata& md,
                  int token, double* out, double* lse = nullptr) {
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  const auto* qsl = md.query_start_loc.data();
  const int s = static_cast<int>(std::upper_bound(qsl, qsl + md.num_seqs + 1, token) - qsl) - 1;
  const std::int64_t q_len = qsl[s + 1] - qsl[s];
  const std::int64_t seq_len = md.seq_lens[idx(s)];
  const std::int64_t qpos = query_position(seq_len, q_len, token - qsl[s]);
  const MaskRule mask = MaskRule::from(p);
  const int D = p.head_size;
  const int group = p.num_heads / p.num_kv_heads;
  std::vector<double> logits(idx(seq_len));
  std::vector<double> q(idx(D));
  for (int h = 0; h < p.num_heads; ++h) {
    const int kvh = h / group;
    for (int d = 0; d < D; ++d) q[idx(d)] = load(query.data, query.dtype, offset3(query, token, h, d));
    const double sink = p.sinks.empty() ? kNegInf : static_cast<double>(p.sinks[idx(h)]);
    double max_logit = sink;
    bool any = false;
    for (std::int64_t j = 0; j < seq_len; ++j) {
      double& l = logits[idx(j)];
      if (!mask.visible(qpos, j)) {
        l = kNegInf;
        continue;
      }
      double dot = 0.0;
      for (int d = 0; d < D; ++d) dot += q[idx(d)] * rd.key(s, j, kvh, d);
      l = dot * static_cast<double>(p.scale);
      if (p.logits_soft_cap > 0.0f) l = p.logits_soft_cap * std::tanh(l / p.logits_soft_cap);
      if (!p.alibi_slopes.empty()) l += static_cast<double>(p.alibi_slopes[idx(h)]) * static_cast<double>(j - qpos);
      max_logit = std::max(max_logit, l);
      any = true;
    }
    double* o = out + static_cast<std::ptrdiff_t>(h) * D;
    std::fill(o, o + D, 0.0);
    if (lse) lse[h] = sink;  // no visible key: the sink alone (or -inf)
    if (!any) continue;  // no visible key: zeros
    double denom = sink == kNegInf ? 0.0 : std::exp(sink - max_logit);
    for (std::int64_t j = 0; j < seq_len; ++j) {
      const double l = logits[idx(j)];
      if (l == kNegInf) continue;
      const double w = std::exp(l - max_logit);
      denom += w;
      for (int d = 0; d < D; ++d) o[d] += w * rd.value(s, j, kvh, d);
    }
    for (int d = 0; d < D; ++d) o[d] /= denom;
    if (lse) lse[h] = max_logit + std::log(denom);
  }
}

class ReferenceImpl final : public AttentionImpl {
 public:
  explicit ReferenceImpl(LayerParams p) : AttentionImpl(std::move(p)) { validate_layer_params(params_); }
  void write_kv_cache(const TensorView& key, const TensorView& value, const KVCacheView& cache,
                      const AttentionMetadata& md) const override {
    reference::write_kv_cache(params_, key, value, cache, md);
  }
  void forward(const TensorView& query, const KVCacheView& cache, const AttentionMetadata& md,
               const TensorView& output) const override {
    reference::forward(params_, query, cache, md, output);
  }
};

}  // namespace

void write_kv_cache(const LayerParams& p, const TensorView& key, const TensorView& value, const KVCacheView& cache,
                    const AttentionMetadata& md) {
  validate_cache_write_args(p, key, value, cache, md);
  const CacheEncoding enc = cache_encoding(p.kv_cache_dtype, key.dtype);
  const std::int64_t bs = cache.key.shape[1];
  for (int i = 0; i < md.num_actual_tokens; ++i) {
    const std::int64_t slot = md.slot_mapping[idx(i)];
    if (slot < 0) continue;
    const std::int64_t block = slot / bs, in_block = slot % bs;
    for (int h = 0; h < p.num_kv_heads; ++h) {
      // Quantise as every kernel does: x * (1/scale) with the head's scale, both in float,
      // then round to the cache type.
      const float k_inv = enc.quantized ? 1.0f / key_scale(p, h) : 1.0f;
      const float v_inv = enc.quantized ? 1.0f / value_scale(p, h) : 1.0f;
      const std::int64_t kc = block * cache.key.stride[0] + in_block * cache.key.stride[1] + h * cache.key.stride[2];
      const std::int64_t vc =
          block * cache.value.stride[0] + in_block * cache.value.stride[1] + h * cache.value.stride[2];
      for (int d = 0; d < p.head_size; ++d) {
        const auto k = static_cast<float>(load(key.data, key.dtype, offset3(key, i, h, d)));
        const auto v = static_cast<float>(load(value.data, value.dtype, offset3(value, i, h, d)));
        store(cache.key.data, enc.stored, kc + d, enc.quantized ? k * k_inv : k);
        store(cache.value.data, enc.stored, vc + d, enc.quantized ? v * v_inv : v);
      }
    }
  }
}

void forward(const LayerParams& p, const TensorView& query, const KVCacheView& cache, const AttentionMetadata& md,
             const TensorView& output) {
  forward(p, query, cache, md, output, nullptr);
}

void forward(const LayerParams& p, const TensorView& query, const KVCacheView& cache, const AttentionMetadata& md,
             const TensorView& output, const TensorView* lse) {
  validate_forward_args(p, query, cache, md, output);
  if (lse && (lse->ndim != 2 || lse->dtype != ScalarType::f32 || lse->shape[0] < md.num_actual_tokens ||
              lse->shape[1] != p.num_heads || lse->device != DeviceKind::cpu))
    throw ValueError("reference::forward: lse must be a host f32 [num_tokens, num_heads] view, got " + lse->describe());
  const CacheReader rd = make_reader(p, cache, md, query.dtype);
#pragma omp parallel for schedule(dynamic, 1) if (worth_threads(p, md, md.num_actual_tokens))
  for (int t = 0; t < md.num_actual_tokens; ++t) {
    std::vector<double> out(idx(p.num_heads) * idx(p.head_size));
    std::vector<double> row_lse(idx(p.num_heads));
    attend_token(p, query, rd, md, t, out.data(), row_lse.data());
    if (lse)
      for (int h = 0; h < p.num_heads; ++h)
        static_cast<float*>(lse->data)[t * lse->stride[0] + h * lse->stride[1]] = static_cast<float>(row_lse[idx(h)]);
    for (int h = 0; h < p.num_heads; ++h)
      for (int d = 0; d < p.head_size; ++d)
        store(output.data, output.dtype, offset3(output, t, h, d), out[idx(h) * idx(p.head_size) + idx(d)]);
  }
}

std::vector<double> attend(const LayerParams& p, const TensorView& query, const KVCacheView& cache,
                           const AttentionMetadata& md, std::span<const std::int32_t> tokens) {
  validate_forward_args(p, query, cache, md, query);
  const CacheReader rd = make_reader(p, cache, md, query.dtype);
  const size_t per_token = idx(p.num_heads) * idx(p.head_size);
  for (const std::int32_t t : tokens)
    if (t < 0 || t >= md.num_actual_tokens)
      throw ValueError("reference::attend: token " + std::to_string(t) + " is outside [0, " +
                       std::to_string(md.num_actual_tokens) + ")");
  std::vector<double> out(tokens.size() * per_token);
  const std::int64_t n = static_cast<std::int64_t>(tokens.size());
#pragma omp parallel for schedule(dynamic, 1) if (worth_threads(p, md, n))
  for (std::int64_t i = 0; i < n; ++i) attend_token(p, query, rd, md, tokens[idx(i)], out.data() + idx(i) * per_token);
  return out;
}

std::unique_ptr<AttentionImpl> make_reference_impl(const LayerParams& p) { return std::make_unique<ReferenceImpl>(p); }

}  // namespace attnsel::kernel::reference
