#include "runtime/run_job.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "attnsel/errors.hpp"
#include "kernels/reference.hpp"
#include "kernels/semantics.hpp"
#include "runtime/job_memory.hpp"

namespace attnsel::runtime {

namespace {

using kernel::ScalarType;
using kernel::TensorView;

void require(bool ok, const std::string& what) {
  if (!ok) throw ValueError(what);
}

// The batch's state: block table, caches (one per distinct layer slot) and step buffers.
class Job {
 public:
  Job(const RunSpec& s, const ImplFactory& make_impl) : s_(s), lp_(layer_params(s)) {
    impl_ = make_impl(lp_);
    const auto enc = kernel::cache_encoding(s.kv_cache_dtype, s.dtype);
    cache_type_ = enc.stored;
    const int total_len = s.context + s.decode_steps * s.new_tokens;
    blocks_per_seq_ = std::max(1, (total_len + s.block_size - 1) / s.block_size);
    num_blocks_ = s.batch * blocks_per_seq_;
    // A shuffled table: sequences do not own contiguous memory, as in a real engine.
    block_table_.resize(static_cast<std::size_t>(num_blocks_));
    std::iota(block_table_.begin(), block_table_.end(), 0);
    std::uint64_t x = s.seed * 0x9E3779B97F4A7C15ull + 1;
    for (std::size_t i = block_table_.size(); i > 1; --i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      std::swap(block_table_[i - 1], block_table_[x % i]);
    }
    const std::size_t per_cache = static_cast<std::size_t>(num_blocks_) * static_cast<std::size_t>(s.block_size) *
                                  static_cast<std::size_t>(s.model.num_kv_heads) *
                                  static_cast<std::size_t>(s.model.head_size) * kernel::element_size(cache_type_);
    distinct_ = static_cast<int>(std::clamp<std::size_t>(s.max_cache_bytes / std::max<std::size_t>(1, 2 * per_cache),
                                                         1, static_cast<std::size_t>(s.model.num_layers)));
    cache_bytes_ = 2 * per_cache * static_cast<std::size_t>(distinct_);
    chunk_ = std::clamp(s.prefill_chunk_tokens / s.batch, 1, std::max(1, s.context));
    const int max_tokens = s.batch * std::max(chunk_, s.new_tokens);
    const std::size_t act = kernel::element_size(s.dtype);
    const auto D = static_cast<std::size_t>(s.model.head_size);
    JobInputs in;
    in.query.resize(static_cast<std::size_t>(max_tokens) * static_cast<std::size_t>(s.model.num_heads) * D * act);
    in.new_keys.resize(static_cast<std::size_t>(max_tokens) * static_cast<std::size_t>(s.model.num_kv_heads) * D * act);
    in.new_values.resize(in.new_keys.size());
    fill_uniform(in.query, s.dtype, 1.0f, s.seed + 1);
    fill_uniform(in.new_keys, s.dtype, 1.0f, s.seed + 2);
    fill_uniform(in.new_values, s.dtype, 1.0f, s.seed + 3);
    output_bytes_ = in.query.size();
    mem_ = make_job_memory(s.device, {distinct_, per_cache}, std::move(in));
  }

  int chunk() const { return chunk_; }
  int distinct() const { return distinct_; }
  std::size_t cache_bytes() const { return cache_bytes_; }

  // One batch step: every sequence has `done` tokens cached and adds `q` new ones.
  // Runs every layer; returns the seconds spent.
  double step(int done, int q, std::int64_t& progress_done, std::int64_t progress_total, std::string_view phase,
              const Progress& progress) {
    build_metadata(done, q);
    const kernel::AttentionMetadata md = metadata();
    const TensorView query = view(mem_->query(), s_.model.num_heads), out = view(mem_->output(), s_.model.num_heads);
    const TensorView k = view(mem_->new_keys(), s_.model.num_kv_heads), v = view(mem_->new_values(), s_.model.num_kv_heads);
    // One bracket around every layer: on a GPU the launches queue up and the events time
    // the device's work (and any gap the host leaves it), with no synchronisation between.
    mem_->begin_step();
    for (int layer = 0; layer < s_.model.num_layers; ++layer) {
      const kernel::KVCacheView cache = cache_view(layer % distinct_);
      impl_->write_kv_cache(k, v, cache, md);
      impl_->forward(query, cache, md, out);
      if (progress) progress(phase, ++progress_done, progress_total);
    }
    last_layer_cache_ = (s_.model.num_layers - 1) % distinct_;
    return mem_->end_step();
  }

  // Compares a sample of the last step's outputs (the last layer) with the reference.
  CheckResult check(std::string_view step_name) {
    CheckResult r;
    r.ran = true;
    r.step = std::string(step_name);
    const kernel::AttentionMetadata md = metadata();
    // Sample the last token of each sequence first (the longest context), then others,
    // within a budget of ~2e8 reference multiply-adds.
    std::vector<std::int32_t> tokens;
    double cost = 0.0;
    const double per_key = static_cast<double>(s_.model.num_heads) * s_.model.head_size;
    for (int pass = 0; pass < 2 && static_cast<int>(tokens.size()) < s_.check_tokens; ++pass)
      for (int seq = 0; seq < s_.batch && static_cast<int>(tokens.size()) < s_.check_tokens; ++seq) {
        const int q = qsl_[static_cast<std::size_t>(seq) + 1] - qsl_[static_cast<std::size_t>(seq)];
        if (pass == 1 && q < 2) continue;
        const int token = pass == 0 ? qsl_[static_cast<std::size_t>(seq) + 1] - 1 : qsl_[static_cast<std::size_t>(seq)] + q / 2;
        const double c = per_key * seq_lens_[static_cast<std::size_t>(seq)];
        if (!tokens.empty() && cost + c > 2e8) break;
        cost += c;
        tokens.push_back(token);
      }
    // Host copies (on a GPU: the output and the last layer's cache are copied back now).
    const auto [host_k, host_v] = mem_->cache_on_host(last_layer_cache_);
    const TensorView host_query = view(const_cast<std::uint8_t*>(mem_->query_on_host()), s_.model.num_heads,
                                       kernel::DeviceKind::cpu);
    const TensorView host_out = view(mem_->output_on_host(output_bytes_), s_.model.num_heads, kernel::DeviceKind::cpu);
    const std::vector<double> want =
        kernel::reference::attend(lp_, host_query, cache_view(host_k, host_v, kernel::DeviceKind::cpu), md, tokens);
    r.tokens = static_cast<int>(tokens.size());
    r.comparison = compare_with_reference(host_out, tokens, want, tolerance_for(s_.dtype));
    return r;
  }

  // K and V bytes and FLOPs of the current step, for one layer.
  double step_kv_bytes() const {
    double tokens = 0.0;
    for (int l : seq_lens_) tokens += l;
    return 2.0 * tokens * s_.model.num_kv_heads * s_.model.head_size * static_cast<double>(kernel::element_size(cache_type_));
  }
  double step_flops() const {
    double keys = 0.0;
    for (std::size_t i = 0; i < seq_lens_.size(); ++i) {
      const double L = seq_lens_[i], q = qsl_[i + 1] - qsl_[i];
      keys += q * (L - q) + q * (q + 1) / 2.0;  // causal: query i sees L - q + i + 1 keys
    }
    return 4.0 * keys * s_.model.head_size * s_.model.num_heads;
  }

 private:
  void build_metadata(int done, int q) {
    qsl_.assign(1, 0);
    seq_lens_.clear();
    slots_.clear();
    for (int seq = 0; seq < s_.batch; ++seq) {
      qsl_.push_back(qsl_.back() + q);
      seq_lens_.push_back(done + q);
      for (int i = 0; i < q; ++i) {
        const int pos = done + i;
        const std::int64_t block = block_table_[static_cast<std::size_t>(seq * blocks_per_seq_ + pos / s_.block_size)];
        slots_.push_back(block * s_.block_size + pos % s_.block_size);
      }
    }
  }
  kernel::AttentionMetadata metadata() const {
    kernel::AttentionMetadata md;
    md.num_seqs = s_.batch;
    md.num_actual_tokens = qsl_.back();
    md.query_start_loc = qsl_;
    md.seq_lens = seq_lens_;
    md.block_table = block_table_;
    md.max_blocks_per_seq = blocks_per_seq_;
    md.slot_mapping = slots_;
    md.max_query_len = qsl_.size() > 1 ? qsl_[1] : 0;
    md.max_seq_len = seq_lens_.empty() ? 0 : *std::max_element(seq_lens_.begin(), seq_lens_.end());
    return md;
  }
  TensorView view(void* data, int heads) { return view(data, heads, mem_->device()); }
  TensorView view(void* data, int heads, kernel::DeviceKind device) {
    return TensorView::contiguous(data, s_.dtype, {static_cast<std::int64_t>(qsl_.back()), heads, s_.model.head_size},
                                  device);
  }
  kernel::KVCacheView cache_view(int i) { return cache_view(mem_->key_cache(i), mem_->value_cache(i), mem_->device()); }
  kernel::KVCacheView cache_view(void* keys, void* values, kernel::DeviceKind device) {
    const auto strides = cache_strides(s_.layout, s_.block_size, s_.model.num_kv_heads, s_.model.head_size);
    const std::int64_t shape[4] = {num_blocks_, s_.block_size, s_.model.num_kv_heads, s_.model.head_size};
    return {TensorView::strided(keys, cache_type_, shape, strides, device),
            TensorView::strided(values, cache_type_, shape, strides, device)};
  }

  const RunSpec& s_;
  kernel::LayerParams lp_;
  std::unique_ptr<kernel::AttentionImpl> impl_;
  ScalarType cache_type_ = ScalarType::bf16;
  int blocks_per_seq_ = 0, num_blocks_ = 0, distinct_ = 1, chunk_ = 1, last_layer_cache_ = 0;
  std::size_t cache_bytes_ = 0, output_bytes_ = 0;
  std::vector<std::int32_t> block_table_, qsl_, seq_lens_;
  std::vector<std::int64_t> slots_;
  std::unique_ptr<JobMemory> mem_;
};

}  // namespace

kernel::LayerParams layer_params(const RunSpec& spec) {
  kernel::LayerParams p;
  p.num_heads = spec.model.num_heads;
  p.num_kv_heads = spec.model.num_kv_heads;
  p.head_size = spec.model.head_size;
  p.scale = 1.0f / std::sqrt(static_cast<float>(spec.model.head_size));
  copy_kv_cache_encoding(spec, p);
  return p;
}

RunReport run_job(const RunSpec& spec, const ImplFactory& make_impl, const Progress& progress) {
  const ModelShape& m = spec.model;
  require(m.num_heads > 0 && m.num_kv_heads > 0 && m.head_size > 0 && m.num_layers > 0,
          fmt::format("model shape needs positive sizes: num_heads={}, num_kv_heads={}, head_size={}, num_layers={}",
                      m.num_heads, m.num_kv_heads, m.head_size, m.num_layers));
  require(spec.batch > 0, fmt::format("batch = {}; it must be at least 1", spec.batch));
  require(spec.context >= 0 && spec.decode_steps >= 0 && spec.new_tokens > 0,
          fmt::format("context = {}, decode_steps = {}, new_tokens = {}: context and decode steps must be >= 0 and "
                      "new tokens >= 1",
                      spec.context, spec.decode_steps, spec.new_tokens));
  require(spec.context + spec.decode_steps > 0, "nothing to run: context and decode_steps are both 0");
  require(spec.block_size > 0, fmt::format("block_size = {}; it must be at least 1", spec.block_size));

  RunReport report;
  report.spec = spec;
  Job job(spec, make_impl);
  report.distinct_caches = job.distinct();
  report.cache_bytes = job.cache_bytes();

  const int chunk = job.chunk();
  const int prefill_steps = spec.context > 0 ? (spec.context + chunk - 1) / chunk : 0;
  std::int64_t done = 0;
  const std::int64_t total = static_cast<std::int64_t>(prefill_steps + spec.decode_steps) * m.num_layers;
  for (int i = 0; i < prefill_steps; ++i) {
    const int cached = i * chunk;
    const int q = std::min(chunk, spec.context - cached);
    report.prefill.seconds += job.step(cached, q, done, total, "prefill", progress);
    report.prefill.steps += 1;
    report.prefill.tokens += static_cast<double>(q) * spec.batch;
    report.prefill.kv_bytes += job.step_kv_bytes() * m.num_layers;
    report.prefill.flops += job.step_flops() * m.num_layers;
    if (spec.check && i + 1 == prefill_steps) report.check_prefill = job.check("prefill");
  }
  for (int i = 0; i < spec.decode_steps; ++i) {
    const int cached = spec.context + i * spec.new_tokens;
    report.decode.seconds += job.step(cached, spec.new_tokens, done, total, "decode", progress);
    report.decode.steps += 1;
    report.decode.tokens += static_cast<double>(spec.new_tokens) * spec.batch;
    report.decode.kv_bytes += job.step_kv_bytes() * m.num_layers;
    report.decode.flops += job.step_flops() * m.num_layers;
    if (spec.check && i + 1 == spec.decode_steps) report.check_decode = job.check("decode");
  }
  return report;
}

}  // namespace attnsel::runtime
