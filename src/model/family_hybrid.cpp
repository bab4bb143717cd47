// Models with Mamba-like layers, whose backends come from the Mamba selector:
// Qwen3-Next (GDN), Jamba (Mamba1), Granite-4 hybrids and Nemotron-H (Mamba2), MiniMax-Text-01
// (linear attention), LFM2 (short conv), and the pure Mamba / Mamba2 models.
#include <algorithm>
#include <fmt/format.h>

#include "model/hf_config.hpp"

namespace attnsel::model {

namespace {

constexpr std::int64_t kMaxState = 1 << 20;

// A hybrid's n layers: the attention layer `a` where is_attention(i), the Mamba-like `m`
// elsewhere.
template <class IsAttention>
void interleave_layers(ModelSpec& out, int n, const AttentionLayerSpec& a, const MambaLayerSpec& m,
                       IsAttention is_attention) {
  out.num_hidden_layers = n;
  for (int i = 0; i < n; ++i) {
    if (is_attention(i))
      out.layers.push_back(attention_layer(i, a));
    else
      out.layers.push_back(mamba_layer(i, m));
  }
}

// Mamba-style inner width: `expand * hidden_size` unless given.
std::int64_t expanded_width(const ConfigReader& c, std::string_view expand_field, std::int64_t expand_default) {
  const std::int64_t hidden = c.get_int64("hidden_size", 1, kMaxWidth);
  const std::int64_t expand = c.opt_int64(expand_field, 1, 64).value_or(expand_default);
  return hidden * expand;
}

MambaLayerSpec mamba2_spec(const ConfigReader& c, std::string_view heads_field, std::string_view head_dim_field,
                           std::string_view groups_field, std::string_view state_field, std::string_view conv_field,
                           std::int64_t intermediate) {
  MambaLayerSpec m;
  m.backend = "MAMBA2";
  m.num_heads = c.get_int64(heads_field, 1, kMaxHeads);
  if (c.has(head_dim_field) && !c.is_string(head_dim_field, "auto")) {
    m.head_dim = c.get_int64(head_dim_field, 1, kMaxHeadSize);
  } else {
    if (intermediate % m.num_heads != 0)
      c.fail(heads_field, fmt::format("{} ({}) does not divide the Mamba inner width ({})", c.field_name(heads_field),
                                      m.num_heads, intermediate));
    m.head_dim = intermediate / m.num_heads;
  }
  m.intermediate_size = m.num_heads * m.head_dim;
  m.n_groups = c.opt_int64(groups_field, 1, kMaxHeads).value_or(1);
  m.d_state = c.opt_int64(state_field, 1, kMaxState).value_or(128);
  m.d_conv = c.opt_int64(conv_field, 1, 1024).value_or(4);
  m.heads_field = c.field_name(heads_field);
  return m;
}

}  // namespace

// Qwen3-Next: GDN (linear attention) layers with a full-attention layer every
// full_attention_interval layers (or as layer_types says).
void read_qwen3_next(const ConfigReader& c, ModelSpec& out) {
  const AttentionLayerSpec a = read_gqa_attention(c);
  const int n = read_num_layers(c);
  const auto types = read_layer_types(c, n, {"full_attention", "linear_attention"});
  const int interval = c.opt_int("full_attention_interval", 1, kMaxLayers).value_or(4);
  MambaLayerSpec g;
  g.backend = "GDN_ATTN";
  g.num_heads = c.get_int64("linear_num_value_heads", 1, kMaxHeads);
  g.num_k_heads = c.get_int64("linear_num_key_heads", 1, kMaxHeads);
  g.head_dim = c.get_int64("linear_value_head_dim", 1, kMaxHeadSize);
  g.head_k_dim = c.get_int64("linear_key_head_dim", 1, kMaxHeadSize);
  g.d_conv = c.opt_int64("linear_conv_kernel_dim", 1, 1024).value_or(4);
  g.heads_field = c.field_name("linear_num_value_heads");
  interleave_layers(out, n, a, g, [&](int i) {
    return types ? (*types)[static_cast<std::size_t>(i)] == "full_attention" : (i + 1) % interval == 0;
  });
}

// Jamba: an attention layer every attn_layer_period layers (at attn_layer_offset), Mamba1
// elsewhere (transformers' JambaConfig.layers_block_type).
void read_jamba(const ConfigReader& c, ModelSpec& out) {
  const AttentionLayerSpec a = read_gqa_attention(c);
  const int n = read_num_layers(c);
  const int period = c.opt_int("attn_layer_period", 1, kMaxLayers).value_or(8);
  const int offset = c.opt_int("attn_layer_offset", 0, kMaxLayers).value_or(4);
  if (offset >= period)
    c.fail("attn_layer_offset", fmt::format("attn_layer_offset ({}) must be smaller than attn_layer_period ({})",
                                            offset, period));
  MambaLayerSpec m;
  m.backend = "MAMBA1";
  m.intermediate_size = expanded_width(c, "mamba_expand", 2);
  m.d_state = c.opt_int64("mamba_d_state", 1, kMaxState).value_or(16);
  m.d_conv = c.opt_int64("mamba_d_conv", 1, 1024).value_or(4);
  m.heads_field = "mamba_expand * hidden_size";
  interleave_layers(out, n, a, m, [&](int i) { return i % period == offset; });
}

// Granite-4 hybrids (granitemoehybrid): layer_types of "mamba" (Mamba2) and "attention".
void read_granite_hybrid(const ConfigReader& c, ModelSpec& out) {
  const AttentionLayerSpec a = read_gqa_attention(c);
  const int n = read_num_layers(c);
  const auto types = read_layer_types(c, n, {"mamba", "attention"});
  if (!types) c.fail_missing("layer_types", fmt::format("an array of {} strings, each \"mamba\" or \"attention\"", n));
  const MambaLayerSpec m = mamba2_spec(c, "mamba_n_heads", "mamba_d_head", "mamba_n_groups", "mamba_d_state",
                                       "mamba_d_conv", expanded_width(c, "mamba_expand", 2));
  interleave_layers(out, n, a, m, [&](int i) { return (*types)[static_cast<std::size_t>(i)] == "attention"; });
}

// Nemotron-H: hybrid_override_pattern, one character per layer: M = Mamba2, * = attention,
// - = MLP, E = MoE (the last two have no cache).
void read_nemotron_h(const ConfigReader& c, ModelSpec& out) {
  const int n = read_num_layers(c);
  const std::optional<std::string> pattern = c.opt_string("hybrid_override_pattern");
  if (!pattern) c.fail_missing("hybrid_override_pattern", fmt::format("a string of {} characters from M, *, -, E", n));
  if (pattern->size() != static_cast<std::size_t>(n))
    c.fail_type("hybrid_override_pattern", fmt::format("a string of {} characters (num_hidden_layers)", n));
  for (std::size_t i = 0; i < pattern->size(); ++i)
    if (std::string_view("M*-E").find((*pattern)[i]) == std::string_view::npos)
      c.fail("hybrid_override_pattern",
             fmt::format("character {} is not one of M (Mamba2), * (attention), - (MLP), E (MoE)", i));
  const bool has_attention = pattern->find('*') != std::string::npos;
  const bool has_mamba = pattern->find('M') != std::string::npos;
  AttentionLayerSpec a;
  if (has_attention)
    a = read_gqa_attention(c, {}, "num_attention_heads", "num_key_value_heads",
                           c.has("head_dim") ? "head_dim" : "attention_head_dim");
  MambaLayerSpec m;
  if (has_mamba) {
    m = mamba2_spec(c, "mamba_num_heads", "mamba_head_dim", "n_groups", "ssm_state_size", "conv_kernel",
                    expanded_width(c, "expand", 2));
    // vLLM's NemotronHForCausalLMConfig: the SSM cache is float32 unless the config says otherwise.
    const auto ssm = c.opt_choice("mamba_ssm_cache_dtype", {"float16", "bfloat16", "float32"});
    m.ssm_state_dtype = parse_dtype(ssm.value_or("float32"));
  }
  out.num_hidden_layers = n;
  for (int i = 0; i < n; ++i) {
    const char kind = (*pattern)[static_cast<std::size_t>(i)];
    if (kind == '*') out.layers.push_back(attention_layer(i, a));
    if (kind == 'M') out.layers.push_back(mamba_layer(i, m));
  }
}

// MiniMax-Text-01: attn_type_list, 0 = lightning (linear) attention, 1 = softmax attention.
void read_minimax(const ConfigReader& c, ModelSpec& out) {
  const AttentionLayerSpec a = read_gqa_attention(c);
  const int n = read_num_layers(c);
  const auto kinds = c.opt_int_array("attn_type_list", 0, 1, n);
  if (!kinds) c.fail_missing("attn_type_list", fmt::format("an array of {} integers, 0 (linear) or 1 (softmax)", n));
  MambaLayerSpec lin;
  lin.backend = "LINEAR";
  lin.num_heads = a.num_heads;
  lin.head_dim = a.head_size;
  lin.heads_field = a.heads_field;
  interleave_layers(out, n, a, lin, [&](int i) { return (*kinds)[static_cast<std::size_t>(i)] == 1; });
}

// LFM2: layer_types of "conv" (short convolution) and "full_attention" (or the older
// full_attn_idxs list).
void read_lfm2(const ConfigReader& c, ModelSpec& out) {
  const AttentionLayerSpec a = read_gqa_attention(c);
  const int n = read_num_layers(c);
  std::vector<bool> is_attention(static_cast<std::size_t>(n), false);
  if (auto types = read_layer_types(c, n, {"conv", "full_attention"})) {
    for (int i = 0; i < n; ++i) is_attention[static_cast<std::size_t>(i)] = (*types)[static_cast<std::size_t>(i)] == "full_attention";
  } else if (auto idxs = c.opt_int_list("full_attn_idxs", 0, n - 1, n)) {
    for (int i : *idxs) is_attention[static_cast<std::size_t>(i)] = true;
  } else {
    c.fail_missing("layer_types", fmt::format("an array of {} strings, each \"conv\" or \"full_attention\"", n));
  }
  MambaLayerSpec conv;
  conv.backend = "SHORT_CONV";
  conv.intermediate_size = c.get_int64("hidden_size", 1, kMaxWidth);
  conv.d_conv = c.opt_int64("conv_L_cache", 1, 1024).value_or(3);
  conv.heads_field = c.field_name("hidden_size");
  interleave_layers(out, n, a, conv, [&](int i) { return is_attention[static_cast<std::size_t>(i)]; });
}

// Mamba / Falcon-Mamba: every layer is a Mamba1 mixer.
void read_mamba(const ConfigReader& c, ModelSpec& out) {
  const int n = read_num_layers(c);
  MambaLayerSpec m;
  m.backend = "MAMBA1";
  m.intermediate_size = c.opt_int64("intermediate_size", 1, kMaxWidth).value_or(expanded_width(c, "expand", 2));
  m.d_state = c.opt_int64("state_size", 1, kMaxState).value_or(16);
  m.d_conv = c.opt_int64("conv_kernel", 1, 1024).value_or(4);
  m.heads_field = c.has("intermediate_size") ? c.field_name("intermediate_size") : "expand * hidden_size";
  out.num_hidden_layers = n;
  for (int i = 0; i < n; ++i) out.layers.push_back(mamba_layer(i, m));
}

// Mamba2 (and Codestral-Mamba): every layer is a Mamba2 mixer.
void read_mamba2(const ConfigReader& c, ModelSpec& out) {
  const int n = read_num_layers(c);
  const MambaLayerSpec m =
      mamba2_spec(c, "num_heads", "head_dim", "n_groups", "state_size", "conv_kernel", expanded_width(c, "expand", 2));
  out.num_hidden_layers = n;
  for (int i = 0; i < n; ++i) out.layers.push_back(mamba_layer(i, m));
}

}  // namespace attnsel::model
