// Layer: core (src/layers.txt)
// The kernel interface: what every backend with a real kernel implements.
//
// Modelled on vLLM's AttentionImpl: a batch of sequences (mixed prefill and
// decode) attends against a paged KV cache. Two operations:
//   * write_kv_cache  — scatter new keys/values into the cache via slot_mapping
//                       (vLLM's reshape_and_cache);
//   * forward         — queries against the paged cache, output written in place.
//
// Engines run both once per layer per step, with the same batch for every layer. The
// step-level form splits the work the way vLLM's AttentionMetadataBuilder and FlashInfer's
// plan()/run() do (docs/STEP_PLAN.md):
//   * plan()      — once per step and KV-cache group: every host check of the batch, the
//                   work split, the workspace and the upload of the batch description;
//   * execute()   — once per layer: checks only the layer's tensors against the plan and
//                   launches, on the caller's stream; no allocation, no synchronisation,
//                   no pageable host-to-device copy, no logging;
//   * write_kv_cache(plan, ...) — the cache write of the step, per layer, likewise;
//   * execute(plan, query, new_kv, ...) — both in one call (FlashAttention's
//                   flash_attn_with_kvcache(k=, v=)): writes the step's new keys and values
//                   to their slots and attends over them, as write_kv_cache then execute.
// forward(query, cache, md, output) stays as the one-call form: a plan and an execute.
//
// Tensors are plain views (data pointer, dtype, shape, strides in elements).
// Every check on shapes, dtypes, strides, block tables and slots runs on the
// host before any memory is touched; violations throw attnsel::ValueError.
//
// Semantics (docs/DECISIONS.md, "Kernels"): query i of a sequence with seq_len L
// and q new tokens sits at position L - q + i; logits are scale·q·k, then the soft
// cap, then ALiBi (slope · (key_pos - query_pos)), then the mask; only decoder
// self-attention is causal; a sliding window W keeps keys within W - 1 positions
// (on both sides when not causal); sinks add to the softmax denominator only.
// Encoder layers write their keys and values with write_kv_cache, then attend over
// the cache like any other layer. The cache stores the model dtype for "auto",
// else the kv_cache_dtype's type; fp8 caches hold x / scale (saturated), with one scale per
// layer or one per KV head (LayerParams::k_scales / v_scales).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <dlpack/dlpack.h>

#include "attnsel/cache_dtype.hpp"
#include "attnsel/export.hpp"
#include "attnsel/kv_cache_layout.hpp"
#include "attnsel/scalar_type.hpp"
#include "attnsel/types.hpp"

namespace attnsel::kernel {

/// Where the memory of a tensor lives.
enum class DeviceKind : std::uint8_t { cpu, cuda };

/// A non-owning strided view. Strides are in elements. Thread-safe to share (read-only).
struct ATTNSEL_API TensorView {
  static constexpr int kMaxDims = 6;
  void* data = nullptr;
  ScalarType dtype = ScalarType::f32;
  DeviceKind device = DeviceKind::cpu;
  int device_index = 0;
  int ndim = 0;
  std::int64_t shape[kMaxDims] = {};
  std::int64_t stride[kMaxDims] = {};

  /// A contiguous (row-major) view over `data` with the given shape.
  static TensorView contiguous(void* data, ScalarType dtype, std::initializer_list<std::int64_t> shape,
                               DeviceKind device = DeviceKind::cpu);
  /// A view with explicit strides (in elements); throws ValueError when the ranks differ or exceed kMaxDims.
  static TensorView strided(void* data, ScalarType dtype, std::span<const std::int64_t> shape,
                            std::span<const std::int64_t> strides, DeviceKind device = DeviceKind::cpu);
  std::int64_t numel() const;
  bool is_contiguous() const;
  /// Whether every element has its own memory, as a tensor that is written must: with the
  /// dimensions of more than one element ordered by stride, each stride steps past all that
  /// the smaller ones span. False for stride 0 (an expanded tensor) and for strides that
  /// interleave rows or heads; also for a few exotic layouts without overlap, which no
  /// kernel tensor has.
  bool has_distinct_elements() const;
  std::string describe() const;  ///< e.g. "bf16[8, 32, 128] strides [4096, 128, 1]"
  template <class T> T* as() const { return static_cast<T*>(data); }
};

/// A view of a DLPack tensor (dlpack.h, any version from 0.6: the DLTensor layout is the
/// same). Throws ValueError for an unsupported dtype, device or rank.
ATTNSEL_API TensorView from_dlpack(const DLTensor& t);

/// A batch of sequences in vLLM's flattened ("varlen") form. All arrays are host-side
/// for the CPU backend and device-side for CUDA (with host copies for validation).
struct ATTNSEL_API AttentionMetadata {
  int num_seqs = 0;
  int num_actual_tokens = 0;                ///< total new (query) tokens in the batch
  std::span<const std::int32_t> query_start_loc;  ///< [num_seqs + 1], prefix sums of query lengths
  std::span<const std::int32_t> seq_lens;         ///< [num_seqs], context length including new tokens
  std::span<const std::int32_t> block_table;      ///< [num_seqs, max_blocks_per_seq] row-major
  int max_blocks_per_seq = 0;
  std::span<const std::int64_t> slot_mapping;     ///< [num_actual_tokens]; -1 = skip (padding)
  int max_query_len = 0;
  int max_seq_len = 0;
};

/// Per-layer parameters, fixed at construction of an implementation.
struct ATTNSEL_API LayerParams {
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_size = 0;
  float scale = 0.0f;                       ///< softmax scale, usually 1/sqrt(head_size)
  std::optional<int> sliding_window;        ///< window size in tokens (left), none = full
  float logits_soft_cap = 0.0f;             ///< 0 = off; else cap * tanh(s / cap)
  std::vector<float> alibi_slopes;          ///< empty = off; else [num_heads]
  std::vector<float> sinks;                 ///< empty = off; else [num_heads] sink logits
  AttentionType attn_type = AttentionType::decoder;
  bool causal = true;                       ///< decoder self-attention is causal unless use_non_causal
  CacheDType kv_cache_dtype = CacheDType::auto_;  ///< auto, float16, bfloat16, fp8, fp8_e4m3 or fp8_e5m2
  float k_scale = 1.0f;                     ///< dequantisation scales for fp8 caches
  float v_scale = 1.0f;
  /// Per-KV-head dequantisation scales for fp8 caches (vLLM's per-head quant scales): empty
  /// = every head uses k_scale / v_scale; else [num_kv_heads], and KV head h is stored as
  /// x / k_scales[h] and read back as stored * k_scales[h] (the scalar is then unused).
  /// Ignored, like the scalars, by caches that are not fp8.
  std::vector<float> k_scales;
  std::vector<float> v_scales;
  /// VLLM_BATCH_INVARIANT: each sequence's output must not depend on the rest of the batch
  /// (bit for bit). Only implementations whose backend declares batch invariance accept it.
  bool batch_invariant = false;
};

/// Geometry of the paged cache: key and value caches are separate views of rank 4 whose
/// dimensions are named [num_blocks, block_size, num_kv_heads, head_size] in *logical*
/// order; the strides encode the physical layout (NHD, HND, block-outermost, ...).
struct ATTNSEL_API KVCacheView {
  TensorView key;
  TensorView value;
  int num_blocks() const { return static_cast<int>(key.shape[0]); }
  int block_size() const { return static_cast<int>(key.shape[1]); }
  int num_kv_heads() const { return static_cast<int>(key.shape[2]); }
  int head_size() const { return static_cast<int>(key.shape[3]); }
};

/// The step's new keys and values, for an execute that appends them to the cache itself:
/// each [tokens, num_kv_heads, head_size] in the plan's activation dtype (at least the
/// plan's num_actual_tokens rows; only those are read), token i going to slot_mapping[i].
struct ATTNSEL_API NewKeysValues {
  TensorView key;
  TensorView value;
};

/// A stream to run device work on, without CUDA's headers: a cudaStream_t cast to void*.
/// The default-constructed handle is CUDA's legacy default stream — work goes there only
/// when the caller passes it. Host kernels ignore it (they run on the calling thread and
/// its OpenMP team, and return when done).
struct ATTNSEL_API Stream {
  void* native = nullptr;
  static Stream from_native(void* cuda_stream) { return Stream{cuda_stream}; }
};

/// How far a kernel's launches can be captured in a CUDA graph and replayed with new batch
/// contents (vLLM's AttentionCGSupport, vllm/v1/attention/backend.py; ordered weakest first).
enum class GraphSupport : std::uint8_t {
  never,                        ///< no capture (host kernels; kernels that plan on the device's results)
  uniform_single_token_decode,  ///< batches where every sequence has exactly one query token
  uniform_batch,                ///< batches of one fixed shape: number of sequences and query lengths
  always,                       ///< any batch, mixed prefill and decode
};
ATTNSEL_API std::string_view to_string(GraphSupport g);

/// What a backend's kernel needs and offers: callers ask this rather than match names.
struct ATTNSEL_API KernelInfo {
  bool available = false;               ///< a kernel exists in this build and can run on this host
  DeviceKind device = DeviceKind::cpu;  ///< where its tensors (queries, cache, batch arrays' copies) live
  std::string isa = "-";                ///< instruction set / device it runs, e.g. "AVX3+BF16", "CUDA sm_90a"
  GraphSupport graph_support = GraphSupport::never;
  std::optional<KVCacheLayout> preferred_layout;  ///< the layout its loads are tuned for; none = no preference
  bool lse_output = false;              ///< execute() can write the log-sum-exp of each row
  /// ...of every batch. False with lse_output: decode batches only — execute() with an lse
  /// output refuses a plan whose batch has a sequence for the kernel's prefill path
  /// (NotImplementedError naming the rule). FLASH_ATTN's CUDA kernels: a sequence is decode
  /// when its query tokens × query heads per KV head are at most 64 (one token per sequence
  /// always is, up to 64 query heads per KV head).
  bool lse_prefill = false;
};

/// How a step plan is built.
struct ATTNSEL_API PlanOptions {
  /// Build into persistent buffers for CUDA-graph capture (kernels with GraphSupport
  /// uniform_batch or better): the plan's device pointers and launch shapes never change,
  /// update() rewrites only their contents, so a step captured once replays for every later
  /// batch of the same shape (number of sequences, query lengths). Rejected by kernels
  /// whose graph support is `never`.
  bool graph_capturable = false;
  /// Capturable plans: block-table rows the buffers hold (0 = the first batch's
  /// max_blocks_per_seq); later batches may use up to this many blocks per sequence.
  int max_blocks_per_seq = 0;
  /// Let execute() write the log-sum-exp (KernelInfo::lse_output). Host kernels then keep
  /// every work item's partial state, which needs more plan-owned memory.
  bool lse = false;
  /// Executes with new keys and values (NewKeysValues) may read the cache positions before
  /// the step's new tokens as soon as their kernel starts, while the kernel before it in
  /// the stream is still finishing (CUDA kernels on sm_90: programmatic launch), so one
  /// layer's reads overlap the previous layer's tail. Promise, by setting it, that no work
  /// still running then writes those positions: true for the layers of one step (each
  /// writes only its new tokens' slots) when steps are separated by their update() or any
  /// other copy or ordinary kernel on the stream; not when two plans' executes on one
  /// cache follow each other directly. Other kernels ignore it.
  bool early_cache_reads = false;
};

/// What a step plan was built for: the batch's size and the group's geometry. execute()
/// compares each layer's tensors with it.
struct ATTNSEL_API StepShape {
  int num_seqs = 0;
  int num_actual_tokens = 0;
  int max_blocks_per_seq = 0;           ///< of the plan's block table (its capacity when capturable)
  bool slot_mapping = false;            ///< the batch came with a slot mapping (write_kv_cache can run)
  ScalarType dtype = ScalarType::bf16;  ///< queries and outputs
  DeviceKind device = DeviceKind::cpu;
  int device_index = 0;
  int num_heads = 0, num_kv_heads = 0, head_size = 0;
  ScalarType cache_dtype = ScalarType::bf16;
  std::int64_t cache_shape[4] = {};     ///< [num_blocks, block_size, num_kv_heads, head_size]
  std::int64_t key_strides[4] = {};
  std::int64_t value_strides[4] = {};
  // The group's layer parameters that shape the work split (the rest may differ per layer).
  std::int64_t window = -1;             ///< sliding window - 1, or -1 for none
  bool causal = true;
  bool batch_invariant = false;
};

/// A plan for one step of one KV-cache group (the layers that share a backend, their
/// layer parameters' shape and their cache geometry). Opaque: built by
/// AttentionImpl::plan, consumed by execute and write_kv_cache of any layer of the group.
///
/// Ownership: the plan owns its copy of the batch description and its workspace (device
/// memory for CUDA kernels, host memory for CPU ones). The workspace size depends on the
/// work split the plan chooses, and every layer of a step reuses it in stream order, so
/// the plan is where it belongs; engines account for it through workspace_bytes(). A plan
/// must outlive the device work it was used for; executes of one plan run in the order of
/// one stream (two streams at once need two plans).
/// Thread-safety: execute/write_kv_cache on one plan may be called from several threads
/// (they only read it); update() must not overlap them.
class ATTNSEL_API StepPlan {
 public:
  virtual ~StepPlan() = default;
  StepPlan(const StepPlan&) = delete;
  StepPlan& operator=(const StepPlan&) = delete;

  const StepShape& shape() const { return shape_; }
  bool graph_capturable() const { return capturable_; }
  bool lse() const { return lse_; }
  /// Bytes of memory the plan owns (batch description and workspace, host and device).
  virtual std::size_t workspace_bytes() const = 0;
  /// One line on the work split, e.g. "split-KV decode (tma): 64 sequences, 512 CTAs".
  virtual std::string describe() const = 0;
  /// True when some of the plan's outputs multiply fp8 queries and probabilities (FLASH_ATTN's
  /// Hopper prefill on an fp8 cache, as FlashAttention-3 runs it with a quantised query):
  /// those outputs carry an fp8 query's rounding, not only the cache's (`attnsel run --check`
  /// compares them with a wider tolerance).
  virtual bool fp8_queries() const { return false; }

 protected:
  StepPlan() = default;
  StepShape shape_;
  bool capturable_ = false;
  bool lse_ = false;
  const void* maker_ = nullptr;  ///< which implementation made it (execute refuses others' plans)
  friend class AttentionImpl;
  friend class MlaImpl;
  friend class IndexerImpl;
  friend class SparseMlaImpl;
};

/// What a backend's kernel implementation provides. Thread-safety: const methods may be
/// called concurrently on distinct output buffers (and distinct plans).
class ATTNSEL_API AttentionImpl {
 public:
  virtual ~AttentionImpl() = default;
  const LayerParams& params() const { return params_; }
  /// The kernel's device, ISA, graph support, layout preference.
  virtual KernelInfo kernel_info() const;

  // ---- step-level API ------------------------------------------------------------------
  /// Validates the batch against the group's cache geometry (`cache`: any layer's cache of
  /// the group; its pointers are not kept) and the activation dtype, splits the work, sizes
  /// the workspace and uploads the batch description on `stream` (CUDA: from pinned memory).
  /// The metadata's arrays are copied: they need not outlive the call.
  std::unique_ptr<StepPlan> plan(const AttentionMetadata& md, const KVCacheView& cache, ScalarType dtype,
                                 Stream stream, const PlanOptions& options = {}) const;
  /// Rebuilds `plan` for a new step's batch in place, reusing its buffers (no allocation
  /// while they fit). Capturable plans keep every pointer and launch shape, and so need the
  /// batch shape they were built for (same num_seqs and query_start_loc); anything else is
  /// refused with ValueError. Issue it on the stream that executes the plan.
  void update(StepPlan& plan, const AttentionMetadata& md, Stream stream) const;
  /// Runs this layer on the plan's batch: query [tokens, num_heads, head_size], the layer's
  /// cache, output like query; lse (optional, null = none): [tokens, num_heads] f32, the
  /// natural log of each row's softmax denominator (sinks included; -inf where a row sees
  /// no key), needs a plan built with PlanOptions::lse. Checks only this layer's tensors
  /// against the plan (ValueError naming the difference) and launches on `stream`.
  void execute(const StepPlan& plan, const TensorView& query, const KVCacheView& cache, const TensorView& output,
               Stream stream, const TensorView* lse = nullptr) const;
  /// The step's cache write for this layer (slot_mapping from the plan).
  void write_kv_cache(const StepPlan& plan, const TensorView& key, const TensorView& value, const KVCacheView& cache,
                      Stream stream) const;
  /// The step's cache write and this layer's attention in one call: the result (cache and
  /// output, fp8 caches quantised alike, slot -1 skipped) is that of
  /// write_kv_cache(plan, new_kv.key, new_kv.value, cache, stream) followed by
  /// execute(plan, query, cache, output, stream, lse). Needs a plan whose batch came with a
  /// slot_mapping. FLASH_ATTN's CUDA kernels fuse the two into the decode launch when every
  /// sequence of the plan takes the decode kernel, every slot is -1 or its token's own
  /// position in the block table, and no block a token goes to is read through another
  /// block-table entry (docs/STEP_PLAN.md, "Appending in execute"); otherwise they launch
  /// the cache write and then the attention. Host kernels write, then attend.
  void execute(const StepPlan& plan, const TensorView& query, const NewKeysValues& new_kv, const KVCacheView& cache,
               const TensorView& output, Stream stream, const TensorView* lse = nullptr) const;

  // ---- one-call API ----------------------------------------------------------------------
  /// key/value: [num_tokens, num_kv_heads, head_size]; writes token i to slot_mapping[i]
  /// (-1 skips it). Only the first md.num_actual_tokens tokens are read. CUDA kernels run it
  /// on the legacy default stream.
  virtual void write_kv_cache(const TensorView& key, const TensorView& value, const KVCacheView& cache,
                              const AttentionMetadata& md) const = 0;

  /// query: [num_tokens, num_heads, head_size]; output: same shape and dtype, its first
  /// md.num_actual_tokens rows written in place (the rest are left untouched). CUDA kernels
  /// run it on the legacy default stream; engines use plan/execute.
  virtual void forward(const TensorView& query, const KVCacheView& cache, const AttentionMetadata& md,
                       const TensorView& output) const = 0;

 protected:
  explicit AttentionImpl(LayerParams p) : params_(std::move(p)) {}

  // Hooks of the step-level API. The defaults serve any implementation through its one-call
  // methods (the plan keeps a host copy of the batch); attnsel's kernels override them.
  // Called after the public methods' checks (the batch in plan/update, the layer's tensors
  // against the plan's shape in execute/write_kv_cache).
  virtual std::unique_ptr<StepPlan> make_plan(const AttentionMetadata& md, const StepShape& shape, Stream stream,
                                              const PlanOptions& options) const;
  virtual void update_plan(StepPlan& plan, const AttentionMetadata& md, Stream stream) const;
  virtual void execute_plan(const StepPlan& plan, const TensorView& query, const KVCacheView& cache,
                            const TensorView& output, Stream stream, const TensorView* lse) const;
  virtual void write_kv_cache_plan(const StepPlan& plan, const TensorView& key, const TensorView& value,
                                   const KVCacheView& cache, Stream stream) const;
  /// The appending execute; the default is write_kv_cache_plan, then execute_plan.
  virtual void execute_append_plan(const StepPlan& plan, const TensorView& query, const NewKeysValues& new_kv,
                                   const KVCacheView& cache, const TensorView& output, Stream stream,
                                   const TensorView* lse) const;
  /// The tag an implementation stamps on the plans it makes (execute refuses another's).
  virtual const void* plan_maker() const;
  static void set_maker(StepPlan& plan, const void* maker) { plan.maker_ = maker; }
  static void set_flags(StepPlan& plan, const StepShape& shape, bool capturable, bool lse) {
    plan.shape_ = shape;
    plan.capturable_ = capturable;
    plan.lse_ = lse;
  }

  LayerParams params_;
};

/// Host-side checks shared by every implementation (throw ValueError naming the problem).
ATTNSEL_API void validate_layer_params(const LayerParams& p);
ATTNSEL_API void validate_forward_args(const LayerParams& p, const TensorView& query, const KVCacheView& cache,
                                       const AttentionMetadata& md, const TensorView& output);
ATTNSEL_API void validate_cache_write_args(const LayerParams& p, const TensorView& key, const TensorView& value,
                                           const KVCacheView& cache, const AttentionMetadata& md);
/// The batch checks of plan(): the metadata against the cache geometry (block ids, lengths,
/// slots) for a layer of `p`; the cache's pointers are not read.
ATTNSEL_API void validate_plan_args(const LayerParams& p, const KVCacheView& cache, ScalarType dtype,
                                    const AttentionMetadata& md);
/// The per-layer checks of execute(): the layer's parameters match the plan's group and its
/// tensors match the plan's shape (a few comparisons; no loop over the batch).
ATTNSEL_API void validate_execute_args(const LayerParams& p, const StepShape& shape, const TensorView& query,
                                       const KVCacheView& cache, const TensorView& output, const TensorView* lse);
ATTNSEL_API void validate_plan_cache_write_args(const LayerParams& p, const StepShape& shape, const TensorView& key,
                                                const TensorView& value, const KVCacheView& cache);
/// The checks of the appending execute: execute's, and the new keys and values (named
/// "new_kv.key" / "new_kv.value" in the messages) against the plan's shape.
ATTNSEL_API void validate_execute_append_args(const LayerParams& p, const StepShape& shape, const TensorView& query,
                                              const NewKeysValues& new_kv, const KVCacheView& cache,
                                              const TensorView& output, const TensorView* lse);
/// The shape a plan for this batch, geometry and layer has.
ATTNSEL_API StepShape step_shape(const LayerParams& p, const KVCacheView& cache, ScalarType dtype,
                                 const AttentionMetadata& md);

}  // namespace attnsel::kernel
