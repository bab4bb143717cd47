#include "kernels/sparse_mla/cpu/indexer_plan.hpp"
#include "kernels/cache_lines.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace attnsel::kernel::sparse_mla::cpu {

namespace {

// The default logits budget (vLLM's VLLM_SPARSE_INDEXER_MAX_LOGITS_MB plays this part).
constexpr std::int64_t kDefaultLogitsBytes = std::int64_t{256} << 20;
// The most tokens a wave holds: their quantised queries stay a few tens of MiB.
constexpr int kMaxWaveTokens = 2048;

}  // namespace

std::size_t CpuIndexerPlan::workspace_bytes() const {
  std::size_t b = logits.size() + head_weights.size() + scratch.size();
  for (const mla::cpu::PackedMatrix& m : queries) b += m.bytes();
  b += (batch.query_start_loc.capacity() + batch.seq_lens.capacity() + batch.block_table.capacity() +
        token_seq.capacity()) * sizeof(std::int32_t) +
       (batch.slot_mapping.capacity() + row_length.capacity()) * sizeof(std::int64_t);
  return b;
}

std::string CpuIndexerPlan::describe() const {
  std::size_t items = 0;
  for (const ScoreWave& w : waves) items += w.items.size();
  return fmt::format("cpu indexer: {} query tokens of {} requests in {} wave(s), {} score items, {} threads",
                     batch.num_actual_tokens, batch.num_seqs, waves.size(), items, threads);
}

IndexerScratch carve_indexer_scratch(const CpuIndexerPlan& plan, int thread, int head_dim) {
  auto* base = plan.scratch.as<std::uint8_t>() + static_cast<std::size_t>(thread) * plan.scratch_stride;
  IndexerScratch s;
  s.keys = reinterpret_cast<std::uint16_t*>(base);
  base += round_to_cache_line(static_cast<std::size_t>(kKeyRun) * static_cast<std::size_t>(head_dim) * 2);
  s.products = reinterpret_cast<float*>(base);
  base += round_to_cache_line(static_cast<std::size_t>(kKeyRun) * static_cast<std::size_t>(plan.padded_heads) * 4);
  s.ranks = reinterpret_cast<std::uint64_t*>(base);
  return s;
}

void build_indexer_work(CpuIndexerPlan& plan, const IndexerLayerParams& p, bool bf16_pairs) {
  const mla::MlaBatch& b = plan.batch;
  const int T = b.num_actual_tokens;
  plan.padded_heads = (p.num_heads + 15) / 16 * 16;
  plan.token_seq.assign(static_cast<std::size_t>(T), 0);
  plan.row_length.assign(static_cast<std::size_t>(T), 0);
  for (int s = 0; s < b.num_seqs; ++s) {
    const int t0 = b.query_start_loc[static_cast<std::size_t>(s)], s_q = b.query_len(s);
    const std::int64_t L = b.seq_lens[static_cast<std::size_t>(s)];
    for (int j = 0; j < s_q; ++j) {
      plan.token_seq[static_cast<std::size_t>(t0 + j)] = s;
      plan.row_length[static_cast<std::size_t>(t0 + j)] = L == 0 ? 0 : L - s_q + j + 1;
    }
  }

  plan.logits_stride = (std::max(b.max_seq_len, 1) + 15) / 16 * 16;
  const std::int64_t budget = plan.options.logits_bytes > 0 ? plan.options.logits_bytes : kDefaultLogitsBytes;
  const int wave_tokens = static_cast<int>(std::clamp<std::int64_t>(
      budget / (plan.logits_stride * static_cast<std::int64_t>(sizeof(float))), 1, kMaxWaveTokens));
  plan.waves.clear();
  plan.max_wave_tokens = 0;
  for (int w0 = 0; w0 < T; w0 += wave_tokens) {
    ScoreWave wave;
    wave.token_begin = w0;
    wave.token_end = std::min(T, w0 + wave_tokens);
    plan.max_wave_tokens = std::max(plan.max_wave_tokens, wave.token_end - wave.token_begin);
    // Groups of one request's tokens inside the wave, each over the positions its last
    // token sees (the most of the group), in items of kItemPositions.
    for (int t = wave.token_begin; t < wave.token_end;) {
      const int s = plan.token_seq[static_cast<std::size_t>(t)];
      const int end = std::min({wave.token_end, b.query_start_loc[static_cast<std::size_t>(s) + 1], t + kGroupTokens});
      const std::int64_t seen = plan.row_length[static_cast<std::size_t>(end - 1)];
      for (std::int64_t k0 = 0; k0 < seen; k0 += kItemPositions)
        wave.items.push_back(ScoreItem{s, t, end, k0, std::min(seen, k0 + kItemPositions)});
      t = end;
    }
    plan.waves.push_back(std::move(wave));
  }

  const std::size_t tokens = static_cast<std::size_t>(std::max(plan.max_wave_tokens, 1));
  plan.logits.reserve(tokens * static_cast<std::size_t>(plan.logits_stride) * sizeof(float));
  plan.head_weights.reserve(tokens * static_cast<std::size_t>(plan.padded_heads) * sizeof(float));
  if (plan.queries.size() < tokens || (!plan.queries.empty() && (plan.queries[0].n != plan.padded_heads ||
                                                                   plan.queries[0].bf16_pairs != bf16_pairs))) {
    mla::cpu::PackedMatrix m;
    m.k = p.head_dim;
    m.n = plan.padded_heads;
    m.bf16_pairs = bf16_pairs;
    if (bf16_pairs) m.pairs.assign(static_cast<std::size_t>(p.head_dim / 2) * static_cast<std::size_t>(m.n), 0);
    else m.f32.assign(static_cast<std::size_t>(p.head_dim) * static_cast<std::size_t>(m.n), 0.0f);
    plan.queries.assign(tokens, m);
  }
  plan.scratch_stride = round_to_cache_line(static_cast<std::size_t>(kKeyRun) * static_cast<std::size_t>(p.head_dim) * 2) +
                        round_to_cache_line(static_cast<std::size_t>(kKeyRun) * static_cast<std::size_t>(plan.padded_heads) * 4) +
                        round_to_cache_line(static_cast<std::size_t>(std::max(b.max_seq_len, 1)) * sizeof(std::uint64_t));
  plan.scratch.reserve(plan.scratch_stride * static_cast<std::size_t>(plan.threads));
}

}  // namespace attnsel::kernel::sparse_mla::cpu
