// DeepSeek-V2/V3 and Kimi-K2 (MLA) and DeepSeek-V3.2 (sparse MLA with its indexer cache).
#include <algorithm>
#include <array>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "model/hf_config.hpp"
#include "model/mla_shape.hpp"

namespace attnsel::model {

namespace {

// vLLM's ModelArchConfigConvertorBase.is_deepseek_mla
// (vllm/transformers_utils/model_arch_config_convertor.py): MLA only for these model types;
// any other runs vLLM's DeepSeek code with plain attention.
constexpr std::array<std::string_view, 20> kMlaModelTypes = {
    "axk1", "bailing_hybrid", "bailing_hybrid_mtp", "bailing_hybrid_v3_mtp", "deepseek_mtp", "deepseek_v2",
    "deepseek_v3", "deepseek_v32", "deepseek_v4", "glm4_moe_lite", "glm4_moe_lite_mtp", "glm_moe_dsa", "k3_dspark",
    "kimi_k2", "kimi_linear", "longcat_flash", "longcat_flash_ngram", "longcat_next", "pangu_ultra_moe",
    "pangu_ultra_moe_mtp"};

bool is_mla_model_type(std::string_view model_type) {
  return std::find(kMlaModelTypes.begin(), kMlaModelTypes.end(), model_type) != kMlaModelTypes.end();
}

// vLLM's DeepseekV2Attention: one KV head per query head, q/k of qk_nope + qk_rope, and the
// value padded to that width before it is cached.
AttentionLayerSpec plain_attention(const ConfigReader& c, int heads) {
  const int qk_rope = c.get_int("qk_rope_head_dim", 0, kMaxHeadSize);
  const int qk_nope = c.get_int("qk_nope_head_dim", 0, kMaxHeadSize);
  const int v_head = c.get_int("v_head_dim", 1, kMaxHeadSize);
  if (qk_nope + qk_rope < 1) c.fail("qk_nope_head_dim", "qk_nope_head_dim + qk_rope_head_dim must be positive");
  if (v_head > qk_nope + qk_rope)
    c.fail("v_head_dim", fmt::format("v_head_dim ({}) must not exceed qk_nope_head_dim + qk_rope_head_dim ({}): vLLM "
                                     "pads the value to the query width",
                                     v_head, qk_nope + qk_rope));
  (void)read_deepseek_rope(c);  // vLLM builds the same rotary embedding
  AttentionLayerSpec a;
  a.num_heads = heads;
  a.num_kv_heads = heads;
  a.head_size = qk_nope + qk_rope;
  a.head_size_v = a.head_size;
  return a;
}

}  // namespace

// vLLM's ModelConfig: use_mla for an MLA model type with kv_lora_rank, with head size
// kv_lora_rank + qk_rope_head_dim (the latent plus the shared RoPE key; 512 + 64 = 576) and
// one latent KV head. use_sparse when the config has index_topk: each layer then also has an
// indexer cache (DeepseekV32IndexerCache) whose backend the model fixes.
void read_deepseek(const ConfigReader& c, ModelSpec& out) {
  const int n = read_num_layers(c);
  const int heads = c.get_int("num_attention_heads", 1, kMaxHeads);
  const bool use_mla = c.has("kv_lora_rank") && is_mla_model_type(out.model_type);
  const std::optional<int> index_topk = c.opt_int("index_topk", 1, 1 << 30);

  AttentionLayerSpec a;
  if (use_mla) {
    const MlaShape mla = read_mla_shape(c);
    a.num_heads = heads;
    a.use_mla = true;
    a.num_kv_heads = 1;
    a.head_size = mla.latent_size();
    a.head_size_v = mla.kv_lora_rank;
    a.kv_heads_field = "kv_lora_rank";
    a.mla = mla;
  } else {
    if (c.has("kv_lora_rank")) (void)c.get_int("kv_lora_rank", 1, kMaxHeadSize);
    a = plain_attention(c, heads);
  }
  if (index_topk) {
    if (!c.has("kv_lora_rank"))
      c.fail_missing("kv_lora_rank", "a positive integer: sparse attention (index_topk) needs MLA");
    if (!use_mla)
      c.fail("model_type", fmt::format("sparse attention (index_topk) needs MLA, which vLLM runs only for the model "
                                       "types {} (got \"{}\")",
                                       fmt::join(kMlaModelTypes, ", "), printable(out.model_type)));
    a.use_sparse = true;
    a.index_topk = index_topk;
  }

  AttentionLayerSpec indexer;
  if (index_topk) {
    indexer.num_heads = c.opt_int("index_n_heads", 1, kMaxHeads).value_or(64);
    indexer.num_kv_heads = 1;
    indexer.head_size = c.opt_int("index_head_dim", 1, kMaxHeadSize).value_or(128);
    indexer.head_size_v = indexer.head_size;
    indexer.heads_field = "index_n_heads";
    indexer.kv_heads_field = "index_n_heads";
  }

  out.num_hidden_layers = n;
  for (int i = 0; i < n; ++i) {
    out.layers.push_back(attention_layer(i, a));
    if (index_topk) {
      LayerSpec l = attention_layer(i, indexer, "", "indexer");
      l.mixer = MixerKind::indexer;
      out.layers.push_back(std::move(l));
    }
  }
}

}  // namespace attnsel::model
