// The CPU_ATTN driver: validation, the work plan, OpenMP threads over work items, and the
// log-sum-exp merge of split-KV partials. The SIMD kernels live in attention_kernels.cpp.
#include "kernels/cpu/cpu_attention.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <vector>

#include "attnsel/errors.hpp"
#include "kernels/cpu/work.hpp"
#include "kernels/cpu/work_plan.hpp"
#include "kernels/fp8.hpp"
#include "kernels/half.hpp"
#include "kernels/semantics.hpp"

namespace attnsel::kernel::cpu {

namespace {

constexpr std::array<int, 11> kHeadSizes = {32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512};
constexpr std::int64_t kMaxPositions = 1 << 24;  // positions are exact in fp32 lanes
constexpr double kParallelCost = 2e5;             // ~100 us of work (WorkItem::cost units)

KvType kv_type_of(ScalarType stored) {
  switch (stored) {
    case ScalarType::f32: return KvType::f32;
    case ScalarType::f16: return KvType::f16;
    case ScalarType::bf16: return KvType::bf16;
    case ScalarType::fp8_e4m3: return KvType::e4m3;
    default: return KvType::e5m2;
  }
}

void check_layer(const LayerParams& p) {
  validate_layer_params(p);
  if (p.batch_invariant)  // how work is split across threads depends on the batch
    throw ValueError("CPU_ATTN does not support batch-invariant mode (LayerParams::batch_invariant); backends that "
                     "declare batch invariance: FLASH_ATTN, TRITON_ATTN, FLEX_ATTENTION");
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

// Stores `v` as element `i` of an activation buffer.
void store_activation(ScalarType t, std::uint8_t* base, std::int64_t i, float v) {
  switch (t) {
    case ScalarType::f32: reinterpret_cast<float*>(base)[i] = v; break;
    case ScalarType::bf16: reinterpret_cast<std::uint16_t*>(base)[i] = float_to_bf16(v); break;
    default: reinterpret_cast<std::uint16_t*>(base)[i] = float_to_half(v); break;
  }
}

float load_activation(ScalarType t, const std::uint8_t* base, std::int64_t i) {
  switch (t) {
    case ScalarType::f32: return reinterpret_cast<const float*>(base)[i];
    case ScalarType::bf16: return bf16_to_float(reinterpret_cast<const std::uint16_t*>(base)[i]);
    default: return half_to_float(reinterpret_cast<const std::uint16_t*>(base)[i]);
  }
}

// Per-thread buffers that live as long as the thread (OpenMP's workers persist): a
// forward pass must not map and unmap memory, whose page faults and TLB-shootdown
// interrupts cost milliseconds on a busy (virtual) machine.
template <int Tag>
void* thread_buffer(std::size_t bytes) {
  struct Buffer {
    void* p = nullptr;
    std::size_t n = 0;
    ~Buffer() { ::operator delete(p, std::align_val_t{64}); }
  };
  thread_local Buffer b;
  if (b.n < bytes) {
    ::operator delete(b.p, std::align_val_t{64});
    b.p = nullptr;
    b.n = 0;
    b.p = ::operator new(bytes, std::align_val_t{64});
    b.n = bytes;
  }
  return b.p;
}
constexpr int kScratchTag = 0, kPartialTag = 1;

class CpuAttentionImpl final : public AttentionImpl {
 public:
  CpuAttentionImpl(LayerParams p, CpuAttentionOptions o) : AttentionImpl(std::move(p)), options_(o) {
    check_layer(params_);
  }

  void write_kv_cache(const TensorView& key, const TensorView& value, const KVCacheView& cache,
                      const AttentionMetadata& md) const override;
  void forward(const TensorView& query, const KVCacheView& cache, const AttentionMetadata& md,
               const TensorView& output) const override;

 private:
  int threads() const { return options_.num_threads > 0 ? options_.num_threads : omp_get_max_threads(); }
  void merge_splits(const LayerCtx& c, const WorkPlan& plan, float* partials) const;

  CpuAttentionOptions options_;
};

void CpuAttentionImpl::forward(const TensorView& query, const KVCacheView& cache, const AttentionMetadata& md,
                               const TensorView& output) const {
  const LayerParams& p = params_;
  validate_forward_args(p, query, cache, md, output);
  check_cpu_tensors({&query, &output, &cache.key, &cache.value});
  check_block_size(cache);
  if (md.max_seq_len >= kMaxPositions)
    throw ValueError(fmt::format("max_seq_len = {} exceeds CPU_ATTN's limit of {} tokens", md.max_seq_len,
                                 kMaxPositions - 1));
  if (md.num_actual_tokens == 0) return;

  const CacheEncoding enc = cache_encoding(p.kv_cache_dtype, query.dtype);
  const MaskRule mask = MaskRule::from(p);
  LayerCtx c;
  c.head_size = p.head_size;
  c.group = p.num_heads / p.num_kv_heads;
  c.kv = kv_type_of(enc.stored);
  // E4M3 bytes decode as value / 256 in the kernels (see Kv<e4m3>). Per-head scales act per
  // KV head on top of the layer's factor (the kernels apply them per item head).
  const float fp8_unit = c.kv == KvType::e4m3 ? 256.0f : 1.0f;
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
  c.bf16_dot = options_.allow_bf16_dot && query.dtype == ScalarType::bf16 &&
               (c.kv == KvType::bf16 || c.kv == KvType::e4m3 || c.kv == KvType::e5m2) && cpu_has_bf16_dot();
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

  const int nthreads = threads();
  const WorkPlan plan = plan_work(p, md, mask, nthreads);
  const std::size_t slot_floats = partial_slot_floats(p.head_size);
  // Every row a merge reads is written first: no need to clear the slots.
  float* partials = static_cast<float*>(
      thread_buffer<kPartialTag>(static_cast<std::size_t>(plan.num_partial_slots) * slot_floats * sizeof(float)));
  const std::size_t scratch = scratch_bytes(p.head_size);
  const auto n_items = static_cast<std::int64_t>(plan.items.size());
  // Waking a team costs tens of microseconds (and spinning workers steal the core on a
  // busy machine): small batches run on the calling thread.
  double total_cost = 0.0;
  for (const WorkItem& it : plan.items) total_cost += it.cost;
  const bool parallel = nthreads > 1 && n_items > 1 && total_cost > kParallelCost;

#pragma omp parallel num_threads(nthreads) if (parallel)
  {
    void* buffer = thread_buffer<kScratchTag>(scratch);
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t i = 0; i < n_items; ++i) {
      const WorkItem& it = plan.items[static_cast<std::size_t>(i)];
      float* slot = it.partial >= 0 ? partials + static_cast<std::size_t>(it.partial) * slot_floats : nullptr;
      process_item(c, it, slot, buffer);
    }
  }
  if (!plan.splits.empty()) merge_splits(c, plan, partials);
}

// out = Σ_i o_i e^{m_i - M} / (Σ_i l_i e^{m_i - M} + e^{sink - M}), M the largest max.
void CpuAttentionImpl::merge_splits(const LayerCtx& c, const WorkPlan& plan, float* partials) const {
  const int D = params_.head_size;
  const std::size_t slot_floats = partial_slot_floats(D);
  std::vector<float> acc(static_cast<std::size_t>(D));
  float* base = partials;
  for (const SplitGroup& g : plan.splits)
    for (int j = 0; j < g.rows.kv_heads; ++j) {
      const WorkItem rows = g.rows.head(j, c.group);
      const int heads = rows.head_end - rows.head_begin;
      auto part = [&](int i) { return partial_for(base + static_cast<std::size_t>(g.first_slot + i) * slot_floats, D, j); };
      for (int r = 0; r < rows.num_rows(); ++r) {
        const int token = rows.token_begin + r / heads;
        const int head = rows.head_begin + r % heads;
        float M = -std::numeric_limits<float>::infinity();
        for (int i = 0; i < g.count; ++i)
          if (part(i).l[r] > 0.0f) M = std::max(M, part(i).m[r]);
        if (c.sinks) M = std::max(M, c.sinks[head]);
        std::fill(acc.begin(), acc.end(), 0.0f);
        float denom = 0.0f;
        for (int i = 0; i < g.count; ++i) {
          const PartialView pv = part(i);
          if (pv.l[r] <= 0.0f) continue;
          const float w = std::exp(pv.m[r] - M);
          denom += pv.l[r] * w;
          const float* o = pv.o + static_cast<std::size_t>(r) * static_cast<std::size_t>(D);
          for (int d = 0; d < D; ++d) acc[static_cast<std::size_t>(d)] += o[d] * w;
        }
        if (c.sinks) denom += std::exp(c.sinks[head] - M);
        const float inv = denom > 0.0f ? 1.0f / denom : 0.0f;
        const std::int64_t out_base = token * c.o_stride[0] + head * c.o_stride[1];
        for (int d = 0; d < D; ++d)
          store_activation(c.q_type, c.out, out_base + d, acc[static_cast<std::size_t>(d)] * inv);
      }
    }
}

void CpuAttentionImpl::write_kv_cache(const TensorView& key, const TensorView& value, const KVCacheView& cache,
                                      const AttentionMetadata& md) const {
  const LayerParams& p = params_;
  validate_cache_write_args(p, key, value, cache, md);
  check_cpu_tensors({&key, &value, &cache.key, &cache.value});
  check_block_size(cache);
  const CacheEncoding enc = cache_encoding(p.kv_cache_dtype, key.dtype);
  // x * (1/scale) in float, the head's scale when the layer has per-head scales.
  std::vector<float> k_inv(static_cast<std::size_t>(p.num_kv_heads), 1.0f), v_inv(k_inv);
  if (enc.quantized)
    for (int h = 0; h < p.num_kv_heads; ++h) {
      k_inv[static_cast<std::size_t>(h)] = 1.0f / key_scale(p, h);
      v_inv[static_cast<std::size_t>(h)] = 1.0f / value_scale(p, h);
    }
  const std::int64_t bs = cache.block_size();
  const int D = p.head_size;
  const std::size_t out_bytes = element_size(enc.stored);
  const bool copy = key.dtype == enc.stored;  // same type: a row copy
  const int tokens = md.num_actual_tokens;
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
        case ScalarType::fp8_e4m3: out[d] = float_to_fp8(x * inv, Fp8Format::e4m3); break;
        case ScalarType::fp8_e5m2: out[d] = float_to_fp8(x * inv, Fp8Format::e5m2); break;
        default: store_activation(enc.stored, out, d, x); break;
      }
    }
  };
  // Writing is a copy: a team only pays off for large batches (~1 MB of cache).
  const bool parallel = static_cast<std::int64_t>(tokens) * p.num_kv_heads * D >= (std::int64_t{1} << 18);
#pragma omp parallel for schedule(static) num_threads(threads()) if (parallel)
  for (int i = 0; i < tokens; ++i) {
    const std::int64_t slot = md.slot_mapping[static_cast<std::size_t>(i)];
    if (slot < 0) continue;
    for (int h = 0; h < p.num_kv_heads; ++h) {
      write_row(key, cache.key, i, h, slot, k_inv[static_cast<std::size_t>(h)]);
      write_row(value, cache.value, i, h, slot, v_inv[static_cast<std::size_t>(h)]);
    }
  }
}

}  // namespace

std::span<const int> supported_head_sizes() { return kHeadSizes; }

std::unique_ptr<AttentionImpl> make_cpu_attention_impl(const LayerParams& params, CpuAttentionOptions options) {
  return std::make_unique<CpuAttentionImpl>(params, options);
}

std::string cpu_attention_isa(ScalarType dtype, const std::string& kv_cache_dtype, CpuAttentionOptions options) {
  LayerCtx c;
  const KvType kv = kv_type_of(cache_encoding(kv_cache_dtype, dtype).stored);
  c.bf16_dot = options.allow_bf16_dot && dtype == ScalarType::bf16 && kv != KvType::f32 && kv != KvType::f16 &&
               cpu_has_bf16_dot();
  return kernel_target_name(c);
}

}  // namespace attnsel::kernel::cpu
