// Layer: model (src/layers.txt)
// A model's layers as the selector sees them: read from a Hugging Face `config.json`
// (transformers format) into one LayerSpec per attention, Mamba-like or indexer layer.
//
// Thread-safety: plain values; the functions are pure and may run concurrently.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attnsel/export.hpp"
#include "attnsel/types.hpp"

namespace attnsel {

/// How a layer mixes tokens, i.e. which selector decides its backend.
enum class MixerKind : std::uint8_t {
  attention,  ///< an attention layer: get_attn_backend (platform priority lists)
  mamba,      ///< a Mamba-like layer (Mamba1/2, GDN, linear attention, short conv): get_mamba_attn_backend
  indexer,    ///< DeepSeek-V3.2's sparse-attention indexer cache: a backend fixed by the model
};
ATTNSEL_API std::string_view mixer_kind_name(MixerKind k);  ///< "attention", "mamba", "indexer"

/// An MLA layer's widths and softmax scale, as vLLM's DeepseekV2MLAAttention derives them
/// from config.json (vllm/model_executor/models/deepseek_v2.py). Tensor parallelism splits
/// only the heads (AttentionLayerSpec::num_heads): every rank caches the whole latent.
/// Thread-safety: a plain value.
struct ATTNSEL_API MlaShape {
  int kv_lora_rank = 0;            ///< the latent's width, also the absorbed decode's value width (512)
  int qk_rope_head_dim = 0;        ///< the shared rotary key's width (64)
  int qk_nope_head_dim = 0;        ///< each head's non-rotary query and key width (128)
  int v_head_dim = 0;              ///< each head's value width (128)
  std::optional<int> q_lora_rank;  ///< the query's low-rank width; nullopt = a plain q_proj (DeepSeek-V2-Lite)
  /// The RoPE type as vLLM's DeepSeek layer runs it: "default", else "deepseek_yarn" (every
  /// other type is renamed to it) or "deepseek_llama_scaling" (apply_yarn_scaling false).
  std::string rope_type = "default";
  std::optional<double> rope_factor;  ///< the RoPE parameters' factor, when given
  double mscale_all_dim = 0.0;        ///< the RoPE parameters' mscale_all_dim (absent: 0)
  /// yarn's attention factor m: 0.1 · mscale_all_dim · ln(factor) + 1 for deepseek_yarn with
  /// factor > 1, else 1.
  double yarn_mscale = 1.0;
  /// qk_head_size()^-0.5 · yarn_mscale²: the scale of every MLA path (absorbed decode,
  /// prefill, sparse).
  double softmax_scale = 0.0;

  int latent_size() const { return kv_lora_rank + qk_rope_head_dim; }       ///< one cached entry (576)
  int qk_head_size() const { return qk_nope_head_dim + qk_rope_head_dim; }  ///< the MHA query/key width (192)
};

/// An attention layer's shape and flags, before tensor parallelism (total heads).
/// Thread-safety: a plain value.
struct ATTNSEL_API AttentionLayerSpec {
  int num_heads = 0;     ///< query heads
  int num_kv_heads = 0;  ///< KV heads (MLA keeps one latent head)
  int head_size = 0;     ///< K head size; MLA: kv_lora_rank + qk_rope_head_dim
  int head_size_v = 0;   ///< V head size (equals head_size except for MLA and DiffKV models)
  bool use_mla = false;
  bool use_sparse = false;     ///< DeepSeek-V3.2's sparse MLA (index_topk)
  bool has_sink = false;       ///< learned attention sinks (gpt-oss)
  bool use_mm_prefix = false;  ///< bidirectional attention over multimodal prefix tokens (Gemma 3 with vision)
  AttentionType attn_type = AttentionType::decoder;
  std::optional<int> sliding_window;       ///< window in tokens; nullopt = full attention
  std::optional<double> logits_soft_cap;   ///< Gemma 2's attn_logit_softcapping (informational)
  std::optional<MlaShape> mla;             ///< MLA only (use_mla)
  std::optional<int> index_topk;           ///< sparse MLA only
  /// The backend class the layer brings itself (vLLM's Attention(attn_backend=...)): a
  /// qualified class name resolved through the registry's class table; the selector is not
  /// consulted. nullopt = selected as usual.
  std::optional<std::string> backend_class;
  std::string heads_field = "num_attention_heads";     ///< config field the heads came from (for messages)
  std::string kv_heads_field = "num_key_value_heads";  ///< config field the KV heads came from
};

/// A Mamba-like layer: its MambaAttentionBackendEnum member and the sizes of its
/// per-sequence state (all totals, before tensor parallelism; 0 = not used by this kind).
/// Thread-safety: a plain value.
struct ATTNSEL_API MambaLayerSpec {
  std::string backend;  ///< "MAMBA1", "MAMBA2", "GDN_ATTN", "LINEAR", "SHORT_CONV"
  std::int64_t intermediate_size = 0;  ///< Mamba1/2 inner width, short-conv hidden size
  std::int64_t num_heads = 0;          ///< Mamba2 / linear-attention heads; GDN value heads
  std::int64_t head_dim = 0;           ///< Mamba2 / linear-attention head dim; GDN value head dim
  std::int64_t num_k_heads = 0;        ///< GDN key heads
  std::int64_t head_k_dim = 0;         ///< GDN key head dim
  std::int64_t n_groups = 0;           ///< Mamba2 groups
  std::int64_t d_state = 0;            ///< SSM state size
  std::int64_t d_conv = 0;             ///< causal-conv kernel width
  std::string heads_field;             ///< config field that must divide by the TP size (for messages)
  /// The SSM / recurrent state's dtype when the model fixes it (Nemotron-H: float32, vLLM's
  /// mamba_ssm_cache_dtype default for it); nullopt = the model dtype ("auto").
  std::optional<DType> ssm_state_dtype;
};

/// One layer with a cache (or at least an attention backend). Thread-safety: a plain value.
struct ATTNSEL_API LayerSpec {
  std::string stack;  ///< "" for decoder-only models; "encoder" / "decoder" for encoder–decoder models
  int index = 0;      ///< index within its stack
  std::string role;   ///< "self_attn", "cross_attn", "mamba", "indexer"
  MixerKind mixer = MixerKind::attention;
  std::optional<AttentionLayerSpec> attention;  ///< set for attention and indexer layers
  std::optional<MambaLayerSpec> mamba;          ///< set for Mamba-like layers
};

/// A model as read from its config.json. Thread-safety: a plain value.
struct ATTNSEL_API ModelSpec {
  std::string source;      ///< the file read, or "<built-in default>"
  std::string model_type;  ///< config.json's model_type
  /// The entry of `architectures` that decided the family (vLLM's model class), else its
  /// first entry; "" when the config has none.
  std::string architecture;
  std::optional<DType> config_dtype;  ///< torch_dtype / dtype; nullopt = not given (transformers' float32)
  bool config_dtype_float32 = false;  ///< the config said float32 (vLLM downcasts it, see resolve_model_dtype)
  bool is_encoder_only = false;       ///< a pooling model (BERT-like)
  bool is_mm_prefix_lm = false;       ///< vLLM's model_config.is_mm_prefix_lm
  int num_hidden_layers = 0;          ///< decoder (or only) stack depth, including layers without a cache
  int tensor_parallel_size = 1;       ///< head counts and widths are per rank of this many (see shard_model)
  std::vector<LayerSpec> layers;      ///< in model order: encoder stack first, then decoder
};

/// Reads `path` (a config.json, or a folder holding one). Throws ValueError naming the file,
/// the field and what was expected (missing file, malformed JSON, missing or mistyped
/// field, an unknown architecture with an unknown model_type, inconsistent heads).
ATTNSEL_API ModelSpec load_model_config(const std::filesystem::path& path);
/// Parses config.json text; `source` names it in error messages.
ATTNSEL_API ModelSpec parse_model_config(std::string_view json_text, std::string_view source);
/// The model planned when none is given: a Llama-3-8B-like shape (32 layers, 32 query and
/// 8 KV heads of 128, bfloat16).
ATTNSEL_API ModelSpec default_model();
/// Every model_type the reader understands, sorted.
ATTNSEL_API std::span<const std::string_view> supported_model_types();
/// Every architecture (config.json's `architectures` entry, vLLM's model class) the reader
/// understands, sorted. The first entry of a config's `architectures` found here decides its
/// family, as in vLLM; the model_type decides only when none is.
ATTNSEL_API std::span<const std::string_view> supported_architectures();

/// vLLM's model dtype: `override` ("auto", "half", "bfloat16", "float32", ...; empty or
/// "auto" = from the config). "auto" keeps the config's dtype, except that a float32 (or
/// absent) config dtype becomes bfloat16 — float16 for pooling models — as vLLM's
/// _resolve_auto_dtype does on GPUs. ValueError for an unknown name.
ATTNSEL_API DType resolve_model_dtype(const ModelSpec& model, std::string_view override_text);

/// "0-31", "0-40 (every 2nd)", "0-4,6-10,12" — a compact, readable form of layer indices.
ATTNSEL_API std::string format_layer_indices(std::span<const int> sorted_indices);

}  // namespace attnsel
