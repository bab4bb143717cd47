#include "kernels/mla/reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/attention/reference.hpp"
#include "kernels/fp8.hpp"
#include "kernels/mla/batch.hpp"
#include "kernels/mla/validation.hpp"

namespace attnsel::kernel::mla::reference {

namespace {

using std::size_t;
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

size_t idx(std::int64_t i) { return static_cast<size_t>(i); }

double load(const TensorView& t, std::int64_t offset) { return kernel::reference::load(t.data, t.dtype, offset); }

// kv_b_proj in double, [num_heads · (qk_nope + v_head), kv_lora_rank].
std::vector<double> weights(const MlaLayerParams& p) {
  const TensorView& w = p.kv_b_proj;
  std::vector<double> out(idx(w.shape[0] * w.shape[1]));
  for (std::int64_t r = 0; r < w.shape[0]; ++r)
    for (std::int64_t l = 0; l < w.shape[1]; ++l) out[idx(r * w.shape[1] + l)] = load(w, r * w.stride[0] + l);
  return out;
}

// Four partial sums: independent chains the CPU overlaps (one running sum is a serial chain).
// Named scalars rather than an array, which the sanitizer builds would keep on the stack.
double dot(const double* a, const double* b, int n) {
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += a[i] * b[i];
    s1 += a[i + 1] * b[i + 1];
    s2 += a[i + 2] * b[i + 2];
    s3 += a[i + 3] * b[i + 3];
  }
  for (; i < n; ++i) s0 += a[i] * b[i];
  return (s0 + s1) + (s2 + s3);
}

// Softmax over logits s[0, n) (n may be 0): fills p with the probabilities, returns the LSE.
double softmax(const std::vector<double>& s, std::int64_t n, std::vector<double>& p) {
  if (n == 0) return kNegInf;
  double m = kNegInf;
  for (std::int64_t k = 0; k < n; ++k) m = std::max(m, s[idx(k)]);
  double sum = 0.0;
  for (std::int64_t k = 0; k < n; ++k) sum += p[idx(k)] = std::exp(s[idx(k)] - m);
  for (std::int64_t k = 0; k < n; ++k) p[idx(k)] /= sum;
  return m + std::log(sum);
}

}  // namespace

Result Result::empty(std::int64_t tokens, int num_heads, int width) {
  Result r;
  r.width = width;
  r.out.assign(idx(tokens) * idx(num_heads) * idx(width), 0.0);
  r.lse.assign(idx(tokens) * idx(num_heads), kNegInf);
  return r;
}

void write_cache(const MlaLayerParams& p, const TensorView& kv_c, const TensorView& k_pe, const TensorView& cache,
                 std::span<const std::int64_t> slot_mapping, int num_tokens) {
  const CacheFormat format = cache_format(p);
  const int rank = p.dims.kv_lora_rank, rope = p.dims.qk_rope_head_dim;
  const std::int64_t bs = cache.shape[1];
  for (int t = 0; t < num_tokens; ++t) {
    const std::int64_t slot = slot_mapping[idx(t)];
    if (slot < 0) continue;
    const std::int64_t row = (slot / bs) * cache.stride[0] + (slot % bs) * cache.stride[1];
    for (int e = 0; e < rank + rope; ++e) {
      const double x = e < rank ? load(kv_c, t * kv_c.stride[0] + e) : load(k_pe, t * k_pe.stride[0] + e - rank);
      if (format.fp8) {
        // vLLM divides in float: e4m3(x / scale).
        static_cast<std::uint8_t*>(cache.data)[row + e] =
            float_to_fp8(static_cast<float>(x) / p.k_scale, ScalarType::fp8_e4m3);
      } else {
        kernel::reference::store(cache.data, cache.dtype, row + e, x);
      }
    }
  }
}

double cache_entry(const MlaLayerParams& p, const TensorView& cache, const AttentionMetadata& md, int seq,
                   std::int64_t pos, int e) {
  const std::int64_t bs = cache.shape[1];
  const std::int32_t block = md.block_table[idx(seq) * idx(md.max_blocks_per_seq) + idx(pos / bs)];
  const std::int64_t off = block * cache.stride[0] + (pos % bs) * cache.stride[1] + e;
  const CacheFormat format = cache_format(p);
  if (format.fp8)
    return static_cast<double>(fp8_to_float(static_cast<const std::uint8_t*>(cache.data)[off], ScalarType::fp8_e4m3)) *
           static_cast<double>(p.k_scale);
  return load(cache, off);
}

Result attend(const MlaLayerParams& p, const AttentionMetadata& md, int decode_query_len, const TensorView& q,
              const TensorView& kv_c, const TensorView& k_pe, const TensorView& cache) {
  const MlaDims& d = p.dims;
  const int N = d.num_heads, rank = d.kv_lora_rank, rope = d.qk_rope_head_dim, nope = d.qk_nope_head_dim,
            dv = d.v_head_dim;
  const int head_rows = nope + dv;
  const std::vector<double> w = weights(p);
  const BatchSplit split = split_decodes_and_prefills(md.query_start_loc, md.num_seqs, decode_query_len);
  Result r = Result::empty(md.num_actual_tokens, N, dv);
  for (int s = 0; s < md.num_seqs; ++s) {
    const int t0 = md.query_start_loc[idx(s)], s_q = md.query_start_loc[idx(s) + 1] - t0;
    const std::int64_t L = md.seq_lens[idx(s)];
    if (L == 0 || s_q == 0) continue;
    // The request's latents and rope keys: the cache, or this step's inputs for a prefill's new tokens.
    const std::int64_t cached = s < split.num_decodes ? L : L - s_q;
    std::vector<double> c(idx(L) * idx(rank)), pe(idx(L) * idx(rope));
#pragma omp parallel for schedule(static)
    for (std::int64_t k = 0; k < L; ++k)
      for (int e = 0; e < rank + rope; ++e) {
        const std::int64_t t = t0 + (k - cached);
        const double x = k < cached        ? cache_entry(p, cache, md, s, k, e)
                         : e < rank        ? load(kv_c, t * kv_c.stride[0] + e)
                                           : load(k_pe, t * k_pe.stride[0] + e - rank);
        (e < rank ? c[idx(k) * idx(rank) + idx(e)] : pe[idx(k) * idx(rope) + idx(e - rank)]) = x;
      }
    std::vector<double> keys(idx(L) * idx(nope)), values(idx(L) * idx(dv));
    for (int n = 0; n < N; ++n) {
      const double* wn = w.data() + idx(n) * idx(head_rows) * idx(rank);
#pragma omp parallel for schedule(static)
      for (std::int64_t k = 0; k < L; ++k) {
        const double* ck = c.data() + idx(k) * idx(rank);
        for (int j = 0; j < nope; ++j) keys[idx(k) * idx(nope) + idx(j)] = dot(wn + idx(j) * idx(rank), ck, rank);
        for (int j = 0; j < dv; ++j)
          values[idx(k) * idx(dv) + idx(j)] = dot(wn + idx(nope + j) * idx(rank), ck, rank);
      }
#pragma omp parallel for schedule(static)
      for (int j = 0; j < s_q; ++j) {
        const std::int64_t t = t0 + j;
        const std::int64_t visible = L - s_q + j + 1;
        std::vector<double> qn(idx(nope + rope)), logits(idx(visible)), prob(idx(visible));
        for (int e = 0; e < nope + rope; ++e) qn[idx(e)] = load(q, t * q.stride[0] + n * q.stride[1] + e);
        for (std::int64_t k = 0; k < visible; ++k)
          logits[idx(k)] = static_cast<double>(p.scale) * (dot(qn.data(), keys.data() + idx(k) * idx(nope), nope) +
                                                           dot(qn.data() + nope, pe.data() + idx(k) * idx(rope), rope));
        r.lse[idx(t) * idx(N) + idx(n)] = softmax(logits, visible, prob);
        double* o = r.out.data() + (idx(t) * idx(N) + idx(n)) * idx(dv);
        for (std::int64_t k = 0; k < visible; ++k)
          for (int e = 0; e < dv; ++e) o[e] += prob[idx(k)] * values[idx(k) * idx(dv) + idx(e)];
      }
    }
  }
  return r;
}

Result attend_latent(const MlaLayerParams& p, const AttentionMetadata& md, int decode_query_len,
                     const TensorView& q_latent, const TensorView& cache) {
  const int N = p.dims.num_heads, rank = p.dims.kv_lora_rank, latent = p.dims.latent_size();
  const BatchSplit split = split_decodes_and_prefills(md.query_start_loc, md.num_seqs, decode_query_len);
  Result r = Result::empty(split.num_decode_tokens, N, rank);
  for (int s = 0; s < split.num_decodes; ++s) {
    const int t0 = md.query_start_loc[idx(s)], s_q = md.query_start_loc[idx(s) + 1] - t0;
    const std::int64_t L = md.seq_lens[idx(s)];
    if (L == 0) continue;
    std::vector<double> c(idx(L) * idx(latent));
#pragma omp parallel for schedule(static)
    for (std::int64_t k = 0; k < L; ++k)
      for (int e = 0; e < latent; ++e) c[idx(k) * idx(latent) + idx(e)] = cache_entry(p, cache, md, s, k, e);
#pragma omp parallel for collapse(2) schedule(static)
    for (int j = 0; j < s_q; ++j)
      for (int n = 0; n < N; ++n) {
        const std::int64_t t = t0 + j, visible = L - s_q + j + 1;
        std::vector<double> qn(idx(latent)), logits(idx(visible)), prob(idx(visible));
        for (int e = 0; e < latent; ++e) qn[idx(e)] = load(q_latent, t * q_latent.stride[0] + n * q_latent.stride[1] + e);
        for (std::int64_t k = 0; k < visible; ++k)
          logits[idx(k)] = static_cast<double>(p.scale) * dot(qn.data(), c.data() + idx(k) * idx(latent), latent);
        r.lse[idx(t) * idx(N) + idx(n)] = softmax(logits, visible, prob);
        double* o = r.out.data() + (idx(t) * idx(N) + idx(n)) * idx(rank);
        for (std::int64_t k = 0; k < visible; ++k)
          for (int e = 0; e < rank; ++e) o[e] += prob[idx(k)] * c[idx(k) * idx(latent) + idx(e)];
      }
  }
  return r;
}

}  // namespace attnsel::kernel::mla::reference
