// The indexer's scores on the CPU (indexer_steps.hpp): what DeepGEMM's fp8_mqa_logits and
// fp8_paged_mqa_logits compute for vLLM, I[t, s] = κ_s · Σ_h w'[t, h] · ReLU(q8[t, h] · k8[s]).
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/element_access.hpp"
#include "kernels/fp8.hpp"
#include "kernels/half.hpp"
#include "kernels/sparse_mla/cpu/fp8_rows.hpp"
#include "kernels/sparse_mla/cpu/head_sums.hpp"
#include "kernels/sparse_mla/cpu/indexer_steps.hpp"
#include "kernels/sparse_mla/formats.hpp"

namespace attnsel::kernel::sparse_mla::cpu {

namespace {

using mla::cpu::PackedMatrix;

// The bf16 bits of each e4m3 byte's value (exact: e4m3 values have 4 significant bits).
const std::array<std::uint16_t, 256>& e4m3_as_bf16() {
  static const std::array<std::uint16_t, 256> table = [] {
    std::array<std::uint16_t, 256> t{};
    for (int b = 0; b < 256; ++b)
      t[static_cast<std::size_t>(b)] = float_to_bf16(fp8_to_float(static_cast<std::uint8_t>(b), ScalarType::fp8_e4m3));
    return t;
  }();
  return table;
}

float load(const TensorView& t, std::int64_t offset) { return load_activation(t.dtype, t.data, offset); }

// Token t's heads quantised into its matrix ([head_dim × padded heads]: column h is head h's
// e4m3 values, as bf16 pairs or f32), and its head weights w' (0 for the padding heads).
void quantise_token(const IndexerStep& s, const TensorView& q, const TensorView& weights, int t, PackedMatrix& m,
                    float* w_out) {
  const int H = s.params.num_heads, D = s.params.head_dim, Hp = s.plan.padded_heads;
  const auto& as_bf16 = e4m3_as_bf16();
  // vLLM's softmax_scale and head_scale, as the fp32 factors its kernel multiplies by.
  const auto softmax_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  const auto head_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(H)));
  float x[256];
  for (int h = 0; h < Hp; ++h) {
    if (h >= H) {
      for (int d = 0; d < D; ++d) {
        if (m.bf16_pairs) m.pairs[static_cast<std::size_t>(d / 2) * static_cast<std::size_t>(Hp) + static_cast<std::size_t>(h)] = 0;
        else m.f32[static_cast<std::size_t>(d) * static_cast<std::size_t>(Hp) + static_cast<std::size_t>(h)] = 0.0f;
      }
      w_out[h] = 0.0f;
      continue;
    }
    const std::int64_t row = t * q.stride[0] + h * q.stride[1];
    float amax = 0.0f;
    for (int d = 0; d < D; ++d) {
      x[d] = load(q, row + d);
      amax = std::fmax(amax, std::fabs(x[d]));
    }
    const float sigma = indexer_query_scale(amax);
    for (int d = 0; d < D; d += 2) {
      const std::uint16_t lo = as_bf16[encode_e4m3(x[d] / sigma)], hi = as_bf16[encode_e4m3(x[d + 1] / sigma)];
      if (m.bf16_pairs) {
        m.pairs[static_cast<std::size_t>(d / 2) * static_cast<std::size_t>(Hp) + static_cast<std::size_t>(h)] =
            static_cast<std::uint32_t>(lo) | static_cast<std::uint32_t>(hi) << 16;
      } else {
        m.f32[static_cast<std::size_t>(d) * static_cast<std::size_t>(Hp) + static_cast<std::size_t>(h)] = bf16_to_float(lo);
        m.f32[static_cast<std::size_t>(d + 1) * static_cast<std::size_t>(Hp) + static_cast<std::size_t>(h)] = bf16_to_float(hi);
      }
    }
    w_out[h] = load(weights, t * weights.stride[0] + h) * sigma * softmax_scale * head_scale;
  }
}

void score_item(const IndexerStep& s, const ScoreWave& wave, const ScoreItem& item, const TensorView& key_cache,
                float* out, std::int64_t out_stride, int first_row, const IndexerScratch& sc) {
  const mla::MlaBatch& b = s.plan.batch;
  const int D = s.params.head_dim, B = b.block_size, Hp = s.plan.padded_heads;
  const std::int32_t* table = b.table_row(item.seq);
  const float* head_weights = s.plan.head_weights.as<float>();
  float kappa[kKeyRun];
  for (std::int64_t p = item.key_begin; p < item.key_end;) {
    const std::int64_t offset = p % B;
    const int run = static_cast<int>(std::min<std::int64_t>({kKeyRun, B - offset, item.key_end - p}));
    const auto* block = static_cast<const std::uint8_t*>(key_cache.data) + table[p / B] * key_cache.stride[0];
    e4m3_to_bf16(block + indexer_value_offset(D, offset), run * D, 1.0f, sc.keys);
    std::memcpy(kappa, block + indexer_scale_offset(D, B, offset), static_cast<std::size_t>(run) * sizeof(float));
    for (int t = item.token_begin; t < item.token_end; ++t) {
      const std::int64_t seen = s.plan.row_length[static_cast<std::size_t>(t)];
      if (seen <= p) continue;
      const int w = t - wave.token_begin;
      const int n = static_cast<int>(std::min<std::int64_t>(run, seen - p));  // the keys this token sees
      mla::cpu::GemmArgs g;
      g.a = sc.keys;
      g.a_type = ScalarType::bf16;
      g.a_stride = D;
      g.m = n;
      g.b = &s.plan.queries[static_cast<std::size_t>(w)];
      g.n_begin = 0;
      g.n_end = Hp;
      g.c = sc.products;
      g.c_type = ScalarType::f32;
      g.c_stride = Hp;
      mla::cpu::gemm(g);
      const float* wt = head_weights + static_cast<std::size_t>(w) * static_cast<std::size_t>(Hp);
      float* row = out + static_cast<std::int64_t>(t - first_row) * out_stride;
      relu_weighted_head_sums(sc.products, n, Hp, wt, kappa, row + p);
    }
    p += run;
  }
}

}  // namespace

void score_wave(const IndexerStep& s, int wave_index, const TensorView& q, const TensorView& weights,
                const TensorView& key_cache, float* out, std::int64_t out_stride, int first_row, std::int64_t width) {
  const ScoreWave& wave = s.plan.waves[static_cast<std::size_t>(wave_index)];
  const int tokens = wave.token_end - wave.token_begin, Hp = s.plan.padded_heads;
  const int team = s.team();
#pragma omp parallel num_threads(team) if (team > 1)
  {
#pragma omp for schedule(dynamic, 1)
    for (int w = 0; w < tokens; ++w) {
      const int t = wave.token_begin + w;
      quantise_token(s, q, weights, t, s.plan.queries[static_cast<std::size_t>(w)],
                     s.plan.head_weights.as<float>() + static_cast<std::size_t>(w) * static_cast<std::size_t>(Hp));
      float* row = out + static_cast<std::int64_t>(t - first_row) * out_stride;
      const std::int64_t seen = s.plan.row_length[static_cast<std::size_t>(t)];
      if (width > seen) std::fill(row + seen, row + width, -std::numeric_limits<float>::infinity());
    }
    const IndexerScratch sc = carve_indexer_scratch(s.plan, omp_get_thread_num(), s.params.head_dim);
    const auto n_items = static_cast<std::int64_t>(wave.items.size());
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t i = 0; i < n_items; ++i)
      score_item(s, wave, wave.items[static_cast<std::size_t>(i)], key_cache, out, out_stride, first_row, sc);
  }
}

}  // namespace attnsel::kernel::sparse_mla::cpu
