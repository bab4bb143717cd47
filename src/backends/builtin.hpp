// Internal: the built-in backend classes and the registry's default members, which the
// registry starts with (builtin_registry.cpp).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attnsel/backend.hpp"
#include "core/registry_startup.hpp"

namespace attnsel::backends {

/// One member of a backend enum as vLLM declares it, with its default C++ class name
/// (nullopt = vLLM's None, i.e. CUSTOM; "" = TORCH_SDPA's empty tag).
using BuiltinMember = registry_startup::Member;

/// AttentionBackendEnum's members, in vLLM's declaration order.
std::span<const BuiltinMember> builtin_attention_members();
/// MambaAttentionBackendEnum's members, in vLLM's declaration order.
std::span<const BuiltinMember> builtin_mamba_members();
/// attnsel's own AttentionBackendEnum members (not vLLM's), registered after vLLM's.
std::span<const BuiltinMember> own_attention_members();

/// Every built-in backend class (attention and Mamba), one object each.
std::vector<std::shared_ptr<const BackendClass>> make_builtin_classes();

}  // namespace attnsel::backends
