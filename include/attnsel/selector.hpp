// Layer: core (src/layers.txt)
// The selector: vLLM's get_attn_backend, its per-kind override, its cache, and the Mamba
// selector. The engine-level inputs vLLM reads from its global VllmConfig are passed
// explicitly as an EngineConfig.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "attnsel/engine_config.hpp"
#include "attnsel/engine_facts.hpp"
#include "attnsel/export.hpp"
#include "attnsel/platform.hpp"

namespace attnsel {

/// Builds the selector config exactly as vLLM's get_attn_backend does (vllm/v1/attention/selector.py).
ATTNSEL_API AttentionSelectorConfig make_selector_config(const EngineConfig& engine, const LayerRequest& layer);
/// The backend argument after the per-kind override (get_attn_backend's backend_per_kind lookup).
ATTNSEL_API std::optional<BackendMember> effective_backend(const EngineConfig& engine, const LayerRequest& layer);

/// A platform plus its memoised selections (vLLM's _cached_get_attn_backend). A selection
/// for an EngineConfig runs on the platform as the engine's settings leave it (with_engine:
/// the FlashAttention version, batch invariance, ... as runtime facts), made once per
/// distinct set of engine facts. The cache is keyed on (backend, config, num_heads, run
/// cache dtype, engine facts) and dropped whenever the registry's generation changes,
/// unlike vLLM's, so a registration is never masked. Each thread also keeps a small memo of
/// its recent hits (no lock, no shared writes), checked against the registry generation and
/// clear(), so a cached call costs a few loads.
/// Thread-safety: all methods may be called concurrently.
class ATTNSEL_API Selector {
 public:
  explicit Selector(std::shared_ptr<const Platform> platform);

  /// vLLM's get_attn_backend: the class chosen for a layer (cached).
  std::shared_ptr<const AttentionBackend> get_attn_backend(const EngineConfig& engine, const LayerRequest& layer);
  /// The same selection with its explanation (cached; failures are not cached).
  std::shared_ptr<const Selection> select(const EngineConfig& engine, const LayerRequest& layer);
  /// _cached_get_attn_backend with explicit arguments, on the platform as given.
  std::shared_ptr<const Selection> cached_select(const std::optional<BackendMember>& backend,
                                                 const AttentionSelectorConfig& config,
                                                 std::optional<int> num_heads,
                                                 CacheDType run_cache_dtype = CacheDType::auto_);
  /// Forgets every memoised selection (vLLM's cache_clear()).
  void clear();
  std::size_t cache_size() const;
  /// The platform as given.
  const Platform& platform() const { return *platform_; }
  /// The platform the selections for `engine` run on: with_engine(platform(), engine).
  std::shared_ptr<const Platform> platform_for(const EngineConfig& engine);

 private:
  struct Key {
    std::optional<BackendMember> backend;
    AttentionSelectorConfig config;
    std::optional<int> num_heads;
    CacheDType run_cache_dtype = CacheDType::auto_;
    std::optional<EngineFacts> engine;  ///< nullopt: the platform as given (cached_select)
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const noexcept;
  };
  struct MemoEntry;  // one slot of the per-thread memo in front of cache_ (selector.cpp)
  /// The memoised selection, through the calling thread's memo; valid until this thread's
  /// next call on any Selector.
  const std::shared_ptr<const Selection>& lookup(const std::optional<BackendMember>& backend,
                                                 const AttentionSelectorConfig& config, std::optional<int> num_heads,
                                                 CacheDType run_cache_dtype,
                                                 const std::optional<EngineFacts>& engine);
  /// The platform for a set of engine facts, made once and kept.
  std::shared_ptr<const Platform> platform_for(const EngineFacts& engine);
  /// The shared cache, filled on a miss by the platform's selection.
  std::shared_ptr<const Selection> lookup_shared(Key key, std::uint64_t generation);

  std::shared_ptr<const Platform> platform_;
  std::mutex platforms_mutex_;
  std::vector<std::pair<EngineFacts, std::shared_ptr<const Platform>>> platforms_;  ///< guarded by platforms_mutex_
  mutable std::shared_mutex mutex_;
  std::uint64_t generation_ = 0;
  std::unordered_map<Key, std::shared_ptr<const Selection>, KeyHash> cache_;
  const std::uint64_t id_;                ///< unique per Selector: names its per-thread memo entries
  std::atomic<std::uint64_t> epoch_{0};  ///< bumped by clear(): invalidates every thread's memo
};

/// vLLM's get_mamba_attn_backend: the member's class; RuntimeError
/// "VLLM batch_invariant mode is not supported for <NAME>." when batch invariance is on
/// and the class does not support it.
ATTNSEL_API std::shared_ptr<const MambaBackend> get_mamba_attn_backend(const BackendMember& mamba_type, bool batch_invariant = false);

}  // namespace attnsel
