// How the CPU MLA decode spreads over the cores: work items of the CPU attention kernel
// (kernels/attention/cpu/work.hpp) over the latent cache, one per request and group of query
// rows (tokens × heads, at most kMaxRows), all of a request's heads at once where they fit,
// so each latent tile is read once for all of them; split along the keys (split-KV, merged
// by log-sum-exp) so that a long request uses every core.
// Thread-safety: pure function.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/attention/cpu/work_plan.hpp"
#include "kernels/mla/batch.hpp"

namespace attnsel::kernel::mla::cpu {

/// Split until every core has this many items: enough for the dynamic schedule to even out
/// a core slowed down by other work.
inline constexpr int kItemsPerCore = 4;

/// The relative cost of an item of `rows` query rows over `keys` keys.
double item_cost(std::int64_t keys, int rows);

/// Heads per item: all of them up to kMaxRows, else even groups.
int heads_per_item(int num_heads);

/// Appends `it` to `out` whole when parts < 2, else as `parts` items on boundaries of
/// kTileKeys keys (so that every part streams whole tiles) of its first `keys_read` keys, the
/// last one running to it.key_end: a split group of `plan` (each part its partial slot),
/// each part costed by the keys it reads.
void append_split(kernel::cpu::WorkPlan& plan, const kernel::cpu::WorkItem& it, std::int64_t keys_read,
                  std::int64_t parts, std::vector<kernel::cpu::WorkItem>& out);

struct DecodeSplitOptions {
  int cores = 1;           ///< the cores the plan spreads over (not the team that runs it)
  int forced_splits = 0;   ///< > 0: split every item into this many key ranges (at most one per tile)
  bool batch_invariant = false;  ///< split a request by its own length only, never by the rest of the batch
};

/// The decode requests' items. A request of L cached tokens and s_q query tokens sees keys
/// [0, L - s_q + j] for its token j; a padding request (L = 0) gets items with no key,
/// which write zeros. The split count is a function of the batch, the cores and the options
/// (never of the thread that runs an item), so a plan's results are the same bits on any team.
kernel::cpu::WorkPlan plan_decode_work(const MlaBatch& batch, int num_heads, const DecodeSplitOptions& options);

}  // namespace attnsel::kernel::mla::cpu
