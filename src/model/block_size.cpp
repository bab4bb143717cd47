// vLLM's select_common_block_size (vllm/v1/worker/utils.py): the kernel block size a
// KV-cache group's backends agree on for the KV manager's block size.
#include <algorithm>
#include <fmt/format.h>
#include <set>

#include "attnsel/errors.hpp"
#include "attnsel/plan.hpp"

namespace attnsel {

namespace {

// Every backend's kernel list accepts `size`: an exact int entry, or a MultipleOf base
// dividing it. (vLLM checks the kernel list here, not the backend's supports_block_size.)
bool all_support(std::span<const AttentionBackend* const> backends, int size, const RuntimeEnv& env) {
  return std::all_of(backends.begin(), backends.end(), [&](const AttentionBackend* b) {
    const auto sizes = b->get_supported_kernel_block_sizes(env);
    return std::any_of(sizes.begin(), sizes.end(), [&](const KernelBlockSize& s) {
      if (const int* exact = std::get_if<int>(&s)) return size == *exact;
      const int base = std::get<MultipleOf>(s).base;
      return base > 0 && size % base == 0;
    });
  });
}

}  // namespace

int select_common_block_size(int kv_manager_block_size, std::span<const AttentionBackend* const> backends,
                             const RuntimeEnv& env) {
  if (all_support(backends, kv_manager_block_size, env)) return kv_manager_block_size;
  // Otherwise an exact kernel size that divides the manager's block; largest first. (If
  // every backend took MultipleOf sizes, the manager's block itself would have passed.)
  std::set<int, std::greater<>> exact_sizes;
  for (const AttentionBackend* b : backends)
    for (const KernelBlockSize& s : b->get_supported_kernel_block_sizes(env))
      if (const int* exact = std::get_if<int>(&s)) exact_sizes.insert(*exact);
  for (int size : exact_sizes) {
    if (size <= 0 || kv_manager_block_size % size != 0) continue;
    if (all_support(backends, size, env)) return size;
  }
  throw ValueError(fmt::format("No common block size for {}. ", kv_manager_block_size));
}

}  // namespace attnsel
