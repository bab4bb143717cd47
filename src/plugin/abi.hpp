// Internal: the host's side of the plugin ABI — version and size checks, and the
// conversions between the C mirrors in attnsel/plugin.h and the C++ types.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "attnsel/kernel.hpp"
#include "attnsel/plugin.h"
#include "attnsel/types.hpp"

namespace attnsel::plugin {

/// The sizes the structs a plugin returns must have at one minor version of the current
/// major ABI. abi_layouts()[m] is minor version m; a new minor appends an entry.
struct AbiLayout {
  std::uint32_t plugin_size;
  std::uint32_t backend_size;
  std::uint32_t kernel_ops_size;
};
std::span<const AbiLayout> abi_layouts();

/// Checks a plugin description's version fields and size against the host's ABI: another
/// major version, a newer minor version, or a struct smaller than its minor version
/// requires is an error (the reason); nullopt = acceptable. `layouts` is abi_layouts()
/// except in tests.
std::optional<std::string> check_abi(const attnsel_plugin& plugin, std::uint32_t host_major,
                                     std::span<const AbiLayout> layouts);

/// "1.0"
std::string abi_version_text(std::uint32_t major, std::uint32_t minor);

std::optional<DType> from_c_dtype(attnsel_dtype d);
attnsel_dtype to_c_dtype(DType d);
attnsel_attn_type to_c_attn_type(AttentionType t);
std::optional<AttentionType> from_c_attn_type(attnsel_attn_type t);
attnsel_scalar_type to_c_scalar(kernel::ScalarType t);

attnsel_tensor to_c_tensor(const kernel::TensorView& v);
attnsel_kv_cache to_c_cache(const kernel::KVCacheView& c);
attnsel_metadata to_c_metadata(const kernel::AttentionMetadata& md);
/// The returned struct points into `p` (its strings and vectors): valid while `p` is.
attnsel_plugin_layer_params to_c_layer_params(const kernel::LayerParams& p);

/// A fixed buffer for the messages a plugin writes, always NUL-terminated after a call.
struct MessageBuffer {
  static constexpr std::size_t kCapacity = 1024;
  char data[kCapacity] = {};
  char* ptr() { return data; }
  std::size_t capacity() const { return kCapacity; }
  /// The text written, or `fallback` when the plugin wrote nothing.
  std::string text(std::string_view fallback);
};

}  // namespace attnsel::plugin
