#include "attnsel/selector.hpp"

#include <array>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <mutex>

#include "attnsel/capability_checks.hpp"
#include "attnsel/errors.hpp"

namespace attnsel {

// --- AttentionConfig validators ------------------------------------------------------

void AttentionConfig::set_backend(std::string_view text) {
  if (to_lower(text) == "auto") {
    backend.reset();
    return;
  }
  backend = AttentionBackendEnum.from_user_text(text);
  // MSA alias rule: the MiniMax-M3 MSA names pick the decode kernel, not a backend.
  const std::string& name = backend->name();
  if (name == "CUTLASS_MSA" || name == "TRITON_MSA") {
    minimax_m3_msa_decode_backend = name == "CUTLASS_MSA" ? "cutlass" : "triton";
    backend.reset();
  }
}

void AttentionConfig::set_backend_per_kind(std::string_view kind, std::string_view backend_name) {
  if (!parse_kind(kind)) {
    std::vector<std::string> valid;
    for (KVCacheSpecKind k : all_kinds()) valid.emplace_back(kind_value(k));
    std::sort(valid.begin(), valid.end());
    throw ValueError(fmt::format("Unknown KV cache group kind '{}' in backend_per_kind. Valid kinds are: {}.", kind,
                                 fmt::join(valid, ", ")));
  }
  backend_per_kind.insert_or_assign(std::string(kind), AttentionBackendEnum.from_user_text(backend_name));
}

// --- get_attn_backend's argument building ---------------------------------------------

AttentionSelectorConfig make_selector_config(const EngineConfig& engine, const LayerRequest& layer) {
  AttentionSelectorConfig c;
  c.head_size = layer.head_size;
  c.dtype = layer.dtype;
  c.kv_cache_dtype = layer.kv_cache_dtype;
  if (engine.cache.user_specified_block_size) c.block_size = engine.cache.block_size;
  c.attn_type = layer.attn_type.value_or(AttentionType::decoder);
  // The boolean fields: each from the layer's argument or the engine config, as the table says.
  for (const CapabilityCheck& check : capability_checks()) {
    if (check.requested == nullptr) continue;
    c.*check.requested = check.layer_argument != nullptr ? layer.*check.layer_argument : check.from_engine(engine);
  }
  return c;
}

std::optional<BackendMember> effective_backend(const EngineConfig& engine, const LayerRequest& layer) {
  std::optional<BackendMember> backend = engine.attention.backend;
  if (!engine.attention.backend_per_kind.empty()) {
    const KVCacheSpecKind kind = get_attn_spec_kind(layer.use_mla, layer.has_sliding_window,
                                                    layer.attn_type.value_or(AttentionType::decoder));
    auto it = engine.attention.backend_per_kind.find(std::string(kind_value(kind)));
    if (it != engine.attention.backend_per_kind.end()) backend = it->second;
  }
  return backend;
}

// --- Selector ------------------------------------------------------------------------

std::size_t Selector::KeyHash::operator()(const Key& k) const noexcept {
  std::size_t h = k.config.hash();
  const std::size_t b = k.backend ? (static_cast<std::size_t>(k.backend->index()) << 1 | 1) : 0;
  h ^= b * 0x9e3779b97f4a7c15ULL;
  h ^= static_cast<std::size_t>(k.num_heads.value_or(-1)) * 0xff51afd7ed558ccdULL;
  h ^= static_cast<std::size_t>(k.run_cache_dtype) + (h << 6);
  if (k.engine) h ^= (k.engine->hash() + 1) * 0xc4ceb9fe1a85ec53ULL;
  return h;
}

namespace {
std::atomic<std::uint64_t> next_selector_id{1};
}  // namespace

Selector::Selector(std::shared_ptr<const Platform> platform)
    : platform_(std::move(platform)), id_(next_selector_id.fetch_add(1, std::memory_order_relaxed)) {
  if (!platform_) throw ValueError("Selector needs a platform");
}

// A per-thread memo slot. A hit is valid while the selector, its epoch (clear()) and the
// registry generation are those it was filled under; otherwise the shared cache decides.
struct Selector::MemoEntry {
  std::uint64_t selector_id = 0;  // 0: empty (ids start at 1)
  std::uint64_t epoch = 0;
  std::uint64_t generation = 0;
  Key key;
  std::shared_ptr<const Selection> selection;
};

const std::shared_ptr<const Selection>& Selector::lookup(const std::optional<BackendMember>& backend,
                                                         const AttentionSelectorConfig& config,
                                                         std::optional<int> num_heads,
                                                         CacheDType run_cache_dtype,
                                                         const std::optional<EngineFacts>& engine) {
  // The shared cache costs a reader lock and reference-count traffic on shared cache lines
  // (~40-80 ns); a model asks for the same few selections over and over, so each thread
  // remembers its last few in a direct-mapped table.
  constexpr std::size_t kSlots = 16;
  thread_local std::array<MemoEntry, kSlots> memo;
  // Read both counters before looking anything up: an entry filled after a concurrent
  // clear() or registration then carries the old value and is never trusted.
  const std::uint64_t generation = registry_generation();
  const std::uint64_t epoch = epoch_.load(std::memory_order_acquire);
  std::size_t h = config.hash() ^ (id_ * 0x9e3779b97f4a7c15ULL);
  if (backend) h ^= (static_cast<std::size_t>(backend->index()) + 1) * 0xff51afd7ed558ccdULL;
  if (num_heads) h ^= static_cast<std::size_t>(*num_heads) * 0xc4ceb9fe1a85ec53ULL;
  if (engine) h ^= engine->hash() * 0x94d049bb133111ebULL;
  MemoEntry& slot = memo[(h ^ (h >> 29)) % kSlots];
  if (slot.selector_id == id_ && slot.epoch == epoch && slot.generation == generation && slot.key.backend == backend &&
      slot.key.num_heads == num_heads && slot.key.run_cache_dtype == run_cache_dtype && slot.key.engine == engine &&
      slot.key.config == config)
    return slot.selection;
  Key key{backend, config, num_heads, run_cache_dtype, engine};
  std::shared_ptr<const Selection> selection = lookup_shared(key, generation);  // throws on failure: not memoised
  slot = MemoEntry{id_, epoch, generation, std::move(key), std::move(selection)};
  return slot.selection;
}

std::shared_ptr<const Selection> Selector::lookup_shared(Key key, std::uint64_t generation) {
  {
    std::shared_lock lock(mutex_);
    if (generation_ == generation) {
      auto it = cache_.find(key);
      if (it != cache_.end()) return it->second;
    }
  }
  const std::shared_ptr<const Platform> platform = key.engine ? platform_for(*key.engine) : platform_;
  auto selection = std::make_shared<const Selection>(
      platform->get_attn_backend_cls(key.backend, key.config, key.num_heads, key.run_cache_dtype));
  std::unique_lock lock(mutex_);
  if (generation_ < generation) {
    cache_.clear();
    generation_ = generation;
  }
  if (generation_ == generation) cache_.emplace(std::move(key), selection);
  return selection;
}

std::shared_ptr<const Platform> Selector::platform_for(const EngineFacts& engine) {
  std::lock_guard lock(platforms_mutex_);
  for (const auto& [facts, platform] : platforms_)
    if (facts == engine) return platform;
  platforms_.emplace_back(engine, with_engine(platform_, engine));
  return platforms_.back().second;
}

std::shared_ptr<const Platform> Selector::platform_for(const EngineConfig& engine) {
  return platform_for(engine_facts(engine));
}

std::shared_ptr<const Selection> Selector::cached_select(const std::optional<BackendMember>& backend,
                                                         const AttentionSelectorConfig& config,
                                                         std::optional<int> num_heads,
                                                         CacheDType run_cache_dtype) {
  return lookup(backend, config, num_heads, run_cache_dtype, std::nullopt);
}

std::shared_ptr<const Selection> Selector::select(const EngineConfig& engine, const LayerRequest& layer) {
  return lookup(effective_backend(engine, layer), make_selector_config(engine, layer), layer.num_heads,
                engine.cache.cache_dtype, engine_facts(engine));
}

std::shared_ptr<const AttentionBackend> Selector::get_attn_backend(const EngineConfig& engine,
                                                                   const LayerRequest& layer) {
  // Copies only the class pointer: the Selection stays owned by the memo.
  return lookup(effective_backend(engine, layer), make_selector_config(engine, layer), layer.num_heads,
                engine.cache.cache_dtype, engine_facts(engine))
      ->backend_class;
}

void Selector::clear() {
  std::unique_lock lock(mutex_);
  cache_.clear();
  epoch_.fetch_add(1, std::memory_order_release);
}

std::size_t Selector::cache_size() const {
  std::shared_lock lock(mutex_);
  return cache_.size();
}

// --- Mamba selector ------------------------------------------------------------------

std::shared_ptr<const MambaBackend> get_mamba_attn_backend(const BackendMember& mamba_type, bool batch_invariant) {
  if (mamba_type.kind() != EnumKind::mamba)
    throw ValueError(fmt::format("{} is not a MambaAttentionBackendEnum member", mamba_type.str()));
  auto cls = std::dynamic_pointer_cast<const MambaBackend>(mamba_type.get_class());
  if (!cls) throw ImportError(fmt::format("{} is not a Mamba backend class", mamba_type.get_path()));
  if (batch_invariant && !cls->supports_batch_invariance())
    throw RuntimeError(fmt::format("VLLM batch_invariant mode is not supported for {}.", cls->get_name()));
  return cls;
}

}  // namespace attnsel
