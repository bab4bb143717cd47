// Layer: core (src/layers.txt)
// The sparse MLA kernel interface: DeepSeek-V3.2's sparse attention (DSA), as vLLM runs it
// (vllm/model_executor/layers/sparse_attn_indexer.py, vllm/v1/attention/backends/mla/
// {indexer,flashmla_sparse,sparse_utils}.py) and FlashMLA's sparse kernels compute it.
//
// Two kernels per layer, each with its own cache:
//   * the lightning indexer (IndexerImpl) — one 128-wide key per token in an fp8 key cache
//     (vLLM's indexer cache: per block [block_size × 128 e4m3 bytes][block_size × 4 fp32
//     scale bytes], a u8 tensor [num_blocks, block_size, 132]); for each query token t of a
//     request and each cached position s it sees, the score
//         I[t, s] = κ_s · Σ_h w'[t, h] · ReLU(q8[t, h] · k8[s])
//     (q8 the query of head h quantised to e4m3 with a power-of-two scale σ[t, h], k8 and κ_s
//     the cached key and its scale, w'[t, h] = w[t, h] · σ[t, h] · head_dim^-0.5 ·
//     num_heads^-0.5, as vLLM folds σ into the weights), then the top_k highest positions;
//   * the sparse attention (SparseMlaImpl) — the absorbed MLA of attnsel/mla.hpp over the
//     latent cache, each query token attending only to the cache rows of its index row: no
//     causal mask (causality came from the indexer), -1 entries contribute nothing.
// Query j of a request with L cached tokens (this step's included) and s_q query tokens sees
// the positions [0, L - s_q + j] (bottom-right causal; an MTP row j: L - s_q + j + 1 positions).
//
// Index rows: int32 [tokens, topk]. The indexer writes request-local positions (0 … L - 1),
// highest score first, ties broken by the lower position, -1 after the row's last position
// (fewer than topk when the request holds fewer positions). physical_indices turns them into
// rows of the latent cache, block_table[request][p / block_size] · block_size + p %
// block_size (-1 stays -1; a position the request does not hold becomes -1), which is what
// attend_latent reads (FlashMLA's sparse decode kernel takes the same).
//
// Plans are StepPlans (kernel.hpp) built once per step for the layers sharing a cache
// geometry. Tensors are TensorViews in the kernel's memory (KernelInfo::device). Every check
// runs on the host before memory is touched; violations throw ValueError naming the argument.
// Thread-safety: an implementation is immutable after construction; its const methods may run
// concurrently on distinct outputs and plans (update() must not overlap a plan's users).
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include "attnsel/cache_dtype.hpp"
#include "attnsel/export.hpp"
#include "attnsel/kernel.hpp"
#include "attnsel/mla.hpp"

namespace attnsel::kernel {

// ---------------------------------------------------------------------------------------
// The lightning indexer

/// One indexer layer (vLLM's Indexer in vllm/model_executor/models/deepseek_v2.py; the
/// config's index_n_heads, index_head_dim and index_topk).
struct ATTNSEL_API IndexerLayerParams {
  int num_heads = 64;    ///< index_n_heads (not sharded by tensor parallelism)
  int head_dim = 128;    ///< index_head_dim: one fp8 block of 128 values per key and per query head
  int topk = 2048;       ///< index_topk: the width of an index row
  /// The dtype of the queries and the keys written to the cache (RoPE already applied); the
  /// head weights may be f32 or this dtype.
  ScalarType dtype = ScalarType::bf16;
};

/// How an indexer plan is built.
struct ATTNSEL_API IndexerPlanOptions {
  /// The requests at the head of the batch with at most this many query tokens are decodes
  /// (vLLM's reorder_batch_threshold); a decode request may have seq_len 0 (a padding request:
  /// its rows select nothing).
  int decode_query_len = 1;
  /// Bytes of fp32 scores top_k holds at once (vLLM's logits budget); 0 = the kernel's default.
  /// Query tokens are scored in waves that fit it, at least one token per wave.
  std::int64_t logits_bytes = 0;
};

/// What an indexer kernel computes at most.
struct ATTNSEL_API IndexerKernelLimits {
  int max_heads = 128;
  int max_topk = 1 << 16;
  int max_decode_query_len = 256;
};

/// What the indexer's kernel provides. See the file comment for the semantics.
class ATTNSEL_API IndexerImpl {
 public:
  virtual ~IndexerImpl() = default;
  IndexerImpl(const IndexerImpl&) = delete;
  IndexerImpl& operator=(const IndexerImpl&) = delete;

  const IndexerLayerParams& params() const { return params_; }
  virtual KernelInfo kernel_info() const = 0;
  virtual IndexerKernelLimits limits() const = 0;

  /// Validates the batch against the key cache's geometry (`key_cache`: u8 [num_blocks,
  /// block_size, head_dim + 4], each block's bytes the values of its tokens then their
  /// scales; its data is not read) and splits the work. The block table is the indexer
  /// cache's.
  virtual std::unique_ptr<StepPlan> plan(const AttentionMetadata& md, const TensorView& key_cache, Stream stream,
                                         const IndexerPlanOptions& options = {}) const = 0;
  /// Rebuilds `plan` for a new step's batch in place.
  virtual void update(StepPlan& plan, const AttentionMetadata& md, Stream stream) const = 0;

  /// vLLM's indexer_k_quant_and_cache for the plan's slot mapping: each new token's key
  /// k [tokens, head_dim] (the activation dtype) as e4m3(k / scale) with scale = max(amax,
  /// 1e-4) / 448 rounded up to a power of two (ue8m0), slot -1 skipped.
  virtual void write_cache(const StepPlan& plan, const TensorView& k, const TensorView& key_cache,
                           Stream stream) const = 0;

  /// The scores of every query token over the positions it sees: q [tokens, num_heads,
  /// head_dim] (the activation dtype), weights [tokens, num_heads] (weights_proj's output,
  /// f32 or the activation dtype), logits f32 [tokens, >= max_seq_len]: row t holds I[t, s]
  /// for the positions s it sees and -inf after them.
  virtual void logits(const StepPlan& plan, const TensorView& q, const TensorView& weights,
                      const TensorView& key_cache, const TensorView& logits, Stream stream) const = 0;

  /// The index rows: indices int32 [tokens, topk], request-local positions (see the file
  /// comment).
  virtual void top_k(const StepPlan& plan, const TensorView& q, const TensorView& weights,
                     const TensorView& key_cache, const TensorView& indices, Stream stream) const = 0;

 protected:
  explicit IndexerImpl(IndexerLayerParams params) : params_(params) {}
  static void set_plan_fields(StepPlan& plan, const StepShape& shape, const void* maker) {
    plan.shape_ = shape;
    plan.capturable_ = false;
    plan.lse_ = false;
    plan.maker_ = maker;
  }
  static const void* plan_maker(const StepPlan& plan) { return plan.maker_; }
  IndexerLayerParams params_;
};

// ---------------------------------------------------------------------------------------
// The sparse attention

/// One sparse MLA layer's parameters, fixed when its implementation is made.
struct ATTNSEL_API SparseMlaLayerParams {
  MlaDims dims;
  /// The activation dtype: queries, outputs, the new tokens' latents and kv_b_proj.
  ScalarType dtype = ScalarType::bf16;
  /// The softmax scale (MlaLayerParams::scale's rule).
  float scale = 0.0f;
  /// auto / bfloat16 / float16: the activation dtype, [num_blocks, block_size, 576];
  /// fp8_ds_mla (bf16 layers): DeepSeek's 656-byte token, u8 [num_blocks, block_size, 656]
  /// — 512 e4m3 latent values, four fp32 scales (one per 128 values), the 64 bf16 rope
  /// values — read back as bf16(e4m3 · scale), as FlashMLA dequantises it.
  CacheDType kv_cache_dtype = CacheDType::auto_;
  int topk = 2048;  ///< the width of an index row (index_topk)
  /// VLLM_BATCH_INVARIANT: a token's output does not depend on the rest of the batch.
  bool batch_invariant = false;
  /// kv_b_proj as MlaLayerParams::kv_b_proj (null data: a layer that runs attend_latent only).
  TensorView kv_b_proj;
};

/// How a sparse MLA plan is built.
struct ATTNSEL_API SparseMlaPlanOptions {
  /// As IndexerPlanOptions::decode_query_len (a decode request with seq_len 0 selects nothing).
  int decode_query_len = 1;
  /// attend_latent may write the log-sum-exp of its rows.
  bool lse = false;
};

/// What a sparse MLA kernel computes at most.
struct ATTNSEL_API SparseMlaKernelLimits {
  int max_heads = 128;
  int max_topk = 1 << 16;
  int max_decode_query_len = 256;
};

/// What a sparse MLA backend's kernel provides. See the file comment for the semantics.
class ATTNSEL_API SparseMlaImpl {
 public:
  virtual ~SparseMlaImpl() = default;
  SparseMlaImpl(const SparseMlaImpl&) = delete;
  SparseMlaImpl& operator=(const SparseMlaImpl&) = delete;

  const SparseMlaLayerParams& params() const { return params_; }
  virtual KernelInfo kernel_info() const = 0;
  virtual SparseMlaKernelLimits limits() const = 0;

  /// Validates the batch against the latent cache's geometry (its data is not read) and
  /// sizes the plan's buffers. The block table is the latent cache's.
  virtual std::unique_ptr<StepPlan> plan(const AttentionMetadata& md, const TensorView& cache, Stream stream,
                                         const SparseMlaPlanOptions& options = {}) const = 0;
  virtual void update(StepPlan& plan, const AttentionMetadata& md, Stream stream) const = 0;

  /// vLLM's concat_and_cache_mla for the plan's slot mapping (MlaImpl::write_cache); an
  /// fp8_ds_mla cache gets per-tile scales 2^ceil(log2(max(amax / 448, 1e-4))).
  virtual void write_cache(const StepPlan& plan, const TensorView& kv_c, const TensorView& k_pe,
                           const TensorView& cache, Stream stream) const = 0;

  /// vLLM's triton_convert_req_index_to_global_index: local int32 [tokens, topk] request
  /// positions → physical int32 [tokens, topk] cache rows (the file comment's rule).
  virtual void physical_indices(const StepPlan& plan, const TensorView& local, const TensorView& physical,
                                Stream stream) const = 0;

  /// The layer's attention over the plan's batch, cache already written: q [tokens,
  /// num_heads, qk_head_size] ([q_nope | q_pe]), indices the indexer's local rows [tokens,
  /// topk], output [tokens, num_heads, v_head_dim]. Absorbed as the MLA decode (q_nope ·
  /// W_UK, the latent attention over each token's rows, · W_UV) for every token.
  virtual void execute(const StepPlan& plan, const TensorView& q, const TensorView& indices, const TensorView& cache,
                       const TensorView& output, Stream stream) const = 0;

  /// The sparse latent kernel alone (FlashMLA's sparse decode): q_latent [tokens, num_heads,
  /// latent_size], indices physical rows [tokens, topk] (-1 or [0, num_blocks · block_size)),
  /// out [tokens, num_heads, kv_lora_rank]; lse (optional) [tokens, num_heads] f32, natural
  /// log, -inf for a row whose indices are all -1 (its output is 0); needs a plan built with
  /// SparseMlaPlanOptions::lse.
  virtual void attend_latent(const StepPlan& plan, const TensorView& q_latent, const TensorView& indices,
                             const TensorView& cache, const TensorView& out, Stream stream,
                             const TensorView* lse = nullptr) const = 0;

 protected:
  explicit SparseMlaImpl(SparseMlaLayerParams params) : params_(std::move(params)) {}
  static void set_plan_fields(StepPlan& plan, const StepShape& shape, bool lse, const void* maker) {
    plan.shape_ = shape;
    plan.capturable_ = false;
    plan.lse_ = lse;
    plan.maker_ = maker;
  }
  static const void* plan_maker(const StepPlan& plan) { return plan.maker_; }
  SparseMlaLayerParams params_;
};

}  // namespace attnsel::kernel
