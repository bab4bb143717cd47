#include "model/hybrid_block_size.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace attnsel::model {

namespace {

std::int64_t cdiv(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

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
  const std::int64_t needed = alignment * cdiv(mamba_page_bytes, alignment * attn_page_bytes_per_token);
  if (block_size < needed) {
    out.block_size = static_cast<int>(needed);
    out.logs.push_back({LogLine::Level::info,
                        fmt::format("Setting attention block size to {} tokens to ensure that attention page size is "
                                    ">= mamba page size.",
                                    out.block_size)});
  }
  const std::int64_t attn_page = out.block_size * attn_page_bytes_per_token;
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
