#include "distributed/partial_attention.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "attnsel/errors.hpp"
#include "kernels/fp8.hpp"
#include "kernels/half.hpp"
#include "kernels/semantics.hpp"

namespace attnsel::distributed {

namespace {

using kernel::ScalarType;

// Decodes `n` elements of type `t` at `p` into `dst`, times `scale`.
void load_row(const std::uint8_t* p, ScalarType t, int n, float scale, float* dst) {
  switch (t) {
    case ScalarType::f32:
      std::memcpy(dst, p, static_cast<std::size_t>(n) * 4);
      break;
    case ScalarType::bf16:
      for (int i = 0; i < n; ++i) {
        std::uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        dst[i] = kernel::bf16_to_float(h);
      }
      break;
    case ScalarType::f16:
      for (int i = 0; i < n; ++i) {
        std::uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        dst[i] = kernel::half_to_float(h);
      }
      break;
    case ScalarType::fp8_e4m3:
      for (int i = 0; i < n; ++i) dst[i] = kernel::fp8_to_float(p[i], kernel::Fp8Format::e4m3);
      break;
    case ScalarType::fp8_e5m2:
      for (int i = 0; i < n; ++i) dst[i] = kernel::fp8_to_float(p[i], kernel::Fp8Format::e5m2);
      break;
    default: throw ValueError(fmt::format("DCP attention cannot read {} elements", kernel::to_string(t)));
  }
  if (scale != 1.0f)
    for (int i = 0; i < n; ++i) dst[i] *= scale;
}

}  // namespace

void validate_dcp_layer(const kernel::LayerParams& p) {
  if (p.sliding_window)
    throw ValueError("decode context parallelism with a sliding window is not supported here (the window is in "
                     "global positions); run without a sliding window");
  if (!p.alibi_slopes.empty())
    throw ValueError("decode context parallelism with ALiBi is not supported here (the bias is in global positions)");
  if (!p.sinks.empty())
    throw ValueError("decode context parallelism with attention sinks is not supported here (a sink must enter the "
                     "softmax once, not once per rank)");
}

void attend_shard(const kernel::LayerParams& p, const kernel::TensorView& query, const kernel::KVCacheView& cache,
                  const kernel::AttentionMetadata& md, std::span<float> out, std::span<float> lse) {
  validate_dcp_layer(p);
  const int H = p.num_heads, KVH = p.num_kv_heads, D = p.head_size;
  if (query.ndim != 3 || query.shape[1] != H || query.shape[2] != D || query.stride[2] != 1 ||
      !kernel::is_float_activation(query.dtype))
    throw ValueError(fmt::format("DCP attention expects a float query [tokens, {}, {}] with contiguous rows, got {}", H,
                                 D, query.describe()));
  if (cache.num_kv_heads() != KVH || cache.head_size() != D || cache.key.stride[3] != 1 || cache.value.stride[3] != 1)
    throw ValueError(fmt::format("DCP attention: the shard's cache {} does not match the layer ({} KV heads, head "
                                 "size {})",
                                 cache.key.describe(), KVH, D));
  const int T = md.num_actual_tokens;
  if (query.shape[0] < T || out.size() < static_cast<std::size_t>(T) * H * D ||
      lse.size() < static_cast<std::size_t>(T) * H)
    throw ValueError("DCP attention: the query, output or LSE buffer is smaller than the batch");
  for (int s = 0; s < md.num_seqs; ++s)
    if (md.query_start_loc[static_cast<std::size_t>(s) + 1] - md.query_start_loc[static_cast<std::size_t>(s)] != 1)
      throw ValueError("decode context parallelism runs decode steps: every sequence needs exactly one query token");
  const kernel::ScalarType ct = cache.key.dtype;
  const bool quantized = ct == ScalarType::fp8_e4m3 || ct == ScalarType::fp8_e5m2;
  const int group = H / KVH, bs = cache.block_size();
  const std::size_t ce = kernel::element_size(ct), qe = kernel::element_size(query.dtype);
  const auto* kbase = static_cast<const std::uint8_t*>(cache.key.data);
  const auto* vbase = static_cast<const std::uint8_t*>(cache.value.data);
  const auto* qbase = static_cast<const std::uint8_t*>(query.data);
  const float cap = p.logits_soft_cap;

#pragma omp parallel
  {
    std::vector<float> q(static_cast<std::size_t>(group) * D), acc(q.size()), k(static_cast<std::size_t>(D)),
        v(static_cast<std::size_t>(D)), m(static_cast<std::size_t>(group)), l(static_cast<std::size_t>(group)),
        s(static_cast<std::size_t>(group));
#pragma omp for collapse(2) schedule(dynamic, 1)
    for (int seq = 0; seq < md.num_seqs; ++seq) {
      for (int g = 0; g < KVH; ++g) {
        const int t = md.query_start_loc[static_cast<std::size_t>(seq)];
        for (int i = 0; i < group; ++i) {
          const int h = g * group + i;
          load_row(qbase + static_cast<std::size_t>(t * query.stride[0] + h * query.stride[1]) * qe, query.dtype, D,
                   1.0f, q.data() + static_cast<std::size_t>(i) * D);
        }
        std::fill(acc.begin(), acc.end(), 0.0f);
        std::fill(m.begin(), m.end(), -std::numeric_limits<float>::infinity());
        std::fill(l.begin(), l.end(), 0.0f);
        const float ks = quantized ? kernel::key_scale(p, g) : 1.0f;
        const float vs = quantized ? kernel::value_scale(p, g) : 1.0f;
        const int len = md.seq_lens[static_cast<std::size_t>(seq)];
        for (int j = 0; j < len; ++j) {
          const std::int64_t block =
              md.block_table[static_cast<std::size_t>(seq) * md.max_blocks_per_seq + static_cast<std::size_t>(j / bs)];
          const std::int64_t ko = block * cache.key.stride[0] + j % bs * cache.key.stride[1] + g * cache.key.stride[2];
          const std::int64_t vo =
              block * cache.value.stride[0] + j % bs * cache.value.stride[1] + g * cache.value.stride[2];
          load_row(kbase + static_cast<std::size_t>(ko) * ce, ct, D, ks, k.data());
          load_row(vbase + static_cast<std::size_t>(vo) * ce, ct, D, vs, v.data());
          for (int i = 0; i < group; ++i) {
            const float* qi = q.data() + static_cast<std::size_t>(i) * D;
            float dot = 0.0f;
            for (int d = 0; d < D; ++d) dot += qi[d] * k[static_cast<std::size_t>(d)];
            float logit = dot * p.scale;
            if (cap > 0.0f) logit = cap * std::tanh(logit / cap);
            // Online softmax: rescale what was accumulated when the maximum moves.
            const float m_new = std::max(m[static_cast<std::size_t>(i)], logit);
            const float correction = std::exp(m[static_cast<std::size_t>(i)] - m_new);
            const float w = std::exp(logit - m_new);
            l[static_cast<std::size_t>(i)] = l[static_cast<std::size_t>(i)] * correction + w;
            float* ai = acc.data() + static_cast<std::size_t>(i) * D;
            for (int d = 0; d < D; ++d) ai[d] = ai[d] * correction + w * v[static_cast<std::size_t>(d)];
            m[static_cast<std::size_t>(i)] = m_new;
          }
        }
        for (int i = 0; i < group; ++i) {
          const int h = g * group + i;
          float* o = out.data() + (static_cast<std::size_t>(t) * H + static_cast<std::size_t>(h)) * D;
          const float li = l[static_cast<std::size_t>(i)];
          const float inv = li > 0.0f ? 1.0f / li : 0.0f;
          for (int d = 0; d < D; ++d) o[d] = acc[static_cast<std::size_t>(i) * D + static_cast<std::size_t>(d)] * inv;
          lse[static_cast<std::size_t>(t) * H + static_cast<std::size_t>(h)] =
              li > 0.0f ? m[static_cast<std::size_t>(i)] + std::log(li) : -std::numeric_limits<float>::infinity();
        }
      }
    }
  }
}

}  // namespace attnsel::distributed
