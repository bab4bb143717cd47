// The step-level API's shared part: the public plan/update/execute methods (their checks,
// then the implementation's hooks), and the default hooks, which serve any implementation
// through its one-call methods (plugins' kernels, the reference).
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "attnsel/errors.hpp"
#include "attnsel/kernel.hpp"

namespace attnsel::kernel {

namespace {

/// A host copy of the batch: the one-call methods read it as an AttentionMetadata.
class HostCopyPlan final : public StepPlan {
 public:
  void assign(const AttentionMetadata& md) {
    auto copy = [](auto& dst, auto src) { dst.assign(src.begin(), src.end()); };
    copy(qsl_, md.query_start_loc.first(static_cast<std::size_t>(md.num_seqs) + 1));
    copy(seq_lens_, md.seq_lens.first(static_cast<std::size_t>(md.num_seqs)));
    copy(block_table_, md.block_table.first(static_cast<std::size_t>(md.num_seqs) *
                                            static_cast<std::size_t>(md.max_blocks_per_seq)));
    copy(slots_, md.slot_mapping.first(std::min(md.slot_mapping.size(), static_cast<std::size_t>(md.num_actual_tokens))));
    md_ = md;
    md_.query_start_loc = qsl_;
    md_.seq_lens = seq_lens_;
    md_.block_table = block_table_;
    md_.slot_mapping = slots_;
  }
  const AttentionMetadata& metadata() const { return md_; }
  std::size_t workspace_bytes() const override {
    return (qsl_.capacity() + seq_lens_.capacity() + block_table_.capacity()) * sizeof(std::int32_t) +
           slots_.capacity() * sizeof(std::int64_t);
  }
  std::string describe() const override { return fmt::format("{} sequences through the one-call forward", md_.num_seqs); }

 private:
  std::vector<std::int32_t> qsl_, seq_lens_, block_table_;
  std::vector<std::int64_t> slots_;
  AttentionMetadata md_;
};

const char kHostCopyMaker = 0;

}  // namespace

std::string_view to_string(GraphSupport g) {
  switch (g) {
    case GraphSupport::never: return "never";
    case GraphSupport::uniform_single_token_decode: return "uniform_single_token_decode";
    case GraphSupport::uniform_batch: return "uniform_batch";
    case GraphSupport::always: return "always";
  }
  return "?";
}

KernelInfo AttentionImpl::kernel_info() const {
  KernelInfo k;
  k.available = true;
  return k;
}

std::unique_ptr<StepPlan> AttentionImpl::plan(const AttentionMetadata& md, const KVCacheView& cache, ScalarType dtype,
                                              Stream stream, const PlanOptions& options) const {
  validate_plan_args(params_, cache, dtype, md);
  if (options.graph_capturable && kernel_info().graph_support == GraphSupport::never)
    throw ValueError("this kernel's launches cannot be captured in a CUDA graph (its graph support is 'never'); "
                     "build the plan without PlanOptions::graph_capturable");
  if (options.lse && !kernel_info().lse_output)
    throw NotImplementedError("this kernel does not write the log-sum-exp of its rows (KernelInfo::lse_output is "
                              "false); build the plan without PlanOptions::lse");
  if (options.max_blocks_per_seq < 0)
    throw ValueError(fmt::format("PlanOptions::max_blocks_per_seq = {} is negative", options.max_blocks_per_seq));
  StepShape shape = step_shape(params_, cache, dtype, md);
  if (options.graph_capturable) {
    if (options.max_blocks_per_seq != 0 && options.max_blocks_per_seq < md.max_blocks_per_seq)
      throw ValueError(fmt::format("PlanOptions::max_blocks_per_seq = {} is smaller than the batch's "
                                   "max_blocks_per_seq = {}",
                                   options.max_blocks_per_seq, md.max_blocks_per_seq));
    shape.max_blocks_per_seq = std::max(options.max_blocks_per_seq, md.max_blocks_per_seq);
  }
  auto p = make_plan(md, shape, stream, options);
  set_flags(*p, shape, options.graph_capturable, options.lse);
  set_maker(*p, plan_maker());
  return p;
}

void AttentionImpl::update(StepPlan& plan, const AttentionMetadata& md, Stream stream) const {
  if (plan.maker_ != plan_maker())
    throw ValueError("update: the plan was built by another kind of kernel implementation");
  const StepShape& s = plan.shape();
  // The geometry the plan was built for, as a view (pointers are not read).
  TensorView k, v;
  k.dtype = v.dtype = s.cache_dtype;
  k.device = v.device = s.device;
  k.device_index = v.device_index = s.device_index;
  k.ndim = v.ndim = 4;
  for (int d = 0; d < 4; ++d) {
    k.shape[d] = v.shape[d] = s.cache_shape[d];
    k.stride[d] = s.key_strides[d];
    v.stride[d] = s.value_strides[d];
  }
  k.data = v.data = reinterpret_cast<void*>(std::uintptr_t{256});  // checked for null only
  const KVCacheView geometry{k, v};
  validate_plan_args(params_, geometry, s.dtype, md);
  if (plan.graph_capturable()) {
    if (md.num_seqs != s.num_seqs || md.num_actual_tokens != s.num_actual_tokens)
      throw ValueError(fmt::format("update: a graph-capturable plan keeps its batch shape ({} sequences, {} query "
                                   "tokens); this batch has {} sequences and {} tokens — build a new plan (and capture "
                                   "a new graph) for it",
                                   s.num_seqs, s.num_actual_tokens, md.num_seqs, md.num_actual_tokens));
    if (md.max_blocks_per_seq > s.max_blocks_per_seq)
      throw ValueError(fmt::format("update: the batch has max_blocks_per_seq = {} but the graph-capturable plan holds "
                                   "{} blocks per sequence (PlanOptions::max_blocks_per_seq)",
                                   md.max_blocks_per_seq, s.max_blocks_per_seq));
  }
  StepShape next = step_shape(params_, geometry, s.dtype, md);
  if (plan.graph_capturable()) next.max_blocks_per_seq = s.max_blocks_per_seq;
  update_plan(plan, md, stream);
  plan.shape_ = next;
}

void AttentionImpl::execute(const StepPlan& plan, const TensorView& query, const KVCacheView& cache,
                            const TensorView& output, Stream stream, const TensorView* lse) const {
  if (plan.maker_ != plan_maker())
    throw ValueError("execute: the plan was built by another kind of kernel implementation (plans are built by the "
                     "implementation of a layer of the same group)");
  validate_execute_args(params_, plan.shape(), query, cache, output, lse);
  if (lse && !plan.lse())
    throw ValueError("execute: an lse output needs a plan built with PlanOptions::lse = true");
  execute_plan(plan, query, cache, output, stream, lse);
}

void AttentionImpl::write_kv_cache(const StepPlan& plan, const TensorView& key, const TensorView& value,
                                   const KVCacheView& cache, Stream stream) const {
  if (plan.maker_ != plan_maker())
    throw ValueError("write_kv_cache: the plan was built by another kind of kernel implementation");
  validate_plan_cache_write_args(params_, plan.shape(), key, value, cache);
  write_kv_cache_plan(plan, key, value, cache, stream);
}

void AttentionImpl::execute(const StepPlan& plan, const TensorView& query, const NewKeysValues& new_kv,
                            const KVCacheView& cache, const TensorView& output, Stream stream,
                            const TensorView* lse) const {
  if (plan.maker_ != plan_maker())
    throw ValueError("execute: the plan was built by another kind of kernel implementation (plans are built by the "
                     "implementation of a layer of the same group)");
  validate_execute_append_args(params_, plan.shape(), query, new_kv, cache, output, lse);
  if (lse && !plan.lse())
    throw ValueError("execute: an lse output needs a plan built with PlanOptions::lse = true");
  execute_append_plan(plan, query, new_kv, cache, output, stream, lse);
}

const void* AttentionImpl::plan_maker() const { return &kHostCopyMaker; }

std::unique_ptr<StepPlan> AttentionImpl::make_plan(const AttentionMetadata& md, const StepShape&, Stream,
                                                   const PlanOptions&) const {
  auto p = std::make_unique<HostCopyPlan>();
  p->assign(md);
  return p;
}

void AttentionImpl::update_plan(StepPlan& plan, const AttentionMetadata& md, Stream) const {
  static_cast<HostCopyPlan&>(plan).assign(md);
}

void AttentionImpl::execute_plan(const StepPlan& plan, const TensorView& query, const KVCacheView& cache,
                                 const TensorView& output, Stream, const TensorView* lse) const {
  if (lse) throw NotImplementedError("this kernel does not write the log-sum-exp of its rows");
  forward(query, cache, static_cast<const HostCopyPlan&>(plan).metadata(), output);
}

void AttentionImpl::write_kv_cache_plan(const StepPlan& plan, const TensorView& key, const TensorView& value,
                                        const KVCacheView& cache, Stream) const {
  write_kv_cache(key, value, cache, static_cast<const HostCopyPlan&>(plan).metadata());
}

void AttentionImpl::execute_append_plan(const StepPlan& plan, const TensorView& query, const NewKeysValues& new_kv,
                                        const KVCacheView& cache, const TensorView& output, Stream stream,
                                        const TensorView* lse) const {
  write_kv_cache_plan(plan, new_kv.key, new_kv.value, cache, stream);
  execute_plan(plan, query, cache, output, stream, lse);
}

}  // namespace attnsel::kernel
