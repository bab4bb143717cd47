// Internal: what the backend registry starts with, supplied by the layers that know it.
//
// Core knows no backend. The registry's first use, by any entry point (the C++ API, the C
// API, Python, the command), runs the two functions below, which the library defines in
// the layers above core, as LLVM's targets define the LLVMInitialize*Target functions that
// InitializeAllTargets calls:
//   builtin_contents()  src/backends/builtin_registry.cpp: vLLM's enum members and every
//                       built-in backend class (again on reset_registry_for_testing());
//   start_plugins()     src/plugin/startup.cpp: the class resolver for "LIB:SYMBOL" names
//                       and the plugins ATTNSEL_PLUGINS names, once per process.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "attnsel/backend.hpp"

namespace attnsel::registry_startup {

/// One member of a backend enum as vLLM declares it, with its default C++ class name
/// (nullopt = vLLM's None, i.e. CUSTOM; "" = TORCH_SDPA's empty tag).
struct Member {
  std::string_view name;
  std::optional<std::string_view> qualname;
};

struct BuiltinContents {
  std::span<const Member> attention_members;  ///< AttentionBackendEnum, in vLLM's order
  std::span<const Member> mamba_members;      ///< MambaAttentionBackendEnum, in vLLM's order
  std::vector<std::shared_ptr<const BackendClass>> classes;  ///< one object per built-in class
  /// attnsel's own AttentionBackendEnum members, which vLLM does not have (backends for what
  /// vLLM does not run, e.g. CPU_MLA_SPARSE): added after vLLM's, as a start-up registration
  /// would add them, and again on every reset.
  std::span<const Member> own_attention_members = {};
};

/// The built-in members and classes. Called with no lock held, before the registry exists
/// and on every reset; it must not use the registry.
BuiltinContents builtin_contents();

/// Installs plugin support into the registry and loads ATTNSEL_PLUGINS. Called once, right
/// after the registry is created, from the thread that first used it (other threads wait);
/// it may use the registry. Failures are logged, never thrown.
void start_plugins() noexcept;

}  // namespace attnsel::registry_startup
