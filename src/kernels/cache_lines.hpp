// Internal: byte counts rounded up to whole 64-byte cache lines, so that the slices of a
// plan's scratch and workspace that different threads write never share a line.
#pragma once

#include <cstddef>

namespace attnsel::kernel {

constexpr std::size_t round_to_cache_line(std::size_t bytes) { return (bytes + 63) / 64 * 64; }

}  // namespace attnsel::kernel
