// Request positions to latent cache rows on the CPU (vLLM's
// triton_convert_req_index_to_global_index, vllm/v1/attention/backends/mla/sparse_utils.py).
#include "kernels/sparse_mla/cpu/sparse_steps.hpp"

namespace attnsel::kernel::sparse_mla::cpu {

void to_physical(const SparseStep& s, const std::int32_t* local, std::int64_t local_stride, std::int32_t* physical,
                 std::int64_t physical_stride) {
  const mla::MlaBatch& b = s.plan.batch;
  const int topk = s.params.topk, B = b.block_size;
  const int tokens = b.num_actual_tokens;
#pragma omp parallel for schedule(static) num_threads(s.team()) if (static_cast<std::int64_t>(tokens) * topk >= 65536)
  for (int t = 0; t < tokens; ++t) {
    const int seq = s.plan.token_seq[static_cast<std::size_t>(t)];
    const std::int64_t L = b.seq_lens[static_cast<std::size_t>(seq)];
    const std::int32_t* table = b.table_row(seq);
    const std::int32_t* in = local + t * local_stride;
    std::int32_t* out = physical + t * physical_stride;
    // A position the request does not hold (negative, or past its seq_len: its block-table
    // entries there are never read) is -1.
    for (int k = 0; k < topk; ++k) {
      const std::int32_t p = in[k];
      out[k] = p >= 0 && p < L ? table[p / B] * B + p % B : -1;
    }
  }
}

}  // namespace attnsel::kernel::sparse_mla::cpu
