// Internal: the per-family readers behind parse_model_config, and the helpers they share.
// Each family reads the fields transformers' config class reads, with transformers'
// defaults where public config.json files rely on them (Gemma 3's text_config).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attnsel/model.hpp"
#include "model/config_reader.hpp"

namespace attnsel::model {

using FamilyReader = void (*)(const ConfigReader& config, ModelSpec& out);

struct Family {
  std::string_view model_type;
  FamilyReader read;
};

/// Every supported model_type with its reader, sorted by model_type.
std::span<const Family> families();

struct Architecture {
  std::string_view name;  ///< a model class vLLM registers (vllm/model_executor/models/registry.py)
  FamilyReader read;
};

/// Every architecture attnsel reads, sorted by name.
std::span<const Architecture> architectures();

struct FamilyChoice {
  FamilyReader read;
  std::string architecture;  ///< the entry of `architectures` that decided, else its first entry (or "")
};

/// The reader for a config, as vLLM picks the model class: the first entry of
/// `architectures` that attnsel reads, else the model_type's family. ValueError naming both
/// fields and the supported values when neither is known.
FamilyChoice choose_family(const ConfigReader& root, const nlohmann::json& root_json, std::string_view model_type);

// --- shared helpers -------------------------------------------------------------------

/// Defaults for configs that omit fields (transformers fills them from the config class).
struct GqaDefaults {
  std::optional<int> num_heads;
  std::optional<int> num_kv_heads;
  std::optional<int> head_dim;
};

/// Query heads, KV heads (default: query heads) and the head size (`head_dim`, else
/// hidden_size / heads); ValueError when the heads do not divide.
AttentionLayerSpec read_gqa_attention(const ConfigReader& c, const GqaDefaults& defaults = {},
                                      std::string_view heads_field = "num_attention_heads",
                                      std::string_view kv_heads_field = "num_key_value_heads",
                                      std::string_view head_dim_field = "head_dim");
/// `num_hidden_layers` (or `field`) in [1, kMaxLayers]; `fallback` when absent.
int read_num_layers(const ConfigReader& c, std::string_view field = "num_hidden_layers",
                    std::optional<int> fallback = std::nullopt);
/// `layer_types` as per-layer strings (nullopt when absent), checked against `choices`.
std::optional<std::vector<std::string>> read_layer_types(const ConfigReader& c, int num_layers,
                                                         const std::vector<std::string_view>& choices);
/// A decoder self-attention layer.
LayerSpec attention_layer(int index, const AttentionLayerSpec& a, std::string stack = "",
                          std::string role = "self_attn");
/// A Mamba-like layer.
LayerSpec mamba_layer(int index, const MambaLayerSpec& m);

// --- family readers (one file per family group) ----------------------------------------

void read_llama(const ConfigReader& c, ModelSpec& out);      // llama, mistral, mixtral
void read_qwen(const ConfigReader& c, ModelSpec& out);       // qwen2, qwen2_moe, qwen3, qwen3_moe
void read_gemma2(const ConfigReader& c, ModelSpec& out);
void read_gemma3_text(const ConfigReader& c, ModelSpec& out);
void read_gemma3(const ConfigReader& c, ModelSpec& out);     // multimodal wrapper (text_config)
void read_gpt_oss(const ConfigReader& c, ModelSpec& out);
void read_deepseek(const ConfigReader& c, ModelSpec& out);   // deepseek_v2/v3/v32, and Kimi-K2 by architecture
void read_qwen3_next(const ConfigReader& c, ModelSpec& out);
void read_jamba(const ConfigReader& c, ModelSpec& out);
void read_granite_hybrid(const ConfigReader& c, ModelSpec& out);
void read_nemotron_h(const ConfigReader& c, ModelSpec& out);
void read_minimax(const ConfigReader& c, ModelSpec& out);
void read_lfm2(const ConfigReader& c, ModelSpec& out);
void read_mamba(const ConfigReader& c, ModelSpec& out);      // mamba, falcon_mamba
void read_mamba2(const ConfigReader& c, ModelSpec& out);
void read_bert(const ConfigReader& c, ModelSpec& out);       // bert, roberta, xlm-roberta
void read_bart(const ConfigReader& c, ModelSpec& out);       // bart, mbart, whisper
void read_t5(const ConfigReader& c, ModelSpec& out);

}  // namespace attnsel::model
