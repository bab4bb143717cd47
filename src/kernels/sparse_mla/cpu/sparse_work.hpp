// How the CPU sparse MLA attention spreads over the cores: work items of the CPU attention
// kernel (kernels/attention/cpu/work.hpp), one per query token and group of heads (every
// head of a token up to kMaxRows, else even groups), each over the token's index row; split
// along the row (split-KV, merged by log-sum-exp) when the items are too few for the cores.
// Tokens are independent (each has its own row), so no item spans two tokens.
// Thread-safety: pure function.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/attention/cpu/work_plan.hpp"

namespace attnsel::kernel::sparse_mla::cpu {

struct SparseSplitOptions {
  int cores = 1;                 ///< the cores the plan spreads over
  bool batch_invariant = false;  ///< never split: a token's result does not depend on the batch
  int min_split_keys = 256;      ///< the fewest keys a split reads
};

/// The items, and the units they are run in: the items of one token over one key range (its
/// groups of heads) are consecutive, unit u being items [unit_starts[u], unit_starts[u + 1]),
/// so that one thread reads (or dequantises) the unit's rows once for all its heads.
struct SparseWork {
  kernel::cpu::WorkPlan plan;
  std::vector<int> unit_starts;  ///< units + 1 entries; units by decreasing cost
};

/// Items of the tokens with `keys[t]` expected valid entries (at most topk) of index rows
/// `topk` wide: WorkItem::seq is the token, the keys positions in its compacted row; a
/// token's last item (or last split) runs to topk.
SparseWork plan_sparse_work(const std::vector<std::int64_t>& keys, int topk, int num_heads,
                            const SparseSplitOptions& options);

}  // namespace attnsel::kernel::sparse_mla::cpu
