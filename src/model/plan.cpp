// make_plan: what vLLM decides for a whole model while it builds it — per-layer
// selection through the cached selector (Mamba-like layers through the Mamba selector), the
// block size (Platform.update_block_size_for_backend) checked against every KV-cache group,
// the layout (resolve_kv_cache_layout), the cache sizes.
#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <limits>
#include <map>
#include <set>
#include <variant>

#include "attnsel/errors.hpp"
#include "attnsel/plan.hpp"
#include "attnsel/registry.hpp"
#include "backends/deepseek_v32_indexer.hpp"
#include "core/checked_math.hpp"
#include "model/hybrid_block_size.hpp"
#include "model/kv_bytes.hpp"
#include "model/model_hooks.hpp"

namespace attnsel {

namespace {

constexpr int kDefaultBlockSize = 16;  // vLLM's DEFAULT_BLOCK_SIZE

std::string dtype_bytes_note(CacheDType cache_dtype) {
  return fmt::format("KV-cache bytes for --kv-cache-dtype {} are not modelled", cache_dtype_name(cache_dtype));
}

// The text that groups layers: everything that makes two layers take different backends or
// different cache shapes.
std::string group_key(const LayerSpec& l, const std::optional<AttentionSelectorConfig>& config,
                      const std::optional<BackendMember>& backend, const std::optional<int>& num_heads) {
  std::string key = fmt::format("{}|{}|{}", l.stack, mixer_kind_name(l.mixer), l.role);
  if (config) key += config->repr();
  if (backend) key += "|" + backend->name();
  if (num_heads) key += fmt::format("|h{}", *num_heads);
  if (l.attention) {
    const AttentionLayerSpec& a = *l.attention;
    key += fmt::format("|kv{}|hs{}|hv{}|w{}", a.num_kv_heads, a.head_size, a.head_size_v, a.sliding_window.value_or(0));
    if (a.backend_class) key += "|own:" + *a.backend_class;
    if (a.mla)
      key += fmt::format("|mla{}/{}/{}/{}/{}", a.mla->qk_nope_head_dim, a.mla->v_head_dim,
                         a.mla->q_lora_rank.value_or(0), a.mla->rope_type, a.mla->softmax_scale);
  }
  if (l.mamba) {
    const MambaLayerSpec& m = *l.mamba;
    key += fmt::format("|{}|{}|{}|{}|{}|{}|{}|{}|{}", m.backend, m.intermediate_size, m.num_heads, m.head_dim,
                       m.num_k_heads, m.head_k_dim, m.n_groups, m.d_state, m.d_conv);
  }
  return key;
}

std::string describe_layers(const PlanGroup& g) {
  std::vector<int> indices;
  for (const LayerRef& r : g.layers) indices.push_back(r.index);
  std::sort(indices.begin(), indices.end());
  indices.erase(std::unique(indices.begin(), indices.end()), indices.end());
  std::string text = format_layer_indices(indices);
  const LayerRef& first = g.layers.front();
  if (!first.stack.empty()) text = fmt::format("{} {}", first.stack, text);
  if (first.role == "cross_attn") text += " (cross)";
  if (first.role == "indexer") text += " (indexer)";
  return text;
}

LayerRequest make_request(const AttentionLayerSpec& a, DType dtype, const EngineOptions& options) {
  LayerRequest r;
  r.head_size = a.head_size;
  r.dtype = dtype;
  r.kv_cache_dtype = options.engine.cache.cache_dtype;  // vLLM passes cache_config.cache_dtype
  r.use_mla = a.use_mla;
  r.has_sink = a.has_sink;
  r.use_sparse = a.use_sparse;
  r.use_mm_prefix = a.use_mm_prefix;
  r.attn_type = a.attn_type;
  r.has_sliding_window = a.sliding_window.has_value();
  // vLLM's MLA layer passes its per-rank heads (they order CUDA's sparse-MLA list); the
  // standard Attention layer does not.
  if (a.use_mla) r.num_heads = a.num_heads;
  return r;
}

std::string request_source(const EngineConfig& engine, KVCacheSpecKind kind) {
  if (engine.attention.backend_per_kind.contains(std::string(kind_value(kind))))
    return fmt::format("backend_per_kind[{}]", kind_value(kind));
  if (engine.attention.backend) return "attention backend";
  return "automatic";
}

// Whether the layer keeps a KV cache: encoder self-attention and encoder-only attention
// see the whole input at once and cache nothing.
bool has_kv_cache(const LayerSpec& l) {
  if (l.mixer == MixerKind::mamba) return false;  // a state, not a per-token cache
  return l.attention->attn_type != AttentionType::encoder && l.attention->attn_type != AttentionType::encoder_only;
}

// Builds the groups, in the order of each group's first layer.
std::vector<PlanGroup> build_groups(const ModelSpec& sharded, DType dtype, const EngineOptions& options) {
  std::vector<PlanGroup> groups;
  std::map<std::string, std::size_t> by_key;
  const CacheDType cache_dtype = options.engine.cache.cache_dtype;
  for (const LayerSpec& l : sharded.layers) {
    std::optional<LayerRequest> request;
    std::optional<AttentionSelectorConfig> config;
    std::optional<BackendMember> backend;
    // A layer that brings its own backend skips get_attn_backend altogether.
    if (l.mixer == MixerKind::attention && !l.attention->backend_class) {
      request = make_request(*l.attention, dtype, options);
      config = make_selector_config(options.engine, *request);
      backend = effective_backend(options.engine, *request);
    }
    const std::string key = group_key(l, config, backend, request ? request->num_heads : std::nullopt);
    auto [it, inserted] = by_key.try_emplace(key, groups.size());
    if (inserted) {
      PlanGroup g;
      g.mixer = l.mixer;
      if (l.mixer == MixerKind::mamba) {
        g.kind = KVCacheSpecKind::mamba;
        g.backend = l.mamba->backend;
        g.request_source = "Mamba selector";
        g.state_bytes_per_sequence = model::mamba_state_bytes(*l.mamba, dtype);
        if (l.mamba->ssm_state_dtype)
          g.notes.push_back(fmt::format("SSM state in {}", dtype_name(*l.mamba->ssm_state_dtype)));
      } else {
        const AttentionLayerSpec& a = *l.attention;
        g.attn_type = a.attn_type;
        g.kind = l.mixer == MixerKind::indexer ? KVCacheSpecKind::mla_attention
                                               : get_attn_spec_kind(a.use_mla, a.sliding_window.has_value(), a.attn_type);
        g.request = request;
        g.config = config;
        if (backend) g.requested_backend = backend->name();
        g.request_source = l.mixer == MixerKind::indexer ? "fixed by the model"
                           : a.backend_class             ? "the layer's own backend (no selection)"
                                                         : request_source(options.engine, g.kind);
        if (a.backend_class) g.class_path = *a.backend_class;
        g.has_kv_cache = has_kv_cache(l);
        g.num_kv_heads = a.use_mla || l.mixer == MixerKind::indexer ? 1 : a.num_kv_heads;
        g.head_size = a.head_size;
        g.num_states = a.use_mla || l.mixer == MixerKind::indexer ? 1 : 2;
        g.sliding_window = a.sliding_window;
        if (l.mixer == MixerKind::attention) g.mla = a.mla;
        if (g.has_kv_cache) {
          g.kv_bytes_per_token = model::kv_bytes_per_token(l, cache_dtype, dtype);
          if (!g.kv_bytes_per_token) g.notes.push_back(dtype_bytes_note(cache_dtype));
        } else {
          g.notes.push_back("no KV cache (the encoder sees its whole input at once)");
        }
        if (a.sliding_window) g.notes.push_back(fmt::format("sliding window of {} tokens", *a.sliding_window));
        if (a.has_sink) g.notes.push_back("attention sinks");
        if (a.logits_soft_cap) g.notes.push_back(fmt::format("logit soft-cap {}", *a.logits_soft_cap));
        if (a.use_mm_prefix) g.notes.push_back("bidirectional attention over multimodal prefix tokens");
        if (a.use_sparse && a.index_topk) g.notes.push_back(fmt::format("sparse: top-{} tokens", *a.index_topk));
      }
      groups.push_back(std::move(g));
    }
    groups[it->second].layers.push_back({l.stack, l.index, l.role});
  }
  for (PlanGroup& g : groups) g.layers_text = describe_layers(g);
  return groups;
}

// Selects every group's backend; failures are recorded on the group.
void select_backends(std::vector<PlanGroup>& groups, const EngineOptions& options, Selector& selector) {
  for (PlanGroup& g : groups) {
    try {
      if (g.mixer == MixerKind::mamba) {
        // g.backend already holds the member name (as attention groups show theirs).
        const auto cls = get_mamba_attn_backend(MambaAttentionBackendEnum[g.backend], options.engine.batch_invariant);
        g.class_path = cls->qualname();
      } else if (g.mixer == MixerKind::indexer) {
        g.layer_backend = backends::deepseek_v32_indexer_backend();
        g.backend = g.layer_backend->get_name();
        g.class_path = g.layer_backend->qualname();
      } else if (!g.request) {
        // The layer's own class (g.class_path): resolved as vLLM imports it, never validated.
        auto cls = std::dynamic_pointer_cast<const AttentionBackend>(resolve_class(g.class_path));
        if (!cls) throw ImportError(fmt::format("{} is not an attention backend class", g.class_path));
        g.layer_backend = std::move(cls);
        g.backend = g.layer_backend->get_name();
      } else {
        g.selection = selector.select(options.engine, *g.request);
        g.backend = g.selection->backend;
        g.class_path = g.selection->class_path;
      }
    } catch (const SelectionError& e) {
      g.error = e.what();
      g.error_kind = e.kind();
      g.failed_candidates = e.candidates();
      if (g.mixer != MixerKind::mamba) g.backend.clear();
    } catch (const Error& e) {
      g.error = e.what();
      g.error_kind = e.kind();
      if (g.mixer != MixerKind::mamba) g.backend.clear();
    }
  }
}

// The backend class a successful group uses (null for Mamba-like groups).
const AttentionBackend* attention_class(const PlanGroup& g) {
  if (g.layer_backend) return g.layer_backend.get();
  if (g.selection) return g.selection->backend_class.get();
  return nullptr;
}

// vLLM's Platform.update_block_size_for_backend (vllm/platforms/interface.py): the user's
// size; else the platform's fixed default (CPU); else the first non-SSM backend's preferred
// size for DEFAULT_BLOCK_SIZE.
BlockSizeChoice choose_block_size(const std::vector<PlanGroup>& groups, const EngineOptions& options,
                                  const Platform& platform) {
  BlockSizeChoice c;
  if (options.engine.cache.user_specified_block_size) {
    c.block_size = options.engine.cache.block_size;
    c.user_specified = true;
    c.source = "--block-size";
    return c;
  }
  if (auto fixed = platform.default_block_size()) {
    c.block_size = *fixed;
    c.source = fmt::format("platform default ({})", platform.spec());
    // The CPU platform sets 16 for CPU_MLA models (vllm/platforms/cpu.py), whose kernel takes only 16:
    // an MLA backend that cannot take the platform's size gets its kernel's fixed size.
    for (const PlanGroup& g : groups)
      if (const AttentionBackend* b = attention_class(g)) {
        const auto sizes = b->get_supported_kernel_block_sizes(platform.env());
        if (b->capabilities(platform.env()).mla && !b->supports_block_size(c.block_size, platform.env()) && !sizes.empty() &&
            std::holds_alternative<int>(sizes.front())) {
          c.block_size = std::get<int>(sizes.front());
          c.source = fmt::format("platform default for {} ({})", b->get_name(), platform.spec());
        }
        break;
      }
    return c;
  }
  // Groups are in layer order, so the first attention group holds the first non-SSM layer.
  for (const PlanGroup& g : groups) {
    if (const AttentionBackend* b = attention_class(g)) {
      c.block_size = b->get_preferred_block_size(kDefaultBlockSize, platform.env());
      c.source = fmt::format("{}.get_preferred_block_size({})", b->get_name(), kDefaultBlockSize);
      return c;
    }
  }
  c.block_size = kDefaultBlockSize;
  c.source = "vLLM's default (no attention layer)";
  return c;
}

// vLLM's update_block_size_for_backend, phase 2 (is_hybrid): the first non-SSM backend's
// attention page must hold one Mamba state page. The CPU platform keeps its own block size
// (its update_block_size_for_backend does nothing), so this runs only where the base one does.
void align_hybrid(ModelPlan& plan, const RuntimeEnv& env) {
  const auto mamba = std::find_if(plan.groups.begin(), plan.groups.end(),
                                  [](const PlanGroup& g) { return g.mixer == MixerKind::mamba; });
  const auto attention = std::find_if(plan.groups.begin(), plan.groups.end(),
                                      [](const PlanGroup& g) { return g.has_kv_cache && attention_class(g); });
  if (mamba == plan.groups.end() || attention == plan.groups.end() || !mamba->state_bytes_per_sequence) return;
  if (!attention->kv_bytes_per_token) {
    plan.logs.push_back({LogLine::Level::info,
                         fmt::format("vLLM raises the block size of hybrid models until an attention page holds a Mamba "
                                     "state page; with --kv-cache-dtype {} the attention page is not modelled, so the "
                                     "block size is not raised here.",
                                     cache_dtype_name(plan.kv_cache_dtype))});
    return;
  }
  const model::HybridAlignment a = model::align_hybrid_block_size(
      plan.block_size.block_size, *attention->kv_bytes_per_token, *mamba->state_bytes_per_sequence,
      *attention_class(*attention), env);
  BlockSizeChoice& choice = plan.block_size;
  choice.mamba_page_bytes = a.mamba_page_bytes;
  choice.mamba_page_padded = a.mamba_page_padded;
  if (a.block_size != choice.block_size) {
    choice.raised_from = choice.block_size;
    choice.block_size = a.block_size;
  }
  plan.logs.insert(plan.logs.end(), a.logs.begin(), a.logs.end());
}

std::string kernel_sizes_text(const AttentionBackend& b, const RuntimeEnv& env) {
  std::vector<std::string> parts;
  for (const KernelBlockSize& s : b.get_supported_kernel_block_sizes(env)) parts.push_back(to_string(s));
  return fmt::format("[{}]", fmt::join(parts, ", "));
}

// The KV-cache groups vLLM forms: layers with one cache spec (kind and shape). Returns
// group indices per spec, in first-layer order.
std::vector<std::vector<std::size_t>> kv_cache_buckets(const std::vector<PlanGroup>& groups) {
  std::vector<std::vector<std::size_t>> buckets;
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const PlanGroup& g = groups[i];
    if (!g.has_kv_cache) continue;
    const std::string key = fmt::format("{}|{}|{}|{}|{}|{}", kind_value(g.kind), mixer_kind_name(g.mixer),
                                        g.num_kv_heads, g.head_size, g.num_states, g.sliding_window.value_or(0));
    auto [it, inserted] = index.try_emplace(key, buckets.size());
    if (inserted) buckets.emplace_back();
    buckets[it->second].push_back(i);
  }
  return buckets;
}

std::vector<const AttentionBackend*> bucket_backends(const std::vector<PlanGroup>& groups,
                                                     const std::vector<std::size_t>& bucket) {
  std::vector<const AttentionBackend*> out;
  for (std::size_t i : bucket)
    if (const AttentionBackend* b = attention_class(groups[i]); b && std::find(out.begin(), out.end(), b) == out.end())
      out.push_back(b);
  return out;
}

// Applies select_common_block_size to every KV-cache group and reports all that fail at
// once (vLLM stops at the first), with the smallest block size every group accepts.
void check_block_size(ModelPlan& plan, const RuntimeEnv& env) {
  const int bs = plan.block_size.block_size;
  const auto buckets = kv_cache_buckets(plan.groups);
  std::vector<std::string> failures;
  for (const auto& bucket : buckets) {
    const auto backends = bucket_backends(plan.groups, bucket);
    try {
      const int kernel = select_common_block_size(bs, backends, env);
      for (std::size_t i : bucket) plan.groups[i].kernel_block_size = kernel;
    } catch (const ValueError&) {
      for (std::size_t i : bucket) {
        const PlanGroup& g = plan.groups[i];
        failures.push_back(fmt::format("  layers {} [{}] {}: kernel block sizes {}", g.layers_text, kind_value(g.kind),
                                       g.backend, kernel_sizes_text(*attention_class(g), env)));
      }
    }
  }
  if (failures.empty()) return;
  std::string message = fmt::format("No common block size for {}. \nKV-cache groups that cannot use block size {}:\n{}",
                                    bs, bs, fmt::join(failures, "\n"));
  // A size every group accepts, so the message says what to do.
  for (int candidate = 1; candidate <= 4096; ++candidate) {
    const bool all_ok = std::all_of(buckets.begin(), buckets.end(), [&](const auto& bucket) {
      try {
        (void)select_common_block_size(candidate, bucket_backends(plan.groups, bucket), env);
        return true;
      } catch (const ValueError&) {
        return false;
      }
    });
    if (all_ok) {
      message += fmt::format("\nEvery KV-cache group supports block size {}: pass --block-size {}.", candidate, candidate);
      break;
    }
  }
  throw PlanError(ErrorKind::value, message, std::make_shared<const ModelPlan>(plan));
}

void resolve_layout(ModelPlan& plan, const ModelSpec& model, const EngineOptions& options, const Platform& platform) {
  std::vector<const AttentionBackend*> backends;
  std::vector<KVCacheShape> shapes;
  const int bs = plan.block_size.block_size;
  for (const PlanGroup& g : plan.groups) {
    if (const AttentionBackend* b = attention_class(g); b && std::find(backends.begin(), backends.end(), b) == backends.end())
      backends.push_back(b);
    if (g.has_kv_cache) {
      // An unmodelled dtype still has one size for every layer: elements stand in for bytes.
      const std::int64_t per_token = g.kv_bytes_per_token.value_or(std::int64_t{g.num_states} * g.num_kv_heads * g.head_size);
      shapes.push_back({g.num_kv_heads, g.num_states, per_token * bs});
    } else if (g.mixer == MixerKind::mamba) {
      shapes.push_back({0, 2, g.state_bytes_per_sequence.value_or(0)});
    }
  }
  try {
    const std::vector<KVCacheLayout> supported = get_supported_kv_cache_layouts(backends, platform.env());
    std::vector<std::string> names;
    for (KVCacheLayout l : supported) names.emplace_back(layout_name(l));
    // Every tensor-parallel worker runs the same backends and reports the same list.
    const std::vector<std::vector<std::string>> reports(static_cast<std::size_t>(plan.tensor_parallel_size), names);
    LayoutInputs inputs;
    inputs.requested = options.kv_cache_layout;
    const bool uses_mla = std::any_of(model.layers.begin(), model.layers.end(),
                                      [](const LayerSpec& l) { return l.attention && l.attention->use_mla; });
    if (options.kv_transfer) inputs.connector_layout = kv_connector_cache_layout(*options.kv_transfer, uses_mla);
    plan.layout = resolve_kv_cache_layout(inputs, reports, shapes);
    plan.logs.insert(plan.logs.end(), plan.layout->logs.begin(), plan.layout->logs.end());
  } catch (const ValueError& e) {
    throw PlanError(ErrorKind::value, e.what(), std::make_shared<const ModelPlan>(plan));
  }
}

// A sum that is unknown as soon as one of its terms is, and absent with no terms; one that
// does not fit in 64 bits is refused (`what` names it).
struct Total {
  std::string_view what;
  bool any = false;
  bool unknown = false;
  std::int64_t sum = 0;
  void add(std::optional<std::int64_t> term, std::int64_t count) {
    any = true;
    if (!term) {
      unknown = true;
      return;
    }
    const std::optional<std::int64_t> product = checked::mul(*term, count);
    const std::optional<std::int64_t> total = product ? checked::add(sum, *product) : std::nullopt;
    if (!total)
      throw ValueError(fmt::format("the model's {} is more than {} bytes: too large to plan", what,
                                   std::numeric_limits<std::int64_t>::max()));
    sum = *total;
  }
  std::optional<std::int64_t> value() const {
    if (!any || unknown) return std::nullopt;
    return sum;
  }
};

void sum_sizes(ModelPlan& plan) {
  Total self{"KV cache per token"}, cross{"cross-attention KV cache per encoder token"},
      state{"Mamba state per sequence"};
  for (const PlanGroup& g : plan.groups) {
    const auto n = static_cast<std::int64_t>(g.layers.size());
    if (g.mixer == MixerKind::mamba)
      state.add(g.state_bytes_per_sequence, n);
    else if (g.has_kv_cache && g.attn_type == AttentionType::encoder_decoder)
      cross.add(g.kv_bytes_per_token, n);
    else if (g.has_kv_cache)
      self.add(g.kv_bytes_per_token, n);
  }
  plan.kv_bytes_per_token = self.any ? self.value() : std::optional<std::int64_t>(0);
  plan.cross_kv_bytes_per_encoder_token = cross.value();
  plan.state_bytes_per_sequence = state.value();
}

}  // namespace

kernel::MlaDims mla_kernel_dims(const PlanGroup& group) {
  if (!group.mla || !group.request || !group.request->num_heads)
    throw ValueError(fmt::format("layers {}: not an MLA group (it has no MLA dimensions)", group.layers_text));
  kernel::MlaDims dims;
  dims.num_heads = *group.request->num_heads;
  dims.kv_lora_rank = group.mla->kv_lora_rank;
  dims.qk_rope_head_dim = group.mla->qk_rope_head_dim;
  dims.qk_nope_head_dim = group.mla->qk_nope_head_dim;
  dims.v_head_dim = group.mla->v_head_dim;
  return dims;
}

ModelPlan make_plan(const ModelSpec& model, const EngineOptions& given_options, Selector& selector) {
  const ModelSpec sharded = shard_model(model, given_options.tensor_parallel_size);
  ModelPlan plan;
  const EngineOptions options = model::apply_model_hooks(model, given_options, plan.logs);
  // The platform as the engine's settings leave it: the one every selection below runs on.
  const std::shared_ptr<const Platform> engine_platform = selector.platform_for(options.engine);
  const Platform& platform = *engine_platform;
  plan.model_source = model.source;
  plan.model_type = model.model_type;
  plan.platform = platform.spec();
  plan.platform_description = platform.describe();
  plan.mode = platform.mode();
  plan.dtype = resolve_model_dtype(model, options.dtype);
  plan.kv_cache_dtype = options.engine.cache.cache_dtype;
  plan.tensor_parallel_size = options.tensor_parallel_size;
  plan.groups = build_groups(sharded, plan.dtype, options);
  sum_sizes(plan);

  select_backends(plan.groups, options, selector);
  std::set<const Selection*> selections;
  for (const PlanGroup& g : plan.groups)
    if (g.selection) selections.insert(g.selection.get());
  plan.distinct_selections = selections.size();
  std::vector<const PlanGroup*> failed;
  for (const PlanGroup& g : plan.groups)
    if (g.error) failed.push_back(&g);
  if (!failed.empty()) {
    // vLLM stops at the first layer that fails; the plan names every group that would.
    std::string message = *failed.front()->error;
    if (failed.size() > 1) {
      message += fmt::format("\n{} more group{} of layers cannot be served:", failed.size() - 1,
                             failed.size() == 2 ? "" : "s");
      for (std::size_t i = 1; i < failed.size(); ++i)
        message += fmt::format("\n  layers {} [{}]: {}", failed[i]->layers_text, kind_value(failed[i]->kind),
                               *failed[i]->error);
    }
    throw PlanError(failed.front()->error_kind, message, std::make_shared<const ModelPlan>(plan));
  }

  plan.block_size = choose_block_size(plan.groups, options, platform);
  if (!platform.default_block_size()) align_hybrid(plan, platform.env());
  check_block_size(plan, platform.env());
  resolve_layout(plan, model, options, platform);
  return plan;
}

}  // namespace attnsel
