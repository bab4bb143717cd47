// The sparse MLA tests' workloads (sparse_mla_test_util.hpp): out of line, so that the build
// compiles them optimised even where the tests' own code is not (tests/CMakeLists.txt).
#include "sparse_mla_test_util.hpp"

namespace attnsel::kernel::sparse_mla::testing {

IndexerWorkload::IndexerWorkload(const IndexerSetup& s)
    : setup(s), rng(s.seed), batch(s.requests, s.block_size, rng) {
  params.num_heads = s.heads;
  params.topk = s.topk;
  params.dtype = s.dtype;
  std::normal_distribution<double> normal(0.0, 1.0);
  const int T = batch.tokens, rows = T + 2;
  q = Buffer(s.dtype, {rows, s.heads, 128});
  weights = Buffer(s.weights_dtype, {rows, s.heads});
  k = Buffer(s.dtype, {rows, 128});
  fill(q, s.q_sigma, normal);
  fill(weights, s.w_sigma, normal);
  fill(k, s.k_sigma, normal);
  key_cache = Buffer(ScalarType::u8, {batch.num_blocks, s.block_size, 132});
  std::fill(key_cache.bytes.begin(), key_cache.bytes.end(), 0xFF);
  Buffer one(s.dtype, {1, 128});
  for (int i = 0; i < batch.md.num_seqs; ++i) {
    const Request& r = s.requests[static_cast<std::size_t>(i)];
    for (int pos = 0; pos < r.seq_len - r.query_len; ++pos) {
      fill(one, s.k_sigma, normal);
      const std::int64_t slot[1] = {batch.slot_of(i, pos)};
      reference::write_keys(params, one.view, key_cache.view, slot, 1);
    }
  }
  reference::write_keys(params, k.view, key_cache.view, batch.slot_mapping, T);
  width = std::max(batch.md.max_seq_len, 1) + 5;
  logits = Buffer(ScalarType::f32, {rows, width});
  indices = Buffer(ScalarType::i32, {rows, s.topk});
  poison_outputs();
}

SparseWorkload::SparseWorkload(const SparseSetup& s)
    : setup(s), rng(s.seed), batch(s.requests, s.block_size, rng) {
  std::normal_distribution<double> normal(0.0, 1.0);
  auto sample = [&](double sigma) { return std::clamp(normal(rng) * sigma, -1.0, 1.0); };
  const int N = s.heads, T = batch.tokens, rows = T + 2;
  params.dims.num_heads = N;
  params.dtype = s.dtype;
  params.scale = 0.1352337789f;
  params.kv_cache_dtype = s.kv_cache_dtype;
  params.topk = s.topk;
  weights = Buffer(s.dtype, {N * 256, 512});
  for (std::int64_t r = 0; r < N * 256; ++r)
    for (std::int64_t l = 0; l < 512; ++l)
      kernel::reference::store(weights.bytes.data(), s.dtype, r * 512 + l, normal(rng) * (r % 256 < 128 ? 4.0 : 0.2));
  params.kv_b_proj = weights.view;
  q = Buffer(s.dtype, {rows, N, 192});
  q_latent = Buffer(s.dtype, {rows, N, 576});
  kv_c = Buffer(s.dtype, {rows, 512});
  k_pe = Buffer(s.dtype, {rows, 64});
  for (auto* b : {&q, &q_latent, &kv_c, &k_pe}) {
    const double scale = b == &kv_c || b == &k_pe ? s.latent_scale : 1.0;
    const std::size_t n = b->bytes.size() / element_size(s.dtype);
    for (std::size_t i = 0; i < n; ++i)
      kernel::reference::store(b->bytes.data(), s.dtype, static_cast<std::int64_t>(i), sample(0.1) * scale);
  }
  const bool ds = s.kv_cache_dtype == CacheDType::fp8_ds_mla;
  cache = ds ? Buffer(ScalarType::u8, {batch.num_blocks, s.block_size, 656})
             : Buffer(s.dtype, {batch.num_blocks, s.block_size, 576});
  if (ds) std::fill(cache.bytes.begin(), cache.bytes.end(), 0xFF);
  else cache.poison();
  Buffer one_c(s.dtype, {1, 512}), one_pe(s.dtype, {1, 64});
  for (int i = 0; i < batch.md.num_seqs; ++i) {
    const Request& r = s.requests[static_cast<std::size_t>(i)];
    for (int pos = 0; pos < r.seq_len - r.query_len; ++pos) {
      for (int e = 0; e < 512; ++e) kernel::reference::store(one_c.bytes.data(), s.dtype, e, sample(0.1) * s.latent_scale);
      for (int e = 0; e < 64; ++e) kernel::reference::store(one_pe.bytes.data(), s.dtype, e, sample(0.1) * s.latent_scale);
      const std::int64_t slot[1] = {batch.slot_of(i, pos)};
      reference::write_latent(params, one_c.view, one_pe.view, cache.view, slot, 1);
    }
  }
  reference::write_latent(params, kv_c.view, k_pe.view, cache.view, batch.slot_mapping, T);

  // Index rows: the positions each token sees, shuffled, a share -1, then -1 to the end.
  local.assign(static_cast<std::size_t>(T) * static_cast<std::size_t>(s.topk), -1);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  for (int t = 0; t < T; ++t) {
    const int seq = batch.seq_of(t);
    const Request& r = s.requests[static_cast<std::size_t>(seq)];
    const int j = t - batch.query_start_loc[static_cast<std::size_t>(seq)];
    const std::int64_t seen = r.seq_len == 0 ? 0 : r.seq_len - r.query_len + j + 1;
    std::vector<std::int32_t> pos(static_cast<std::size_t>(seen));
    std::iota(pos.begin(), pos.end(), 0);
    std::shuffle(pos.begin(), pos.end(), rng);
    const std::size_t fill = std::min<std::size_t>(pos.size(), static_cast<std::size_t>(std::max(0, s.topk - s.trailing)));
    for (std::size_t k = 0; k < fill; ++k)
      local[static_cast<std::size_t>(t) * static_cast<std::size_t>(s.topk) + k] = uniform(rng) < s.invalid ? -1 : pos[k];
  }
  physical = reference::physical_indices(batch.md, s.block_size, local, s.topk);
  local_buf = indices_buffer(local);
  physical_buf = indices_buffer(physical);
  output = Buffer(s.dtype, {rows, N, 128});
  latent_out = Buffer(s.dtype, {rows, N, 512});
  lse = Buffer(ScalarType::f32, {rows, N});
  poison_outputs();
}

}  // namespace attnsel::kernel::sparse_mla::testing
