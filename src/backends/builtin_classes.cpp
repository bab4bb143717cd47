// Temporary: filled in by the capability declarations.
#include "backends/builtin.hpp"

namespace attnsel::backends {
std::vector<std::shared_ptr<const BackendClass>> make_builtin_classes() { return {}; }
}  // namespace attnsel::backends
