// The lightning indexer's CUDA IndexerImpl: the host checks of every call (shared with the
// CPU indexer: kernels/sparse_mla/validation.hpp, kernels/mla/validation.hpp), the plan (the
// batch on the device, the waves of query tokens whose scores fit the logits budget, their
// buffers), then the launches (launch.hpp).
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "attnsel/errors.hpp"
#include "kernels/device/cuda/device_memory.hpp"
#include "kernels/mla/validation.hpp"
#include "kernels/sparse_mla/cuda/device_batch.hpp"
#include "kernels/sparse_mla/cuda/launch.hpp"
#include "kernels/sparse_mla/cuda/sparse_mla_cuda.hpp"
#include "kernels/sparse_mla/validation.hpp"
#include "kernels/mla/batch.hpp"

namespace attnsel::kernel::cuda::sparse_mla {

namespace host = ::attnsel::kernel::sparse_mla;
namespace mla_host = ::attnsel::kernel::mla;

namespace {

const char kIndexerPlanMaker = 0;
/// Bytes of fp32 scores a wave holds when IndexerPlanOptions::logits_bytes is 0 (the CPU
/// indexer's default).
constexpr std::int64_t kDefaultLogitsBytes = std::int64_t{256} << 20;
/// The scores' grid holds a request's positions in 64-position CTAs along its second axis.
constexpr std::int64_t kMaxPositions = std::int64_t{65535} * 64;

/// Query tokens [begin, end) scored at once; `width` the most positions one of them sees.
struct Wave {
  int begin = 0, end = 0;
  std::int64_t width = 0;
};

class CudaIndexerPlan final : public StepPlan {
 public:
  kernel::mla::MlaBatch batch;
  IndexerPlanOptions options;
  DeviceBatch device;
  std::vector<Wave> waves;
  int max_wave_tokens = 0;
  std::int64_t logits_stride = 0;  ///< floats per row of `logits` (>= max_seq_len)
  DeviceBuffer logits;             ///< a wave's scores [max_wave_tokens, logits_stride] f32
  DeviceBuffer q8;                 ///< a wave's quantised queries [max_wave_tokens, heads, 128] bf16
  DeviceBuffer w_eff;              ///< their weights [max_wave_tokens, heads] f32

  std::size_t workspace_bytes() const override { return device.bytes() + logits.size() + q8.size() + w_eff.size(); }
  std::string describe() const override {
    return fmt::format("lightning indexer (CUDA mma.sync): {} tokens in {} wave{} of at most {}",
                       batch.num_actual_tokens, waves.size(), waves.size() == 1 ? "" : "s", max_wave_tokens);
  }
};

class CudaIndexerImpl final : public IndexerImpl {
 public:
  explicit CudaIndexerImpl(const IndexerLayerParams& p) : IndexerImpl(p) {
    host::validate_indexer_layer(params_, cuda_indexer_limits());
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) device = 0;
    require_sparse_device(device);
  }

  KernelInfo kernel_info() const override { return cuda_indexer_info(); }
  IndexerKernelLimits limits() const override { return cuda_indexer_limits(); }

  std::unique_ptr<StepPlan> plan(const AttentionMetadata& md, const TensorView& key_cache, Stream stream,
                                 const IndexerPlanOptions& options) const override {
    validate_cache(key_cache);
    host::check_indexer_plan_options(options, limits(), "the CUDA indexer");
    auto plan = std::make_unique<CudaIndexerPlan>();
    plan->options = options;
    build(*plan, md, key_cache, stream);
    return plan;
  }

  void update(StepPlan& base, const AttentionMetadata& md, Stream stream) const override {
    CudaIndexerPlan& plan = own(base);
    build(plan, md, host::planned_key_cache_geometry(plan.shape(), DeviceKind::cuda), stream);
  }

  void write_cache(const StepPlan& base, const TensorView& k, const TensorView& key_cache,
                   Stream stream) const override {
    const CudaIndexerPlan& plan = own(base);
    mla_host::require_slot_mapping(plan.shape());
    mla_host::check_tensor(k, "k", {plan.batch.num_actual_tokens, params_.head_dim}, params_.dtype, plan.shape());
    check_cache(plan, key_cache);
    mla_host::check_no_overlap(key_cache, "key_cache", k, "k");
    KeyWriteParams w;
    w.k = k.data;
    w.k_stride = k.stride[0];
    w.cache = static_cast<std::uint8_t*>(key_cache.data);
    w.block_stride = key_cache.stride[0];
    w.block_size = static_cast<int>(key_cache.shape[1]);
    w.slots = plan.device.slots();
    w.tokens = plan.batch.num_actual_tokens;
    const DeviceScope scope(plan.shape().device_index);
    launch_key_write(w, params_.dtype, stream.native);
  }

  void logits(const StepPlan& base, const TensorView& q, const TensorView& weights, const TensorView& key_cache,
              const TensorView& logits, Stream stream) const override {
    const CudaIndexerPlan& plan = own(base);
    host::check_indexer_inputs(params_, q, weights, plan.shape());
    check_cache(plan, key_cache);
    const int T = plan.batch.num_actual_tokens;
    const std::int64_t width = std::max(plan.batch.max_seq_len, 1);
    if (logits.ndim != 2 || logits.shape[0] < T || logits.shape[1] < width || logits.dtype != ScalarType::f32 ||
        logits.device != DeviceKind::cuda || logits.device_index != plan.shape().device_index ||
        (logits.shape[1] > 1 && logits.stride[1] != 1) || logits.stride[0] < 0)
      throw ValueError(
          fmt::format("logits must be f32 [>= {}, >= {}] (tokens, max_seq_len) on cuda:{} with unit "
                      "stride in its last dimension, got {}",
                      T, width, plan.shape().device_index, logits.describe()));
    if (logits.shape[1] > kMaxPositions)
      throw ValueError(fmt::format("logits {} is wider than the {} positions the CUDA indexer writes per row",
                                   logits.describe(), kMaxPositions));
    if (T > 0 && logits.data == nullptr) throw ValueError("logits has a null data pointer");
    for (const auto& [input, name] :
         {std::pair{&q, "q"}, std::pair{&weights, "weights"}, std::pair{&key_cache, "key_cache"}})
      mla_host::check_no_overlap(logits, "logits", *input, name);
    const DeviceScope scope(plan.shape().device_index);
    for (const Wave& wave : plan.waves) {
      quantise(plan, wave, q, weights, stream);
      score(plan, wave, key_cache, logits.as<float>() + std::int64_t(wave.begin) * logits.stride[0], logits.stride[0],
            logits.shape[1], stream);
    }
  }

  void top_k(const StepPlan& base, const TensorView& q, const TensorView& weights, const TensorView& key_cache,
             const TensorView& indices, Stream stream) const override {
    const CudaIndexerPlan& plan = own(base);
    host::check_indexer_inputs(params_, q, weights, plan.shape());
    check_cache(plan, key_cache);
    mla_host::check_tensor(indices, "indices", {plan.batch.num_actual_tokens, params_.topk}, ScalarType::i32,
                           plan.shape());
    for (const auto& [input, name] :
         {std::pair{&q, "q"}, std::pair{&weights, "weights"}, std::pair{&key_cache, "key_cache"}})
      mla_host::check_no_overlap(indices, "indices", *input, name);
    const DeviceScope scope(plan.shape().device_index);
    auto* scores = static_cast<float*>(plan.logits.data());
    for (const Wave& wave : plan.waves) {
      quantise(plan, wave, q, weights, stream);
      score(plan, wave, key_cache, scores, plan.logits_stride, wave.width, stream);
      TopKParams t;
      t.logits = scores;
      t.logits_stride = plan.logits_stride;
      t.row_len = plan.device.row_len();
      t.token_begin = wave.begin;
      t.indices = indices.as<std::int32_t>() + std::int64_t(wave.begin) * indices.stride[0];
      t.indices_stride = indices.stride[0];
      t.tokens = wave.end - wave.begin;
      t.topk = params_.topk;
      launch_top_k(t, stream.native);
    }
  }

 private:
  CudaIndexerPlan& own(const StepPlan& base) const {
    if (plan_maker(base) != &kIndexerPlanMaker)
      throw ValueError("this plan was not made by a CUDA indexer implementation: build it with this layer's plan()");
    auto& plan = const_cast<CudaIndexerPlan&>(static_cast<const CudaIndexerPlan&>(base));
    if (plan.shape().num_heads != params_.num_heads || plan.shape().dtype != params_.dtype)
      throw ValueError(fmt::format(
          "the indexer layer ({} heads, {}) is not in the plan's group ({} heads, {}): build "
          "one plan per layer group",
          params_.num_heads, to_string(params_.dtype), plan.shape().num_heads, to_string(plan.shape().dtype)));
    return plan;
  }

  void check_cache(const CudaIndexerPlan& plan, const TensorView& key_cache) const {
    host::check_planned_key_cache(params_, key_cache, plan.shape(), DeviceKind::cuda);
    require_aligned(key_cache, "key_cache", 4);
  }

  void validate_cache(const TensorView& key_cache) const {
    host::validate_key_cache(params_, key_cache, DeviceKind::cuda);
    require_aligned(key_cache, "key_cache", 4);  // keys are read and written in 4-byte words
  }

  void build(CudaIndexerPlan& plan, const AttentionMetadata& md, const TensorView& key_cache, Stream stream) const {
    MlaPlanOptions batch_options;
    batch_options.decode_query_len = plan.options.decode_query_len;
    MlaKernelLimits batch_limits;
    batch_limits.max_decode_query_len = limits().max_decode_query_len;
    mla_host::build_batch(plan.batch, md, key_cache, batch_options, batch_limits, kernel::mla::kNoContextChunks);
    if (plan.batch.max_seq_len > kMaxPositions)
      throw ValueError(fmt::format("max_seq_len = {}; the CUDA indexer scores at most {} positions per request",
                                   plan.batch.max_seq_len, kMaxPositions));
    const DeviceScope scope(key_cache.device_index);
    plan.device.upload(plan.batch, stream);

    // Waves of query tokens whose scores fit the logits budget (at least one token each).
    const int T = plan.batch.num_actual_tokens;
    plan.logits_stride = std::max(plan.batch.max_seq_len, 1);
    const std::int64_t budget = plan.options.logits_bytes > 0 ? plan.options.logits_bytes : kDefaultLogitsBytes;
    const auto per_wave =
        static_cast<int>(std::clamp<std::int64_t>(budget / (plan.logits_stride * 4), 1, std::max(T, 1)));
    plan.waves.clear();
    const std::vector<std::int32_t>& len = plan.device.host_row_len();
    for (int begin = 0; begin < T; begin += per_wave) {
      Wave w{begin, std::min(T, begin + per_wave), 0};
      for (int t = w.begin; t < w.end; ++t) w.width = std::max<std::int64_t>(w.width, len[static_cast<std::size_t>(t)]);
      plan.waves.push_back(w);
    }
    plan.max_wave_tokens = std::min(per_wave, T);
    const auto wave_tokens = static_cast<std::size_t>(std::max(plan.max_wave_tokens, 1));
    const auto heads = static_cast<std::size_t>(params_.num_heads);
    reserve(plan.logits, wave_tokens * static_cast<std::size_t>(plan.logits_stride) * 4);
    reserve(plan.q8, wave_tokens * heads * kIndexerDim * 2);
    reserve(plan.w_eff, wave_tokens * heads * 4);
    set_plan_fields(plan, host::step_shape(plan.batch, params_.dtype, params_.num_heads, key_cache, false),
                    &kIndexerPlanMaker);
  }

  void quantise(const CudaIndexerPlan& plan, const Wave& wave, const TensorView& q, const TensorView& weights,
                Stream stream) const {
    QueryQuantParams p;
    p.q = static_cast<const std::uint8_t*>(q.data) + wave.begin * q.stride[0] * std::int64_t(element_size(q.dtype));
    p.q_token_stride = q.stride[0];
    p.q_head_stride = q.stride[1];
    p.weights = static_cast<const std::uint8_t*>(weights.data) +
                wave.begin * weights.stride[0] * std::int64_t(element_size(weights.dtype));
    p.weights_stride = weights.stride[0];
    p.weights_f32 = weights.dtype == ScalarType::f32;
    p.q8 = static_cast<std::uint16_t*>(plan.q8.data());
    p.w_eff = static_cast<float*>(plan.w_eff.data());
    p.tokens = wave.end - wave.begin;
    p.heads = params_.num_heads;
    p.weight_scale = static_cast<float>(1.0 / std::sqrt(double(params_.head_dim) * double(params_.num_heads)));
    launch_query_quant(p, params_.dtype, stream.native);
  }

  void score(const CudaIndexerPlan& plan, const Wave& wave, const TensorView& key_cache, float* logits,
             std::int64_t logits_stride, std::int64_t width, Stream stream) const {
    ScoreParams p;
    p.q8 = static_cast<const std::uint16_t*>(plan.q8.data());
    p.w_eff = static_cast<const float*>(plan.w_eff.data());
    p.cache = static_cast<const std::uint8_t*>(key_cache.data);
    p.block_stride = key_cache.stride[0];
    p.block_size = static_cast<int>(key_cache.shape[1]);
    p.token_seq = plan.device.token_seq();
    p.row_len = plan.device.row_len();
    p.block_table = plan.device.block_table();
    p.table_stride = plan.batch.max_blocks_per_seq;
    p.logits = logits;
    p.logits_stride = logits_stride;
    p.width = width;
    p.token_begin = wave.begin;
    p.tokens = wave.end - wave.begin;
    p.heads = params_.num_heads;
    launch_scores(p, stream.native);
  }
};

}  // namespace

IndexerKernelLimits cuda_indexer_limits() {
  IndexerKernelLimits l;
  l.max_topk = kMaxTopK;
  return l;
}

std::unique_ptr<IndexerImpl> make_cuda_indexer_impl(const IndexerLayerParams& params) {
  return std::make_unique<CudaIndexerImpl>(params);
}

KernelInfo cuda_indexer_info() {
  return sparse_device_kernel_info();
}

}  // namespace attnsel::kernel::cuda::sparse_mla
