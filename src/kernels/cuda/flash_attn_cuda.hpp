// FLASH_ATTN's CUDA kernels, as the backend and the tools see them.
//
// With CUDA built (ATTNSEL_HAVE_CUDA), make_flash_attn_cuda_impl returns an AttentionImpl
// that runs attnsel's own kernels: a split-KV decode kernel with a log-sum-exp merge, a
// FlashAttention-2-style mma.sync prefill kernel (sm_80+), a TMA + wgmma prefill kernel
// (sm_90a), and the cache writer. Without CUDA, or without a device, every entry point says
// why. Tensors and the cache live on the device; AttentionMetadata stays on the host (it is
// validated there and uploaded once per call — or once per plan, see FlashAttnCuda::plan).
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

namespace attnsel::kernel::cuda {

/// True when this build contains the CUDA kernels.
bool cuda_kernels_built();
/// Empty when the kernels can run here; else why not ("attnsel was built without CUDA
/// (nvcc not found)", "no CUDA device: ...").
std::string cuda_kernels_unavailable_reason();

/// FLASH_ATTN's kernel implementation. Throws NotImplementedError when the kernels cannot
/// run here, ValueError when the layer asks for something they do not compute.
std::unique_ptr<AttentionImpl> make_flash_attn_cuda_impl(const LayerParams& params);

/// What FLASH_ATTN declares for this configuration but the kernels do not compute yet, one
/// explicit reason each (empty = covered).
std::vector<std::string> flash_attn_cuda_gaps(const AttentionSelectorConfig& config, const RuntimeEnv& env);

/// How the decode kernel fills shared memory (16-bit caches; fp8 caches always use cp.async).
enum class DecodeCopies {
  automatic,  ///< the measured best where it applies: TMA boxes on sm_90, else cp.async
  cp_async,   ///< 16-byte cp.async per thread (any sm_80+)
  bulk_rows,  ///< sm_90: one bulk copy per key row
  tma_boxes,  ///< sm_90: one TMA box per page slice and 64 columns (head size padded to 64s)
};

/// Planner knobs (defaults are the tuned values; the benchmark sweeps them).
struct CudaTuning {
  double split_waves = 1.0;   ///< decode: split long sequences until the grid fills this many waves
  int min_split_keys = 256;   ///< decode: never cut a sequence into slices shorter than this
  int decode_max_rows = 64;   ///< query tokens × group up to this take the split-KV kernel
  bool use_hopper = true;     ///< use the sm_90a prefill kernel where it applies
  DecodeCopies decode_copies = DecodeCopies::automatic;  ///< falls back where a choice cannot apply
  int split_align_keys = 16;  ///< decode: key slices start on multiples of this (a power of 2)
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
  bool kv_fp8 = false;         ///< the cache is e4m3 (dequantised with k_scale/v_scale)
  std::string describe() const;
};

/// The implementation, with a plan/run split so a benchmark can time the kernels alone.
class FlashAttnCuda final : public AttentionImpl {
 public:
  explicit FlashAttnCuda(const LayerParams& params, CudaTuning tuning = {});
  ~FlashAttnCuda() override;

  void write_kv_cache(const TensorView& key, const TensorView& value, const KVCacheView& cache,
                      const AttentionMetadata& md) const override;
  /// plan + run on the default stream (asynchronous, like any CUDA launch).
  void forward(const TensorView& query, const KVCacheView& cache, const AttentionMetadata& md,
               const TensorView& output) const override;

  struct Plan;
  /// Validates every argument on the host, splits the work, uploads the batch description.
  std::shared_ptr<const Plan> plan(const TensorView& query, const KVCacheView& cache, const AttentionMetadata& md,
                                   const TensorView& output) const;
  /// Launches the kernels of a plan (the tensors it was made with must still be alive).
  void run(const Plan& plan) const;
  static PlanSummary summary(const Plan& plan);

 private:
  struct DeviceConstants;  // sinks and ALiBi slopes, uploaded once
  CudaTuning tuning_;
  std::shared_ptr<const DeviceConstants> constants_;
};

}  // namespace attnsel::kernel::cuda
