// shard_model: vLLM's tensor-parallel split of heads and Mamba widths.
#include <fmt/format.h>

#include "attnsel/errors.hpp"
#include "attnsel/plan.hpp"

namespace attnsel {

namespace {

[[noreturn]] void not_divisible(const ModelSpec& m, std::string_view field, std::string_view what, std::int64_t n,
                                int tp) {
  throw ValueError(fmt::format("{}: field '{}': Total number of {} ({}) must be divisible by tensor parallel size ({}).",
                               m.source, field, what, n, tp));
}

void shard_attention(const ModelSpec& m, AttentionLayerSpec& a, int tp) {
  if (a.num_heads % tp != 0) not_divisible(m, a.heads_field, "attention heads", a.num_heads, tp);
  a.num_heads /= tp;
  if (a.use_mla) return;  // the latent is replicated on every rank
  if (a.num_kv_heads >= tp) {
    if (a.num_kv_heads % tp != 0) not_divisible(m, a.kv_heads_field, "KV heads", a.num_kv_heads, tp);
    a.num_kv_heads /= tp;
  } else {
    // Fewer KV heads than ranks: each is replicated, which needs the ranks to divide evenly.
    if (tp % a.num_kv_heads != 0)
      throw ValueError(fmt::format("{}: field '{}': tensor parallel size ({}) must be divisible by the total number of "
                                   "KV heads ({}) to replicate them.",
                                   m.source, a.kv_heads_field, tp, a.num_kv_heads));
    a.num_kv_heads = 1;
  }
}

void shard_mamba(const ModelSpec& m, MambaLayerSpec& s, int tp) {
  const std::string_view b = s.backend;
  if (b == "MAMBA1" || b == "SHORT_CONV") {
    if (s.intermediate_size % tp != 0) not_divisible(m, s.heads_field, "Mamba channels", s.intermediate_size, tp);
    s.intermediate_size /= tp;
    return;
  }
  if (s.num_heads % tp != 0) not_divisible(m, s.heads_field, "Mamba heads", s.num_heads, tp);
  s.num_heads /= tp;
  s.intermediate_size = s.num_heads * s.head_dim;
  if (b == "GDN_ATTN") {
    if (s.num_k_heads % tp != 0) not_divisible(m, "linear_num_key_heads", "key heads", s.num_k_heads, tp);
    s.num_k_heads /= tp;
  }
  if (b == "MAMBA2") {
    // vLLM replicates a single group onto every rank; other counts must divide.
    if (s.n_groups % tp == 0)
      s.n_groups /= tp;
    else if (s.n_groups != 1)
      not_divisible(m, "n_groups", "Mamba groups", s.n_groups, tp);
  }
}

}  // namespace

ModelSpec shard_model(const ModelSpec& model, int tensor_parallel_size) {
  const int tp = tensor_parallel_size;
  if (tp < 1) throw ValueError(fmt::format("--tensor-parallel-size: expected a positive integer, got {}", tp));
  if (model.tensor_parallel_size != 1)
    throw ValueError(fmt::format("{}: already sharded for tensor parallel size {}", model.source,
                                 model.tensor_parallel_size));
  ModelSpec out = model;
  out.tensor_parallel_size = tp;
  if (tp == 1) return out;
  for (LayerSpec& l : out.layers) {
    if (l.mixer == MixerKind::attention && l.attention) shard_attention(model, *l.attention, tp);
    if (l.mixer == MixerKind::mamba && l.mamba) shard_mamba(model, *l.mamba, tp);
    // The indexer's single key head is replicated.
  }
  return out;
}

}  // namespace attnsel
