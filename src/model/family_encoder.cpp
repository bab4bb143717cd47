// Encoder-only (BERT-like) and encoder–decoder (BART/Whisper, T5) models.
#include <fmt/format.h>

#include "model/hf_config.hpp"

namespace attnsel::model {

namespace {

// Heads and head size from d_model; `heads_field` names the config field for messages.
AttentionLayerSpec heads_from_d_model(const ConfigReader& c, std::string_view heads_field, std::int64_t d_model,
                                      std::string_view d_model_field) {
  AttentionLayerSpec a;
  a.num_heads = c.get_int(heads_field, 1, kMaxHeads);
  a.num_kv_heads = a.num_heads;
  if (d_model % a.num_heads != 0)
    c.fail(heads_field, fmt::format("{} ({}) is not divisible by {} ({})", c.field_name(d_model_field), d_model,
                                    c.field_name(heads_field), a.num_heads));
  a.head_size = static_cast<int>(d_model / a.num_heads);
  a.head_size_v = a.head_size;
  a.heads_field = c.field_name(heads_field);
  a.kv_heads_field = a.heads_field;
  return a;
}

// Encoder self-attention (no KV cache), then per decoder layer its self-attention and its
// cross-attention over the encoder output.
void add_encoder_decoder(ModelSpec& out, int encoder_layers, AttentionLayerSpec enc, int decoder_layers,
                         AttentionLayerSpec dec) {
  enc.attn_type = AttentionType::encoder;
  for (int i = 0; i < encoder_layers; ++i) out.layers.push_back(attention_layer(i, enc, "encoder", "self_attn"));
  AttentionLayerSpec cross = dec;
  cross.attn_type = AttentionType::encoder_decoder;
  for (int i = 0; i < decoder_layers; ++i) {
    out.layers.push_back(attention_layer(i, dec, "decoder", "self_attn"));
    out.layers.push_back(attention_layer(i, cross, "decoder", "cross_attn"));
  }
  out.num_hidden_layers = decoder_layers;
}

}  // namespace

// BERT, RoBERTa, XLM-RoBERTa: bidirectional encoder-only attention, no KV cache.
void read_bert(const ConfigReader& c, ModelSpec& out) {
  AttentionLayerSpec a = read_gqa_attention(c);
  a.attn_type = AttentionType::encoder_only;
  const int n = read_num_layers(c);
  out.is_encoder_only = true;
  out.num_hidden_layers = n;
  for (int i = 0; i < n; ++i) out.layers.push_back(attention_layer(i, a));
}

// BART, mBART and Whisper share the field names.
void read_bart(const ConfigReader& c, ModelSpec& out) {
  const std::int64_t d_model = c.get_int64("d_model", 1, kMaxWidth);
  const int enc_layers = read_num_layers(c, "encoder_layers");
  const int dec_layers = read_num_layers(c, "decoder_layers");
  add_encoder_decoder(out, enc_layers, heads_from_d_model(c, "encoder_attention_heads", d_model, "d_model"),
                      dec_layers, heads_from_d_model(c, "decoder_attention_heads", d_model, "d_model"));
}

// T5: the head size is d_kv, independent of d_model.
void read_t5(const ConfigReader& c, ModelSpec& out) {
  AttentionLayerSpec a;
  a.num_heads = c.get_int("num_heads", 1, kMaxHeads);
  a.num_kv_heads = a.num_heads;
  a.head_size = c.get_int("d_kv", 1, kMaxHeadSize);
  a.head_size_v = a.head_size;
  a.heads_field = c.field_name("num_heads");
  a.kv_heads_field = a.heads_field;
  const int enc_layers = read_num_layers(c, "num_layers");
  const int dec_layers = read_num_layers(c, "num_decoder_layers", enc_layers);
  add_encoder_decoder(out, enc_layers, a, dec_layers, a);
}

}  // namespace attnsel::model
