// Merging split-KV partials by log-sum-exp (the exact combine of split-KV attention: empty
// splits are not read), for the CPU attention kernel's split groups and for the MLA and
// sparse MLA passes that run its work items.
// Thread-safety: reentrant on distinct rows.
#pragma once

#include "kernels/attention/cpu/work.hpp"
#include "kernels/attention/cpu/work_plan.hpp"

namespace attnsel::kernel::cpu {

/// Merges `count` split-KV partial slots (from `first`, each partial_slot_floats(c.value_size())
/// floats) of `rows` (one KV head's rows, at kv_head within the slots) into c.out and c.lse
/// (when set): out = Σ_i o_i e^{m_i - M} / (Σ_i l_i e^{m_i - M} + e^{sink - M}) over the splits
/// that saw a key (l_i > 0), M the largest of their maxima and the head's sink (c.sinks, when
/// set), lse = M + ln(denominator); when the denominator is 0, out = 0 and lse = -inf.
void merge_partials(const LayerCtx& c, const WorkItem& rows, int kv_head, float* first, int count);

/// Merges every KV head of split group `g`, whose slots are in `partials`.
void merge_group(const LayerCtx& c, const SplitGroup& g, float* partials);

}  // namespace attnsel::kernel::cpu
