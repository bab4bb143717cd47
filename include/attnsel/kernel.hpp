// The kernel interface: what every backend with a real kernel implements.
//
// Modelled on vLLM's AttentionImpl: a batch of sequences (mixed prefill and
// decode) attends against a paged KV cache. Two operations:
//   * write_kv_cache  — scatter new keys/values into the cache via slot_mapping
//                       (vLLM's reshape_and_cache);
//   * forward         — queries against the paged cache, output written in place.
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
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <dlpack/dlpack.h>

#include "attnsel/export.hpp"
#include "attnsel/types.hpp"

namespace attnsel::kernel {

/// Element types a tensor view can hold.
enum class ScalarType : std::uint8_t { f32, f16, bf16, fp8_e4m3, fp8_e5m2, u8, i32, i64 };

ATTNSEL_API std::string_view to_string(ScalarType t);
ATTNSEL_API std::size_t element_size(ScalarType t);

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
  std::string kv_cache_dtype = "auto";      ///< "auto" | "fp8" | "fp8_e4m3" | "fp8_e5m2" | ...
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

/// What a backend's kernel implementation provides. Thread-safety: const methods may be
/// called concurrently on distinct output buffers.
class ATTNSEL_API AttentionImpl {
 public:
  virtual ~AttentionImpl() = default;
  const LayerParams& params() const { return params_; }

  /// key/value: [num_tokens, num_kv_heads, head_size]; writes token i to slot_mapping[i]
  /// (-1 skips it). Only the first md.num_actual_tokens tokens are read.
  virtual void write_kv_cache(const TensorView& key, const TensorView& value, const KVCacheView& cache,
                              const AttentionMetadata& md) const = 0;

  /// query: [num_tokens, num_heads, head_size]; output: same shape and dtype, its first
  /// md.num_actual_tokens rows written in place (the rest are left untouched).
  virtual void forward(const TensorView& query, const KVCacheView& cache, const AttentionMetadata& md,
                       const TensorView& output) const = 0;

 protected:
  explicit AttentionImpl(LayerParams p) : params_(std::move(p)) {}
  LayerParams params_;
};

/// Host-side checks shared by every implementation (throw ValueError naming the problem).
ATTNSEL_API void validate_layer_params(const LayerParams& p);
ATTNSEL_API void validate_forward_args(const LayerParams& p, const TensorView& query, const KVCacheView& cache,
                                       const AttentionMetadata& md, const TensorView& output);
ATTNSEL_API void validate_cache_write_args(const LayerParams& p, const TensorView& key, const TensorView& value,
                                           const KVCacheView& cache, const AttentionMetadata& md);

}  // namespace attnsel::kernel
