// Shared by the MLA kernel tests: a step's batch with FlashMLA-like inputs (latents and
// queries ~ N(0, 0.1²) clamped to ±1, kv_b_proj scaled so that per-head logits are O(1)),
// a paged latent cache with permuted block tables, holes, garbage past the used blocks and
// every row nobody wrote NaN-poisoned; and FlashMLA's comparison (tests/kernelkit/compare.py's
// check_is_allclose: non-finite positions equal, each element within abs or rel, and the
// cosine distance of the whole tensor).
#pragma once

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "attnsel/mla.hpp"
#include "kernels/attention/reference.hpp"
#include "kernels/half.hpp"
#include "kernels/mla/reference.hpp"

namespace attnsel::kernel::mla::testing {

/// FlashMLA's criteria: |a - r| < abs or |a - r| / (|r| + 1e-6) < rel, element by element,
/// and 1 - 2Σar / Σ(a² + r²) <= cos over the finite elements.
struct Tolerance {
  double abs = 0.0, rel = 0.0, cos = 0.0;
};
/// The latent output of bf16/f16 layers (FlashMLA's dense decode test).
inline constexpr Tolerance kLatentHalf{8e-4, 2.01 / 128, 5e-6};
/// The output after W_UV (128 wide) of bf16/f16 layers: the latent's bound, abs widened.
inline constexpr Tolerance kOutputHalf{4e-3, 2.01 / 128, 5e-6};
/// The prefill's output of bf16/f16 layers: its keys and values are rounded to the
/// activation dtype after the up-projection (as vLLM's kv_b_proj returns them) and its
/// probabilities to bf16 before P·V, one rounding more than the decode's: abs 6e-3 (about
/// 1 % of the values' spread here; 1 element in 10^5 of the 128-head case passes 4e-3).
inline constexpr Tolerance kPrefillHalf{6e-3, 2.01 / 128, 5e-6};
/// fp32 layers.
inline constexpr Tolerance kF32{1e-5, 1e-5, 1e-10};
/// LSE (FlashMLA's dense decode test).
inline constexpr Tolerance kLse{1e-6, 8.01 / 65536, 0.0};

inline Tolerance output_tolerance(ScalarType dtype) { return dtype == ScalarType::f32 ? kF32 : kOutputHalf; }
inline Tolerance prefill_tolerance(ScalarType dtype) { return dtype == ScalarType::f32 ? kF32 : kPrefillHalf; }
inline Tolerance latent_tolerance(ScalarType dtype) { return dtype == ScalarType::f32 ? kF32 : kLatentHalf; }
inline Tolerance lse_tolerance(ScalarType dtype) { return dtype == ScalarType::f32 ? Tolerance{1e-5, 1e-5, 0.0} : kLse; }

/// "" when `got` passes against `ref`, else what failed (the first element and the cosine).
std::string compare(const std::vector<double>& got, const std::vector<double>& ref, Tolerance tol);

/// One request: L cached tokens (this step's included) and its query tokens.
struct Request {
  int seq_len = 0;
  int query_len = 1;
};

struct MlaSetup {
  ScalarType dtype = ScalarType::bf16;
  CacheDType kv_cache_dtype = CacheDType::auto_;
  float k_scale = 1.0f;
  int heads = 16;
  int block_size = 16;
  std::vector<Request> requests;
  int decode_query_len = 1;
  std::uint64_t seed = 1;
  int extra_rows = 3;  ///< rows of q / kv_c / k_pe / output past num_actual_tokens (never read or written)
  float latent_scale = 1.0f;  ///< multiplies every latent (fp8 saturation tests)
};

inline std::string describe(const MlaSetup& s) {
  std::string reqs;
  for (const Request& r : s.requests) reqs += fmt::format("({},{})", r.seq_len, r.query_len);
  return fmt::format("dtype={} kv={} k_scale={} heads={} block={} decode_query_len={} requests={}", to_string(s.dtype),
                     cache_dtype_name(s.kv_cache_dtype), s.k_scale, s.heads, s.block_size, s.decode_query_len, reqs);
}

/// A tensor's storage: zeroed bytes, owned.
struct Buffer {
  std::vector<std::uint8_t> bytes;
  TensorView view;
  Buffer() = default;
  Buffer(ScalarType t, std::initializer_list<std::int64_t> shape) {
    std::int64_t n = 1;
    for (std::int64_t d : shape) n *= d;
    bytes.assign(static_cast<std::size_t>(n) * element_size(t), 0);
    view = TensorView::contiguous(bytes.data(), t, shape);
  }
  Buffer(Buffer&&) = default;  // the view stays valid: a moved vector keeps its storage
  Buffer& operator=(Buffer&&) = default;
  /// Fills with NaN of its type.
  void poison();
};

/// Every element of `t`'s first `rows` rows, in row-major order.
std::vector<double> read(const TensorView& t, std::int64_t rows);

/// A step: the layer, the batch, the inputs, a written cache, NaN-poisoned outputs.
class MlaWorkload {
 public:
  explicit MlaWorkload(const MlaSetup& s);

  std::int64_t slot_of(int seq, int pos) const {
    return static_cast<std::int64_t>(block_table[static_cast<std::size_t>(seq * md.max_blocks_per_seq + pos / setup.block_size)]) *
               setup.block_size +
           pos % setup.block_size;
  }
  int num_decode_tokens() const {
    int t = 0;
    for (std::size_t i = 0; i < setup.requests.size() && setup.requests[i].query_len <= setup.decode_query_len; ++i)
      t += setup.requests[i].query_len;
    return t;
  }
  void poison_outputs() {
    output.poison();
    latent_out.poison();
    lse.poison();
  }
  MlaPlanOptions plan_options(bool with_lse = true) const {
    MlaPlanOptions o;
    o.decode_query_len = setup.decode_query_len;
    o.lse = with_lse;
    return o;
  }

  /// The absorbed decode queries [decode tokens, heads, 576]: [q_nope · W_UK (double, rounded
  /// to the activation dtype) | q_pe].
  Buffer& absorbed_queries();

  /// Latent outputs [T, heads, 512] (any rows) through W_UV, in double: [T, heads, 128].
  std::vector<double> through_w_uv(const std::vector<double>& latent) const;

  mla::reference::Result reference() const {
    return mla::reference::attend(params, md, setup.decode_query_len, q.view, kv_c.view, k_pe.view, cache.view);
  }
  mla::reference::Result latent_reference() const {
    return mla::reference::attend_latent(params, md, setup.decode_query_len, q_latent.view, cache.view);
  }

  MlaSetup setup;
  MlaLayerParams params;
  AttentionMetadata md;
  int tokens = 0;
  ScalarType cache_dtype = ScalarType::bf16;
  std::vector<std::int32_t> query_start_loc, seq_lens, block_table;
  std::vector<std::int64_t> slot_mapping;
  Buffer weights, q, kv_c, k_pe, cache, output, latent_out, lse, q_latent;
  std::vector<double> w;  ///< kv_b_proj in double
};

}  // namespace attnsel::kernel::mla::testing
