#include "runtime/mla_bench_job.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <utility>

#include "attnsel/errors.hpp"
#include "runtime/huge_buffer.hpp"
#include "runtime/median.hpp"
#include "runtime/mla_check.hpp"

namespace attnsel::runtime {

namespace {

using kernel::TensorView;

// Absorbed queries (q_nope · W_UK over 128 key rows of std 4, queries of std 0.1) have a std
// near 4.5: uniform in ±7 gives decode_latent the logits the layer would.
constexpr float kLatentQueryRange = 7.0f;
// Reference multiply-adds a case's check may spend (one sample is always checked).
constexpr double kCheckBudget = 1e9;

double seconds_of(const auto& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<std::uint8_t> filled(std::size_t elements, kernel::ScalarType t, float range, std::uint64_t seed) {
  std::vector<std::uint8_t> bytes(elements * kernel::element_size(t));
  fill_uniform(bytes, t, range, seed);
  return bytes;
}

}  // namespace

std::vector<MlaBenchCase> standard_mla_bench_cases(const MlaLayerShape& layer, double scale) {
  auto scaled = [&](int n) { return std::max(16, static_cast<int>(std::lround(n * scale))); };
  std::vector<MlaBenchCase> cases;
  {
    MlaBenchCase c{"mla-decode", layer, {}, true, 60.0};
    for (int i = 0; i < 8; ++i) c.requests.push_back({scaled(8192), 1});
    cases.push_back(std::move(c));
  }
  {
    MlaBenchCase c{"mla-prefill", layer, {}, false, 55.0};
    const int n = scaled(4096);
    c.requests.push_back({n, n});
    cases.push_back(std::move(c));
  }
  return cases;
}

MlaBenchCase mla_shape_decode_case(const MlaLayerShape& layer, int batch, int context, int new_tokens) {
  if (batch < 1 || new_tokens < 1 || context < new_tokens)
    throw ValueError(fmt::format("an MLA decode case needs batch >= 1 and a context ({}) of at least the new tokens "
                                 "({}) each request adds",
                                 context, new_tokens));
  MlaBenchCase c{"mla-decode-shape", layer, {}, true, 0.0};
  for (int i = 0; i < batch; ++i) c.requests.push_back({context, new_tokens});
  return c;
}

MlaBenchResult run_mla_bench_case(const MlaBenchCase& c, const MlaImplFactory& make_impl, const Ceilings& ceilings,
                                  const std::string& isa, int repeats) {
  const MlaLayerShape& layer = c.layer;
  const kernel::MlaDims& d = layer.dims;
  const kernel::ScalarType act = layer.dtype;
  const int n = static_cast<int>(c.requests.size());
  std::vector<int> lens, queries, context;
  int max_len = 0, max_query = 0;
  for (const SequenceShape& r : c.requests) {
    lens.push_back(r.seq_len);
    queries.push_back(r.query_len);
    context.push_back(r.seq_len - r.query_len);
    max_len = std::max(max_len, r.seq_len);
    max_query = std::max(max_query, r.query_len);
  }
  LatentBatch batch(n, max_len, layer.block_size, 1);
  std::vector<std::uint8_t> weights(static_cast<std::size_t>(d.num_heads) * (d.qk_nope_head_dim + d.v_head_dim) *
                                    d.kv_lora_rank * kernel::element_size(act));
  fill_kv_b_proj(weights, layer, 7);
  const TensorView kv_b_proj = TensorView::contiguous(
      weights.data(), act, {static_cast<std::int64_t>(d.num_heads) * (d.qk_nope_head_dim + d.v_head_dim), d.kv_lora_rank});
  const kernel::MlaLayerParams params = layer.params(kv_b_proj);
  const std::unique_ptr<kernel::MlaImpl> impl = make_impl(params);
  kernel::MlaPlanOptions options;
  options.decode_query_len = c.decode ? max_query : 1;

  HugeBuffer cache_bytes(static_cast<std::size_t>(batch.num_blocks()) * static_cast<std::size_t>(layer.block_size) *
                         static_cast<std::size_t>(d.latent_size()) * kernel::element_size(layer.cache_type()));
  const TensorView cache = TensorView::contiguous(cache_bytes.data(), layer.cache_type(),
                                                  {batch.num_blocks(), layer.block_size, d.latent_size()});
  auto latent_views = [&](std::vector<std::uint8_t>& rows, int tokens) {
    const std::int64_t shape_c[2] = {tokens, d.kv_lora_rank}, shape_pe[2] = {tokens, d.qk_rope_head_dim};
    const std::int64_t strides[2] = {d.latent_size(), 1};
    return std::pair{TensorView::strided(rows.data(), act, shape_c, strides),
                     TensorView::strided(rows.data() + static_cast<std::size_t>(d.kv_lora_rank) * kernel::element_size(act),
                                         act, shape_pe, strides)};
  };
  // The context each request had before this step, written through a plan whose new tokens are all of it.
  batch.set_requests(context, context);
  if (batch.num_tokens() > 0) {
    std::vector<std::uint8_t> rows = filled(static_cast<std::size_t>(batch.num_tokens()) * d.latent_size(), act,
                                            kMlaInputRange, 11);
    const auto [kv_c, k_pe] = latent_views(rows, batch.num_tokens());
    kernel::MlaPlanOptions write_options;
    write_options.decode_query_len = 1;
    const auto plan = impl->plan(batch.metadata(), cache, kernel::Stream{}, write_options);
    impl->write_cache(*plan, kv_c, k_pe, cache, kernel::Stream{});
  }
  // The step: its new tokens written as the layer would, then the timed calls.
  batch.set_requests(lens, queries);
  const int T = batch.num_tokens();
  std::vector<std::uint8_t> rows = filled(static_cast<std::size_t>(T) * d.latent_size(), act, kMlaInputRange, 13);
  // Named views, not a structured binding: the lambdas below capture them (clang 14 cannot
  // capture bindings).
  const std::pair<TensorView, TensorView> latents = latent_views(rows, T);
  const TensorView kv_c = latents.first, k_pe = latents.second;
  const kernel::AttentionMetadata md = batch.metadata();
  const auto plan = impl->plan(md, cache, kernel::Stream{}, options);
  impl->write_cache(*plan, kv_c, k_pe, cache, kernel::Stream{});
  std::vector<std::uint8_t> q = filled(static_cast<std::size_t>(T) * d.num_heads * d.qk_head_size(), act,
                                       kMlaInputRange, 17);
  std::vector<std::uint8_t> out(static_cast<std::size_t>(T) * d.num_heads * d.v_head_dim * kernel::element_size(act));
  const TensorView q_view = TensorView::contiguous(q.data(), act, {T, d.num_heads, d.qk_head_size()});
  const TensorView out_view = TensorView::contiguous(out.data(), act, {T, d.num_heads, d.v_head_dim});
  auto execute = [&] { impl->execute(*plan, q_view, kv_c, k_pe, cache, out_view, kernel::Stream{}); };
  std::vector<std::uint8_t> q_latent, latent_out;
  if (c.decode) {
    q_latent = filled(static_cast<std::size_t>(T) * d.num_heads * d.latent_size(), act, kLatentQueryRange, 19);
    latent_out.resize(static_cast<std::size_t>(T) * d.num_heads * d.kv_lora_rank * kernel::element_size(act));
  }
  auto decode_latent = [&] {
    impl->decode_latent(*plan, TensorView::contiguous(q_latent.data(), act, {T, d.num_heads, d.latent_size()}), cache,
                        TensorView::contiguous(latent_out.data(), act, {T, d.num_heads, d.kv_lora_rank}),
                        kernel::Stream{});
  };

  execute();  // warm-up, and the checked run
  if (c.decode) decode_latent();
  MlaOutputCheck check(mla_output_tolerance(act, !c.decode));
  double cost = 0.0;
  for (const auto& [seq, head] : {std::pair{n - 1, d.num_heads - 1}, std::pair{0, 0}, std::pair{n / 2, d.num_heads / 2}}) {
    const double more = mla_reference_cost(d, batch.seq_len(seq), batch.query_len(seq));
    if (check.result().samples > 0 && cost + more > kCheckBudget) break;
    cost += more;
    check.add(params, batch, options.decode_query_len, q_view, kv_c, k_pe, cache, out_view, seq, head, 0);
  }

  const ComputePeak peak = compute_peak(ceilings, isa);
  auto probe = [&] { return peak.bf16 ? measure_bf16_peak(ceilings.threads, 1) : measure_fp32_peak(ceilings.threads, 1); };
  const double flops = c.decode ? MlaCounts::decode_flops(d, max_query, batch.sum_seq_lens())
                                : MlaCounts::prefill_flops(d, batch.causal_pairs());
  std::vector<double> times, latent_times, peaks, ratios, latent_ratios;
  double before = probe();
  for (int r = 0; r < std::max(1, repeats); ++r) {
    const double t = seconds_of(execute);
    const double after = probe();
    times.push_back(t);
    peaks.push_back(0.5 * (before + after));
    ratios.push_back(flops / t / 1e9 / peaks.back());
    before = after;
    if (!c.decode) continue;
    const double tl = seconds_of(decode_latent);
    const double after_latent = probe();
    latent_times.push_back(tl);
    latent_ratios.push_back(flops / tl / 1e9 / (0.5 * (before + after_latent)));
    before = after_latent;
  }

  MlaBenchResult r;
  r.name = c.name;
  r.decode = c.decode;
  r.timed = "execute of one plan";
  r.seconds = median(times);
  r.figure = flops / r.seconds / 1e9;
  r.ceiling = median(peaks);
  r.ceiling_name = fmt::format("{} peak", peak.name);
  r.pct = 100.0 * median(ratios);
  r.target_pct = c.target_pct;
  r.check_passed = check.result().passed();
  r.check_samples = check.result().samples;
  if (c.decode) {
    const double bytes = MlaCounts::decode_bytes(d, n, max_query, batch.sum_seq_lens(),
                                                 kernel::element_size(layer.cache_type()), kernel::element_size(act));
    r.gb_per_s = bytes / r.seconds / 1e9;
    r.read_pct = ceilings.read_gbps > 0 ? 100.0 * r.gb_per_s / ceilings.read_gbps : 0.0;
    r.latent_seconds = median(latent_times);
    r.latent_figure = flops / r.latent_seconds / 1e9;
    r.latent_pct = 100.0 * median(latent_ratios);
  }
  r.shape = fmt::format("{} × {} tokens{}, {} heads, {} {} latent cache, block {}", n, c.requests.front().seq_len,
                        c.decode ? fmt::format(" (s_q {})", max_query) : std::string(" (causal)"), d.num_heads,
                        kernel::to_string(layer.cache_type()), cache_dtype_name(layer.kv_cache_dtype),
                        layer.block_size);
  return r;
}

}  // namespace attnsel::runtime
