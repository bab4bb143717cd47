// Shared by the kernel tests: run an implementation on a synthetic paged batch and compare
// every output element with the double-precision reference; the check that a call is
// refused with a ValueError naming the problem.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "attnsel/errors.hpp"
#include "attnsel/kernel.hpp"
#include "kernels/attention/reference.hpp"
#include "runtime/accuracy.hpp"
#include "runtime/paged_workload.hpp"

namespace attnsel::kernel::testing {

inline std::string describe(const runtime::WorkloadSpec& s, const LayerParams& p) {
  std::string seqs;
  for (const auto& q : s.sequences) seqs += fmt::format("({},{})", q.seq_len, q.query_len);
  return fmt::format("dtype={} kv={} heads={}/{} D={} bs={} layout={} type={} causal={} window={} cap={} alibi={} "
                     "sinks={} seqs={}",
                     to_string(s.dtype), cache_dtype_name(s.kv_cache_dtype), p.num_heads, p.num_kv_heads, p.head_size, s.block_size,
                     s.layout == runtime::CacheLayout::nhd ? "NHD" : "HND", attn_type_name(p.attn_type), p.causal,
                     p.sliding_window ? *p.sliding_window : 0, p.logits_soft_cap, !p.alibi_slopes.empty(),
                     !p.sinks.empty(), seqs);
}

/// The exact outputs of every query token, [tokens, num_heads, head_size].
inline std::vector<double> reference_outputs(const LayerParams& p, runtime::PagedWorkload& w) {
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(w.num_tokens()));
  std::iota(tokens.begin(), tokens.end(), 0);
  return reference::attend(p, w.query(), w.cache(), w.metadata(), tokens);
}

/// Runs `impl` with a NaN-poisoned output and compares every element with `ref`; returns
/// the largest error relative to the tolerance (<= 1 passes).
inline double expect_matches(const AttentionImpl& impl, runtime::PagedWorkload& w, const std::vector<double>& ref,
                             const std::string& what) {
  w.poison_output();
  impl.forward(w.query(), w.cache(), w.metadata(), w.output());
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(w.num_tokens()));
  std::iota(tokens.begin(), tokens.end(), 0);
  const runtime::Comparison c =
      runtime::compare_with_reference(w.output(), tokens, ref, runtime::tolerance_for(w.output().dtype));
  for (const runtime::Mismatch& m : c.first_failures)
    ADD_FAILURE() << what << "\n  token " << m.token << " head " << m.head << " dim " << m.dim << ": got " << m.got
                  << ", reference " << m.want;
  if (std::getenv("ATTNSEL_PRINT_ERRORS")) std::printf("worst %.3f  %s\n", c.worst_ratio, what.c_str());
  return c.worst_ratio;
}

inline double expect_matches_reference(const AttentionImpl& impl, runtime::PagedWorkload& w, const std::string& what) {
  return expect_matches(impl, w, reference_outputs(impl.params(), w), what);
}

/// A test failure unless f() throws a ValueError whose message contains `text`.
inline void expect_value_error(const std::function<void()>& f, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing: " << text;
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

}  // namespace attnsel::kernel::testing
