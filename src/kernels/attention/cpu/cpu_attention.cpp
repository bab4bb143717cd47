// The CPU_ATTN driver: validation, the work plan, OpenMP threads over work items, and the
// log-sum-exp merge of split-KV partials. The SIMD kernels live in attention_kernels.cpp.
#include "kernels/attention/cpu/cpu_attention.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <array>
#include <cstring>
#include <new>
#include <vector>

#include "attnsel/errors.hpp"
#include "kernels/attention/cpu/split_merge.hpp"
#include "kernels/attention/cpu/work.hpp"
#include "kernels/attention/cpu/work_plan.hpp"
#include "kernels/element_access.hpp"
#include "kernels/fp8.hpp"
#include "kernels/attention/semantics.hpp"
#include "kernels/cache_lines.hpp"

namespace attnsel::kernel::cpu {

namespace {

constexpr std::array<int, 11> kHeadSizes = {32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512};
constexpr std::int64_t kMaxPositions = 1 << 24;  // positions are exact in fp32 lanes
constexpr double kParallelCost = 2e5;             // ~100 us of work (WorkItem::cost units)


void check_layer(const LayerParams& p) {
  validate_layer_params(p);
  if (p.batch_invariant)  // how work is split across threads depends on the batch
    throw ValueError("CPU_ATTN does not support batch-invariant mode (LayerParams::batch_invariant); choose a "
                     "backend that declares batch invariance (`attnsel list` shows which do)");
  if (std::find(kHeadSizes.begin(), kHeadSizes.end(), p.head_size) == kHeadSizes.end())
    throw ValueError(fmt::format("head_size {} is not supported by CPU_ATTN; supported head sizes: {}", p.head_size,
                                 fmt::join(kHeadSizes, ", ")));
}

void check_cpu_tensors(std::initializer_list<const TensorView*> views) {
  for (const TensorView* v : views)
    if (v->device != DeviceKind::cpu)
      throw ValueError(fmt::format("CPU_ATTN needs tensors in host memory, got one on cuda:{}", v->device_index));
}

void check_block_size(const KVCacheView& cache) {
  if (cache.block_size() % 16 != 0)
    throw ValueError(fmt::format("block_size {} is not supported by CPU_ATTN: it must be a multiple of 16",
                                 cache.block_size()));
}

/// 64-byte aligned host memory that only grows (plan-owned scratch and partials).
class AlignedArena {
 public:
  AlignedArena() = default;
  AlignedArena(const AlignedArena&) = delete;
  AlignedArena& operator=(const AlignedArena&) = delete;
  ~AlignedArena() { release(); }
  void reserve(std::size_t bytes) {
    if (bytes <= bytes_) return;
    release();
    ptr_ = ::operator new(bytes, std::align_val_t{64});
    bytes_ = bytes;
  }
  void* data() const { return ptr_; }
  std::size_t size() const { return bytes_; }

 private:
  void release() {
    if (ptr_) ::operator delete(ptr_, std::align_val_t{64});
    ptr_ = nullptr;
    bytes_ = 0;
  }
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

/// CPU_ATTN's step plan: a copy of the batch, the work items, and the memory every layer's
/// execute uses (one scratch area per thread of the team, the split-KV partial slots).
class CpuStepPlan final : public StepPlan {
 public:
  std::vector<std::int32_t> query_start_loc, seq_lens, block_table;
  std::vector<std::int64_t> slot_mapping;
  AttentionMetadata md;  // views of the copies above
  WorkPlan work;
  int threads = 1;
  bool parallel = false;
  std::size_t scratch_stride = 0;  // bytes per thread, a multiple of 64
  AlignedArena scratch, partials;

  std::size_t workspace_bytes() const override {
    return scratch.size() + partials.size() + work.items.capacity() * sizeof(WorkItem) +
           work.splits.capacity() * sizeof(SplitGroup) +
           (query_start_loc.capacity() + seq_lens.capacity() + block_table.capacity()) * sizeof(std::int32_t) +
           slot_mapping.capacity() * sizeof(std::int64_t);
  }
  std::string describe() const override {
    return fmt::format("{} work items ({} split-KV groups, {} partial slots) on {} thread{}", work.items.size(),
                       work.splits.size(), work.num_partial_slots, parallel ? threads : 1,
                       parallel && threads > 1 ? "s" : "");
  }
};

const char kCpuPlanMaker = 0;

class CpuAttentionImpl final : public AttentionImpl {
 public:
  CpuAttentionImpl(LayerParams p, CpuAttentionOptions o) : AttentionImpl(std::move(p)), options_(o) {
    check_layer(params_);
    // x * (1/scale) in float for the cache writer, the head's scale when the layer has
    // per-head scales (computed once: the writer runs every layer of every step).
    const CacheEncoding enc = cache_encoding(params_.kv_cache_dtype, ScalarType::f32);
    k_inv_.assign(static_cast<std::size_t>(params_.num_kv_heads), 1.0f);
    v_inv_ = k_inv_;
    if (enc.quantized)
      for (int h = 0; h < params_.num_kv_heads; ++h) {
        k_inv_[static_cast<std::size_t>(h)] = 1.0f / key_scale(params_, h);
        v_inv_[static_cast<std::size_t>(h)] = 1.0f / value_scale(params_, h);
      }
  }

  KernelInfo kernel_info() const override;
  using AttentionImpl::write_kv_cache;  // the step plan's form too
  void write_kv_cache(const TensorView& key, const TensorView& value, const KVCacheView& cache,
                      const AttentionMetadata& md) const override;
  void forward(const TensorView& query, const KVCacheView& cache, const AttentionMetadata& md,
               const TensorView& output) const override;

 protected:
  std::unique_ptr<StepPlan> make_plan(const AttentionMetadata& md, const StepShape& shape, Stream stream,
                                      const PlanOptions& options) const override;
  void update_plan(StepPlan& plan, const AttentionMetadata& md, Stream stream) const override;
  void execute_plan(const StepPlan& plan, const TensorView& query, const KVCacheView& cache, const TensorView& output,
                    Stream stream, const TensorView* lse) const override;
  void write_kv_cache_plan(const StepPlan& plan, const TensorView& key, const TensorView& value,
                           const KVCacheView& cache, Stream stream) const override;
  const void* plan_maker() const override { return &kCpuPlanMaker; }

 private:
  int threads() const { return options_.num_threads > 0 ? options_.num_threads : omp_get_max_threads(); }
  void build(CpuStepPlan& plan, const AttentionMetadata& md, bool lse) const;
  LayerCtx layer_ctx(const TensorView& query, const KVCacheView& cache, const TensorView& output,
                     const AttentionMetadata& md) const;
  void write_rows(const TensorView& key, const TensorView& value, const KVCacheView& cache,
                  std::span<const std::int64_t> slots, int tokens) const;

  CpuAttentionOptions options_;
  std::vector<float> k_inv_, v_inv_;
};

KernelInfo CpuAttentionImpl::kernel_info() const {
  KernelInfo k;
  k.available = true;
  k.device = DeviceKind::cpu;
  k.isa = cpu_attention_isa(ScalarType::bf16, params_.kv_cache_dtype, options_);
  k.graph_support = GraphSupport::never;
  k.lse_output = true;
  k.lse_prefill = true;
  return k;
}

void CpuAttentionImpl::build(CpuStepPlan& plan, const AttentionMetadata& md, bool lse) const {
  if (md.max_seq_len >= kMaxPositions)
    throw ValueError(fmt::format("max_seq_len = {} exceeds CPU_ATTN's limit of {} tokens", md.max_seq_len,
                                 kMaxPositions - 1));
  const auto n = static_cast<std::size_t>(md.num_seqs);
  plan.query_start_loc.assign(md.query_start_loc.begin(), md.query_start_loc.begin() + static_cast<std::ptrdiff_t>(n + 1));
  plan.seq_lens.assign(md.seq_lens.begin(), md.seq_lens.begin() + static_cast<std::ptrdiff_t>(n));
  plan.block_table.assign(md.block_table.begin(),
                          md.block_table.begin() + static_cast<std::ptrdiff_t>(n * static_cast<std::size_t>(md.max_blocks_per_seq)));
  const auto tokens = static_cast<std::size_t>(md.num_actual_tokens);
  if (md.slot_mapping.size() >= tokens)
    plan.slot_mapping.assign(md.slot_mapping.begin(), md.slot_mapping.begin() + static_cast<std::ptrdiff_t>(tokens));
  else
    plan.slot_mapping.clear();
  plan.md = md;
  plan.md.query_start_loc = plan.query_start_loc;
  plan.md.seq_lens = plan.seq_lens;
  plan.md.block_table = plan.block_table;
  plan.md.slot_mapping = plan.slot_mapping;

  plan.threads = threads();
  plan.work = plan_work(params_, plan.md, MaskRule::from(params_), plan.threads);
  if (lse) {
    // Every item keeps its partial state (a one-slice group): the merge then knows each
    // row's maximum and sum, which the log-sum-exp needs.
    for (WorkItem& it : plan.work.items)
      if (it.partial < 0) {
        it.partial = plan.work.num_partial_slots++;
        plan.work.splits.push_back({it, it.partial, 1});
      }
  }
  // Waking a team costs tens of microseconds (and spinning workers steal the core on a
  // busy machine): small batches run on the calling thread.
  double total_cost = 0.0;
  for (const WorkItem& it : plan.work.items) total_cost += it.cost;
  plan.parallel = plan.threads > 1 && plan.work.items.size() > 1 && total_cost > kParallelCost;
  plan.scratch_stride = round_to_cache_line(scratch_bytes(params_.head_size));
  plan.scratch.reserve(plan.scratch_stride * static_cast<std::size_t>(plan.parallel ? plan.threads : 1));
  plan.partials.reserve(static_cast<std::size_t>(plan.work.num_partial_slots) * partial_slot_floats(params_.head_size) *
                        sizeof(float));
}

std::unique_ptr<StepPlan> CpuAttentionImpl::make_plan(const AttentionMetadata& md, const StepShape& shape, Stream,
                                                      const PlanOptions& options) const {
  if (shape.device != DeviceKind::cpu)
    throw ValueError(fmt::format("CPU_ATTN needs the KV cache in host memory, got one on cuda:{}", shape.device_index));
  if (shape.cache_shape[1] % 16 != 0)
    throw ValueError(fmt::format("block_size {} is not supported by CPU_ATTN: it must be a multiple of 16",
                                 shape.cache_shape[1]));
  auto plan = std::make_unique<CpuStepPlan>();
  build(*plan, md, options.lse);
  return plan;
}

void CpuAttentionImpl::update_plan(StepPlan& plan, const AttentionMetadata& md, Stream) const {
  auto& p = static_cast<CpuStepPlan&>(plan);
  build(p, md, p.lse());
}

LayerCtx CpuAttentionImpl::layer_ctx(const TensorView& query, const KVCacheView& cache, const TensorView& output,
                                     const AttentionMetadata& md) const {
  const LayerParams& p = params_;
  const CacheEncoding enc = cache_encoding(p.kv_cache_dtype, query.dtype);
  const MaskRule mask = MaskRule::from(p);
  LayerCtx c;
  c.head_size = p.head_size;
  c.group = p.num_heads / p.num_kv_heads;
  c.kv = enc.stored;
  // E4M3 bytes decode as value / 256 in the kernels (see Kv<e4m3>). Per-head scales act per
  // KV head on top of the layer's factor (the kernels apply them per item head).
  const float fp8_unit = c.kv == ScalarType::fp8_e4m3 ? 256.0f : 1.0f;
  const bool k_per_head = enc.quantized && !p.k_scales.empty();
  const bool v_per_head = enc.quantized && !p.v_scales.empty();
  const float k_deq = enc.quantized ? (k_per_head ? 1.0f : p.k_scale) * fp8_unit : 1.0f;
  c.v_scale = enc.quantized ? (v_per_head ? 1.0f : p.v_scale) * fp8_unit : 1.0f;
  c.qk_scale = p.scale * k_deq;
  c.k_head_scales = k_per_head ? p.k_scales.data() : nullptr;
  c.v_head_scales = v_per_head ? p.v_scales.data() : nullptr;
  c.soft_cap = p.logits_soft_cap;
  c.causal = mask.causal;
  c.window = mask.window;
  c.alibi = p.alibi_slopes.empty() ? nullptr : p.alibi_slopes.data();
  c.sinks = p.sinks.empty() ? nullptr : p.sinks.data();
  c.q_type = query.dtype;
  c.out_type = output.dtype;
  c.bf16_dot = options_.allow_bf16_dot && query.dtype == ScalarType::bf16 &&
               (c.kv == ScalarType::bf16 || is_fp8(c.kv)) && cpu_has_bf16_dot();
  c.query = static_cast<const std::uint8_t*>(query.data);
  c.q_stride[0] = query.stride[0];
  c.q_stride[1] = query.stride[1];
  c.out = static_cast<std::uint8_t*>(output.data);
  c.o_stride[0] = output.stride[0];
  c.o_stride[1] = output.stride[1];
  c.key_cache = static_cast<const std::uint8_t*>(cache.key.data);
  c.value_cache = static_cast<const std::uint8_t*>(cache.value.data);
  for (int d = 0; d < 3; ++d) {
    c.k_stride[d] = cache.key.stride[d];
    c.v_stride[d] = cache.value.stride[d];
  }
  c.block_table = md.block_table.data();
  c.max_blocks_per_seq = md.max_blocks_per_seq;
  c.block_size = cache.block_size();
  c.num_kv_heads = p.num_kv_heads;
  {
    const std::int64_t per_block = static_cast<std::int64_t>(c.block_size) * p.num_kv_heads * p.head_size;
    auto contiguous = [&](const TensorView& t) {
      // The three inner dimensions fill exactly one block's region (in either order).
      const std::int64_t a = t.stride[1] * t.shape[1], b = t.stride[2] * t.shape[2];
      return t.stride[0] == per_block && std::max(a, b) == per_block && std::min(t.stride[1], t.stride[2]) >= p.head_size;
    };
    if (contiguous(cache.key) && contiguous(cache.value))
      c.block_bytes = per_block * static_cast<std::int64_t>(element_size(cache.key.dtype));
  }
  return c;
}

void CpuAttentionImpl::forward(const TensorView& query, const KVCacheView& cache, const AttentionMetadata& md,
                               const TensorView& output) const {
  validate_forward_args(params_, query, cache, md, output);
  check_cpu_tensors({&query, &output, &cache.key, &cache.value});
  check_block_size(cache);
  if (md.num_actual_tokens == 0) return;
  // The one-call form reuses one plan per thread: its memory stays mapped between calls
  // (mapping and unmapping scratch on every call costs page faults and TLB shootdowns,
  // milliseconds on a busy machine).
  thread_local CpuStepPlan plan;
  build(plan, md, false);
  set_flags(plan, step_shape(params_, cache, query.dtype, md), false, false);
  set_maker(plan, plan_maker());
  execute_plan(plan, query, cache, output, Stream{}, nullptr);
}

void CpuAttentionImpl::execute_plan(const StepPlan& base, const TensorView& query, const KVCacheView& cache,
                                    const TensorView& output, Stream, const TensorView* lse) const {
  const auto& plan = static_cast<const CpuStepPlan&>(base);
  if (plan.md.num_actual_tokens == 0) return;
  LayerCtx c = layer_ctx(query, cache, output, plan.md);
  if (lse) {  // the plan keeps every item's partial state: the merges write it
    c.lse = static_cast<float*>(lse->data);
    c.lse_stride = lse->stride[0];
  }
  const std::size_t slot_floats = partial_slot_floats(params_.head_size);
  // Every row a merge reads is written first: no need to clear the slots.
  auto* partials = static_cast<float*>(plan.partials.data());
  auto* scratch = static_cast<std::byte*>(plan.scratch.data());
  const std::size_t stride = plan.scratch_stride;
  const WorkItem* items = plan.work.items.data();
  const auto n_items = static_cast<std::int64_t>(plan.work.items.size());

#pragma omp parallel num_threads(plan.threads) if (plan.parallel)
  {
    void* buffer = scratch + static_cast<std::size_t>(omp_get_thread_num()) * stride;
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t i = 0; i < n_items; ++i) {
      const WorkItem& it = items[i];
      float* slot = it.partial >= 0 ? partials + static_cast<std::size_t>(it.partial) * slot_floats : nullptr;
      process_item(c, it, slot, buffer);
    }
  }
  for (const SplitGroup& g : plan.work.splits) merge_group(c, g, partials);
}

void CpuAttentionImpl::write_kv_cache(const TensorView& key, const TensorView& value, const KVCacheView& cache,
                                      const AttentionMetadata& md) const {
  validate_cache_write_args(params_, key, value, cache, md);
  check_cpu_tensors({&key, &value, &cache.key, &cache.value});
  check_block_size(cache);
  write_rows(key, value, cache, md.slot_mapping, md.num_actual_tokens);
}

void CpuAttentionImpl::write_kv_cache_plan(const StepPlan& base, const TensorView& key, const TensorView& value,
                                           const KVCacheView& cache, Stream) const {
  const auto& plan = static_cast<const CpuStepPlan&>(base);
  write_rows(key, value, cache, plan.slot_mapping, plan.md.num_actual_tokens);
}

void CpuAttentionImpl::write_rows(const TensorView& key, const TensorView& value, const KVCacheView& cache,
                                  std::span<const std::int64_t> slots, int tokens) const {
  const LayerParams& p = params_;
  const CacheEncoding enc = cache_encoding(p.kv_cache_dtype, key.dtype);
  const std::int64_t bs = cache.block_size();
  const int D = p.head_size;
  const std::size_t out_bytes = element_size(enc.stored);
  const bool copy = key.dtype == enc.stored;  // same type: a row copy
  auto write_row = [&](const TensorView& src, const TensorView& dst, std::int64_t i, int h, std::int64_t slot,
                       float inv) {
    const auto* in = static_cast<const std::uint8_t*>(src.data);
    auto* out = static_cast<std::uint8_t*>(dst.data) +
                ((slot / bs) * dst.stride[0] + (slot % bs) * dst.stride[1] + h * dst.stride[2]) *
                    static_cast<std::int64_t>(out_bytes);
    const std::int64_t src_off = i * src.stride[0] + h * src.stride[1];
    if (copy) {
      std::memcpy(out, in + src_off * static_cast<std::int64_t>(out_bytes), static_cast<std::size_t>(D) * out_bytes);
      return;
    }
    for (int d = 0; d < D; ++d) {
      const float x = load_activation(src.dtype, in, src_off + d);
      switch (enc.stored) {
        case ScalarType::fp8_e4m3: out[d] = float_to_fp8(x * inv, ScalarType::fp8_e4m3); break;
        case ScalarType::fp8_e5m2: out[d] = float_to_fp8(x * inv, ScalarType::fp8_e5m2); break;
        default: store_activation(enc.stored, out, d, x); break;
      }
    }
  };
  // Writing is a copy: a team only pays off for large batches (~1 MB of cache).
  const bool parallel = static_cast<std::int64_t>(tokens) * p.num_kv_heads * D >= (std::int64_t{1} << 18);
#pragma omp parallel for schedule(static) num_threads(threads()) if (parallel)
  for (int i = 0; i < tokens; ++i) {
    const std::int64_t slot = slots[static_cast<std::size_t>(i)];
    if (slot < 0) continue;
    for (int h = 0; h < p.num_kv_heads; ++h) {
      write_row(key, cache.key, i, h, slot, k_inv_[static_cast<std::size_t>(h)]);
      write_row(value, cache.value, i, h, slot, v_inv_[static_cast<std::size_t>(h)]);
    }
  }
}

}  // namespace

std::span<const int> supported_head_sizes() { return kHeadSizes; }

std::unique_ptr<AttentionImpl> make_cpu_attention_impl(const LayerParams& params, CpuAttentionOptions options) {
  return std::make_unique<CpuAttentionImpl>(params, options);
}

std::string cpu_attention_isa(ScalarType dtype, CacheDType kv_cache_dtype, CpuAttentionOptions options) {
  LayerCtx c;
  const ScalarType kv = cache_encoding(kv_cache_dtype, dtype).stored;
  c.bf16_dot = options.allow_bf16_dot && dtype == ScalarType::bf16 && kv != ScalarType::f32 && kv != ScalarType::f16 &&
               cpu_has_bf16_dot();
  return kernel_target_name(c);
}

}  // namespace attnsel::kernel::cpu
