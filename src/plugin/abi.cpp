#include "plugin/abi.hpp"

#include <fmt/format.h>

#include <array>
#include <cstring>

namespace attnsel::plugin {

std::span<const AbiLayout> abi_layouts() {
  // One entry per minor version of ABI major 1. Appending a field to a struct in minor
  // version m means adding an entry here with the new sizes.
  static constexpr std::array<AbiLayout, ATTNSEL_PLUGIN_ABI_MINOR + 1> kLayouts = {{
      {sizeof(attnsel_plugin), sizeof(attnsel_backend), sizeof(attnsel_kernel_ops)},
  }};
  return kLayouts;
}

std::string abi_version_text(std::uint32_t major, std::uint32_t minor) { return fmt::format("{}.{}", major, minor); }

std::optional<std::string> check_abi(const attnsel_plugin& plugin, std::uint32_t host_major,
                                     std::span<const AbiLayout> layouts) {
  const std::uint32_t host_minor = static_cast<std::uint32_t>(layouts.size()) - 1;
  const std::string host = abi_version_text(host_major, host_minor);
  const std::string theirs = abi_version_text(plugin.abi_major, plugin.abi_minor);
  if (plugin.abi_major != host_major)
    return fmt::format("it was built for plugin ABI {}, but this attnsel provides plugin ABI {} (major versions "
                       "must match; rebuild the plugin against this attnsel)",
                       theirs, host);
  if (plugin.abi_minor > host_minor)
    return fmt::format("it was built for plugin ABI {}, newer than the plugin ABI {} this attnsel provides "
                       "(update attnsel, or rebuild the plugin against this attnsel)",
                       theirs, host);
  const std::uint32_t expected = layouts[plugin.abi_minor].plugin_size;
  if (plugin.struct_size < expected)
    return fmt::format("its attnsel_plugin struct is {} bytes, smaller than the {} bytes plugin ABI {} requires",
                       plugin.struct_size, expected, theirs);
  return std::nullopt;
}

std::optional<DType> from_c_dtype(attnsel_dtype d) {
  switch (d) {
    case ATTNSEL_DTYPE_FLOAT16: return DType::float16;
    case ATTNSEL_DTYPE_BFLOAT16: return DType::bfloat16;
    case ATTNSEL_DTYPE_FLOAT32: return DType::float32;
    default: return std::nullopt;
  }
}

attnsel_dtype to_c_dtype(DType d) {
  switch (d) {
    case DType::float16: return ATTNSEL_DTYPE_FLOAT16;
    case DType::bfloat16: return ATTNSEL_DTYPE_BFLOAT16;
    case DType::float32: return ATTNSEL_DTYPE_FLOAT32;
  }
  return ATTNSEL_DTYPE_FLOAT32;
}

attnsel_attn_type to_c_attn_type(AttentionType t) {
  switch (t) {
    case AttentionType::decoder: return ATTNSEL_ATTN_TYPE_DECODER;
    case AttentionType::encoder: return ATTNSEL_ATTN_TYPE_ENCODER;
    case AttentionType::encoder_only: return ATTNSEL_ATTN_TYPE_ENCODER_ONLY;
    case AttentionType::encoder_decoder: return ATTNSEL_ATTN_TYPE_ENCODER_DECODER;
  }
  return ATTNSEL_ATTN_TYPE_DECODER;
}

std::optional<AttentionType> from_c_attn_type(attnsel_attn_type t) {
  switch (t) {
    case ATTNSEL_ATTN_TYPE_DECODER: return AttentionType::decoder;
    case ATTNSEL_ATTN_TYPE_ENCODER: return AttentionType::encoder;
    case ATTNSEL_ATTN_TYPE_ENCODER_ONLY: return AttentionType::encoder_only;
    case ATTNSEL_ATTN_TYPE_ENCODER_DECODER: return AttentionType::encoder_decoder;
    default: return std::nullopt;
  }
}

attnsel_scalar_type to_c_scalar(kernel::ScalarType t) {
  using kernel::ScalarType;
  switch (t) {
    case ScalarType::f32: return ATTNSEL_SCALAR_F32;
    case ScalarType::f16: return ATTNSEL_SCALAR_F16;
    case ScalarType::bf16: return ATTNSEL_SCALAR_BF16;
    case ScalarType::fp8_e4m3: return ATTNSEL_SCALAR_FP8_E4M3;
    case ScalarType::fp8_e5m2: return ATTNSEL_SCALAR_FP8_E5M2;
    case ScalarType::u8: return ATTNSEL_SCALAR_U8;
    case ScalarType::i32: return ATTNSEL_SCALAR_I32;
    case ScalarType::i64: return ATTNSEL_SCALAR_I64;
  }
  return ATTNSEL_SCALAR_U8;
}

attnsel_tensor to_c_tensor(const kernel::TensorView& v) {
  static_assert(kernel::TensorView::kMaxDims == ATTNSEL_MAX_DIMS);
  attnsel_tensor t{};
  t.data = v.data;
  t.dtype = to_c_scalar(v.dtype);
  t.device = v.device == kernel::DeviceKind::cuda ? ATTNSEL_DEVICE_CUDA : ATTNSEL_DEVICE_CPU;
  t.device_index = v.device_index;
  t.ndim = v.ndim;
  for (int d = 0; d < ATTNSEL_MAX_DIMS; ++d) {
    t.shape[d] = v.shape[d];
    t.stride[d] = v.stride[d];
  }
  return t;
}

attnsel_kv_cache to_c_cache(const kernel::KVCacheView& c) { return {to_c_tensor(c.key), to_c_tensor(c.value)}; }

attnsel_metadata to_c_metadata(const kernel::AttentionMetadata& md) {
  attnsel_metadata m{};
  m.struct_size = sizeof(attnsel_metadata);
  m.num_seqs = md.num_seqs;
  m.num_actual_tokens = md.num_actual_tokens;
  m.query_start_loc = md.query_start_loc.data();
  m.query_start_loc_len = static_cast<std::int64_t>(md.query_start_loc.size());
  m.seq_lens = md.seq_lens.data();
  m.seq_lens_len = static_cast<std::int64_t>(md.seq_lens.size());
  m.block_table = md.block_table.data();
  m.block_table_len = static_cast<std::int64_t>(md.block_table.size());
  m.max_blocks_per_seq = md.max_blocks_per_seq;
  m.slot_mapping = md.slot_mapping.data();
  m.slot_mapping_len = static_cast<std::int64_t>(md.slot_mapping.size());
  m.max_query_len = md.max_query_len;
  m.max_seq_len = md.max_seq_len;
  return m;
}

attnsel_plugin_layer_params to_c_layer_params(const kernel::LayerParams& p) {
  attnsel_plugin_layer_params c{};
  c.struct_size = sizeof(attnsel_plugin_layer_params);
  c.num_heads = p.num_heads;
  c.num_kv_heads = p.num_kv_heads;
  c.head_size = p.head_size;
  c.scale = p.scale;
  c.has_sliding_window = p.sliding_window.has_value() ? 1 : 0;
  c.sliding_window = p.sliding_window.value_or(0);
  c.logits_soft_cap = p.logits_soft_cap;
  c.alibi_slopes = p.alibi_slopes.empty() ? nullptr : p.alibi_slopes.data();
  c.num_alibi_slopes = static_cast<std::uint32_t>(p.alibi_slopes.size());
  c.sinks = p.sinks.empty() ? nullptr : p.sinks.data();
  c.num_sinks = static_cast<std::uint32_t>(p.sinks.size());
  c.attn_type = to_c_attn_type(p.attn_type);
  c.causal = p.causal ? 1 : 0;
  c.kv_cache_dtype = cache_dtype_name(p.kv_cache_dtype).data();  // a string literal: NUL-terminated
  c.k_scale = p.k_scale;
  c.v_scale = p.v_scale;
  return c;
}

std::string MessageBuffer::text(std::string_view fallback) {
  data[kCapacity - 1] = '\0';  // a plugin that forgets the terminator cannot make us over-read
  const std::size_t n = std::strlen(data);
  return n == 0 ? std::string(fallback) : std::string(data, n);
}

}  // namespace attnsel::plugin
