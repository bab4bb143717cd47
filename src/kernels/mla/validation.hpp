// Host-side checks of the MLA kernels' arguments, shared by every device's implementation:
// the layer's parameters and cache format, the latent cache view, each call's tensors
// against its plan, that no written tensor gives two elements one address and that no
// output overlaps an input. Every check names the argument, the value and the valid
// choices (ValueError), and runs before a kernel touches memory.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string_view>

#include "attnsel/kernel.hpp"
#include "attnsel/mla.hpp"

namespace attnsel::kernel::mla {

/// How a layer's cache stores the latent_size entries of a token.
struct CacheFormat {
  ScalarType stored = ScalarType::bf16;  ///< the activation dtype, or fp8_e4m3
  bool fp8 = false;                      ///< fp8: the value is stored · k_scale
};

/// The layer's cache format: "auto" stores the activation dtype, "bfloat16" / "float16"
/// name it (and must match it), "fp8" / "fp8_e4m3" store e4m3 bytes with the per-tensor
/// k_scale. ValueError for any other kv_cache_dtype, listing the valid ones.
CacheFormat cache_format(const MlaLayerParams& p);

/// The checks of a layer every MLA kernel makes when its implementation is made: heads in
/// [1, limits.max_heads], positive dimensions, a float activation dtype, a positive finite
/// scale, the cache format (cache_format) and, for fp8, a positive finite k_scale; kv_b_proj,
/// when it has data, [num_heads · (qk_nope + v_head), kv_lora_rank] of the activation dtype
/// on `device`, rows of unit stride.
void validate_layer_params(const MlaLayerParams& p, const MlaKernelLimits& limits, DeviceKind device);

/// For kernels built for DeepSeek's dimensions only (kv_lora_rank 512, qk_rope_head_dim 64,
/// qk_nope_head_dim 128, v_head_dim 128): ValueError naming the first field that differs.
void require_deepseek_dims(const MlaDims& d, std::string_view kernel);

/// The cache of plan(): [num_blocks >= 1, block_size >= 1, latent_size] in the layer's cache
/// format (fp8 caches may also be u8), on `device`, unit stride over the entries and token
/// rows that do not overlap (strides in the identity order, as vLLM allocates it).
void validate_cache(const MlaLayerParams& p, const TensorView& cache, DeviceKind device);

/// A tensor of a call: `dims.size()` dimensions; dimension 0 holds at least dims[0] rows,
/// the others exactly dims[i]; `dtype`, the plan's device; unit stride in the last dimension,
/// no negative stride; data when it has elements.
void check_tensor(const TensorView& t, std::string_view name, std::initializer_list<std::int64_t> dims,
                  ScalarType dtype, const StepShape& plan);

/// A plan used by a layer's call: ValueError unless it was built for the layer's group
/// (`num_heads`, `dtype` and batch invariance, the StepShape's).
void check_plan_group(const StepShape& plan, int num_heads, ScalarType dtype, bool batch_invariant);

/// The new tokens' inputs of a latent cache write: a plan whose batch came with a slot
/// mapping, kv_c [num_actual_tokens, kv_lora_rank] and k_pe [num_actual_tokens,
/// qk_rope_head_dim] of `dtype` (check_tensor).
void check_latent_write_inputs(const StepShape& plan, const MlaDims& d, ScalarType dtype, const TensorView& kv_c,
                               const TensorView& k_pe);

/// ValueError unless the plan's batch came with a slot mapping: a cache write needs one.
void require_slot_mapping(const StepShape& plan);

/// A call's cache against the plan's geometry (shape, strides, dtype, device).
void check_planned_cache(const TensorView& cache, const StepShape& plan);

/// A tensor the kernel writes against one it reads: ValueError when `output`'s own elements
/// share memory (kernels/tensor_checks.hpp's check_distinct_elements) or when the memory
/// `output` may write overlaps the memory of `input`.
void check_no_overlap(const TensorView& output, std::string_view output_name, const TensorView& input,
                      std::string_view input_name);

/// The first and one-past-the-last byte a view may touch (both null for an empty view).
struct ByteRange {
  const std::uint8_t* begin = nullptr;
  const std::uint8_t* end = nullptr;
};
ByteRange byte_range(const TensorView& t);

}  // namespace attnsel::kernel::mla
