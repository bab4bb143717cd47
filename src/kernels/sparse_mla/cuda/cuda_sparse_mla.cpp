// The sparse MLA CUDA kernel's SparseMlaImpl: the host checks of every call (shared with the
// CPU kernel: kernels/sparse_mla/validation.hpp, kernels/mla/validation.hpp), the plan (the
// batch on the device, the split of each index row, the buffers of execute), then the
// launches (launch.hpp).
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <utility>

#include "attnsel/errors.hpp"
#include "kernels/device/cuda/cuda_error.hpp"
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

const char kSparseMlaPlanMaker = 0;
constexpr std::string_view kKernelName = "attnsel's sparse MLA CUDA kernel";
/// Pieces an index row may be split into (when the batch's CTAs fill less than two waves).
constexpr int kMaxSplits = 64;

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw_cuda_error(static_cast<int>(err), what, "");
}

class CudaSparseMlaPlan final : public StepPlan {
 public:
  kernel::mla::MlaBatch batch;
  SparseMlaPlanOptions options;
  DeviceBatch device;
  int splits = 1, keys_per_split = 0;
  DeviceBuffer partials;  ///< split pieces: part_o [splits, tokens, heads, 512] f32, then part_lse
  std::size_t part_lse_off = 0;
  DeviceBuffer physical;    ///< execute's index rows as cache rows [tokens, topk] i32
  DeviceBuffer q_latent;    ///< execute's absorbed queries [tokens, heads, 576]
  DeviceBuffer latent_out;  ///< execute's latent outputs [tokens, heads, 512]

  std::size_t workspace_bytes() const override {
    return device.bytes() + partials.size() + physical.size() + q_latent.size() + latent_out.size();
  }
  std::string describe() const override {
    return fmt::format(
        "sparse MLA (CUDA mma.sync): {} tokens x {} heads in groups of 16, index rows of {} in {} "
        "piece{}",
        batch.num_actual_tokens, shape().num_heads, keys_per_split * splits, splits, splits == 1 ? "" : "s");
  }
};

class CudaSparseMlaImpl final : public SparseMlaImpl {
 public:
  explicit CudaSparseMlaImpl(const SparseMlaLayerParams& p) : SparseMlaImpl(p) {
    host::validate_sparse_layer(params_, cuda_sparse_mla_limits(), DeviceKind::cuda, kKernelName);
    format_ = host::latent_format(params_);
    if (params_.dtype != ScalarType::bf16 && params_.dtype != ScalarType::f16)
      throw ValueError(
          fmt::format("dtype {} is not computed by {}; supported: bf16, f16 (its products are "
                      "16-bit mma)",
                      to_string(params_.dtype), kKernelName));
    device_ = params_.kv_b_proj.data ? params_.kv_b_proj.device_index : current_device();
    require_sparse_device(device_);
    sms_ = device_multiprocessors(device_);
    if (params_.kv_b_proj.data) split_weights();
    params_.kv_b_proj.data = nullptr;  // the split copies are what the kernel reads; the caller's may go
  }

  KernelInfo kernel_info() const override { return cuda_sparse_mla_info(); }
  SparseMlaKernelLimits limits() const override { return cuda_sparse_mla_limits(); }

  std::unique_ptr<StepPlan> plan(const AttentionMetadata& md, const TensorView& cache, Stream stream,
                                 const SparseMlaPlanOptions& options) const override {
    validate_cache(cache);
    host::check_decode_query_len("SparseMlaPlanOptions::decode_query_len", options.decode_query_len, kKernelName,
                                 limits().max_decode_query_len);
    auto plan = std::make_unique<CudaSparseMlaPlan>();
    plan->options = options;
    build(*plan, md, cache, stream);
    return plan;
  }

  void update(StepPlan& base, const AttentionMetadata& md, Stream stream) const override {
    CudaSparseMlaPlan& plan = own(base);
    build(plan, md, planned_geometry(plan.shape()), stream);
  }

  void write_cache(const StepPlan& base, const TensorView& kv_c, const TensorView& k_pe, const TensorView& cache,
                   Stream stream) const override {
    const CudaSparseMlaPlan& plan = own(base);
    mla_host::check_latent_write_inputs(plan.shape(), params_.dims, params_.dtype, kv_c, k_pe);
    check_cache(plan, cache);
    mla_host::check_no_overlap(cache, "cache", kv_c, "kv_c");
    mla_host::check_no_overlap(cache, "cache", k_pe, "k_pe");
    require_aligned(k_pe, "k_pe", 4);  // fp8_ds_mla copies the rope key in 4-byte words
    LatentWriteParams w;
    w.kv_c = kv_c.data;
    w.kv_c_stride = kv_c.stride[0];
    w.k_pe = k_pe.data;
    w.k_pe_stride = k_pe.stride[0];
    w.cache = cache.data;
    w.cache_row_stride = cache.stride[1];
    w.slots = plan.device.slots();
    w.tokens = plan.batch.num_actual_tokens;
    const DeviceScope scope(device_);
    launch_latent_write(w, params_.dtype, cache_kind(), stream.native);
  }

  void physical_indices(const StepPlan& base, const TensorView& local, const TensorView& physical,
                        Stream stream) const override {
    const CudaSparseMlaPlan& plan = own(base);
    const int T = plan.batch.num_actual_tokens;
    mla_host::check_tensor(local, "local", {T, params_.topk}, ScalarType::i32, plan.shape());
    mla_host::check_tensor(physical, "physical", {T, params_.topk}, ScalarType::i32, plan.shape());
    mla_host::check_no_overlap(physical, "physical", local, "local");
    const DeviceScope scope(device_);
    to_physical(plan, local.as<std::int32_t>(), local.stride[0], physical.as<std::int32_t>(), physical.stride[0],
                stream);
  }

  void execute(const StepPlan& base, const TensorView& q, const TensorView& indices, const TensorView& cache,
               const TensorView& output, Stream stream) const override {
    const CudaSparseMlaPlan& plan = own(base);
    if (!w_uk_.data())
      throw ValueError(
          "execute needs the layer's kv_b_proj (SparseMlaLayerParams::kv_b_proj had no data when the "
          "implementation was made: such a layer runs attend_latent only)");
    const MlaDims& d = params_.dims;
    const int T = plan.batch.num_actual_tokens;
    mla_host::check_tensor(q, "q", {T, d.num_heads, d.qk_head_size()}, params_.dtype, plan.shape());
    mla_host::check_tensor(indices, "indices", {T, params_.topk}, ScalarType::i32, plan.shape());
    mla_host::check_tensor(output, "output", {T, d.num_heads, d.v_head_dim}, params_.dtype, plan.shape());
    check_cache(plan, cache);
    for (const auto& [input, name] : {std::pair{&q, "q"}, std::pair{&indices, "indices"}, std::pair{&cache, "cache"}})
      mla_host::check_no_overlap(output, "output", *input, name);
    if (T == 0) return;
    const DeviceScope scope(device_);
    void* s = stream.native;
    auto* physical = static_cast<std::int32_t*>(plan.physical.data());
    to_physical(plan, indices.as<std::int32_t>(), indices.stride[0], physical, params_.topk, stream);

    // q_latent = [q_nope · W_UK | q_pe], rounded to the activation dtype.
    const std::int64_t N = d.num_heads;
    HeadGemmParams absorb;
    absorb.a = q.data;
    absorb.a_token_stride = q.stride[0];
    absorb.a_head_stride = q.stride[1];
    absorb.b = w_uk_.data();
    absorb.c = plan.q_latent.data();
    absorb.c_token_stride = N * kLatentDim;
    absorb.c_head_stride = kLatentDim;
    absorb.tokens = T;
    absorb.heads = d.num_heads;
    absorb.k = d.qk_nope_head_dim;
    absorb.n = d.kv_lora_rank;
    launch_head_gemm(absorb, params_.dtype, s);
    RowCopyParams rope;
    rope.src = static_cast<const std::uint8_t*>(q.data) + d.qk_nope_head_dim * element_size(params_.dtype);
    rope.src_token_stride = q.stride[0];
    rope.src_head_stride = q.stride[1];
    rope.dst = static_cast<std::uint8_t*>(plan.q_latent.data()) + d.kv_lora_rank * element_size(params_.dtype);
    rope.dst_token_stride = N * kLatentDim;
    rope.dst_head_stride = kLatentDim;
    rope.tokens = T;
    rope.heads = d.num_heads;
    rope.cols = d.qk_rope_head_dim;
    launch_row_copy(rope, params_.dtype, s);

    LatentAttendParams a = attend_params(plan, cache);
    a.q = plan.q_latent.data();
    a.q_token_stride = N * kLatentDim;
    a.q_head_stride = kLatentDim;
    a.indices = physical;
    a.indices_stride = params_.topk;
    a.out = plan.latent_out.data();
    a.out_token_stride = N * kValueDim;
    a.out_head_stride = kValueDim;
    attend(a, s);

    // output = latent_out · W_UV.
    HeadGemmParams up;
    up.a = plan.latent_out.data();
    up.a_token_stride = N * kValueDim;
    up.a_head_stride = kValueDim;
    up.b = w_uv_t_.data();
    up.c = output.data;
    up.c_token_stride = output.stride[0];
    up.c_head_stride = output.stride[1];
    up.tokens = T;
    up.heads = d.num_heads;
    up.k = d.kv_lora_rank;
    up.n = d.v_head_dim;
    launch_head_gemm(up, params_.dtype, s);
  }

  void attend_latent(const StepPlan& base, const TensorView& q_latent, const TensorView& indices,
                     const TensorView& cache, const TensorView& out, Stream stream,
                     const TensorView* lse) const override {
    const CudaSparseMlaPlan& plan = own(base);
    const MlaDims& d = params_.dims;
    const int T = plan.batch.num_actual_tokens;
    mla_host::check_tensor(q_latent, "q_latent", {T, d.num_heads, d.latent_size()}, params_.dtype, plan.shape());
    mla_host::check_tensor(indices, "indices", {T, params_.topk}, ScalarType::i32, plan.shape());
    mla_host::check_tensor(out, "out", {T, d.num_heads, d.kv_lora_rank}, params_.dtype, plan.shape());
    check_cache(plan, cache);
    for (const auto& [input, name] :
         {std::pair{&q_latent, "q_latent"}, std::pair{&indices, "indices"}, std::pair{&cache, "cache"}})
      mla_host::check_no_overlap(out, "out", *input, name);
    require_aligned(q_latent, "q_latent", 16);  // cp.async copies 16 bytes
    require_aligned(out, "out", 4);             // stored in pairs
    if (lse) {
      if (!plan.lse())
        throw ValueError("attend_latent with an lse output needs a plan built with SparseMlaPlanOptions::lse");
      mla_host::check_tensor(*lse, "lse", {T, d.num_heads}, ScalarType::f32, plan.shape());
      for (const auto& [input, name] : {std::pair{&q_latent, "q_latent"}, std::pair{&indices, "indices"},
                                        std::pair{&cache, "cache"}, std::pair{&out, "out"}})
        mla_host::check_no_overlap(*lse, "lse", *input, name);
    }
    if (T == 0) return;
    const DeviceScope scope(device_);
    LatentAttendParams a = attend_params(plan, cache);
    a.q = q_latent.data;
    a.q_token_stride = q_latent.stride[0];
    a.q_head_stride = q_latent.stride[1];
    a.indices = indices.as<std::int32_t>();
    a.indices_stride = indices.stride[0];
    a.out = out.data;
    a.out_token_stride = out.stride[0];
    a.out_head_stride = out.stride[1];
    if (lse) {
      a.lse = lse->as<float>();
      a.lse_token_stride = lse->stride[0];
    }
    attend(a, stream.native);
  }

 private:
  // The current device (0 when there is none: require_sparse_device then says why).
  static int current_device() {
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) device = 0;
    return device;
  }

  LatentCache cache_kind() const { return format_.ds_mla ? LatentCache::ds_mla : LatentCache::b16; }

  CudaSparseMlaPlan& own(const StepPlan& base) const {
    if (plan_maker(base) != &kSparseMlaPlanMaker)
      throw ValueError("this plan was not made by a CUDA sparse MLA implementation: build it with this layer's plan()");
    auto& plan = const_cast<CudaSparseMlaPlan&>(static_cast<const CudaSparseMlaPlan&>(base));
    const StepShape& s = plan.shape();
    if (s.num_heads != params_.dims.num_heads || s.dtype != params_.dtype ||
        s.batch_invariant != params_.batch_invariant || s.device_index != device_)
      throw ValueError(fmt::format(
          "the layer ({} heads, {}{}, cuda:{}) is not in the plan's group ({} heads, {}{}, "
          "cuda:{}): build one plan per KV-cache group",
          params_.dims.num_heads, to_string(params_.dtype), params_.batch_invariant ? ", batch-invariant" : "", device_,
          s.num_heads, to_string(s.dtype), s.batch_invariant ? ", batch-invariant" : "", s.device_index));
    return plan;
  }

  void validate_cache(const TensorView& cache) const {
    host::validate_latent_cache(params_, cache, DeviceKind::cuda);
    if (cache.device_index != device_)
      throw ValueError(
          fmt::format("cache is on cuda:{} but the layer's weights are on cuda:{}", cache.device_index, device_));
    require_aligned(cache, "cache", 16);
    if (cache.shape[0] * cache.shape[1] > std::numeric_limits<std::int32_t>::max())
      throw ValueError(fmt::format("cache {} holds more than 2^31 - 1 rows: index rows are int32", cache.describe()));
  }

  void check_cache(const CudaSparseMlaPlan& plan, const TensorView& cache) const {
    validate_cache(cache);
    mla_host::check_planned_cache(cache, plan.shape());
  }

  static TensorView planned_geometry(const StepShape& shape) {
    TensorView g;  // the plan's cache geometry (its data is not read)
    g.ndim = 3;
    g.dtype = shape.cache_dtype;
    g.device = DeviceKind::cuda;
    g.device_index = shape.device_index;
    for (int d : {0, 1}) {
      g.shape[d] = shape.cache_shape[d];
      g.stride[d] = shape.key_strides[d];
    }
    g.shape[2] = shape.cache_shape[3];
    g.stride[2] = 1;
    return g;
  }

  void build(CudaSparseMlaPlan& plan, const AttentionMetadata& md, const TensorView& cache, Stream stream) const {
    MlaPlanOptions batch_options;
    batch_options.decode_query_len = plan.options.decode_query_len;
    MlaKernelLimits batch_limits;
    batch_limits.max_decode_query_len = limits().max_decode_query_len;
    batch_limits.max_heads = limits().max_heads;
    mla_host::build_batch(plan.batch, md, cache, batch_options, batch_limits, kernel::mla::kNoContextChunks);
    const int T = plan.batch.num_actual_tokens;
    const int N = params_.dims.num_heads;
    const DeviceScope scope(device_);
    plan.device.upload(plan.batch, stream);

    // Split each index row when the CTAs (a token's groups of 16 heads) fill less than two
    // waves of the device; a batch-invariant layer never splits (its result would depend
    // on the batch's size).
    const int chunks = (params_.topk + kKeyChunk - 1) / kKeyChunk;
    const std::int64_t ctas = std::int64_t(T) * ((N + kHeadGroup - 1) / kHeadGroup);
    int splits = 1;
    if (!params_.batch_invariant && ctas > 0 && ctas < 2 * std::int64_t(sms_))
      splits = static_cast<int>(std::min<std::int64_t>({chunks, (2 * sms_ + ctas - 1) / ctas, kMaxSplits}));
    plan.keys_per_split = (chunks + splits - 1) / splits * kKeyChunk;
    plan.splits = (params_.topk + plan.keys_per_split - 1) / plan.keys_per_split;

    const auto rows = static_cast<std::size_t>(T) * static_cast<std::size_t>(N);
    if (plan.splits > 1) {
      plan.part_lse_off = static_cast<std::size_t>(plan.splits) * rows * kValueDim * sizeof(float);
      reserve(plan.partials, plan.part_lse_off + static_cast<std::size_t>(plan.splits) * rows * sizeof(float));
    }
    reserve(plan.physical, static_cast<std::size_t>(T) * static_cast<std::size_t>(params_.topk) * 4);
    const std::size_t es = element_size(params_.dtype);
    reserve(plan.q_latent, rows * kLatentDim * es);
    reserve(plan.latent_out, rows * kValueDim * es);
    set_plan_fields(plan, host::step_shape(plan.batch, params_.dtype, N, cache, params_.batch_invariant),
                    plan.options.lse, &kSparseMlaPlanMaker);
  }

  LatentAttendParams attend_params(const CudaSparseMlaPlan& plan, const TensorView& cache) const {
    LatentAttendParams a;
    a.topk = params_.topk;
    a.cache = cache.data;
    a.cache_row_stride = cache.stride[1];
    a.cache_rows = cache.shape[0] * cache.shape[1];
    a.tokens = plan.batch.num_actual_tokens;
    a.heads = params_.dims.num_heads;
    a.scale_log2 = params_.scale * 1.4426950408889634f;
    a.splits = plan.splits;
    a.keys_per_split = plan.keys_per_split;
    if (plan.splits > 1) {
      a.part_o = static_cast<float*>(plan.partials.data());
      a.part_lse = reinterpret_cast<float*>(static_cast<std::uint8_t*>(plan.partials.data()) + plan.part_lse_off);
    }
    return a;
  }

  void attend(const LatentAttendParams& a, void* stream) const {
    launch_latent_attend(a, params_.dtype, cache_kind(), stream);
    if (a.splits > 1) launch_latent_combine(a, params_.dtype, stream);
  }

  void to_physical(const CudaSparseMlaPlan& plan, const std::int32_t* local, std::int64_t local_stride,
                   std::int32_t* physical, std::int64_t physical_stride, Stream stream) const {
    PhysicalParams p;
    p.local = local;
    p.local_stride = local_stride;
    p.physical = physical;
    p.physical_stride = physical_stride;
    p.token_seq = plan.device.token_seq();
    p.seq_lens = plan.device.seq_lens();
    p.block_table = plan.device.block_table();
    p.table_stride = plan.batch.max_blocks_per_seq;
    p.block_size = plan.batch.block_size;
    p.tokens = plan.batch.num_actual_tokens;
    p.topk = params_.topk;
    launch_physical_indices(p, stream.native);
  }

  // kv_b_proj split into W_UK [heads, 128, 512] and W_UVᵀ [heads, 512, 128] (device copies).
  void split_weights() {
    const DeviceScope scope(device_);
    const MlaDims& d = params_.dims;
    const std::size_t es = element_size(params_.dtype);
    const auto heads = static_cast<std::size_t>(d.num_heads);
    w_uk_ = DeviceBuffer(heads * static_cast<std::size_t>(d.qk_nope_head_dim * d.kv_lora_rank) * es);
    w_uv_t_ = DeviceBuffer(heads * static_cast<std::size_t>(d.kv_lora_rank * d.v_head_dim) * es);
    SplitWeightsParams s;
    s.kv_b_proj = params_.kv_b_proj.data;
    s.row_stride = params_.kv_b_proj.stride[0];
    s.w_uk = w_uk_.data();
    s.w_uv_t = w_uv_t_.data();
    s.heads = d.num_heads;
    s.nope = d.qk_nope_head_dim;
    s.v = d.v_head_dim;
    s.latent = d.kv_lora_rank;
    launch_split_weights(s, params_.dtype, nullptr);
    // The caller may free kv_b_proj once the implementation is made.
    check(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize (sparse MLA weight split)");
  }

  host::LatentFormat format_;
  int device_ = 0;
  int sms_ = 1;
  DeviceBuffer w_uk_, w_uv_t_;
};

}  // namespace

SparseMlaKernelLimits cuda_sparse_mla_limits() { return SparseMlaKernelLimits{}; }

std::unique_ptr<SparseMlaImpl> make_cuda_sparse_mla_impl(const SparseMlaLayerParams& params) {
  return std::make_unique<CudaSparseMlaImpl>(params);
}

KernelInfo cuda_sparse_mla_info() {
  KernelInfo k = sparse_device_kernel_info();
  k.lse_output = true;  // SparseMlaImpl::attend_latent's
  return k;
}

}  // namespace attnsel::kernel::cuda::sparse_mla
