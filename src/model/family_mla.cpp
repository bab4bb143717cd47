// DeepSeek-V2/V3 (MLA) and DeepSeek-V3.2 (sparse MLA with its indexer cache).
#include <fmt/format.h>

#include "model/hf_config.hpp"

namespace attnsel::model {

// vLLM's ModelConfig: use_mla when kv_lora_rank is set, with head size kv_lora_rank +
// qk_rope_head_dim (the latent plus the shared RoPE key; 512 + 64 = 576) and one latent KV
// head. use_sparse when the config has index_topk: each layer then also has an indexer
// cache (DeepseekV32IndexerCache) whose backend the model fixes.
void read_deepseek(const ConfigReader& c, ModelSpec& out) {
  const int n = read_num_layers(c);
  const int heads = c.get_int("num_attention_heads", 1, kMaxHeads);
  const int qk_rope = c.get_int("qk_rope_head_dim", 0, kMaxHeadSize);
  const int qk_nope = c.get_int("qk_nope_head_dim", 0, kMaxHeadSize);
  const int v_head = c.get_int("v_head_dim", 1, kMaxHeadSize);
  const std::optional<int> kv_lora_rank = c.opt_int("kv_lora_rank", 1, kMaxHeadSize);
  const std::optional<int> index_topk = c.opt_int("index_topk", 1, 1 << 30);

  AttentionLayerSpec a;
  a.num_heads = heads;
  a.qk_nope_head_dim = qk_nope;
  if (kv_lora_rank) {
    a.use_mla = true;
    a.num_kv_heads = 1;
    a.head_size = *kv_lora_rank + qk_rope;
    a.head_size_v = *kv_lora_rank;
    a.kv_heads_field = "kv_lora_rank";
  } else {
    // Without a latent the model runs plain multi-head attention with unequal K/V heads.
    a.num_kv_heads = c.opt_int("num_key_value_heads", 1, kMaxHeads).value_or(heads);
    a.head_size = qk_nope + qk_rope;
    a.head_size_v = v_head;
    if (a.head_size < 1) c.fail("qk_nope_head_dim", "qk_nope_head_dim + qk_rope_head_dim must be positive");
    if (heads % a.num_kv_heads != 0)
      c.fail("num_key_value_heads",
             fmt::format("num_heads ({}) is not divisible by num_kv_heads ({})", heads, a.num_kv_heads));
  }
  if (index_topk) {
    if (!kv_lora_rank) c.fail_missing("kv_lora_rank", "a positive integer: sparse attention (index_topk) needs MLA");
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
