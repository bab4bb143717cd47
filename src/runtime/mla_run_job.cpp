#include "runtime/mla_run_job.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <vector>

#include "attnsel/errors.hpp"
#include "runtime/huge_buffer.hpp"
#include "runtime/job_memory.hpp"
#include "runtime/paged_workload.hpp"

namespace attnsel::runtime {

namespace {

using kernel::ScalarType;
using kernel::TensorView;
using Clock = std::chrono::steady_clock;

// The first and the last layer are checked; each writes its own output so that it survives
// the step.
std::vector<int> checked_layers(const MlaRunSpec& s) {
  if (!s.check) return {};
  if (s.num_layers == 1) return {0};
  return {s.num_layers - 1, 0};
}

// The sizes of a run's memory, from its spec alone (the job and the memory check agree).
struct MlaGeometry {
  int max_tokens = 0;
  std::int64_t max_len = 0;  ///< positions a request reaches
  std::size_t per_cache = 0, per_weights = 0;
  int distinct_caches = 1, distinct_weights = 1;
  std::size_t query_bytes = 0, output_bytes = 0, latent_bytes = 0, workspace_bytes = 0;
};

MlaGeometry job_geometry(const MlaRunSpec& s) {
  const kernel::MlaDims& d = s.layer.dims;
  const auto act = kernel::element_size(s.layer.dtype);
  MlaGeometry g;
  g.max_tokens = max_step_tokens(s);
  g.max_len = max_positions(s);
  const std::int64_t blocks = blocks_per_sequence(s, s.layer.block_size);
  g.per_cache = static_cast<std::size_t>(blocks * s.batch * s.layer.block_size) *
                static_cast<std::size_t>(d.latent_size()) * kernel::element_size(s.layer.cache_type());
  g.distinct_caches = static_cast<int>(std::clamp<std::size_t>(s.max_cache_bytes / std::max<std::size_t>(1, g.per_cache),
                                                               1, static_cast<std::size_t>(s.num_layers)));
  g.per_weights = static_cast<std::size_t>(d.num_heads) * static_cast<std::size_t>(d.qk_nope_head_dim + d.v_head_dim) *
                  static_cast<std::size_t>(d.kv_lora_rank) * act;
  // A weight set costs its kv_b_proj and the kernel's packed W_UK / W_UV (at most f32: 2× bf16).
  const std::size_t per_set = g.per_weights * (1 + 4 / act);
  g.distinct_weights = static_cast<int>(std::clamp<std::size_t>(s.max_weight_bytes / std::max<std::size_t>(1, per_set),
                                                                1, static_cast<std::size_t>(s.num_layers)));
  const auto tokens = static_cast<std::size_t>(g.max_tokens), heads = static_cast<std::size_t>(d.num_heads);
  g.query_bytes = tokens * heads * static_cast<std::size_t>(d.qk_head_size()) * act;
  g.output_bytes = tokens * heads * static_cast<std::size_t>(d.v_head_dim) * act;
  g.latent_bytes = tokens * static_cast<std::size_t>(d.latent_size()) * act;
  // The kernel's plan (a bound): the new tokens' up-projected keys and values, fp32 partial
  // outputs of the prefill's passes, and its context-chunk workspace (~256 MiB on the CPU).
  g.workspace_bytes = tokens * heads *
                          (static_cast<std::size_t>(d.qk_head_size() + d.v_head_dim) * act +
                           3 * static_cast<std::size_t>(d.v_head_dim + d.kv_lora_rank) * sizeof(float)) +
                      (std::size_t{512} << 20);
  return g;
}

void check_spec(const MlaRunSpec& s) {
  const kernel::MlaDims& d = s.layer.dims;
  require_spec(d.num_heads > 0 && d.kv_lora_rank > 0 && d.qk_rope_head_dim > 0 && d.qk_nope_head_dim > 0 &&
              d.v_head_dim > 0 && s.num_layers > 0,
          fmt::format("the MLA layer needs positive sizes: num_heads={}, kv_lora_rank={}, qk_rope_head_dim={}, "
                      "qk_nope_head_dim={}, v_head_dim={}, num_layers={}",
                      d.num_heads, d.kv_lora_rank, d.qk_rope_head_dim, d.qk_nope_head_dim, d.v_head_dim,
                      s.num_layers));
  check_steps(s, s.layer.block_size);
  require_spec(s.prefill_chunk_tokens > 0, fmt::format("prefill_chunk_tokens = {}; it must be at least 1",
                                                  s.prefill_chunk_tokens));
}

// The batch's state: the layers' weights and kernels, the latent caches and step buffers.
class MlaJob {
 public:
  MlaJob(const MlaRunSpec& s, const MlaImplFactory& make_impl)
      : s_(s), g_(job_geometry(s)), batch_(s.batch, g_.max_len, s.layer.block_size, s.seed), checked_(checked_layers(s)) {
    for (int i = 0; i < g_.distinct_weights; ++i) {
      std::vector<std::uint8_t>& w = weights_.emplace_back(g_.per_weights);
      fill_kv_b_proj(w, s.layer, mla_stream_seed(s.seed, 1000 + static_cast<std::uint64_t>(i)));
      impls_.push_back(make_impl(s.layer.params(weights_view(i))));
    }
    // Decode requests of more query tokens than the kernel's absorbed decode takes go through
    // its prefill path, as vLLM's backends whose reorder_batch_threshold is 1 send them.
    const kernel::MlaKernelLimits limits = impls_.front()->limits();
    decode_query_len_ = s.new_tokens <= limits.max_decode_query_len ? s.new_tokens : 1;
    for (int i = 0; i < g_.distinct_caches; ++i) caches_.emplace_back(g_.per_cache);
    query_.resize(g_.query_bytes);
    fill_uniform(query_, s.layer.dtype, kMlaInputRange, mla_stream_seed(s.seed, 1));
    latents_.resize(g_.latent_bytes);
    outputs_.resize(1 + checked_.size());
    for (auto& o : outputs_) o.resize(g_.output_bytes);
    options_.decode_query_len = decode_query_len_;
  }

  int decode_query_len() const { return decode_query_len_; }
  const MlaGeometry& geometry() const { return g_; }
  const LatentBatch& batch() const { return batch_; }
  std::string plan_description() const { return plan_ ? plan_->describe() : std::string(); }

  // One batch step: every request has `done` tokens cached and adds `q` new ones, whose
  // latents are drawn afresh for the step (`step_index` seeds them), so that no two chunks
  // of the cache hold the same rows. One plan per step (updated in place between steps),
  // then every layer's cache write and attention. Returns the seconds of the plan and the
  // layers.
  double step(int done, int q, std::uint64_t step_index, PhaseStats& stats) {
    batch_.set_step(done, q);
    const std::size_t latent_bytes = static_cast<std::size_t>(batch_.num_tokens()) *
                                      static_cast<std::size_t>(s_.layer.dims.latent_size()) *
                                      kernel::element_size(s_.layer.dtype);
    fill_uniform(std::span(latents_).first(latent_bytes), s_.layer.dtype, kMlaInputRange,
                 mla_stream_seed(s_.seed, 2000 + step_index));
    const kernel::AttentionMetadata md = batch_.metadata();
    const auto t0 = Clock::now();
    if (!plan_)
      plan_ = impls_.front()->plan(md, cache_view(0), kernel::Stream{}, options_);
    else
      impls_.front()->update(*plan_, md, kernel::Stream{});
    const auto t1 = Clock::now();
    const TensorView q_view = query(), kv_c = latent(false), k_pe = latent(true);
    for (int layer = 0; layer < s_.num_layers; ++layer) {
      const kernel::MlaImpl& impl = *impls_[static_cast<std::size_t>(layer % g_.distinct_weights)];
      const TensorView cache = cache_view(layer % g_.distinct_caches);
      impl.write_cache(*plan_, kv_c, k_pe, cache, kernel::Stream{});
      impl.execute(*plan_, q_view, kv_c, k_pe, cache, output(layer), kernel::Stream{});
    }
    const auto t2 = Clock::now();
    stats.plan_seconds += std::chrono::duration<double>(t1 - t0).count();
    stats.issue_seconds += std::chrono::duration<double>(t2 - t1).count();
    stats.layers += s_.num_layers;
    return std::chrono::duration<double>(t2 - t0).count();
  }

  // Samples of the last step's outputs against the reference: the checked layers, the
  // last, first and middle requests and heads, within the spec's budget.
  MlaCheckResult check(std::string_view step_name, bool prefill) {
    MlaCheckResult r;
    r.ran = true;
    r.step = std::string(step_name);
    MlaOutputCheck c(mla_output_tolerance(s_.layer.dtype, prefill));
    const int last_seq = s_.batch - 1, last_head = s_.layer.dims.num_heads - 1;
    const int mid_seq = s_.batch / 2, mid_head = s_.layer.dims.num_heads / 2;
    const int last = checked_.front(), first = checked_.back();
    const std::array<std::array<int, 3>, 6> candidates{{{last, last_seq, last_head},
                                                        {first, 0, 0},
                                                        {last, 0, mid_head},
                                                        {first, last_seq, mid_head},
                                                        {last, mid_seq, 0},
                                                        {first, mid_seq, last_head}}};
    std::vector<std::array<int, 3>> done;
    double cost = 0.0;
    for (const auto& sample : candidates) {
      if (std::find(done.begin(), done.end(), sample) != done.end()) continue;
      const auto [layer, seq, head] = sample;
      const double more = mla_reference_cost(s_.layer.dims, batch_.seq_len(seq), batch_.query_len(seq));
      if (!done.empty() && cost + more > s_.check_budget) break;
      cost += more;
      done.push_back(sample);
      c.add(s_.layer.params(weights_view(layer % g_.distinct_weights)), batch_, decode_query_len_, query(),
            latent(false), latent(true), cache_view(layer % g_.distinct_caches), output(layer), seq, head, layer);
    }
    r.comparison = c.result();
    return r;
  }

 private:
  TensorView weights_view(int i) {
    const kernel::MlaDims& d = s_.layer.dims;
    return TensorView::contiguous(weights_[static_cast<std::size_t>(i)].data(), s_.layer.dtype,
                                  {static_cast<std::int64_t>(d.num_heads) * (d.qk_nope_head_dim + d.v_head_dim),
                                   d.kv_lora_rank});
  }
  TensorView cache_view(int i) {
    return TensorView::contiguous(caches_[static_cast<std::size_t>(i)].data(), s_.layer.cache_type(),
                                  {batch_.num_blocks(), s_.layer.block_size, s_.layer.dims.latent_size()});
  }
  TensorView query() {
    const kernel::MlaDims& d = s_.layer.dims;
    return TensorView::contiguous(query_.data(), s_.layer.dtype, {batch_.num_tokens(), d.num_heads, d.qk_head_size()});
  }
  // kv_c and k_pe: the two slices of one [tokens, latent_size] tensor, as vLLM's kv_a_proj output is split.
  TensorView latent(bool rope) {
    const kernel::MlaDims& d = s_.layer.dims;
    const std::int64_t shape[2] = {batch_.num_tokens(), rope ? d.qk_rope_head_dim : d.kv_lora_rank};
    const std::int64_t strides[2] = {d.latent_size(), 1};
    std::uint8_t* base = latents_.data() + (rope ? static_cast<std::size_t>(d.kv_lora_rank) *
                                                       kernel::element_size(s_.layer.dtype)
                                                 : 0);
    return TensorView::strided(base, s_.layer.dtype, shape, strides);
  }
  TensorView output(int layer) {
    const auto it = std::find(checked_.begin(), checked_.end(), layer);
    const std::size_t i = it == checked_.end() ? 0 : 1 + static_cast<std::size_t>(it - checked_.begin());
    const kernel::MlaDims& d = s_.layer.dims;
    return TensorView::contiguous(outputs_[i].data(), s_.layer.dtype, {batch_.num_tokens(), d.num_heads, d.v_head_dim});
  }

  const MlaRunSpec& s_;
  MlaGeometry g_;
  LatentBatch batch_;
  std::vector<int> checked_;
  int decode_query_len_ = 1;
  kernel::MlaPlanOptions options_;
  std::vector<std::vector<std::uint8_t>> weights_;
  std::vector<std::unique_ptr<kernel::MlaImpl>> impls_;
  std::vector<HugeBuffer> caches_;  // 2 MiB pages: blocks are read in random order
  std::vector<std::uint8_t> query_, latents_;
  std::vector<std::vector<std::uint8_t>> outputs_;  // [0] every unchecked layer's, then one per checked layer
  std::unique_ptr<kernel::StepPlan> plan_;
};

}  // namespace

MemoryNeed mla_memory_need(const MlaRunSpec& spec) {
  check_spec(spec);
  const MlaGeometry g = job_geometry(spec);
  MemoryNeed need;
  need.cache_bytes = g.per_cache * static_cast<std::size_t>(g.distinct_caches);
  const std::size_t weights = g.per_weights * static_cast<std::size_t>(g.distinct_weights) *
                              (1 + 4 / kernel::element_size(spec.layer.dtype));
  const std::size_t buffers = g.query_bytes + g.latent_bytes + g.output_bytes * (1 + checked_layers(spec).size());
  need.host_bytes = need.cache_bytes + weights + buffers + g.workspace_bytes;
  need.host_available = host_memory_available();
  if (need.host_available > 0 && need.host_bytes > need.host_available)
    need.shortfall = fmt::format(
        "this run needs {} of host memory but {} is available; the latent caches ({}) grow with --batch × "
        "(--context + --decode-steps × --new-tokens), the step buffers with the heads and --batch × the prefill "
        "chunk; lower --batch or --context, or raise --tensor-parallel-size",
        format_gib(need.host_bytes), format_gib(need.host_available), format_gib(need.cache_bytes));
  return need;
}

MlaRunReport run_mla_job(const MlaRunSpec& spec, const MlaImplFactory& make_impl, const Progress& progress) {
  mla_memory_need(spec).require_fit();  // checks the spec first

  MlaRunReport report;
  report.spec = spec;
  MlaJob job(spec, make_impl);
  const MlaGeometry& g = job.geometry();
  report.distinct_caches = g.distinct_caches;
  report.distinct_weights = g.distinct_weights;
  report.cache_bytes = g.per_cache * static_cast<std::size_t>(g.distinct_caches);
  report.weight_bytes = g.per_weights * static_cast<std::size_t>(g.distinct_weights);
  report.decode_query_len = job.decode_query_len();
  report.absorbed_decode = job.decode_query_len() == spec.new_tokens;

  const kernel::MlaDims& d = spec.layer.dims;
  const std::size_t e_kv = kernel::element_size(spec.layer.cache_type());
  const std::size_t e_act = kernel::element_size(spec.layer.dtype);
  StepTally tally(spec, spec.num_layers, progress);
  std::uint64_t step_index = 0;
  for (int i = 0; i < tally.prefill_steps(); ++i) {
    const int q = tally.prefill_tokens(i);
    const double seconds = job.step(tally.prefill_cached(i), q, step_index++, report.prefill);
    tally.count("prefill", report.prefill, q, seconds,
                job.batch().sum_seq_lens() * d.latent_size() * static_cast<double>(e_kv),
                MlaCounts::prefill_flops(d, job.batch().causal_pairs()));
  }
  report.prefill_plan = job.plan_description();
  if (spec.check && tally.prefill_steps() > 0) {
    tally.report("check");
    report.check_prefill = job.check("prefill", true);
  }
  // The first decode step is the decode phase's warm-up, timed apart when more follow (the
  // plan resized for decode batches), as `attnsel run` does for standard attention.
  auto decode_step = [&](int i, PhaseStats& stats) {
    const double seconds = job.step(tally.decode_cached(i), spec.new_tokens, step_index++, stats);
    const double sum_seq_lens = job.batch().sum_seq_lens();
    tally.count("decode", stats, spec.new_tokens, seconds,
                MlaCounts::decode_bytes(d, spec.batch, spec.new_tokens, sum_seq_lens, e_kv, e_act),
                MlaCounts::decode_flops(d, spec.new_tokens, sum_seq_lens));
  };
  const int first_timed = tally.decode_warmup_steps();
  if (first_timed > 0) decode_step(0, report.decode_warmup);
  for (int i = first_timed; i < spec.decode_steps; ++i) decode_step(i, report.decode);
  report.decode_plan = job.plan_description();
  if (spec.check && spec.decode_steps > 0) {
    tally.report("check");
    report.check_decode = job.check("decode", false);
  }
  return report;
}

}  // namespace attnsel::runtime
