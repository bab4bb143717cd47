// Layer: model (src/layers.txt)
// Whole-model plans: every layer of a model grouped by KV-cache kind and selector
// configuration, each group's backend (vLLM's cached selection with per-kind overrides, or
// the Mamba selector), the block size by vLLM's rule, the KV-cache layout resolved across
// all of the model's backends, and the KV-cache bytes per token.
//
// Thread-safety: plans are plain values; make_plan may run concurrently on different
// Selectors, or on one Selector (whose cache is thread-safe).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "attnsel/export.hpp"
#include "attnsel/engine_args.hpp"
#include "attnsel/kv_layout_resolution.hpp"
#include "attnsel/mla.hpp"
#include "attnsel/model.hpp"
#include "attnsel/selector.hpp"

namespace attnsel {

/// Splits heads (and Mamba widths) across `tensor_parallel_size` ranks, as vLLM's
/// ModelConfig and parallel layers do. ValueError naming the file and the field when a
/// count does not divide: "Total number of attention heads (32) must be divisible by tensor
/// parallel size (3)." KV heads fewer than the TP size are replicated (one per rank).
ATTNSEL_API ModelSpec shard_model(const ModelSpec& model, int tensor_parallel_size);

/// The runtime facts a plan takes from the model (model.head_size, model.num_attention_heads,
/// model.is_mm_prefix_lm, ..., per tensor-parallel rank) as "name=value" overrides for
/// make_platform. Put the user's --fact values after them so that they win. The engine
/// options' facts are not among them: with_engine (attnsel/engine_facts.hpp) applies those.
ATTNSEL_API std::vector<std::string> plan_facts(const ModelSpec& model, const EngineOptions& options);

/// Builds the platform a plan runs on: `platform_spec` ("cuda:9.0", ...; nullopt = the host)
/// with plan_facts() and then `user_facts` applied, as the engine options leave it
/// (with_engine).
ATTNSEL_API std::shared_ptr<const Platform> make_plan_platform(const ModelSpec& model, const EngineOptions& options,
                                                               std::optional<std::string_view> platform_spec,
                                                         const std::vector<std::string>& user_facts = {},
                                                         std::optional<SelectionMode> mode = std::nullopt);

/// One layer of a group: its stack ("" / "encoder" / "decoder"), index and role.
/// Thread-safety: a plain value.
struct ATTNSEL_API LayerRef {
  std::string stack;
  int index = 0;
  std::string role;
};

/// Layers that share a KV-cache kind, a selector configuration and a cache shape, and so
/// one backend. Thread-safety: a plain value (the selection it holds is immutable).
struct ATTNSEL_API PlanGroup {
  std::vector<LayerRef> layers;
  std::string layers_text;  ///< "decoder 0-31 (cross_attn)", "0-40 (every 2nd)"
  MixerKind mixer = MixerKind::attention;
  KVCacheSpecKind kind = KVCacheSpecKind::full_attention;
  AttentionType attn_type = AttentionType::decoder;

  // Attention groups: the selector's inputs and outcome.
  std::optional<LayerRequest> request;
  std::optional<AttentionSelectorConfig> config;
  std::optional<std::string> requested_backend;  ///< after the per-kind override; nullopt = automatic
  std::string request_source;                    ///< "automatic", "attention backend", "backend_per_kind[...]"
  std::shared_ptr<const Selection> selection;    ///< null when the selection failed (see error) or was skipped
  /// The backend a layer brings itself (its own class, or the indexer's); no selection ran.
  std::shared_ptr<const AttentionBackend> layer_backend;

  std::string backend;     ///< the chosen backend's name ("" when it failed)
  std::string class_path;  ///< the chosen class's qualified name
  std::optional<std::string> error;  ///< why no backend could be chosen
  ErrorKind error_kind = ErrorKind::value;
  std::vector<Candidate> failed_candidates;  ///< the candidates of a failed selection

  // The KV cache (per rank).
  bool has_kv_cache = false;
  int num_kv_heads = 0;      ///< per rank (MLA and the indexer: 1)
  int head_size = 0;
  int num_states = 0;        ///< 2 (K and V), or 1 (MLA latent, indexer keys)
  std::optional<int> sliding_window;
  std::optional<std::int64_t> kv_bytes_per_token;     ///< per layer; nullopt when the cache dtype is not modelled
  std::optional<std::int64_t> state_bytes_per_sequence;  ///< Mamba-like layers, per layer
  std::optional<int> kernel_block_size;                ///< select_common_block_size's result for this group
  std::vector<std::string> notes;

  /// MLA groups: the layers' widths and softmax scale (their heads per rank are
  /// request->num_heads); see mla_kernel_dims.
  std::optional<MlaShape> mla;
};

/// An MLA group's kernel dimensions on this rank (heads divided by the TP size, the latent
/// whole), for kernel::MlaLayerParams with `group.mla->softmax_scale`. ValueError for a
/// group without MLA layers.
ATTNSEL_API kernel::MlaDims mla_kernel_dims(const PlanGroup& group);

/// How the block size was chosen. Thread-safety: a plain value.
struct ATTNSEL_API BlockSizeChoice {
  int block_size = 16;
  bool user_specified = false;
  std::string source;  ///< "--block-size", "FLASH_ATTN.get_preferred_block_size(16)", ...; empty = not chosen yet
  /// Hybrid attention + Mamba models: the size before vLLM raised it so that one attention
  /// page holds a Mamba state page (nullopt = not raised).
  std::optional<int> raised_from;
  /// Hybrid models: the Mamba state page (bytes per layer, per rank) and, when it is smaller
  /// than the attention page, the size vLLM pads it to.
  std::optional<std::int64_t> mamba_page_bytes;
  std::optional<std::int64_t> mamba_page_padded;
};

/// A whole model's plan. Thread-safety: a plain value.
struct ATTNSEL_API ModelPlan {
  std::string model_source;
  std::string model_type;
  std::string platform;  ///< the platform's spec
  std::string platform_description;
  SelectionMode mode = SelectionMode::reference;
  DType dtype = DType::bfloat16;
  CacheDType kv_cache_dtype = CacheDType::auto_;
  int tensor_parallel_size = 1;
  std::vector<PlanGroup> groups;  ///< ordered by each group's first layer
  BlockSizeChoice block_size;
  std::optional<ResolvedLayout> layout;
  /// Sum over the decoder's cached layers (self-attention and indexer), per rank; nullopt
  /// when a cache dtype is not modelled.
  std::optional<std::int64_t> kv_bytes_per_token;
  std::optional<std::int64_t> cross_kv_bytes_per_encoder_token;  ///< encoder–decoder models
  std::optional<std::int64_t> state_bytes_per_sequence;          ///< Mamba-like layers
  std::size_t distinct_selections = 0;  ///< selector cache entries the plan used
  std::vector<LogLine> logs;
};

/// A plan that could not be completed: vLLM's error (the first failure, with its exact
/// message; our message adds every other failing group), and the partial plan.
/// Thread-safety: immutable after construction.
class ATTNSEL_API PlanError : public Error {
 public:
  PlanError(ErrorKind kind, const std::string& message, std::shared_ptr<const ModelPlan> partial)
      : Error(kind, message), partial_(std::move(partial)) {}
  const ModelPlan& partial_plan() const { return *partial_; }

 private:
  std::shared_ptr<const ModelPlan> partial_;
};

/// vLLM's select_common_block_size for one KV-cache group: `kv_manager_block_size` when
/// every backend's kernel supports it, else the largest exact kernel size that divides it and
/// every backend supports; ValueError "No common block size for N. " otherwise.
ATTNSEL_API int select_common_block_size(int kv_manager_block_size, std::span<const AttentionBackend* const> backends,
                                         const RuntimeEnv& env);

/// Plans `model` (unsharded; shard_model is applied) with `options` on the selector's
/// platform. Throws ValueError for inconsistent input (see shard_model) and PlanError when a
/// group has no valid backend, a KV-cache group cannot use the block size, or no layout fits.
ATTNSEL_API ModelPlan make_plan(const ModelSpec& model, const EngineOptions& options, Selector& selector);

}  // namespace attnsel
