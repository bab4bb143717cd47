#include "kernels/mla/cpu/plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <new>

#include "kernels/attention/cpu/work.hpp"
#include "kernels/attention/semantics.hpp"
#include "kernels/mla/cpu/latent_decode.hpp"
#include "kernels/mla/cpu/prefill_attention.hpp"
#include "kernels/cache_lines.hpp"

namespace attnsel::kernel::mla::cpu {

namespace {

using kernel::cpu::WorkPlan;

std::size_t bytes_of(std::int64_t elements, ScalarType t) {
  return static_cast<std::size_t>(elements) * element_size(t);
}

// A pass of the prefill requests' queries over `keys[i]` workspace rows from `first_row[i]`.
PrefillPass make_pass(const MlaBatch& b, const MlaLayerParams& p, const std::vector<std::int64_t>& keys,
                      const std::vector<std::int64_t>& first_row, bool causal, int cores) {
  const BatchSplit& split = b.split;
  PrefillPass pass;
  const int t0 = split.num_decode_tokens;
  for (std::int64_t k : keys) pass.max_keys = std::max(pass.max_keys, static_cast<int>(k));
  pass.max_keys = std::max(pass.max_keys, 1);
  pass.query_start_loc.resize(static_cast<std::size_t>(split.num_prefills) + 1);
  pass.seq_lens.resize(static_cast<std::size_t>(split.num_prefills));
  pass.table.assign(static_cast<std::size_t>(split.num_prefills) * static_cast<std::size_t>(pass.max_keys), 0);
  int max_query = 0;
  for (int i = 0; i <= split.num_prefills; ++i)
    pass.query_start_loc[static_cast<std::size_t>(i)] = b.query_start_loc[static_cast<std::size_t>(split.num_decodes + i)] - t0;
  for (int i = 0; i < split.num_prefills; ++i) {
    const auto ii = static_cast<std::size_t>(i);
    pass.seq_lens[ii] = static_cast<std::int32_t>(keys[ii]);
    for (std::int64_t k = 0; k < keys[ii]; ++k)
      pass.table[ii * static_cast<std::size_t>(pass.max_keys) + static_cast<std::size_t>(k)] =
          static_cast<std::int32_t>(first_row[ii] + k);
    max_query = std::max(max_query, pass.query_start_loc[ii + 1] - pass.query_start_loc[ii]);
  }
  AttentionMetadata md;
  md.num_seqs = split.num_prefills;
  md.num_actual_tokens = split.num_prefill_tokens;
  md.query_start_loc = pass.query_start_loc;
  md.seq_lens = pass.seq_lens;
  md.block_table = pass.table;
  md.max_blocks_per_seq = pass.max_keys;
  md.max_query_len = max_query;
  md.max_seq_len = pass.max_keys;
  LayerParams heads;  // multi-head attention: one key and value head per query head
  heads.num_heads = heads.num_kv_heads = p.dims.num_heads;
  heads.head_size = p.dims.qk_head_size();
  heads.causal = causal;
  MaskRule mask;
  mask.causal = causal;
  pass.work = kernel::cpu::plan_work(heads, md, mask, cores);
  return pass;
}

}  // namespace

void HostBuffer::reserve(std::size_t bytes) {
  if (bytes <= bytes_) return;
  release();
  ptr_ = ::operator new(bytes, std::align_val_t{64});
  bytes_ = bytes;
}

void HostBuffer::release() {
  if (ptr_) ::operator delete(ptr_, std::align_val_t{64});
  ptr_ = nullptr;
  bytes_ = 0;
}

std::size_t CpuMlaPlan::workspace_bytes() const {
  std::size_t b = 0;
  for (const HostBuffer* h : {&scratch, &partials, &decode_query, &decode_latent_out, &new_keys, &new_values, &suffix,
                              &suffix_lse, &prefix, &prefix_lse, &chunk_out, &chunk_lse, &gathered, &chunk_keys,
                              &chunk_values})
    b += h->size();
  b += split_counters * sizeof(std::atomic<int>);
  b += (batch.query_start_loc.capacity() + batch.seq_lens.capacity() + batch.block_table.capacity()) *
           sizeof(std::int32_t) +
       batch.slot_mapping.capacity() * sizeof(std::int64_t);
  auto items = [](const WorkPlan& w) {
    return w.items.capacity() * sizeof(kernel::cpu::WorkItem) + w.splits.capacity() * sizeof(kernel::cpu::SplitGroup);
  };
  b += items(decode) + items(prefill.work) + prefill.table.capacity() * sizeof(std::int32_t);
  for (const ContextChunkPass& c : chunks)
    b += items(c.pass.work) + c.pass.table.capacity() * sizeof(std::int32_t) +
         c.gathers.capacity() * sizeof(ContextGather);
  return b;
}

std::string CpuMlaPlan::describe() const {
  const MlaStepSummary s = batch.summary();
  std::string text = fmt::format("MLA: {} decode requests ({} work items, {} split-KV groups)", s.num_decodes,
                                 decode.items.size(), decode.splits.size());
  if (s.num_prefills > 0)
    text += fmt::format(", {} prefill requests ({} tokens, {} work items; context in {} chunk{} of {} tokens)",
                        s.num_prefills, s.num_prefill_tokens, prefill.work.items.size(), s.context_chunks,
                        s.context_chunks == 1 ? "" : "s", batch.chunks.chunk_tokens);
  return text + fmt::format(" on {} thread{}", threads, threads == 1 ? "" : "s");
}

void build_work(CpuMlaPlan& plan, const MlaLayerParams& p, int decode_splits) {
  const MlaBatch& b = plan.batch;
  const BatchSplit& split = b.split;
  const MlaDims& d = p.dims;
  const int N = d.num_heads;
  DecodeSplitOptions decode_options;
  decode_options.cores = plan.threads;
  decode_options.forced_splits = decode_splits;
  decode_options.batch_invariant = p.batch_invariant;
  plan.decode = plan_decode_work(b, N, decode_options);

  // The prefill's new tokens: request i's keys are its own tokens, rows from its first.
  const auto P = static_cast<std::size_t>(split.num_prefills);
  std::vector<std::int64_t> keys(P), first_row(P);
  for (std::size_t i = 0; i < P; ++i) {
    const int seq = split.num_decodes + static_cast<int>(i);
    keys[i] = b.query_len(seq);
    first_row[i] = b.query_start_loc[static_cast<std::size_t>(seq)] - split.num_decode_tokens;
  }
  plan.prefill = make_pass(b, p, keys, first_row, true, plan.threads);

  // The cached context, chunk by chunk: each request's rows of the chunk, one after another.
  plan.chunks.resize(static_cast<std::size_t>(b.chunks.num_chunks));
  plan.max_chunk_rows = 0;
  for (int c = 0; c < b.chunks.num_chunks; ++c) {
    ContextChunkPass& chunk = plan.chunks[static_cast<std::size_t>(c)];
    chunk.gathers.clear();
    chunk.rows = 0;
    for (std::size_t i = 0; i < P; ++i) {
      const int seq = split.num_decodes + static_cast<int>(i);
      const auto [begin, end] = b.chunks.range(c, b.context_len(seq));
      keys[i] = end - begin;
      first_row[i] = chunk.rows;
      if (end > begin) chunk.gathers.push_back({seq, begin, end, chunk.rows});
      chunk.rows += end - begin;
    }
    chunk.pass = make_pass(b, p, keys, first_row, false, plan.threads);
    plan.max_chunk_rows = std::max(plan.max_chunk_rows, chunk.rows);
  }

  // Memory: what the largest pass needs; every pass of a step runs one after another.
  const ScalarType act = p.dtype;
  const std::int64_t Td = split.num_decode_tokens, Tp = split.num_prefill_tokens;
  const std::size_t scratch =
      std::max({kernel::cpu::scratch_bytes(std::max(d.latent_size(), d.qk_head_size())), latent_scratch_bytes(),
                prefill_scratch_bytes()});
  plan.scratch_stride = round_to_cache_line(scratch);
  plan.scratch.reserve(plan.scratch_stride * static_cast<std::size_t>(plan.threads));
  std::size_t partial_floats =
      static_cast<std::size_t>(plan.decode.num_partial_slots) * kernel::cpu::partial_slot_floats(d.kv_lora_rank);
  auto pass_partials = [&](const PrefillPass& pass) {
    return static_cast<std::size_t>(pass.work.num_partial_slots) * kernel::cpu::partial_slot_floats(d.v_head_dim);
  };
  partial_floats = std::max(partial_floats, pass_partials(plan.prefill));
  for (const ContextChunkPass& c : plan.chunks) partial_floats = std::max(partial_floats, pass_partials(c.pass));
  plan.partials.reserve(std::max<std::size_t>(partial_floats * sizeof(float), 64));
  std::size_t groups = std::max(plan.decode.splits.size(), plan.prefill.work.splits.size());
  for (const ContextChunkPass& c : plan.chunks) groups = std::max(groups, c.pass.work.splits.size());
  if (groups > plan.split_counters) {
    plan.split_parts_left = std::make_unique<std::atomic<int>[]>(groups);
    plan.split_counters = groups;
  }
  plan.decode_query.reserve(bytes_of(Td * N * d.latent_size(), act));
  plan.decode_latent_out.reserve(bytes_of(Td * N * d.kv_lora_rank, act));
  plan.new_keys.reserve(bytes_of(Tp * N * d.qk_head_size(), act));
  plan.new_values.reserve(bytes_of(Tp * N * d.v_head_dim, act));
  if (!plan.chunks.empty()) {
    for (HostBuffer* h : {&plan.suffix, &plan.prefix, &plan.chunk_out})
      h->reserve(bytes_of(Tp * N * d.v_head_dim, ScalarType::f32));
    for (HostBuffer* h : {&plan.suffix_lse, &plan.prefix_lse, &plan.chunk_lse})
      h->reserve(bytes_of(Tp * N, ScalarType::f32));
    plan.gathered.reserve(bytes_of(plan.max_chunk_rows * d.latent_size(), act));
    plan.chunk_keys.reserve(bytes_of(plan.max_chunk_rows * N * d.qk_head_size(), act));
    plan.chunk_values.reserve(bytes_of(plan.max_chunk_rows * N * d.v_head_dim, act));
  }
}

}  // namespace attnsel::kernel::mla::cpu
