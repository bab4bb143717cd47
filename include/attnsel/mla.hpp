// Layer: core (src/layers.txt)
// The MLA kernel interface: multi-head latent attention (DeepSeek-V2/V3/V3.2, Kimi-K2), as
// vLLM's MLA layer runs it (vllm/model_executor/layers/attention/mla_attention.py,
// MLACommonImpl) and FlashMLA's kernels compute it (flash_mla/flash_mla_interface.py).
//
// One cached entry per token and layer, shared by every head: the latent
// [kv_c_normed (kv_lora_rank) | k_pe (qk_rope_head_dim)] = 512 + 64 = 576 values, in a paged
// cache [num_blocks, block_size, 576] (vLLM's MLACommonBackend.get_kv_cache_shape). The
// layer's up-projection kv_b_proj ([num_heads · (qk_nope + v_head), kv_lora_rank]) turns a
// latent into each head's key (its 128 "nope" columns, then the shared 64-wide rope key) and
// value (128).
//
// A step's batch is vLLM's: decode requests first (at most MlaPlanOptions::decode_query_len
// query tokens each), then prefills. Per layer:
//   * write_cache — vLLM's concat_and_cache_mla: each new token's latent and rope key into
//                   its slot (-1 skips; fp8 caches hold e4m3(x / k_scale));
//   * execute     — MLACommonImpl.forward without the cache write: the decode requests in
//                   absorbed form (q_nope · W_UK → a 576-wide query over the latent cache,
//                   value = the latent's first 512 entries, then · W_UV), the prefills as
//                   causal MHA over the new tokens (q/k 192, v 128) merged by log-sum-exp with
//                   attention over their cached context, read in chunks and up-projected;
//   * decode_latent — the absorbed decode kernel alone (FlashMLA's flash_mla_with_kvcache):
//                   576-wide queries of the plan's decode tokens, 512-wide outputs and LSE.
// Query j of a request with L cached tokens (this step's included) and s_q query tokens sees
// keys [0, L - s_q + j] (causal among the new tokens). The softmax scale is the model's
// (MlaLayerParams::scale, yarn mscale included), the same in every path.
//
// Plans are StepPlans (kernel.hpp): built once per step for the layers that share a cache
// geometry, updated in place, read by every layer's calls. Tensors are TensorViews in the
// kernel's memory (KernelInfo::device). Every check runs on the host before memory is
// touched; violations throw ValueError naming the argument.
// Thread-safety: an MlaImpl is immutable after construction; its const methods may run
// concurrently on distinct outputs and plans (update() must not overlap a plan's users).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "attnsel/cache_dtype.hpp"
#include "attnsel/export.hpp"
#include "attnsel/kernel.hpp"

namespace attnsel::kernel {

/// One MLA layer's dimensions on this rank (vLLM's MLACommonImpl attributes): a model's
/// config.json after tensor parallelism (heads divided by the TP size; the latent is never
/// sharded).
struct ATTNSEL_API MlaDims {
  int num_heads = 0;           ///< query heads on this rank
  int kv_lora_rank = 512;      ///< latent width: the absorbed decode's value width
  int qk_rope_head_dim = 64;   ///< the shared rotary key's width
  int qk_nope_head_dim = 128;  ///< each head's non-rotary query and key width
  int v_head_dim = 128;        ///< each head's value width after the up-projection
  int latent_size() const { return kv_lora_rank + qk_rope_head_dim; }       ///< one cached entry (576)
  int qk_head_size() const { return qk_nope_head_dim + qk_rope_head_dim; }  ///< the MHA query/key width (192)
};

/// One MLA layer's parameters, fixed when its implementation is made.
struct ATTNSEL_API MlaLayerParams {
  MlaDims dims;
  /// The activation dtype: queries, outputs, the new tokens' latents and kv_b_proj.
  ScalarType dtype = ScalarType::bf16;
  /// The softmax scale: qk_head_size^-0.5, times mscale² for yarn rope scaling
  /// (vllm/model_executor/models/deepseek_v2.py, DeepseekV2MLAAttention).
  float scale = 0.0f;
  /// auto / bfloat16 / float16: the model dtype; fp8 / fp8_e4m3: e4m3 bytes with one
  /// per-tensor scale (k_scale) covering the latent and the rope key.
  CacheDType kv_cache_dtype = CacheDType::auto_;
  float k_scale = 1.0f;  ///< fp8 caches: stored = e4m3(x / k_scale), read back as stored · k_scale
  /// VLLM_BATCH_INVARIANT: a request's output does not depend on the rest of the batch.
  bool batch_invariant = false;
  /// kv_b_proj.weight for this rank's heads, [num_heads · (qk_nope_head_dim + v_head_dim),
  /// kv_lora_rank] (out × in, as vLLM's ColumnParallelLinear holds it: head n's rows are
  /// its qk_nope key rows, then its v rows), of the activation dtype, in the kernel's memory.
  /// The implementation derives W_UK and W_UV from it when it is made (vLLM's
  /// process_weights_after_loading) and keeps no pointer to it. Null data: a layer that
  /// runs decode_latent only (execute then refuses).
  TensorView kv_b_proj;
};

/// How an MLA step plan is built.
struct ATTNSEL_API MlaPlanOptions {
  /// Capturable plans (PlanOptions::graph_capturable): fixed buffers and launch shapes.
  bool graph_capturable = false;
  /// Capturable plans: block-table rows the buffers hold (0 = the first batch's).
  int max_blocks_per_seq = 0;
  /// The requests at the head of the batch with at most this many query tokens take the
  /// absorbed decode (vLLM's reorder_batch_threshold: 1, or 1 + num_speculative_tokens with
  /// MTP); the first request with more, and every request after it, take the prefill path.
  /// At most the kernel's MlaKernelLimits::max_decode_query_len.
  int decode_query_len = 1;
  /// decode_latent may write the log-sum-exp of its rows.
  bool lse = false;
  /// Cached-context rows read per chunk in the prefill path (vLLM's chunked-prefill
  /// workspace); 0 = the kernel's default. Rounded down to the block size, as vLLM does.
  std::int64_t context_chunk_tokens = 0;
};

/// What an MLA plan's batch holds (for reports and engines' accounting).
struct ATTNSEL_API MlaStepSummary {
  int num_decodes = 0;        ///< decode requests (the head of the batch)
  int num_decode_tokens = 0;  ///< their query tokens: the rows of decode_latent
  int num_prefills = 0;
  int num_prefill_tokens = 0;
  int context_chunks = 0;     ///< chunks the prefills' cached context is read in (0 = none)
};

/// The limits of one MLA kernel.
struct ATTNSEL_API MlaKernelLimits {
  int max_decode_query_len = 1;  ///< most query tokens per decode request
  int max_heads = 128;
};

/// The summary of a plan made by an MlaImpl (ValueError for another kind of plan).
ATTNSEL_API MlaStepSummary mla_step_summary(const StepPlan& plan);

/// What an MLA backend's kernel provides. See the file comment for the semantics.
class ATTNSEL_API MlaImpl {
 public:
  virtual ~MlaImpl() = default;
  MlaImpl(const MlaImpl&) = delete;
  MlaImpl& operator=(const MlaImpl&) = delete;

  const MlaLayerParams& params() const { return params_; }
  virtual KernelInfo kernel_info() const = 0;
  virtual MlaKernelLimits limits() const = 0;

  /// Validates the batch against the cache geometry (`cache`: [num_blocks, block_size,
  /// latent_size], any layer's of the group; its data is not read) and splits the work.
  virtual std::unique_ptr<StepPlan> plan(const AttentionMetadata& md, const TensorView& cache, Stream stream,
                                         const MlaPlanOptions& options = {}) const = 0;
  /// Rebuilds `plan` for a new step's batch in place (capturable plans: same batch shape).
  virtual void update(StepPlan& plan, const AttentionMetadata& md, Stream stream) const = 0;

  /// vLLM's concat_and_cache_mla for the plan's slot mapping: kv_c [tokens, kv_lora_rank],
  /// k_pe [tokens, qk_rope_head_dim] (at least the plan's num_actual_tokens rows; only those
  /// are read) in the activation dtype. Needs a plan whose batch came with a slot mapping.
  virtual void write_cache(const StepPlan& plan, const TensorView& kv_c, const TensorView& k_pe,
                           const TensorView& cache, Stream stream) const = 0;

  /// The layer's attention over the plan's batch, cache already written: q [tokens,
  /// num_heads, qk_head_size] ([q_nope | q_pe], rope last), kv_c and k_pe of the step's new
  /// tokens as in write_cache (the prefills attend over them unquantised), output [tokens,
  /// num_heads, v_head_dim]. Its first num_actual_tokens rows are written.
  virtual void execute(const StepPlan& plan, const TensorView& q, const TensorView& kv_c, const TensorView& k_pe,
                       const TensorView& cache, const TensorView& output, Stream stream) const = 0;

  /// The absorbed decode kernel over the plan's decode requests: q_latent [decode tokens,
  /// num_heads, latent_size] (W_UK already applied, rope last), out [decode tokens, num_heads,
  /// kv_lora_rank]; lse (optional) [decode tokens, num_heads] f32, natural log, -inf for a
  /// row that sees no key (its output is 0), needs a plan built with MlaPlanOptions::lse.
  virtual void decode_latent(const StepPlan& plan, const TensorView& q_latent, const TensorView& cache,
                             const TensorView& out, Stream stream, const TensorView* lse = nullptr) const = 0;

 protected:
  explicit MlaImpl(MlaLayerParams params) : params_(std::move(params)) {}
  /// Stamps a plan this implementation made (its StepShape and flags; the maker tag lets
  /// every call refuse another implementation's plan).
  static void set_plan_fields(StepPlan& plan, const StepShape& shape, bool capturable, bool lse, const void* maker) {
    plan.shape_ = shape;
    plan.capturable_ = capturable;
    plan.lse_ = lse;
    plan.maker_ = maker;
  }
  static const void* plan_maker(const StepPlan& plan) { return plan.maker_; }
  MlaLayerParams params_;
};

}  // namespace attnsel::kernel
