#include "model/kv_bytes.hpp"

#include "attnsel/scalar_type.hpp"

namespace attnsel::model {

namespace {

// DeepSeek-V3.2's indexer key: fp8 values plus one float32 scale per 128 values.
int indexer_bytes_per_token(int index_head_dim) { return index_head_dim + index_head_dim / 128 * 4; }

}  // namespace

std::optional<int> kv_cache_element_bytes(CacheDType cache_dtype, DType model_dtype) {
  switch (cache_dtype) {
    case CacheDType::auto_: return static_cast<int>(kernel::element_size(kernel::scalar_type(model_dtype)));
    case CacheDType::float16:
    case CacheDType::bfloat16: return 2;
    case CacheDType::fp8:
    case CacheDType::fp8_e4m3:
    case CacheDType::fp8_e5m2:
    case CacheDType::fp8_inc:
    case CacheDType::fp8_ds_mla: return 1;
    default: return std::nullopt;
  }
}

std::optional<std::int64_t> kv_bytes_per_token(const LayerSpec& layer, CacheDType cache_dtype, DType model_dtype) {
  if (!layer.attention) return std::nullopt;
  const AttentionLayerSpec& a = *layer.attention;
  if (layer.mixer == MixerKind::indexer) return indexer_bytes_per_token(a.head_size);
  if (a.use_mla) {
    // fp8_ds_mla: 512 fp8 latent values, 4 float32 scales and 64 bf16 RoPE values.
    if (cache_dtype == CacheDType::fp8_ds_mla) return 656;
    const auto e = kv_cache_element_bytes(cache_dtype, model_dtype);
    if (!e) return std::nullopt;
    return std::int64_t{*e} * a.head_size;
  }
  if (cache_dtype == CacheDType::fp8_ds_mla) return std::nullopt;  // an MLA-only format
  const auto e = kv_cache_element_bytes(cache_dtype, model_dtype);
  if (!e) return std::nullopt;
  return std::int64_t{*e} * a.num_kv_heads * (a.head_size + a.head_size_v);
}

MambaStateElements mamba_state_elements(const MambaLayerSpec& m) {
  const std::int64_t taps = m.d_conv > 0 ? m.d_conv - 1 : 0;
  if (m.backend == "MAMBA1") return {taps * m.intermediate_size, m.intermediate_size * m.d_state};
  if (m.backend == "MAMBA2")
    return {taps * (m.intermediate_size + 2 * m.n_groups * m.d_state), m.num_heads * m.head_dim * m.d_state};
  if (m.backend == "GDN_ATTN")
    return {taps * (2 * m.num_k_heads * m.head_k_dim + m.num_heads * m.head_dim),
            m.num_heads * m.head_k_dim * m.head_dim};
  if (m.backend == "LINEAR") return {0, m.num_heads * m.head_dim * m.head_dim};
  if (m.backend == "SHORT_CONV") return {taps * m.intermediate_size, 0};
  return {};
}

std::int64_t mamba_state_bytes(const MambaLayerSpec& m, DType model_dtype) {
  auto size = [](DType d) { return static_cast<std::int64_t>(kernel::element_size(kernel::scalar_type(d))); };
  const MambaStateElements e = mamba_state_elements(m);
  return e.conv * size(model_dtype) + e.ssm * size(m.ssm_state_dtype.value_or(model_dtype));
}

}  // namespace attnsel::model
