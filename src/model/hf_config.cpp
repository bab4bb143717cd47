#include "model/hf_config.hpp"

#include <algorithm>
#include <array>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fstream>
#include <sstream>

#include "attnsel/errors.hpp"

namespace attnsel {

namespace model {

namespace {

constexpr std::array<Family, 30> kFamilies = {{
    {"bart", read_bart},
    {"bert", read_bert},
    {"deepseek_v2", read_deepseek},
    {"deepseek_v3", read_deepseek},
    {"deepseek_v32", read_deepseek},
    {"falcon_mamba", read_mamba},
    {"gemma2", read_gemma2},
    {"gemma3", read_gemma3},
    {"gemma3_text", read_gemma3_text},
    {"gpt_oss", read_gpt_oss},
    {"granitemoehybrid", read_granite_hybrid},
    {"jamba", read_jamba},
    {"lfm2", read_lfm2},
    {"llama", read_llama},
    {"mamba", read_mamba},
    {"mamba2", read_mamba2},
    {"mbart", read_bart},
    {"minimax", read_minimax},
    {"mistral", read_llama},
    {"mixtral", read_llama},
    {"nemotron_h", read_nemotron_h},
    {"qwen2", read_qwen},
    {"qwen2_moe", read_qwen},
    {"qwen3", read_qwen},
    {"qwen3_moe", read_qwen},
    {"qwen3_next", read_qwen3_next},
    {"roberta", read_bert},
    {"t5", read_t5},
    {"whisper", read_bart},
    {"xlm-roberta", read_bert},
}};

// vLLM's ModelConfig.is_mm_prefix_lm: the config's own flag, else a list of model types.
bool read_is_mm_prefix_lm(const ConfigReader& root, std::string_view model_type) {
  if (root.has("is_mm_prefix_lm")) return root.opt_bool("is_mm_prefix_lm", false);
  static constexpr std::array<std::string_view, 6> kPrefixLm = {"bagel", "gemma3", "molmo2",
                                                                "moondream3", "paligemma", "umm"};
  return std::find(kPrefixLm.begin(), kPrefixLm.end(), model_type) != kPrefixLm.end();
}

// torch_dtype (transformers < 5) or dtype (transformers 5), on the config or its text_config.
void read_config_dtype(const ConfigReader& root, ModelSpec& out) {
  const std::vector<std::string_view> choices = {"float16", "bfloat16", "float32"};
  auto from = [&](const ConfigReader& c) -> std::optional<std::string> {
    if (auto d = c.opt_choice("dtype", choices)) return d;
    return c.opt_choice("torch_dtype", choices);
  };
  std::optional<std::string> text = from(root);
  if (!text)
    if (auto tc = root.opt_object("text_config")) text = from(*tc);
  if (!text) return;
  out.config_dtype = parse_dtype(*text);
  out.config_dtype_float32 = *text == "float32";
}

}  // namespace

std::span<const Family> families() { return kFamilies; }

AttentionLayerSpec read_gqa_attention(const ConfigReader& c, const GqaDefaults& defaults,
                                      std::string_view heads_field, std::string_view kv_heads_field,
                                      std::string_view head_dim_field) {
  AttentionLayerSpec a;
  if (defaults.num_heads)
    a.num_heads = c.opt_int(heads_field, 1, kMaxHeads).value_or(*defaults.num_heads);
  else
    a.num_heads = c.get_int(heads_field, 1, kMaxHeads);
  a.num_kv_heads = c.opt_int(kv_heads_field, 1, kMaxHeads).value_or(defaults.num_kv_heads.value_or(a.num_heads));
  if (auto hd = c.opt_int(head_dim_field, 1, kMaxHeadSize)) {
    a.head_size = *hd;
  } else if (defaults.head_dim) {
    a.head_size = *defaults.head_dim;
  } else {
    const std::int64_t hidden = c.get_int64("hidden_size", 1, kMaxWidth);
    if (hidden % a.num_heads != 0)
      c.fail("hidden_size", fmt::format("hidden_size ({}) is not divisible by {} ({}), and no {} is given", hidden,
                                        c.field_name(heads_field), a.num_heads, c.field_name(head_dim_field)));
    a.head_size = static_cast<int>(hidden / a.num_heads);
  }
  a.head_size_v = a.head_size;
  if (a.num_heads % a.num_kv_heads != 0)
    c.fail(kv_heads_field, fmt::format("num_heads ({}) is not divisible by num_kv_heads ({})", a.num_heads,
                                       a.num_kv_heads));
  a.heads_field = c.field_name(heads_field);
  a.kv_heads_field = c.field_name(kv_heads_field);
  return a;
}

int read_num_layers(const ConfigReader& c, std::string_view field, std::optional<int> fallback) {
  if (fallback) return c.opt_int(field, 1, kMaxLayers).value_or(*fallback);
  return c.get_int(field, 1, kMaxLayers);
}

std::optional<std::vector<std::string>> read_layer_types(const ConfigReader& c, int num_layers,
                                                         const std::vector<std::string_view>& choices) {
  return c.opt_choice_array("layer_types", choices, num_layers);
}

LayerSpec attention_layer(int index, const AttentionLayerSpec& a, std::string stack, std::string role) {
  LayerSpec l;
  l.stack = std::move(stack);
  l.index = index;
  l.role = std::move(role);
  l.mixer = MixerKind::attention;
  l.attention = a;
  return l;
}

LayerSpec mamba_layer(int index, const MambaLayerSpec& m) {
  LayerSpec l;
  l.index = index;
  l.role = "mamba";
  l.mixer = MixerKind::mamba;
  l.mamba = m;
  return l;
}

}  // namespace model

std::string_view mixer_kind_name(MixerKind k) {
  switch (k) {
    case MixerKind::attention: return "attention";
    case MixerKind::mamba: return "mamba";
    case MixerKind::indexer: return "indexer";
  }
  return "attention";
}

std::span<const std::string_view> supported_model_types() {
  static const std::vector<std::string_view> kTypes = [] {
    std::vector<std::string_view> v;
    for (const model::Family& f : model::families()) v.push_back(f.model_type);
    return v;
  }();
  return kTypes;
}

ModelSpec parse_model_config(std::string_view json_text, std::string_view source) {
  const nlohmann::json root_json = model::parse_json(json_text, source);
  if (!root_json.is_object())
    throw ValueError(fmt::format("{}: expected a JSON object at the top level, got {}", source,
                                 model::describe_json(root_json)));
  const model::ConfigReader root(root_json, std::string(source));
  // transformers needs a model_type to read any config.json, whatever its architectures.
  const std::optional<std::string> model_type = root.opt_string("model_type");
  if (!model_type)
    root.fail_missing("model_type", fmt::format("one of: {}", fmt::join(supported_model_types(), ", ")));
  const model::FamilyChoice family = model::choose_family(root, root_json, *model_type);

  ModelSpec m;
  m.source = std::string(source);
  m.model_type = *model_type;
  m.architecture = family.architecture;
  model::read_config_dtype(root, m);
  family.read(root, m);
  m.is_mm_prefix_lm = model::read_is_mm_prefix_lm(root, m.model_type);
  if (m.is_mm_prefix_lm)
    for (LayerSpec& l : m.layers)
      if (l.attention && l.mixer == MixerKind::attention) l.attention->use_mm_prefix = true;
  return m;
}

ModelSpec load_model_config(const std::filesystem::path& path) {
  if (path.empty()) throw ValueError("the model path is empty: give a config.json or a folder holding one");
  std::error_code ec;
  std::filesystem::path file = path;
  if (std::filesystem::is_directory(path, ec)) {
    file = path / "config.json";
    if (!std::filesystem::exists(file, ec))
      throw ValueError(fmt::format("{}: no config.json in this folder", path.string()));
  } else if (!std::filesystem::exists(path, ec)) {
    throw ValueError(fmt::format("{}: no such file or folder (expected a config.json or a folder holding one)",
                                 path.string()));
  }
  constexpr std::uintmax_t kMaxBytes = 64ull << 20;
  const std::uintmax_t size = std::filesystem::file_size(file, ec);
  if (ec) throw ValueError(fmt::format("{}: cannot read: {}", file.string(), ec.message()));
  if (size > kMaxBytes)
    throw ValueError(fmt::format("{}: {} bytes is too large for a config.json (limit {})", file.string(), size,
                                 kMaxBytes));
  std::ifstream in(file, std::ios::binary);
  if (!in) throw ValueError(fmt::format("{}: cannot open for reading", file.string()));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_model_config(text.str(), file.string());
}

ModelSpec default_model() {
  ModelSpec m;
  m.source = "<built-in default>";
  m.model_type = "llama";
  m.architecture = "LlamaForCausalLM";
  m.config_dtype = DType::bfloat16;
  m.num_hidden_layers = 32;
  AttentionLayerSpec a;
  a.num_heads = 32;
  a.num_kv_heads = 8;
  a.head_size = 128;
  a.head_size_v = 128;
  for (int i = 0; i < m.num_hidden_layers; ++i) m.layers.push_back(model::attention_layer(i, a));
  return m;
}

DType resolve_model_dtype(const ModelSpec& model, std::string_view override_text) {
  const std::string t = to_lower(override_text);
  if (!t.empty() && t != "auto") {
    if (t == "float" || t == "float32" || t == "torch.float32") return DType::float32;
    if (auto d = parse_dtype(t)) return *d;
    throw ValueError(fmt::format("Unknown dtype '{}'. Valid choices are: auto, half, float16, bfloat16, float, "
                                 "float32",
                                 override_text));
  }
  if (model.config_dtype && !model.config_dtype_float32) return *model.config_dtype;
  // vLLM downcasts float32 checkpoints (and transformers' implicit float32) to the
  // platform's preferred half type; pooling models prefer float16.
  return model.is_encoder_only ? DType::float16 : DType::bfloat16;
}

}  // namespace attnsel
