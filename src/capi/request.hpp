// attnsel_select_request → the library's values: the platform, the engine configuration and
// the layer, built exactly as `attnsel select` builds them from its flags.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attnsel/attnsel.h"
#include "attnsel/platform.hpp"
#include "attnsel/selector.hpp"

namespace attnsel::capi {

struct SelectInputs {
  std::shared_ptr<const Platform> platform;  ///< as the engine's settings leave it (with_engine)
  EngineConfig engine;
  LayerRequest layer;
  AttentionSelectorConfig config;
  std::optional<BackendMember> requested;
};

/// The size of attnsel_select_request in C API 2.2, the oldest a caller may pass (the `flags`
/// word came with 2.3).
inline constexpr std::size_t kSelectRequestMinimumSize = offsetof(attnsel_select_request, flags);

/// Which selector flags the request turns on (its 2.2 fields or its `flags` bits), indexed
/// as selector_flags().
std::vector<bool> requested_flags(const attnsel_select_request& request);

/// The platform alone (ValueError for a malformed spec, mode or fact).
std::shared_ptr<Platform> make_request_platform(const char* spec, const char* mode,
                                                const std::vector<std::string>& facts);
/// "NAME=VALUE" strings from a (pointer, count) pair; ValueError when one is malformed or
/// one name gets two values.
std::vector<std::string> assignments(const char* const* items, std::uint32_t count, std::string_view what);

/// Every input of a selection; throws ValueError for anything malformed (the message names
/// the field and the valid values).
SelectInputs read_select_request(const attnsel_select_request& request);
/// The request's engine settings alone: the attention backend and config, per-kind
/// overrides, cache config and the engine switches.
EngineConfig read_engine_config(const attnsel_select_request& request);

}  // namespace attnsel::capi
