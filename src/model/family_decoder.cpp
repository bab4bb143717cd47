// Decoder-only transformer families with standard (GQA) attention: Llama/Mistral/Mixtral,
// Qwen2/Qwen3 (and MoE), Gemma 2, Gemma 3 (text and with vision), gpt-oss.
#include <algorithm>
#include <fmt/format.h>

#include "model/hf_config.hpp"

namespace attnsel::model {

namespace {

constexpr int kMaxWindow = 1 << 30;
const std::vector<std::string_view> kSlidingLayerTypes = {"full_attention", "sliding_attention"};

// Builds one self-attention layer per index; `sliding(i)` says whether layer i uses the window.
template <class IsSliding>
void add_layers(ModelSpec& out, int num_layers, const AttentionLayerSpec& base, std::optional<int> window,
                IsSliding sliding) {
  out.num_hidden_layers = num_layers;
  for (int i = 0; i < num_layers; ++i) {
    AttentionLayerSpec a = base;
    if (sliding(i)) a.sliding_window = window;
    out.layers.push_back(attention_layer(i, a));
  }
}

// A layer_types entry of "sliding_attention" needs a window to slide.
int require_window(const ConfigReader& c, std::optional<int> window) {
  if (!window) c.fail_missing("sliding_window", "a positive integer, since layer_types has sliding_attention layers");
  return *window;
}

}  // namespace

// vLLM's Llama model: `layer_types` decides per layer; otherwise the model-level
// sliding_window (Mistral 7B v0.1) applies to every layer.
void read_llama(const ConfigReader& c, ModelSpec& out) {
  const AttentionLayerSpec a = read_gqa_attention(c);
  const int n = read_num_layers(c);
  const std::optional<int> window = c.opt_int("sliding_window", 1, kMaxWindow);
  if (auto types = read_layer_types(c, n, kSlidingLayerTypes)) {
    const bool any = std::find(types->begin(), types->end(), "sliding_attention") != types->end();
    const std::optional<int> w = any ? std::optional<int>(require_window(c, window)) : std::nullopt;
    add_layers(out, n, a, w, [&](int i) { return (*types)[static_cast<std::size_t>(i)] == "sliding_attention"; });
    return;
  }
  add_layers(out, n, a, window, [&](int) { return window.has_value(); });
}

// transformers' Qwen2Config: the window applies only with use_sliding_window, to the layers
// from max_window_layers on (or as layer_types says).
void read_qwen(const ConfigReader& c, ModelSpec& out) {
  const AttentionLayerSpec a = read_gqa_attention(c);
  const int n = read_num_layers(c);
  const bool use_sliding_window = c.opt_bool("use_sliding_window", false);
  const std::optional<int> window = c.opt_int("sliding_window", 1, kMaxWindow);
  const int max_window_layers = c.opt_int("max_window_layers", 0, kMaxLayers).value_or(28);
  const auto types = read_layer_types(c, n, kSlidingLayerTypes);
  if (!use_sliding_window) {
    add_layers(out, n, a, std::nullopt, [](int) { return false; });
    return;
  }
  const int w = require_window(c, window);
  if (types) {
    add_layers(out, n, a, w, [&](int i) { return (*types)[static_cast<std::size_t>(i)] == "sliding_attention"; });
    return;
  }
  add_layers(out, n, a, w, [&](int i) { return i >= max_window_layers; });
}

// transformers' Gemma2Config defaults; layers alternate sliding (even) and full (odd).
void read_gemma2(const ConfigReader& c, ModelSpec& out) {
  AttentionLayerSpec a = read_gqa_attention(c, GqaDefaults{8, 4, 256});
  const int n = read_num_layers(c, "num_hidden_layers", 26);
  const int window = c.opt_int("sliding_window", 1, kMaxWindow).value_or(4096);
  // Absent means transformers' default 50.0; an explicit null turns soft-capping off.
  a.logits_soft_cap = c.present("attn_logit_softcapping") ? c.opt_number("attn_logit_softcapping") : 50.0;
  if (auto types = read_layer_types(c, n, kSlidingLayerTypes)) {
    add_layers(out, n, a, window, [&](int i) { return (*types)[static_cast<std::size_t>(i)] == "sliding_attention"; });
    return;
  }
  add_layers(out, n, a, window, [](int i) { return i % 2 == 0; });
}

// transformers' Gemma3TextConfig defaults; every sliding_window_pattern-th layer is full.
void read_gemma3_text(const ConfigReader& c, ModelSpec& out) {
  AttentionLayerSpec a = read_gqa_attention(c, GqaDefaults{8, 4, 256});
  const int n = read_num_layers(c, "num_hidden_layers", 26);
  const int window = c.opt_int("sliding_window", 1, kMaxWindow).value_or(4096);
  const int pattern = c.opt_int("sliding_window_pattern", 1, kMaxLayers).value_or(6);
  a.logits_soft_cap = c.opt_number("attn_logit_softcapping");
  if (auto types = read_layer_types(c, n, kSlidingLayerTypes)) {
    add_layers(out, n, a, window, [&](int i) { return (*types)[static_cast<std::size_t>(i)] == "sliding_attention"; });
    return;
  }
  add_layers(out, n, a, window, [&](int i) { return (i + 1) % pattern != 0; });
}

// Gemma 3 with vision: the language model lives in text_config (which public configs leave
// mostly to the defaults); the vision tower's ViT attention has no KV cache.
void read_gemma3(const ConfigReader& c, ModelSpec& out) {
  static const nlohmann::json kEmpty = nlohmann::json::object();
  if (auto text = c.opt_object("text_config")) {
    read_gemma3_text(*text, out);
  } else {
    read_gemma3_text(ConfigReader(kEmpty, c.source(), "text_config."), out);
  }
}

// gpt-oss: every layer has learned sinks; even layers slide over a 128-token window.
void read_gpt_oss(const ConfigReader& c, ModelSpec& out) {
  AttentionLayerSpec a = read_gqa_attention(c);
  a.has_sink = true;
  const int n = read_num_layers(c);
  const int window = c.get_int("sliding_window", 1, kMaxWindow);
  if (auto types = read_layer_types(c, n, kSlidingLayerTypes)) {
    add_layers(out, n, a, window, [&](int i) { return (*types)[static_cast<std::size_t>(i)] == "sliding_attention"; });
    return;
  }
  add_layers(out, n, a, window, [](int i) { return i % 2 == 0; });
}

}  // namespace attnsel::model
