// Internal: the built-in backend classes and the registry's default members.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attnsel/backend.hpp"

namespace attnsel::backends {

/// One member of a backend enum as vLLM declares it, with its default C++ class name
/// (nullopt = vLLM's None, i.e. CUSTOM; "" = TORCH_SDPA's empty tag).
struct BuiltinMember {
  std::string_view name;
  std::optional<std::string_view> qualname;
};

/// AttentionBackendEnum's members, in vLLM's declaration order.
std::span<const BuiltinMember> builtin_attention_members();
/// MambaAttentionBackendEnum's members, in vLLM's declaration order.
std::span<const BuiltinMember> builtin_mamba_members();

/// Every built-in backend class (attention and Mamba), one object each.
std::vector<std::shared_ptr<const BackendClass>> make_builtin_classes();

}  // namespace attnsel::backends
