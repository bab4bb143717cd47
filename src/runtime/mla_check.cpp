#include "runtime/mla_check.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/attention/reference.hpp"
#include "kernels/mla/reference.hpp"

namespace attnsel::runtime {

namespace {

// `t` moved `rows` rows (dimension 0) and `heads` heads (dimension 1) in, keeping its strides.
kernel::TensorView offset(const kernel::TensorView& t, std::int64_t rows, std::int64_t heads = 0) {
  kernel::TensorView v = t;
  const std::int64_t elements = rows * t.stride[0] + (t.ndim > 2 ? heads * t.stride[1] : 0);
  v.data = static_cast<std::uint8_t*>(t.data) + elements * static_cast<std::int64_t>(kernel::element_size(t.dtype));
  return v;
}

}  // namespace

MlaTolerance mla_output_tolerance(kernel::ScalarType dtype, bool prefill) {
  if (dtype == kernel::ScalarType::f32) return {1e-5, 1e-5, 1e-10};
  // A bf16 layer rounds its absorbed query, probabilities, latent output (or up-projected
  // keys and values) and output to 8 significant bits: on these inputs the cosine distance
  // of the whole chain is 3.5e-6 to 5.7e-6, 64x (= (2^-8 / 2^-11)^2) that of the same chain
  // in fp16. Its bound is 2e-5; fp16 keeps FlashMLA's 5e-6.
  const double cos = dtype == kernel::ScalarType::bf16 ? 2e-5 : 5e-6;
  return {prefill ? 6e-3 : 4e-3, 2.01 / 128, cos};
}

double mla_reference_cost(const kernel::MlaDims& d, std::int64_t seq_len, std::int64_t query_len) {
  const double L = static_cast<double>(seq_len), q = static_cast<double>(query_len);
  return L * (d.qk_nope_head_dim + d.v_head_dim) * d.kv_lora_rank + q * L * (d.qk_head_size() + d.v_head_dim);
}

void MlaOutputCheck::add(const kernel::MlaLayerParams& params, const LatentBatch& batch, int decode_query_len,
                         const kernel::TensorView& q, const kernel::TensorView& kv_c, const kernel::TensorView& k_pe,
                         const kernel::TensorView& cache, const kernel::TensorView& output, int seq, int head,
                         int layer) {
  const kernel::MlaDims& d = params.dims;
  const int t0 = batch.query_start(seq), rows = batch.query_len(seq);
  // One head of one request: its query rows and kv_b_proj rows, the request's batch alone.
  kernel::MlaLayerParams one = params;
  one.dims.num_heads = 1;
  const std::int64_t head_rows = d.qk_nope_head_dim + d.v_head_dim;
  one.kv_b_proj = offset(params.kv_b_proj, head * head_rows);
  one.kv_b_proj.shape[0] = head_rows;
  kernel::TensorView q1 = offset(q, t0, head);
  q1.shape[1] = 1;
  const kernel::mla::reference::Result want = kernel::mla::reference::attend(
      one, batch.single(seq), decode_query_len, q1, offset(kv_c, t0), offset(k_pe, t0), cache);

  MlaComparison& r = result_;
  const MlaTolerance& tol = r.tolerance;
  for (int j = 0; j < rows; ++j)
    for (int e = 0; e < d.v_head_dim; ++e) {
      const std::int64_t token = t0 + j;
      const double got = kernel::reference::load(output.data, output.dtype,
                                                 token * output.stride[0] + head * output.stride[1] + e);
      const double w = want.out[static_cast<std::size_t>(j) * static_cast<std::size_t>(d.v_head_dim) +
                                static_cast<std::size_t>(e)];
      const double diff = std::fabs(got - w);
      const double ratio =
          std::isfinite(got) ? std::min(diff / tol.abs, diff / (std::fabs(w) + 1e-6) / tol.rel) : 1e30;
      ++r.elements;
      r.worst_ratio = std::max(r.worst_ratio, ratio);
      if (std::isfinite(diff)) {
        r.max_abs_error = std::max(r.max_abs_error, diff);
        got_want_ += got * w;
        squares_ += got * got + w * w;
      }
      if (!(ratio < 1.0)) {
        ++r.failures;
        if (r.first_failures.size() < 5)
          r.first_failures.push_back({layer, static_cast<int>(token), head, e, got, w});
      }
    }
  r.cos_diff = squares_ > 0.0 ? 1.0 - 2.0 * got_want_ / squares_ : 0.0;
  ++r.samples;
}

}  // namespace attnsel::runtime
