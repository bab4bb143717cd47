// vLLM's base Platform.get_attn_backend_cls returns "", so the selector raises.
#include <fmt/format.h>

#include "platforms/platforms.hpp"

namespace attnsel::platforms {

Selection OtherPlatform::get_attn_backend_cls(const std::optional<BackendMember>&, const AttentionSelectorConfig&,
                                              std::optional<int>, CacheDType) const {
  throw SelectionError(ErrorKind::value, fmt::format("Invalid attention backend for {}", device_name()), {});
}

}  // namespace attnsel::platforms
