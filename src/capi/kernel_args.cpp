#include "capi/kernel_args.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <mutex>
#include <set>

#include "attnsel/errors.hpp"
#include "attnsel/registry.hpp"
#include "capi/status.hpp"

namespace attnsel::capi {

using kernel::TensorView;

std::shared_ptr<const AttentionBackend> named_backend(const char* backend) {
  require(backend, "backend");
  return AttentionBackendEnum.from_user_text(backend).get_attention_class();
}

std::shared_ptr<const AttentionBackend> backend_with_kernel(const char* backend) {
  std::shared_ptr<const AttentionBackend> cls = named_backend(backend);
  if (!cls->has_kernel()) throw NotImplementedError(cls->missing_kernel_reason());
  return cls;
}

TensorView view(const DLTensor* t, std::string_view what) {
  require(t, what);
  try {
    return kernel::from_dlpack(*t);
  } catch (const ValueError& e) {
    throw ValueError(fmt::format("{}: {}", what, e.what()));
  }
}

std::optional<TensorView> optional_view(const DLTensor* t, std::string_view what) {
  if (t == nullptr) return std::nullopt;
  return view(t, what);
}

kernel::AttentionMetadata metadata(const attnsel_batch* batch) {
  require(batch, "batch");
  require_struct(batch->struct_size, sizeof(attnsel_batch), "attnsel_batch");
  const attnsel_batch& b = *batch;
  if (b.num_seqs < 0) throw ValueError(fmt::format("num_seqs = {} is negative", b.num_seqs));
  if (b.max_blocks_per_seq < 0)
    throw ValueError(fmt::format("max_blocks_per_seq = {} is negative", b.max_blocks_per_seq));
  const auto n = static_cast<std::size_t>(b.num_seqs);
  require(b.query_start_loc, "query_start_loc");
  if (n > 0) require(b.seq_lens, "seq_lens");
  const std::size_t table_size = n * static_cast<std::size_t>(b.max_blocks_per_seq);
  if (table_size > 0) require(b.block_table, "block_table");
  kernel::AttentionMetadata md;
  md.num_seqs = b.num_seqs;
  md.num_actual_tokens = b.query_start_loc[n];
  if (md.num_actual_tokens < 0)
    throw ValueError(fmt::format("query_start_loc[num_seqs] = {} is negative", md.num_actual_tokens));
  md.query_start_loc = {b.query_start_loc, n + 1};
  md.seq_lens = {b.seq_lens, n};
  md.block_table = {b.block_table, table_size};
  md.max_blocks_per_seq = b.max_blocks_per_seq;
  if (b.slot_mapping != nullptr) md.slot_mapping = {b.slot_mapping, static_cast<std::size_t>(md.num_actual_tokens)};
  for (std::size_t s = 0; s < n; ++s) {
    md.max_query_len = std::max(md.max_query_len, b.query_start_loc[s + 1] - b.query_start_loc[s]);
    md.max_seq_len = std::max(md.max_seq_len, b.seq_lens[s]);
  }
  return md;
}

kernel::Stream stream_of(attnsel_stream stream) { return kernel::Stream::from_native(stream); }

namespace {
std::int32_t graph_support_code(kernel::GraphSupport g) {
  switch (g) {
    case kernel::GraphSupport::never: return ATTNSEL_GRAPH_SUPPORT_NEVER;
    case kernel::GraphSupport::uniform_single_token_decode: return ATTNSEL_GRAPH_SUPPORT_UNIFORM_SINGLE_TOKEN_DECODE;
    case kernel::GraphSupport::uniform_batch: return ATTNSEL_GRAPH_SUPPORT_UNIFORM_BATCH;
    case kernel::GraphSupport::always: return ATTNSEL_GRAPH_SUPPORT_ALWAYS;
  }
  return ATTNSEL_GRAPH_SUPPORT_NEVER;
}
}  // namespace

void fill_info(const kernel::KernelInfo& k, const char* isa, const char* layout, attnsel_kernel_info* out) {
  require(out, "out");
  // The first version ended with lse_output; later fields are filled where the caller's struct has them.
  require_struct(out->struct_size, offsetof(attnsel_kernel_info, lse_prefill), "attnsel_kernel_info");
  out->available = k.available ? 1 : 0;
  out->device_type = k.device == kernel::DeviceKind::cuda ? kDLCUDA : kDLCPU;
  out->isa = isa;
  out->graph_support = graph_support_code(k.graph_support);
  out->graph_support_name = to_string(k.graph_support).data();  // a string literal's view
  out->preferred_layout = layout;
  out->lse_output = k.lse_output ? 1 : 0;
  if (out->struct_size >= offsetof(attnsel_kernel_info, lse_prefill) + sizeof(out->lse_prefill))
    out->lse_prefill = k.lse_prefill ? 1 : 0;
}

const char* interned(const std::string& text) {
  static std::mutex mutex;
  static std::set<std::string> strings;
  const std::lock_guard lock(mutex);
  return strings.insert(text).first->c_str();
}

const kernel::StepPlan& step_plan(const attnsel_step_plan* plan) {
  require(plan, "plan");
  return *plan->plan;
}

}  // namespace attnsel::capi
