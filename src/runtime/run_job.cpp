#include "runtime/run_job.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <vector>

#include "attnsel/errors.hpp"
#include "kernels/attention/reference.hpp"
#include "kernels/attention/semantics.hpp"
#include "runtime/host_batch.hpp"
#include "runtime/job_memory.hpp"

namespace attnsel::runtime {

namespace {

using kernel::ScalarType;
using kernel::TensorView;

// The sizes of a job's memory, from its spec alone (the job and the memory check agree).
struct JobGeometry {
  ScalarType cache_type = ScalarType::bf16;
  int blocks_per_seq = 0, num_blocks = 0, distinct = 1, max_tokens = 0;
  std::size_t per_cache = 0, cache_bytes = 0, query_bytes = 0, kv_input_bytes = 0;
};

JobGeometry job_geometry(const RunSpec& s) {
  JobGeometry g;
  g.cache_type = kernel::cache_encoding(s.kv_cache_dtype, s.dtype).stored;
  const std::int64_t blocks = blocks_per_sequence(s, s.block_size);
  require_spec(blocks * s.batch <= std::numeric_limits<std::int32_t>::max(),
          fmt::format("batch {} × {} blocks per sequence exceeds the 2^31 block ids a block table holds; lower "
                      "--batch or --context",
                      s.batch, blocks));
  g.blocks_per_seq = static_cast<int>(blocks);
  g.num_blocks = s.batch * g.blocks_per_seq;
  g.per_cache = static_cast<std::size_t>(g.num_blocks) * static_cast<std::size_t>(s.block_size) *
                static_cast<std::size_t>(s.num_kv_heads) * static_cast<std::size_t>(s.head_size) *
                kernel::element_size(g.cache_type);
  g.distinct = static_cast<int>(std::clamp<std::size_t>(s.max_cache_bytes / std::max<std::size_t>(1, 2 * g.per_cache), 1,
                                                        static_cast<std::size_t>(s.num_layers)));
  g.cache_bytes = 2 * g.per_cache * static_cast<std::size_t>(g.distinct);
  g.max_tokens = max_step_tokens(s);
  const std::size_t act = kernel::element_size(s.dtype);
  const auto D = static_cast<std::size_t>(s.head_size);
  g.query_bytes = static_cast<std::size_t>(g.max_tokens) * static_cast<std::size_t>(s.num_heads) * D * act;
  g.kv_input_bytes = static_cast<std::size_t>(g.max_tokens) * static_cast<std::size_t>(s.num_kv_heads) * D * act;
  return g;
}

// The batch's state: block table, caches (one per distinct layer slot) and step buffers.
class Job {
 public:
  Job(const RunSpec& s, const ImplFactory& make_impl) : s_(s), lp_(layer_params_for(s)) {
    impl_ = make_impl(lp_);
    const JobGeometry g = job_geometry(s);
    cache_type_ = g.cache_type;
    blocks_per_seq_ = g.blocks_per_seq;
    num_blocks_ = g.num_blocks;
    block_table_ = shuffled_block_ids(static_cast<std::size_t>(num_blocks_), s.seed);
    distinct_ = g.distinct;
    cache_bytes_ = g.cache_bytes;
    JobInputs in;
    in.query.resize(g.query_bytes);
    in.new_keys.resize(g.kv_input_bytes);
    in.new_values.resize(g.kv_input_bytes);
    fill_uniform(in.query, s.dtype, 1.0f, s.seed + 1);
    fill_uniform(in.new_keys, s.dtype, 1.0f, s.seed + 2);
    fill_uniform(in.new_values, s.dtype, 1.0f, s.seed + 3);
    output_bytes_ = in.query.size();
    mem_ = make_job_memory(s.device, {distinct_, g.per_cache}, std::move(in));
  }

  int distinct() const { return distinct_; }
  std::size_t cache_bytes() const { return cache_bytes_; }

  // One batch step: every sequence has `done` tokens cached and adds `q` new ones. One plan
  // per step (updated in place between steps), then every layer's cache write and
  // attention on the job's stream, in one execute per layer; a decode step in graph mode is captured once and
  // replayed. Returns the seconds the step took (device events on a GPU: host gaps count);
  // timed = false leaves the timing, and the wait for the step's end, to the caller
  // (begin_steps / end_steps around several steps).
  double step(int done, int q, bool decode, PhaseStats& stats, bool timed = true) {
    using Clock = std::chrono::steady_clock;
    build_metadata(done, q);
    const kernel::AttentionMetadata md = metadata();
    const kernel::Stream stream = mem_->stream();
    const bool graph = decode && s_.cuda_graphs;
    if (timed) mem_->begin_step();
    const auto t0 = Clock::now();
    if (!plan_ || plan_->graph_capturable() != graph) {
      kernel::PlanOptions options;
      options.graph_capturable = graph;
      options.max_blocks_per_seq = blocks_per_seq_;
      // Every layer writes only its step's new tokens and steps are separated by the plan's
      // update (a copy on the stream), so each layer may start reading the older positions
      // while the layer before it finishes.
      options.early_cache_reads = true;
      plan_ = impl_->plan(md, cache_view(0), s_.dtype, stream, options);
    } else {
      impl_->update(*plan_, md, stream);
    }
    const auto t1 = Clock::now();
    if (graph && mem_->captured())
      mem_->replay();
    else
      issue_layers(stream);
    const auto t2 = Clock::now();
    last_layer_cache_ = (s_.num_layers - 1) % distinct_;
    const double seconds = timed ? mem_->end_step() : 0.0;
    stats.plan_seconds += std::chrono::duration<double>(t1 - t0).count();
    stats.issue_seconds += std::chrono::duration<double>(t2 - t1).count();
    stats.layers += s_.num_layers;
    return seconds;
  }

  // Captures the decode step's layers in the job's CUDA graph (nothing runs until a step
  // replays it). Called after a decode step ran as is, so that every kernel is loaded and
  // configured before the capture begins; a no-op without --cuda-graphs or once captured.
  void capture_decode_step() {
    if (!s_.cuda_graphs || mem_->captured()) return;
    mem_->begin_capture();
    issue_layers(mem_->stream());
    mem_->end_capture();
  }

  // Times steps issued with step(..., timed = false) as one interval; end_steps waits for them.
  void begin_steps() { mem_->begin_step(); }
  double end_steps() { return mem_->end_step(); }

  std::string plan_description() const { return plan_ ? plan_->describe() : std::string(); }
  int graph_nodes() const { return mem_->captured_nodes(); }

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
    const double per_key = static_cast<double>(s_.num_heads) * s_.head_size;
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
    const TensorView host_query = view(const_cast<std::uint8_t*>(mem_->query_on_host()), s_.num_heads,
                                       kernel::DeviceKind::cpu, qsl_.back());
    const TensorView host_out =
        view(mem_->output_on_host(output_bytes_), s_.num_heads, kernel::DeviceKind::cpu, qsl_.back());
    const std::vector<double> want =
        kernel::reference::attend(lp_, host_query, cache_view(host_k, host_v, kernel::DeviceKind::cpu), md, tokens);
    r.tokens = static_cast<int>(tokens.size());
    r.fp8_queries = plan_ && plan_->fp8_queries();
    r.tolerance = tolerance_for(s_.dtype, r.fp8_queries);
    r.comparison = compare_with_reference(host_out, tokens, want, r.tolerance);
    return r;
  }

  // K and V bytes and FLOPs of the current step, for one layer.
  double step_kv_bytes() const {
    double tokens = 0.0;
    for (int l : seq_lens_) tokens += l;
    return 2.0 * tokens * s_.num_kv_heads * s_.head_size * static_cast<double>(kernel::element_size(cache_type_));
  }
  double step_flops() const {
    double keys = 0.0;
    for (std::size_t i = 0; i < seq_lens_.size(); ++i) {
      const double L = seq_lens_[i], q = qsl_[i + 1] - qsl_[i];
      keys += q * (L - q) + q * (q + 1) / 2.0;  // causal: query i sees L - q + i + 1 keys
    }
    return 4.0 * keys * s_.head_size * s_.num_heads;
  }

 private:
  void issue_layers(kernel::Stream stream) {
    const int tokens = qsl_.back();
    const TensorView query = view(mem_->query(), s_.num_heads, tokens);
    const TensorView out = view(mem_->output(), s_.num_heads, tokens);
    const TensorView k = view(mem_->new_keys(), s_.num_kv_heads, tokens);
    const TensorView v = view(mem_->new_values(), s_.num_kv_heads, tokens);
    for (int layer = 0; layer < s_.num_layers; ++layer) {
      const kernel::KVCacheView cache = cache_view(layer % distinct_);
      impl_->execute(*plan_, query, kernel::NewKeysValues{k, v}, cache, out, stream);  // write + attend
    }
  }

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
    return batch_metadata(qsl_, seq_lens_, block_table_, blocks_per_seq_, slots_);
  }
  TensorView view(void* data, int heads, int tokens) { return view(data, heads, mem_->device(), tokens); }
  TensorView view(void* data, int heads, kernel::DeviceKind device, int tokens) {
    return TensorView::contiguous(data, s_.dtype, {static_cast<std::int64_t>(tokens), heads, s_.head_size}, device);
  }
  kernel::KVCacheView cache_view(int i) { return cache_view(mem_->key_cache(i), mem_->value_cache(i), mem_->device()); }
  kernel::KVCacheView cache_view(void* keys, void* values, kernel::DeviceKind device) {
    const auto strides = cache_strides(s_.layout, s_.block_size, s_.num_kv_heads, s_.head_size);
    const std::int64_t shape[4] = {num_blocks_, s_.block_size, s_.num_kv_heads, s_.head_size};
    return {TensorView::strided(keys, cache_type_, shape, strides, device),
            TensorView::strided(values, cache_type_, shape, strides, device)};
  }

  const RunSpec& s_;
  kernel::LayerParams lp_;
  std::unique_ptr<kernel::AttentionImpl> impl_;
  ScalarType cache_type_ = ScalarType::bf16;
  int blocks_per_seq_ = 0, num_blocks_ = 0, distinct_ = 1, last_layer_cache_ = 0;
  std::size_t cache_bytes_ = 0, output_bytes_ = 0;
  std::vector<std::int32_t> block_table_, qsl_, seq_lens_;
  std::vector<std::int64_t> slots_;
  std::unique_ptr<JobMemory> mem_;
  std::unique_ptr<kernel::StepPlan> plan_;  // after mem_: freed on its stream before the stream goes
};

void check_spec(const RunSpec& spec) {
  require_spec(spec.num_heads > 0 && spec.num_kv_heads > 0 && spec.head_size > 0 && spec.num_layers > 0,
          fmt::format("model shape needs positive sizes: num_heads={}, num_kv_heads={}, head_size={}, num_layers={}",
                      spec.num_heads, spec.num_kv_heads, spec.head_size, spec.num_layers));
  check_steps(spec, spec.block_size);
}

}  // namespace

MemoryNeed memory_need(const RunSpec& spec) {
  check_spec(spec);
  const JobGeometry g = job_geometry(spec);
  MemoryNeed need;
  need.cache_bytes = g.cache_bytes;
  const std::size_t step_buffers = 2 * g.query_bytes + 2 * g.kv_input_bytes;  // query, output, new keys and values
  const std::size_t table = static_cast<std::size_t>(g.num_blocks) * sizeof(std::int32_t);
  const bool gpu = spec.device == kernel::DeviceKind::cuda;
  // Host: the inputs are filled on the host; the check copies the output (and, on a GPU,
  // one layer's cache) back.
  need.host_bytes = step_buffers + table + (gpu ? (spec.check ? g.per_cache * 2 : 0) : g.cache_bytes);
  // Device: caches and step buffers, and the plan's workspace (split-KV partials: a few
  // slices of every query row in fp32, bounded here generously).
  const std::size_t workspace =
      static_cast<std::size_t>(g.max_tokens) * spec.num_heads * (spec.head_size + 1) * sizeof(float) * 16;
  need.device_bytes = gpu ? g.cache_bytes + step_buffers + table * 2 + workspace : 0;
  need.host_available = host_memory_available();
  need.device_available = gpu ? device_memory_available() : 0;
  const std::string lower = fmt::format(
      "the KV caches ({}) grow with --batch × (--context + --decode-steps × --new-tokens) and the heads and head size; "
      "lower --batch or --context",
      format_gib(g.cache_bytes));
  if (gpu && need.device_available > 0 && need.device_bytes > need.device_available)
    need.shortfall = fmt::format("this run needs {} of device memory on cuda:0 but {} is available there; {}",
                                 format_gib(need.device_bytes), format_gib(need.device_available), lower);
  else if (need.host_available > 0 && need.host_bytes > need.host_available)
    need.shortfall = fmt::format("this run needs {} of host memory but {} is available{}; {}",
                                 format_gib(need.host_bytes), format_gib(need.host_available),
                                 gpu ? " (the check copies one layer's cache back)" : "",
                                 gpu && spec.check ? lower + ", or pass --no-check" : lower);
  return need;
}

void require_spec(bool ok, const std::string& what) {
  if (!ok) throw ValueError(what);
}

std::string format_gib(std::size_t bytes) {
  return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / double(1ull << 30));
}

void MemoryNeed::require_fit() const {
  if (!shortfall.empty()) throw ValueError(shortfall);
}

RunReport run_job(const RunSpec& spec, const ImplFactory& make_impl, const Progress& progress) {
  memory_need(spec).require_fit();  // checks the spec first

  RunReport report;
  report.spec = spec;
  Job job(spec, make_impl);
  report.distinct_caches = job.distinct();
  report.cache_bytes = job.cache_bytes();

  StepTally tally(spec, spec.num_layers, progress);
  for (int i = 0; i < tally.prefill_steps(); ++i) {
    const int q = tally.prefill_tokens(i);
    const double seconds = job.step(tally.prefill_cached(i), q, false, report.prefill);
    tally.count("prefill", report.prefill, q, seconds, job.step_kv_bytes(), job.step_flops());
    if (spec.check && i + 1 == tally.prefill_steps()) report.check_prefill = job.check("prefill");
  }
  // The first decode step is the decode phase's warm-up, timed apart (when more steps
  // follow): it loads the decode kernels and sizes the plan's buffers for decode batches,
  // and with CUDA graphs the step is captured after it. An engine does both once, before it
  // serves (vLLM captures its decode graphs at start-up: GPUModelRunner.capture_model in
  // vllm/v1/worker/gpu_model_runner.py), so they are not part of its decode rate.
  auto decode_step = [&](int i, PhaseStats& stats, bool timed) {
    const double seconds = job.step(tally.decode_cached(i), spec.new_tokens, true, stats, timed);
    tally.count("decode", stats, spec.new_tokens, seconds, job.step_kv_bytes(), job.step_flops());
  };
  const int first_timed = tally.decode_warmup_steps();
  if (first_timed > 0) {  // timed from the step's start to the end of the capture
    job.begin_steps();
    decode_step(0, report.decode_warmup, false);
    job.capture_decode_step();
    report.decode_warmup.seconds = job.end_steps();
  }
  // Decode steps follow one another without a wait unless sync_steps: the plan update and
  // the launches of step i + 1 overlap step i on the device (the plan's uploads are
  // stream-ordered and double-buffered), and the phase is timed from its first step's
  // start to its last step's end.
  const bool pipelined = !spec.sync_steps && spec.decode_steps > first_timed;
  if (pipelined) job.begin_steps();
  for (int i = first_timed; i < spec.decode_steps; ++i) decode_step(i, report.decode, !pipelined);
  if (pipelined) report.decode.seconds += job.end_steps();
  if (spec.check && spec.decode_steps > 0) report.check_decode = job.check("decode");
  report.decode_plan = job.plan_description();
  report.graph_nodes = job.graph_nodes();
  return report;
}

}  // namespace attnsel::runtime
