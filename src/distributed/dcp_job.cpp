#include "distributed/dcp_job.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <numeric>

#include "attnsel/errors.hpp"
#include "distributed/dcp_layout.hpp"
#include "distributed/kv_shard.hpp"
#include "distributed/merge_states.hpp"
#include "distributed/partial_attention.hpp"
#include "kernels/fp8.hpp"
#include "kernels/half.hpp"
#include "kernels/attention/reference.hpp"

namespace attnsel::distributed {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Encodes fp32 values as the output dtype (round to nearest even).
void encode(std::span<const float> in, kernel::ScalarType t, std::uint8_t* out) {
  for (std::size_t i = 0; i < in.size(); ++i) kernel::reference::store(out, t, static_cast<std::int64_t>(i), in[i]);
}

// Every rank must run the same job: compare a digest of the spec across the group.
void agree_on_job(const DcpJobSpec& spec, Communicator& comm) {
  const std::uint64_t mine = std::hash<std::string>{}(spec.describe());
  std::vector<std::uint64_t> all(static_cast<std::size_t>(comm.size()));
  comm.all_gather(&mine, all.data(), sizeof mine);
  std::vector<int> differ;
  for (int r = 0; r < comm.size(); ++r)
    if (all[static_cast<std::size_t>(r)] != all[0]) differ.push_back(r);
  if (!differ.empty())
    throw ValueError(fmt::format("the DCP ranks were given different jobs: rank(s) {} differ from rank 0 (every rank "
                                 "needs the same command line); this rank runs: {}",
                                 fmt::join(differ, ", "), spec.describe()));
}

template <class T>
std::vector<T> gather_values(Communicator& comm, const T& value) {
  std::vector<T> all(static_cast<std::size_t>(comm.size()));
  comm.all_gather(&value, all.data(), sizeof(T));
  return all;
}

}  // namespace

std::string DcpJobSpec::describe() const {
  return fmt::format("{} kernel; dcp {} interleave {}; heads {}/{} d{} layers {}; {} cache {} block {} {}; batch {} "
                     "context {} steps {}; check {} x {}; seed {}",
                     backend, world_size, interleave, num_heads, num_kv_heads, head_size, num_layers,
                     kernel::to_string(dtype),
                     cache_dtype_name(kv_cache_dtype), block_size, layout == runtime::CacheLayout::nhd ? "NHD" : "HND", batch, context,
                     decode_steps, check, check_tokens, seed);
}

double DcpReport::merge_share() const {
  double share = 0.0;
  for (const RankTimes& t : rank_times)
    if (t.step > 0) share = std::max(share, t.merge / t.step);
  return share;
}

DcpReport run_dcp_job(const DcpJobSpec& spec, const runtime::ImplFactory& make_impl, Communicator& comm) {
  // Checks every rank makes alike, before any collective: a refusal never leaves a rank waiting.
  if (comm.device() != kernel::DeviceKind::cpu)
    throw NotImplementedError(fmt::format("the DCP job runs its partial attention on the host; {} moves device "
                                          "memory",
                                          comm.name()));
  if (comm.size() != spec.world_size)
    throw ValueError(fmt::format("--dcp {} needs {} ranks, but {} were started: launch with mpirun -np {} (or pass "
                                 "--dcp {})",
                                 spec.world_size, spec.world_size, comm.size(), spec.world_size, comm.size()));
  const DcpLayout layout = make_dcp_layout(spec.world_size, spec.interleave, spec.block_size);
  validate_dcp_heads(spec.num_heads, spec.num_kv_heads, spec.world_size);
  if (spec.batch < 1 || spec.context < 0 || spec.decode_steps < 0 || spec.num_layers < 1 || spec.head_size < 1)
    throw ValueError("the DCP job needs batch >= 1, context >= 0, decode steps >= 0, layers >= 1, head size >= 1");
  runtime::WorkloadSpec ws;
  ws.shape() = spec.shape();
  ws.seed = spec.seed;
  ws.sequences.assign(static_cast<std::size_t>(spec.batch), {spec.context + 1, 1});
  kernel::LayerParams params = runtime::layer_params_for(ws);
  validate_dcp_layer(params);
  kernel::validate_layer_params(params);
  PartialAttention attention(make_impl(params));
  require_dcp_kernel(attention.impl().kernel_info(), spec.backend);
  agree_on_job(spec, comm);

  const int R = spec.world_size, rank = comm.rank(), H = spec.num_heads, D = spec.head_size;
  const int hpr = H / R;
  // Every rank builds the same batch (same seed) and keeps only its shard of the cache.
  runtime::PagedWorkload full(ws);
  KVShard shard(full.cache(), full.metadata(), layout, rank);
  const kernel::AttentionMetadata shard_md = shard.metadata();
  const int T = full.num_tokens();
  const std::size_t qe = kernel::element_size(spec.dtype);
  const std::size_t slice = static_cast<std::size_t>(hpr) * D;  // one token's heads on one rank

  // This rank's query heads, as vLLM's tensor-parallel rank holds them.
  std::vector<std::uint8_t> q_local(static_cast<std::size_t>(T) * slice * qe);
  const auto* q_all = static_cast<const std::uint8_t*>(full.query().data);
  for (int t = 0; t < T; ++t)
    std::memcpy(q_local.data() + static_cast<std::size_t>(t) * slice * qe,
                q_all + (static_cast<std::size_t>(t) * H + static_cast<std::size_t>(rank) * hpr) * D * qe, slice * qe);

  std::vector<std::uint8_t> q_gathered(static_cast<std::size_t>(R) * q_local.size()), q_full(q_local.size() * R);
  std::vector<float> out(static_cast<std::size_t>(T) * H * D), packed(out.size()), lse(static_cast<std::size_t>(T) * H),
      lses(lse.size() * R), merged(static_cast<std::size_t>(T) * slice);
  std::vector<std::uint8_t> output(merged.size() * qe);
  const kernel::TensorView q_view = kernel::TensorView::contiguous(q_full.data(), spec.dtype, {T, H, D});

  RankTimes times;
  auto step = [&](bool timed) {
    const auto t0 = Clock::now();
    attention.plan(shard_md, shard.cache(), spec.dtype);  // once per step, for every layer
    if (timed) times.plan += since(t0);
    for (int layer = 0; layer < spec.num_layers; ++layer) {
      auto ta = Clock::now();
      comm.all_gather(q_local.data(), q_gathered.data(), q_local.size());
      for (int r = 0; r < R; ++r)  // [R, T, H/R, D] -> [T, H, D]
        for (int t = 0; t < T; ++t)
          std::memcpy(q_full.data() + (static_cast<std::size_t>(t) * H + static_cast<std::size_t>(r) * hpr) * D * qe,
                      q_gathered.data() + (static_cast<std::size_t>(r) * T + static_cast<std::size_t>(t)) * slice * qe,
                      slice * qe);
      const double tq = since(ta);
      ta = Clock::now();
      attention.execute(q_view, shard.cache(), out, lse);
      const double tattn = since(ta);
      ta = Clock::now();
      comm.all_gather(lse.data(), lses.data(), lse.size() * sizeof(float));
      correct_partial_output(lses, R, rank, T, H, D, out, {});
      pack_heads_by_rank(out, R, T, H, D, packed);
      comm.reduce_scatter_sum(packed.data(), merged.data(), merged.size());
      comm.synchronize();
      const double tmerge = since(ta);
      encode(merged, spec.dtype, output.data());
      if (timed) {
        times.query_gather += tq;
        times.attention += tattn;
        times.merge += tmerge;
      }
    }
    if (timed) times.step += since(t0);
  };
  step(false);  // warm-up: first-touch of the buffers, the transport's connections

  DcpReport report;
  report.spec = spec;
  report.transport = std::string(comm.name());
  report.plan = attention.describe();
  if (spec.check) {
    // The output of the warm-up step, checked head slice by head slice on every rank.
    std::vector<std::int32_t> tokens;
    const int n = std::min(std::max(spec.check_tokens, 1), T);
    for (int i = 0; i < n; ++i) tokens.push_back(static_cast<std::int32_t>(static_cast<std::int64_t>(i) * T / n));
    const std::vector<double> want_all =
        kernel::reference::attend(params, full.query(), full.cache(), full.metadata(), tokens);
    std::vector<double> want(tokens.size() * slice);
    for (std::size_t i = 0; i < tokens.size(); ++i)
      std::copy_n(want_all.begin() + static_cast<std::ptrdiff_t>((i * H + static_cast<std::size_t>(rank) * hpr) * D),
                  slice, want.begin() + static_cast<std::ptrdiff_t>(i * slice));
    const kernel::TensorView got = kernel::TensorView::contiguous(output.data(), spec.dtype, {T, hpr, D});
    runtime::Comparison mine =
        runtime::compare_with_reference(got, tokens, want, runtime::tolerance_for(spec.dtype));
    for (runtime::Mismatch& m : mine.first_failures) m.head += rank * hpr;  // report global head numbers
    struct Summary { double worst, max_abs; std::int64_t elements, failures; };
    const auto all = gather_values(comm, Summary{mine.worst_ratio, mine.max_abs_error, mine.elements, mine.failures});
    report.checked = true;
    report.check_tokens = n;
    report.comparison = mine;
    report.comparison.elements = report.comparison.failures = 0;
    for (const Summary& s : all) {
      report.comparison.worst_ratio = std::max(report.comparison.worst_ratio, s.worst);
      report.comparison.max_abs_error = std::max(report.comparison.max_abs_error, s.max_abs);
      report.comparison.elements += s.elements;
      report.comparison.failures += s.failures;
    }
  }
  for (int i = 0; i < spec.decode_steps; ++i) step(true);

  report.rank_times = gather_values(comm, times);
  std::int64_t tokens = 0;
  for (std::int32_t l : shard.local_seq_lens()) tokens += l;
  report.rank_tokens = gather_values(comm, tokens);
  report.rank_cache_bytes = gather_values(comm, static_cast<std::int64_t>(shard.cache_bytes()));
  report.tokens = static_cast<double>(T) * spec.decode_steps;
  for (const RankTimes& t : report.rank_times) report.seconds = std::max(report.seconds, t.step);
  return report;
}

}  // namespace attnsel::distributed
