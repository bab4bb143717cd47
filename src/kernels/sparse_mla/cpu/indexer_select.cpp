// The indexer's top-k on the CPU (indexer_steps.hpp): each row of a wave's scores.
#include <omp.h>

#include "kernels/sparse_mla/cpu/indexer_steps.hpp"
#include "kernels/sparse_mla/cpu/top_k.hpp"

namespace attnsel::kernel::sparse_mla::cpu {

void select_wave(const IndexerStep& s, int wave_index, std::int32_t* indices, std::int64_t indices_stride) {
  const ScoreWave& wave = s.plan.waves[static_cast<std::size_t>(wave_index)];
  const int team = s.team();
#pragma omp parallel num_threads(team) if (team > 1 && wave.token_end - wave.token_begin > 1)
  {
    const IndexerScratch sc = carve_indexer_scratch(s.plan, omp_get_thread_num(), s.params.head_dim);
#pragma omp for schedule(dynamic, 1)
    for (int t = wave.token_begin; t < wave.token_end; ++t) {
      const float* row = s.plan.logits.as<float>() + static_cast<std::int64_t>(t - wave.token_begin) * s.plan.logits_stride;
      top_k_row(row, s.plan.row_length[static_cast<std::size_t>(t)], s.params.topk, indices + t * indices_stride, sc.ranks);
    }
  }
}

}  // namespace attnsel::kernel::sparse_mla::cpu
