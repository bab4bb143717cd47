// The MLA tests' workloads and comparisons (mla_test_util.hpp): out of line, so that the
// build compiles them optimised even where the tests' own code is not (tests/CMakeLists.txt).
#include "mla_test_util.hpp"

namespace attnsel::kernel::mla::testing {

std::string compare(const std::vector<double>& got, const std::vector<double>& ref, Tolerance tol) {
  if (got.size() != ref.size()) return fmt::format("size {} vs reference {}", got.size(), ref.size());
  double ar = 0.0, aa_rr = 0.0;
  std::int64_t failures = 0;
  std::string first;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double a = got[i], r = ref[i];
    if (!std::isfinite(a) || !std::isfinite(r)) {
      if (!(a == r || (std::isnan(a) && std::isnan(r)))) {
        if (failures++ == 0) first = fmt::format("element {}: got {}, reference {}", i, a, r);
      }
      continue;
    }
    const double diff = std::abs(a - r);
    if (!(diff < tol.abs || diff / (std::abs(r) + 1e-6) < tol.rel)) {
      if (failures++ == 0) first = fmt::format("element {}: got {}, reference {} (|diff| {:.3g})", i, a, r, diff);
    }
    ar += a * r;
    aa_rr += a * a + r * r;
  }
  const double cos_diff = aa_rr > 0.0 ? 1.0 - 2.0 * ar / aa_rr : 0.0;
  if (failures > 0) return fmt::format("{} of {} elements outside abs {} / rel {}; {}", failures, ref.size(), tol.abs,
                                       tol.rel, first);
  if (tol.cos > 0.0 && cos_diff > tol.cos) return fmt::format("cosine distance {:.3g} > {}", cos_diff, tol.cos);
  return "";
}

void Buffer::poison() {
  const std::size_t n = bytes.size() / element_size(view.dtype);
  for (std::size_t i = 0; i < n; ++i) kernel::reference::store(bytes.data(), view.dtype, static_cast<std::int64_t>(i), NAN);
}

std::vector<double> read(const TensorView& t, std::int64_t rows) {
  std::vector<double> out;
  const std::int64_t inner = t.ndim > 2 ? t.shape[1] * t.shape[2] : t.shape[1];
  out.reserve(static_cast<std::size_t>(rows * inner));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < inner; ++i) {
      std::int64_t off = r * t.stride[0];
      if (t.ndim > 2) off += (i / t.shape[2]) * t.stride[1] + i % t.shape[2];
      else off += i;
      out.push_back(kernel::reference::load(t.data, t.dtype, off));
    }
  return out;
}

MlaWorkload::MlaWorkload(const MlaSetup& s) : setup(s) {
  std::mt19937_64 rng(s.seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  auto sample = [&](double sigma, double clamp) { return std::clamp(normal(rng) * sigma, -clamp, clamp); };
  const int N = s.heads;
  params.dims.num_heads = N;
  params.dtype = s.dtype;
  params.scale = static_cast<float>(1.0 / std::sqrt(192.0));
  params.kv_cache_dtype = s.kv_cache_dtype;
  params.k_scale = s.k_scale;
  // kv_b_proj: key rows ~ N(0, 4²) give logits of std ~0.75; value rows ~ N(0, 0.2²) give values ~ N(0, 0.45²).
  weights = Buffer(s.dtype, {N * 256, 512});
  for (std::int64_t r = 0; r < N * 256; ++r)
    for (std::int64_t l = 0; l < 512; ++l)
      kernel::reference::store(weights.bytes.data(), s.dtype, r * 512 + l, sample(r % 256 < 128 ? 4.0 : 0.2, 1e9));
  params.kv_b_proj = weights.view;
  w.resize(static_cast<std::size_t>(N) * 256 * 512);
  for (std::size_t i = 0; i < w.size(); ++i)
    w[i] = kernel::reference::load(weights.bytes.data(), s.dtype, static_cast<std::int64_t>(i));

  // The batch: query_start_loc, seq_lens, a permuted block table with holes and garbage.
  const int n = static_cast<int>(s.requests.size());
  query_start_loc.push_back(0);
  int max_blocks = 1, total_blocks = 0, max_q = 0, max_s = 0;
  for (const Request& r : s.requests) {
    query_start_loc.push_back(query_start_loc.back() + r.query_len);
    seq_lens.push_back(r.seq_len);
    const int used = (r.seq_len + s.block_size - 1) / s.block_size;
    max_blocks = std::max(max_blocks, used + 2);
    total_blocks += used;
    max_q = std::max(max_q, r.query_len);
    max_s = std::max(max_s, r.seq_len);
  }
  tokens = query_start_loc.back();
  const int num_blocks = 2 * total_blocks + 3;
  std::vector<std::int32_t> ids(static_cast<std::size_t>(num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  block_table.assign(static_cast<std::size_t>(n) * static_cast<std::size_t>(max_blocks), 2147480000);
  std::size_t next = 0;
  for (int i = 0; i < n; ++i)
    for (int b = 0; b < (s.requests[static_cast<std::size_t>(i)].seq_len + s.block_size - 1) / s.block_size; ++b)
      block_table[static_cast<std::size_t>(i * max_blocks + b)] = ids[next++];
  md.num_seqs = n;
  md.num_actual_tokens = tokens;
  md.max_blocks_per_seq = max_blocks;
  md.max_query_len = max_q;
  md.max_seq_len = max_s;

  // Inputs, and the cache: every position of every request written (the context as earlier
  // steps left it, this step's tokens from kv_c / k_pe), every other row NaN.
  const int rows = tokens + s.extra_rows;
  q = Buffer(s.dtype, {rows, N, 192});
  kv_c = Buffer(s.dtype, {rows, 512});
  k_pe = Buffer(s.dtype, {rows, 64});
  for (auto* b : {&q, &kv_c, &k_pe}) {
    const std::size_t count = b->bytes.size() / element_size(s.dtype);
    const double scale = b == &q ? 1.0 : s.latent_scale;
    for (std::size_t i = 0; i < count; ++i)
      kernel::reference::store(b->bytes.data(), s.dtype, static_cast<std::int64_t>(i), sample(0.1, 1.0) * scale);
  }
  cache_dtype = params.kv_cache_dtype == CacheDType::fp8 || params.kv_cache_dtype == CacheDType::fp8_e4m3
                    ? ScalarType::fp8_e4m3
                    : s.dtype;
  cache = Buffer(cache_dtype, {num_blocks, s.block_size, 576});
  cache.poison();
  Buffer ctx_c(s.dtype, {1, 512}), ctx_pe(s.dtype, {1, 64});
  for (int i = 0; i < n; ++i) {
    const Request& r = s.requests[static_cast<std::size_t>(i)];
    const int context = std::max(0, r.seq_len - r.query_len);
    for (int pos = 0; pos < r.seq_len; ++pos) {
      const std::int64_t slot = slot_of(i, pos);
      if (pos < context) {
        for (int e = 0; e < 512; ++e) kernel::reference::store(ctx_c.bytes.data(), s.dtype, e, sample(0.1, 1.0) * s.latent_scale);
        for (int e = 0; e < 64; ++e) kernel::reference::store(ctx_pe.bytes.data(), s.dtype, e, sample(0.1, 1.0) * s.latent_scale);
        const std::int64_t one[1] = {slot};
        mla::reference::write_cache(params, ctx_c.view, ctx_pe.view, cache.view, one, 1);
      }
    }
  }
  for (int i = 0; i < n; ++i) {
    const Request& r = s.requests[static_cast<std::size_t>(i)];
    for (int j = 0; j < r.query_len; ++j)
      slot_mapping.push_back(r.seq_len == 0 ? -1 : slot_of(i, r.seq_len - r.query_len + j));
  }
  mla::reference::write_cache(params, kv_c.view, k_pe.view, cache.view, slot_mapping, tokens);
  md.query_start_loc = query_start_loc;
  md.seq_lens = seq_lens;
  md.block_table = block_table;
  md.slot_mapping = slot_mapping;

  output = Buffer(s.dtype, {rows, N, 128});
  latent_out = Buffer(s.dtype, {rows, N, 512});
  lse = Buffer(ScalarType::f32, {rows, N});
  poison_outputs();
}

Buffer& MlaWorkload::absorbed_queries() {
  const int T = num_decode_tokens(), N = setup.heads;
  q_latent = Buffer(setup.dtype, {T + 1, N, 576});
  for (int t = 0; t < T; ++t)
    for (int n = 0; n < N; ++n) {
      const std::int64_t qo = (static_cast<std::int64_t>(t) * N + n) * 192, lo = (static_cast<std::int64_t>(t) * N + n) * 576;
      for (int l = 0; l < 512; ++l) {
        double acc = 0.0;
        for (int d = 0; d < 128; ++d)
          acc += kernel::reference::load(q.bytes.data(), setup.dtype, qo + d) *
                 w[(static_cast<std::size_t>(n) * 256 + static_cast<std::size_t>(d)) * 512 + static_cast<std::size_t>(l)];
        kernel::reference::store(q_latent.bytes.data(), setup.dtype, lo + l, acc);
      }
      for (int e = 0; e < 64; ++e)
        kernel::reference::store(q_latent.bytes.data(), setup.dtype, lo + 512 + e,
                                 kernel::reference::load(q.bytes.data(), setup.dtype, qo + 128 + e));
    }
  return q_latent;
}

std::vector<double> MlaWorkload::through_w_uv(const std::vector<double>& latent) const {
  const int N = setup.heads;
  const std::size_t T = latent.size() / (static_cast<std::size_t>(N) * 512);
  std::vector<double> out(T * static_cast<std::size_t>(N) * 128, 0.0);
  for (std::size_t t = 0; t < T; ++t)
    for (int n = 0; n < N; ++n)
      for (int v = 0; v < 128; ++v) {
        double acc = 0.0;
        const double* wv = w.data() + (static_cast<std::size_t>(n) * 256 + 128 + static_cast<std::size_t>(v)) * 512;
        const double* o = latent.data() + (t * static_cast<std::size_t>(N) + static_cast<std::size_t>(n)) * 512;
        for (int l = 0; l < 512; ++l) acc += o[l] * wv[l];
        out[(t * static_cast<std::size_t>(N) + static_cast<std::size_t>(n)) * 128 + static_cast<std::size_t>(v)] = acc;
      }
  return out;
}

}  // namespace attnsel::kernel::mla::testing
