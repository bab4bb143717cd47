#include "platforms/record_cache.hpp"

#include <mutex>

#include "attnsel/registry.hpp"

namespace attnsel {

namespace {

// The same object, not merely one at the same address.
bool same_object(const std::weak_ptr<const AttentionBackend>& a, const std::shared_ptr<const AttentionBackend>& b) {
  return !a.owner_before(b) && !b.owner_before(a);
}

}  // namespace

std::shared_ptr<const BackendCapabilities> Platform::RecordCache::record(
    const std::shared_ptr<const AttentionBackend>& cls, const RuntimeEnv& env) {
  const std::uint64_t generation = registry_generation();
  {
    std::shared_lock lock(mu_);
    if (env_ != nullptr && env_ != &env) return std::make_shared<const BackendCapabilities>(cls->capabilities(env));
    if (generation_ == generation) {
      auto it = entries_.find(cls.get());
      if (it != entries_.end() && same_object(it->second.cls, cls)) return it->second.record;
    }
  }
  auto made = std::make_shared<const BackendCapabilities>(cls->capabilities(env));  // no lock held: may be slow
  std::unique_lock lock(mu_);
  if (env_ == nullptr) env_ = &env;
  if (env_ != &env) return made;
  if (generation > generation_) {  // the registry changed: drop what it may have replaced
    entries_.clear();
    generation_ = generation;
  }
  if (generation == generation_) entries_.insert_or_assign(cls.get(), Entry{cls, made});
  return made;
}

}  // namespace attnsel
