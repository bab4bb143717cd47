// FLASH_ATTN's CUDA kernels, as the backend and the tools see them.
//
// With CUDA built (ATTNSEL_HAVE_CUDA), make_flash_attn_cuda_impl returns an AttentionImpl
// that runs attnsel's own kernels: a split-KV decode kernel with a log-sum-exp merge, a
// FlashAttention-2-style mma.sync prefill kernel (sm_80+), a TMA + wgmma prefill kernel
// (sm_90a), and the cache writer. Without CUDA, or without a device, every entry point says
// why. Tensors and the cache live on the device; AttentionMetadata stays on the host (it is
// validated there and uploaded once per step plan, see kernel.hpp).
//
// Thread-safety: the free functions are safe to call from any thread; a FlashAttnCuda is
// immutable after construction and its const methods may run concurrently.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "attnsel/facts.hpp"
#include "attnsel/kernel.hpp"
#include "attnsel/selector_config.hpp"
#include "kernels/device/cuda/device_memory.hpp"

namespace attnsel::kernel::cuda {

/// FLASH_ATTN's kernel implementation. Throws NotImplementedError when the kernels cannot
/// run here, ValueError when the layer asks for something they do not compute.
std::unique_ptr<AttentionImpl> make_flash_attn_cuda_impl(const LayerParams& params);

/// What FLASH_ATTN declares for this configuration but the kernels do not compute yet, one
/// explicit reason each (empty = covered).
std::vector<std::string> flash_attn_cuda_gaps(const AttentionSelectorConfig& config, const RuntimeEnv& env);

/// How the Hopper prefill multiplies with an fp8 (e4m3) cache.
enum class Fp8PrefillProducts {
  /// The environment variable ATTNSEL_CUDA_FP8_PREFILL (e4m3 or f16, read once) if set, else
  /// e4m3.
  automatic,
  /// fp8 wgmma: queries (scaled per row) and probabilities quantised to e4m3, K as stored, V
  /// transposed by the producer warpgroup — FlashAttention-3's fp8 path, which vLLM's
  /// FLASH_ATTN runs on Hopper with an fp8 cache. 1.5× faster than f16 on the H200, at ~14×
  /// the error (rel. L2 ~0.023 against ~0.0016; docs/kernels-fp8.md): the plan says so
  /// (StepPlan::fp8_queries). Head sizes up to 128: above, the prefill takes f16 products
  /// (the plan's summary says which ran).
  e4m3,
  /// K and V widened to f16 exactly by the producer warpgroup; f16 products (exact K and V,
  /// the queries exact in f16): the fp8 cache's own error bound, at 0.65× the e4m3 rate.
  f16,
};

/// The planner's settings. The defaults are what every caller gets; the tests change them
/// to reach paths that their device or their batch would not take.
struct CudaTuning {
  /// decode: split long sequences until the grid fills this many waves (0: no split)
  double split_waves = 1.0;
  /// false: plan as on an sm_80 device (cp.async decode copies, the mma.sync prefill), so
  /// that those kernels run on a Hopper device too
  bool sm90_kernels = true;
  Fp8PrefillProducts fp8_prefill = Fp8PrefillProducts::automatic;  ///< sm_90 prefill on an fp8 cache
};

/// What a plan will launch (for reports and the benchmark).
struct PlanSummary {
  int decode_seqs = 0;
  int decode_ctas = 0;
  int max_splits = 1;
  int merge_rows = 0;          ///< query tokens whose slices are merged
  std::string decode_loads;    ///< "tma", "bulk", "cp.async", or "fp8 tma" / "fp8 cp.async" + ", converted in registers"
  int prefill_seqs = 0;
  int prefill_ctas = 0;
  std::string prefill_kernel;  ///< "sm90-wgmma", "sm80-mma" or "" when there is no prefill
  std::string prefill_products;  ///< sm90-wgmma on an fp8 cache: "e4m3" or "f16"; "" otherwise
  int prefill_variant = 0;     ///< sm90-wgmma: the HopperVariant flags it runs with (hopper_variant)
  int prefill_head_dim = 0;    ///< sm90-wgmma: the head size its products compute (64, 96, 128 or 256)
  bool kv_fp8 = false;         ///< the cache is e4m3 (dequantised with k_scale/v_scale)
  /// An execute with new keys and values appends them inside the decode launch: every
  /// sequence takes the decode kernel, every slot is -1 or its token's block-table position,
  /// and no block a new token goes to is read through another block-table entry.
  bool fused_append = false;
  std::string describe() const;
};

/// What FLASH_ATTN's CUDA kernels are (available only with a usable device): device memory,
/// "CUDA sm_XY on <device>", graph support uniform_batch, NHD layout.
KernelInfo flash_attn_cuda_kernel_info();

/// The implementation. Its step plans own pinned host staging, one device buffer with the
/// batch description and one device workspace for split-KV partials; executes of a plan
/// are launches on the caller's stream and nothing else.
class FlashAttnCuda final : public AttentionImpl {
 public:
  explicit FlashAttnCuda(const LayerParams& params, CudaTuning tuning = {});
  ~FlashAttnCuda() override;

  KernelInfo kernel_info() const override;
  using AttentionImpl::write_kv_cache;  // the step plan's form too
  void write_kv_cache(const TensorView& key, const TensorView& value, const KVCacheView& cache,
                      const AttentionMetadata& md) const override;
  /// A plan (reused between calls, so steady use allocates nothing) and an execute, on the
  /// legacy default stream (asynchronous, like any CUDA launch).
  void forward(const TensorView& query, const KVCacheView& cache, const AttentionMetadata& md,
               const TensorView& output) const override;

  /// What a plan of this implementation will launch (ValueError for another's plan).
  static PlanSummary summary(const StepPlan& plan);

 protected:
  std::unique_ptr<StepPlan> make_plan(const AttentionMetadata& md, const StepShape& shape, Stream stream,
                                      const PlanOptions& options) const override;
  void update_plan(StepPlan& plan, const AttentionMetadata& md, Stream stream) const override;
  void execute_plan(const StepPlan& plan, const TensorView& query, const KVCacheView& cache, const TensorView& output,
                    Stream stream, const TensorView* lse) const override;
  void write_kv_cache_plan(const StepPlan& plan, const TensorView& key, const TensorView& value,
                           const KVCacheView& cache, Stream stream) const override;
  /// Fused into the decode launch where the plan allows it (fused_append in its summary),
  /// else the cache write and then the attention.
  void execute_append_plan(const StepPlan& plan, const TensorView& query, const NewKeysValues& new_kv,
                           const KVCacheView& cache, const TensorView& output, Stream stream,
                           const TensorView* lse) const override;
  const void* plan_maker() const override;

 private:
  struct DeviceConstants;  // sinks, ALiBi slopes, per-head fp8 scales and their inverses, uploaded once
  struct CudaPlan;
  struct ForwardCache;     // the one-call form's reused plan
  void build(CudaPlan& plan, const AttentionMetadata& md, void* stream) const;
  /// The per-layer checks of an execute (lse, alignment and strides), before anything runs.
  void check_launch(const CudaPlan& plan, const TensorView& query, const KVCacheView& cache, const TensorView& output,
                    const TensorView* lse) const;
  /// The attention launches of a plan; `append` (null = none) is written by the decode CTAs.
  void launch(const CudaPlan& plan, const TensorView& query, const KVCacheView& cache, const TensorView& output,
              Stream stream, const TensorView* lse, const NewKeysValues* append) const;

  CudaTuning tuning_;
  std::shared_ptr<const DeviceConstants> constants_;
  std::unique_ptr<ForwardCache> forward_cache_;
};

}  // namespace attnsel::kernel::cuda
