// The registry's built-in contents: this layer knows the built-in backends, so it supplies
// them to the registry's first use (core/registry_startup.hpp).
#include "backends/builtin.hpp"
#include "core/registry_startup.hpp"

namespace attnsel::registry_startup {

BuiltinContents builtin_contents() {
  return {backends::builtin_attention_members(), backends::builtin_mamba_members(), backends::make_builtin_classes(),
          backends::own_attention_members()};
}

}  // namespace attnsel::registry_startup
