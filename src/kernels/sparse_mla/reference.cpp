#include "kernels/sparse_mla/reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "kernels/attention/reference.hpp"
#include "kernels/fp8.hpp"
#include "kernels/half.hpp"

namespace attnsel::kernel::sparse_mla::reference {

namespace {

using std::size_t;
constexpr double kNegInf = -std::numeric_limits<double>::infinity();
constexpr int kLatent = 576, kRank = 512, kRope = 64, kTile = 128;

size_t idx(std::int64_t i) { return static_cast<size_t>(i); }

double load(const TensorView& t, std::int64_t offset) { return kernel::reference::load(t.data, t.dtype, offset); }

// vLLM's ue8m0 rounding: exp2(ceil(log2(s))).
double ue8m0(double s) { return std::exp2(std::ceil(std::log2(s))); }

double dot(const double* a, const double* b, int n) {
  double acc = 0.0;
  for (int i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

std::uint8_t* bytes(const TensorView& t) { return static_cast<std::uint8_t*>(t.data); }

bool is_ds_mla(const SparseMlaLayerParams& p) { return p.kv_cache_dtype == CacheDType::fp8_ds_mla; }

// Softmax of logits[0, n) over the entries flagged valid: probabilities into prob, the LSE.
double softmax(const std::vector<double>& logits, const std::vector<char>& valid, std::vector<double>& prob) {
  double m = kNegInf;
  for (size_t k = 0; k < logits.size(); ++k)
    if (valid[k]) m = std::max(m, logits[k]);
  if (m == kNegInf) return kNegInf;
  double sum = 0.0;
  for (size_t k = 0; k < logits.size(); ++k) sum += prob[k] = valid[k] ? std::exp(logits[k] - m) : 0.0;
  for (double& x : prob) x /= sum;
  return m + std::log(sum);
}

// The latents of one token's index row: rows c [topk][576] (zeros for -1) and which are valid.
struct Gathered {
  std::vector<double> c;
  std::vector<char> valid;
};

Gathered gather(const SparseMlaLayerParams& p, const TensorView& cache, const std::int32_t* row, int topk) {
  Gathered g;
  g.c.assign(idx(topk) * kLatent, 0.0);
  g.valid.assign(idx(topk), 0);
  for (int k = 0; k < topk; ++k) {
    if (row[k] < 0) continue;
    g.valid[idx(k)] = 1;
    for (int e = 0; e < kLatent; ++e) g.c[idx(k) * kLatent + idx(e)] = latent_entry(p, cache, row[k], e);
  }
  return g;
}

}  // namespace

void write_keys(const IndexerLayerParams& p, const TensorView& k, const TensorView& key_cache,
                std::span<const std::int64_t> slots, int num_tokens) {
  const int D = p.head_dim;
  const std::int64_t B = key_cache.shape[1];
  for (int t = 0; t < num_tokens; ++t) {
    const std::int64_t slot = slots[idx(t)];
    if (slot < 0) continue;
    double amax = 0.0;
    for (int d = 0; d < D; ++d) amax = std::max(amax, std::abs(load(k, t * k.stride[0] + d)));
    // vLLM computes the scale in float: max(amax, 1e-4) / 448, then rounds it up (ue8m0).
    const auto scale = static_cast<float>(ue8m0(static_cast<double>(std::fmax(static_cast<float>(amax), 1e-4f) / 448.0f)));
    std::uint8_t* block = bytes(key_cache) + (slot / B) * key_cache.stride[0];
    const std::int64_t off = slot % B;
    for (int d = 0; d < D; ++d)
      block[off * D + d] = float_to_fp8(static_cast<float>(load(k, t * k.stride[0] + d)) / scale, ScalarType::fp8_e4m3);
    std::memcpy(block + B * D + off * 4, &scale, 4);
  }
}

std::vector<std::int64_t> row_lengths(const AttentionMetadata& md) {
  std::vector<std::int64_t> lengths(idx(md.num_actual_tokens), 0);
  for (int s = 0; s < md.num_seqs; ++s) {
    const int t0 = md.query_start_loc[idx(s)], s_q = md.query_start_loc[idx(s) + 1] - t0;
    const std::int64_t L = md.seq_lens[idx(s)];
    for (int j = 0; j < s_q; ++j) lengths[idx(t0 + j)] = L == 0 ? 0 : L - s_q + j + 1;
  }
  return lengths;
}

std::vector<double> logits(const IndexerLayerParams& p, const AttentionMetadata& md, const TensorView& q,
                           const TensorView& weights, const TensorView& key_cache, std::int64_t width) {
  const int H = p.num_heads, D = p.head_dim;
  const std::int64_t B = key_cache.shape[1];
  const std::vector<std::int64_t> lengths = row_lengths(md);
  std::vector<double> out(idx(md.num_actual_tokens) * idx(width), kNegInf);
  for (int s = 0; s < md.num_seqs; ++s) {
    const int t0 = md.query_start_loc[idx(s)], s_q = md.query_start_loc[idx(s) + 1] - t0;
    const std::int64_t L = md.seq_lens[idx(s)];
    if (L == 0) continue;
    // The request's keys dequantised: k8 · κ.
    std::vector<double> keys(idx(L) * idx(D));
    for (std::int64_t pos = 0; pos < L; ++pos) {
      const std::int32_t block = md.block_table[idx(s) * idx(md.max_blocks_per_seq) + idx(pos / B)];
      const std::uint8_t* base = bytes(key_cache) + block * key_cache.stride[0];
      float kappa = 0.0f;
      std::memcpy(&kappa, base + B * D + (pos % B) * 4, 4);
      for (int d = 0; d < D; ++d)
        keys[idx(pos) * idx(D) + idx(d)] =
            static_cast<double>(fp8_to_float(base[(pos % B) * D + d], ScalarType::fp8_e4m3)) * kappa;
    }
#pragma omp parallel for schedule(static)
    for (int j = 0; j < s_q; ++j) {
      const std::int64_t t = t0 + j;
      // The quantised query heads, dequantised (q8 · σ), and their weights w · D^-0.5 · H^-0.5.
      std::vector<double> qh(idx(H) * idx(D)), w(idx(H));
      for (int h = 0; h < H; ++h) {
        double amax = 0.0;
        for (int d = 0; d < D; ++d) amax = std::max(amax, std::abs(load(q, t * q.stride[0] + h * q.stride[1] + d)));
        const double sigma = ue8m0(std::max(amax, 1e-10) / 448.0);
        for (int d = 0; d < D; ++d) {
          const double x = load(q, t * q.stride[0] + h * q.stride[1] + d);
          qh[idx(h) * idx(D) + idx(d)] =
              static_cast<double>(fp8_to_float(float_to_fp8(static_cast<float>(x / sigma), ScalarType::fp8_e4m3),
                                               ScalarType::fp8_e4m3)) *
              sigma;
        }
        w[idx(h)] = load(weights, t * weights.stride[0] + h) / std::sqrt(static_cast<double>(D)) /
                    std::sqrt(static_cast<double>(H));
      }
      for (std::int64_t pos = 0; pos < lengths[idx(t)]; ++pos) {
        double score = 0.0;
        for (int h = 0; h < H; ++h)
          score += w[idx(h)] * std::max(0.0, dot(qh.data() + idx(h) * idx(D), keys.data() + idx(pos) * idx(D), D));
        out[idx(t) * idx(width) + idx(pos)] = score;
      }
    }
  }
  return out;
}

std::vector<std::int32_t> top_k(const std::vector<double>& scores, std::int64_t width,
                                const std::vector<std::int64_t>& lengths, int topk) {
  std::vector<std::int32_t> out(lengths.size() * idx(topk), -1);
  for (size_t r = 0; r < lengths.size(); ++r) {
    std::vector<std::int32_t> order(idx(lengths[r]));
    std::iota(order.begin(), order.end(), 0);
    const double* row = scores.data() + r * idx(width);
    std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) { return row[a] > row[b]; });
    for (size_t k = 0; k < std::min(order.size(), idx(topk)); ++k) out[r * idx(topk) + k] = order[k];
  }
  return out;
}

std::vector<std::int32_t> physical_indices(const AttentionMetadata& md, int block_size,
                                           const std::vector<std::int32_t>& local, int topk) {
  std::vector<std::int32_t> out(local.size(), -1);
  for (int s = 0; s < md.num_seqs; ++s)
    for (int t = md.query_start_loc[idx(s)]; t < md.query_start_loc[idx(s) + 1]; ++t)
      for (int k = 0; k < topk; ++k) {
        const std::int64_t pos = local[idx(t) * idx(topk) + idx(k)];
        if (pos < 0 || pos >= md.seq_lens[idx(s)]) continue;
        const std::int32_t block = md.block_table[idx(s) * idx(md.max_blocks_per_seq) + idx(pos / block_size)];
        out[idx(t) * idx(topk) + idx(k)] = static_cast<std::int32_t>(block * block_size + pos % block_size);
      }
  return out;
}

void write_latent(const SparseMlaLayerParams& p, const TensorView& kv_c, const TensorView& k_pe,
                  const TensorView& cache, std::span<const std::int64_t> slots, int num_tokens) {
  const std::int64_t B = cache.shape[1];
  for (int t = 0; t < num_tokens; ++t) {
    const std::int64_t slot = slots[idx(t)];
    if (slot < 0) continue;
    const std::int64_t row = (slot / B) * cache.stride[0] + (slot % B) * cache.stride[1];
    if (!is_ds_mla(p)) {
      for (int e = 0; e < kLatent; ++e)
        kernel::reference::store(cache.data, cache.dtype, row + e,
                                 e < kRank ? load(kv_c, t * kv_c.stride[0] + e) : load(k_pe, t * k_pe.stride[0] + e - kRank));
      continue;
    }
    std::uint8_t* rec = bytes(cache) + row;
    for (int tile = 0; tile < kRank / kTile; ++tile) {
      double amax = 0.0;
      for (int e = tile * kTile; e < (tile + 1) * kTile; ++e) amax = std::max(amax, std::abs(load(kv_c, t * kv_c.stride[0] + e)));
      const auto scale = static_cast<float>(ue8m0(std::max(amax / 448.0, 1e-4)));
      for (int e = tile * kTile; e < (tile + 1) * kTile; ++e)
        rec[e] = float_to_fp8(static_cast<float>(load(kv_c, t * kv_c.stride[0] + e)) / scale, ScalarType::fp8_e4m3);
      std::memcpy(rec + kRank + 4 * tile, &scale, 4);
    }
    for (int e = 0; e < kRope; ++e) {
      const std::uint16_t h = float_to_bf16(static_cast<float>(load(k_pe, t * k_pe.stride[0] + e)));
      std::memcpy(rec + kRank + 16 + 2 * e, &h, 2);
    }
  }
}

double latent_entry(const SparseMlaLayerParams& p, const TensorView& cache, std::int64_t row, int e) {
  const std::int64_t off = row * cache.stride[1];  // packed blocks: row r at r × token stride
  if (!is_ds_mla(p)) return load(cache, off + e);
  const std::uint8_t* rec = bytes(cache) + off;
  if (e >= kRank) {
    std::uint16_t h = 0;
    std::memcpy(&h, rec + kRank + 16 + 2 * (e - kRank), 2);
    return bf16_to_float(h);
  }
  float scale = 0.0f;
  std::memcpy(&scale, rec + kRank + 4 * (e / kTile), 4);
  // FlashMLA's reading: the fp32 product, rounded to bf16.
  return bf16_to_float(float_to_bf16(fp8_to_float(rec[e], ScalarType::fp8_e4m3) * scale));
}

Result attend_latent(const SparseMlaLayerParams& p, const TensorView& q_latent, const std::vector<std::int32_t>& indices,
                     const TensorView& cache, int tokens) {
  const int N = p.dims.num_heads, topk = p.topk;
  Result r = Result::empty(tokens, N, kRank);
  for (int t = 0; t < tokens; ++t) {
    const Gathered g = gather(p, cache, indices.data() + idx(t) * idx(topk), topk);
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; ++n) {
      std::vector<double> qn(kLatent), logits(idx(topk), 0.0), prob(idx(topk), 0.0);
      for (int e = 0; e < kLatent; ++e) qn[idx(e)] = load(q_latent, t * q_latent.stride[0] + n * q_latent.stride[1] + e);
      for (int k = 0; k < topk; ++k)
        if (g.valid[idx(k)])
          logits[idx(k)] = static_cast<double>(p.scale) * dot(qn.data(), g.c.data() + idx(k) * kLatent, kLatent);
      r.lse[idx(t) * idx(N) + idx(n)] = softmax(logits, g.valid, prob);
      double* o = r.out.data() + (idx(t) * idx(N) + idx(n)) * kRank;
      for (int k = 0; k < topk; ++k)
        if (g.valid[idx(k)])
          for (int e = 0; e < kRank; ++e) o[e] += prob[idx(k)] * g.c[idx(k) * kLatent + idx(e)];
    }
  }
  return r;
}

Result attend(const SparseMlaLayerParams& p, const TensorView& q, const std::vector<std::int32_t>& indices,
              const TensorView& cache, int tokens) {
  const MlaDims& d = p.dims;
  const int N = d.num_heads, nope = d.qk_nope_head_dim, dv = d.v_head_dim, topk = p.topk;
  const TensorView& wv = p.kv_b_proj;
  std::vector<double> w(idx(wv.shape[0]) * kRank);  // kv_b_proj in double
  for (std::int64_t row = 0; row < wv.shape[0]; ++row)
    for (int l = 0; l < kRank; ++l) w[idx(row) * kRank + idx(l)] = load(wv, row * wv.stride[0] + l);
  Result r = Result::empty(tokens, N, dv);
  for (int t = 0; t < tokens; ++t) {
    const Gathered g = gather(p, cache, indices.data() + idx(t) * idx(topk), topk);
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; ++n) {
      const double* wn = w.data() + idx(n) * idx(nope + dv) * kRank;
      std::vector<double> qn(idx(nope + kRope)), logits(idx(topk), 0.0), prob(idx(topk), 0.0), key(idx(nope));
      for (int e = 0; e < nope + kRope; ++e) qn[idx(e)] = load(q, t * q.stride[0] + n * q.stride[1] + e);
      for (int k = 0; k < topk; ++k) {
        if (!g.valid[idx(k)]) continue;
        const double* ck = g.c.data() + idx(k) * kLatent;
        for (int j = 0; j < nope; ++j) key[idx(j)] = dot(wn + idx(j) * kRank, ck, kRank);
        logits[idx(k)] = static_cast<double>(p.scale) * (dot(qn.data(), key.data(), nope) + dot(qn.data() + nope, ck + kRank, kRope));
      }
      r.lse[idx(t) * idx(N) + idx(n)] = softmax(logits, g.valid, prob);
      double* o = r.out.data() + (idx(t) * idx(N) + idx(n)) * idx(dv);
      for (int k = 0; k < topk; ++k) {
        if (!g.valid[idx(k)]) continue;
        const double* ck = g.c.data() + idx(k) * kLatent;
        for (int j = 0; j < dv; ++j) o[j] += prob[idx(k)] * dot(wn + idx(nope + j) * kRank, ck, kRank);
      }
    }
  }
  return r;
}

}  // namespace attnsel::kernel::sparse_mla::reference
