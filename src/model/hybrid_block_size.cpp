#include "model/hybrid_block_size.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <limits>

#include "attnsel/errors.hpp"
#include "core/checked_math.hpp"

namespace attnsel::model {

namespace {

std::int64_t cdiv(std::int64_t a, std::int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

[[noreturn]] void too_large(std::int64_t mamba_page_bytes, std::int64_t attn_page_bytes_per_token) {
  throw ValueError(fmt::format("a Mamba state page of {} bytes needs an attention block of more than {} tokens at {} "
                               "bytes per token: no block size can hold it",
                               mamba_page_bytes, std::numeric_limits<int>::max(), attn_page_bytes_per_token));
}

}  // namespace

HybridAlignment align_hybrid_block_size(int block_size, std::int64_t attn_page_bytes_per_token,
                                        std::int64_t mamba_page_bytes, const AttentionBackend& backend,
                                        const RuntimeEnv& env) {
  HybridAlignment out;
  out.block_size = block_size;
  out.attn_page_bytes_per_token = attn_page_bytes_per_token;
  out.mamba_page_bytes = mamba_page_bytes;
  if (mamba_page_bytes <= 0 || attn_page_bytes_per_token <= 0) return out;

  // The kernel's alignment: the smallest size (or MultipleOf base) the backend declares, but
  // no less than the block size already chosen.
  int alignment = block_size;
  const std::vector<KernelBlockSize> sizes = backend.get_supported_kernel_block_sizes(env);
  if (!sizes.empty()) {
    int smallest = block_base(sizes.front());
    for (const KernelBlockSize& s : sizes) smallest = std::min(smallest, block_base(s));
    alignment = std::max(smallest, block_size);
  }
  // Block sizes are ints: a state page that needs more tokens than that is refused, not cut.
  const std::optional<std::int64_t> aligned_page = checked::mul(alignment, attn_page_bytes_per_token);
  const std::optional<std::int64_t> needed =
      aligned_page ? checked::mul(alignment, cdiv(mamba_page_bytes, *aligned_page)) : std::optional<std::int64_t>(alignment);
  if (!needed || *needed > std::numeric_limits<int>::max()) too_large(mamba_page_bytes, attn_page_bytes_per_token);
  if (block_size < *needed) {
    out.block_size = static_cast<int>(*needed);
    out.logs.push_back({LogLine::Level::info,
                        fmt::format("Setting attention block size to {} tokens to ensure that attention page size is "
                                    ">= mamba page size.",
                                    out.block_size)});
  }
  const std::optional<std::int64_t> checked_page = checked::mul(out.block_size, attn_page_bytes_per_token);
  if (!checked_page) too_large(mamba_page_bytes, attn_page_bytes_per_token);
  const std::int64_t attn_page = *checked_page;
  if (attn_page != mamba_page_bytes) {
    out.mamba_page_padded = attn_page;
    const double pct = 100.0 * static_cast<double>(attn_page - mamba_page_bytes) / static_cast<double>(mamba_page_bytes);
    out.logs.push_back({LogLine::Level::info,
                        fmt::format("Padding mamba page size by {:.2f}% to ensure that mamba page size and attention "
                                    "page size are exactly equal.",
                                    pct)});
  }
  return out;
}

}  // namespace attnsel::model
