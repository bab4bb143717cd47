// Internal: the size of a layer's KV cache per token, and of a Mamba-like layer's state per
// sequence, from per-rank shapes.
#pragma once

#include <cstdint>
#include <optional>

#include "attnsel/cache_dtype.hpp"
#include "attnsel/model.hpp"

namespace attnsel::model {

/// Bytes of one cached element: the model dtype for auto, 2 for float16/bfloat16, 1 for
/// the fp8 formats; nullopt for the packed formats (per-token-head, nvfp4, turboquant, ...)
/// whose scale layout is not modelled.
std::optional<int> kv_cache_element_bytes(CacheDType cache_dtype, DType model_dtype);

/// One attention layer's cache per token: K and V of every KV head, or MLA's latent
/// (656 bytes with fp8_ds_mla), or the indexer's fp8 keys with their scales.
std::optional<std::int64_t> kv_bytes_per_token(const LayerSpec& layer, CacheDType cache_dtype, DType model_dtype);

/// Elements of a Mamba-like layer's state per sequence.
struct MambaStateElements {
  std::int64_t conv = 0;  ///< the causal-conv window
  std::int64_t ssm = 0;   ///< the SSM / recurrent (or linear-attention KV) state
};
MambaStateElements mamba_state_elements(const MambaLayerSpec& m);
/// Bytes of that state: the conv state in the model dtype, the SSM state in its own dtype.
std::int64_t mamba_state_bytes(const MambaLayerSpec& m, DType model_dtype);

}  // namespace attnsel::model
