// Internal: the capability records of the backend classes checked on one platform.
//
// A record is a function of the backend class and the platform's RuntimeEnv, which never
// changes after the platform is constructed. Making one builds lists and rules that an
// uncached selection would otherwise rebuild for every candidate, so each class's record
// is made once per platform. A record may refer to the env it was made for, so it serves
// only the platform object that holds that env. Entries do not keep classes alive (a
// plugin's library closes when its last object goes); an entry whose class is gone is
// made again, and a change of the registry drops them all.
//
// Thread-safety: any number of threads may call record() at once.
#pragma once

#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <unordered_map>

#include "attnsel/backend.hpp"
#include "attnsel/platform.hpp"

namespace attnsel {

// Hidden although a member of an exported class: no part of the public API.
class __attribute__((visibility("hidden"))) Platform::RecordCache {
 public:
  /// cls->capabilities(env), made at most once per class while the registry is unchanged.
  std::shared_ptr<const BackendCapabilities> record(const std::shared_ptr<const AttentionBackend>& cls,
                                                    const RuntimeEnv& env);

 private:
  struct Entry {
    std::weak_ptr<const AttentionBackend> cls;
    std::shared_ptr<const BackendCapabilities> record;
  };
  std::shared_mutex mu_;
  const RuntimeEnv* env_ = nullptr;  // the env every record was made for (a copied platform has another)
  std::uint64_t generation_ = 0;
  std::unordered_map<const AttentionBackend*, Entry> entries_;
};

}  // namespace attnsel
