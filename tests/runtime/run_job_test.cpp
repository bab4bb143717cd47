// The run job: prefill then decode through an implementation, counted and checked.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "attnsel/errors.hpp"
#include "kernels/attention/cpu/cpu_attention.hpp"
#include "kernels/attention/reference.hpp"
#include "runtime/run_job.hpp"

namespace attnsel::runtime {
namespace {

RunSpec small_spec() {
  RunSpec s;
  s.num_heads = 8;
  s.num_kv_heads = 2;
  s.head_size = 64;
  s.num_layers = 3;
  s.batch = 3;
  s.context = 45;
  s.decode_steps = 4;
  s.new_tokens = 2;
  s.prefill_chunk_tokens = 60;  // 20 tokens per sequence per prefill step: 3 steps
  s.check_tokens = 4;
  return s;
}

TEST(RunJob, RunsPrefillInChunksThenDecodeAndChecks) {
  const RunSpec s = small_spec();
  std::vector<std::string> phases;
  std::int64_t last_done = 0, last_total = 0;
  const RunReport r = run_job(
      s, [](const kernel::LayerParams& p) { return kernel::cpu::make_cpu_attention_impl(p); },
      [&](std::string_view phase, std::int64_t done, std::int64_t total) {
        if (phases.empty() || phases.back() != phase) phases.emplace_back(phase);
        last_done = done;
        last_total = total;
      });
  EXPECT_EQ(r.prefill.steps, 3);
  // The first of the 4 decode steps is the warm-up, reported apart from the decode rate.
  EXPECT_EQ(r.decode_warmup.steps, 1);
  EXPECT_EQ(r.decode.steps, 3);
  EXPECT_EQ(r.prefill.tokens, 3 * 45);
  EXPECT_EQ(r.decode_warmup.tokens, 3 * 2);
  EXPECT_EQ(r.decode.tokens, 3 * 3 * 2);
  EXPECT_GT(r.decode_warmup.seconds, 0.0);
  EXPECT_EQ(phases, (std::vector<std::string>{"prefill", "decode"}));
  EXPECT_EQ(last_done, last_total);
  EXPECT_EQ(last_total, (3 + 4) * 3);
  // Decode reads the whole context once per step and layer: sum over steps of 45 + 2(i+1)
  // tokens, the warm-up step's 47 apart.
  const double tokens = 3.0 * ((45 + 4) + (45 + 6) + (45 + 8));
  EXPECT_DOUBLE_EQ(r.decode.kv_bytes, 3 /*layers*/ * tokens * 2 * 2 * 64 * 2);
  EXPECT_DOUBLE_EQ(r.decode_warmup.kv_bytes, 3 /*layers*/ * 3.0 * (45 + 2) * 2 * 2 * 64 * 2);
  // Prefill FLOPs of a causal 45-token prompt: 4·d·h·45·46/2 per sequence and layer.
  EXPECT_DOUBLE_EQ(r.prefill.flops, 3 * 3 * 4.0 * 64 * 8 * (45.0 * 46 / 2));
  ASSERT_TRUE(r.check_prefill.ran);
  ASSERT_TRUE(r.check_decode.ran);
  EXPECT_EQ(r.check_decode.tokens, 4);
  EXPECT_TRUE(r.check_passed()) << r.check_decode.comparison.worst_ratio;
  // The CPU kernels multiply the queries as given: the bf16 output's tolerance.
  EXPECT_FALSE(r.check_prefill.fp8_queries);
  EXPECT_EQ(r.check_prefill.tolerance.atol, tolerance_for(kernel::ScalarType::bf16).atol);
  EXPECT_EQ(r.check_prefill.tolerance.rtol, tolerance_for(kernel::ScalarType::bf16).rtol);
  EXPECT_GT(r.prefill.seconds, 0.0);
}

// Decode steps timed as one interval (the default) or each on its own (sync_steps): both run
// every step, time the phase and leave the last step's output for the check.
TEST(RunJob, DecodeStepsPipelinedOrSynchronisedAreTimedAndChecked) {
  for (const bool sync : {false, true}) {
    SCOPED_TRACE(sync ? "sync_steps" : "pipelined");
    RunSpec s = small_spec();
    s.sync_steps = sync;
    const RunReport r = run_job(s, [](const kernel::LayerParams& p) { return kernel::cpu::make_cpu_attention_impl(p); });
    EXPECT_EQ(r.decode_warmup.steps, 1);
    EXPECT_EQ(r.decode.steps, 3);
    EXPECT_EQ(r.decode.layers, 3 * 3);
    EXPECT_GT(r.decode.seconds, 0.0);
    EXPECT_GT(r.decode.issue_seconds, 0.0);
    ASSERT_TRUE(r.check_decode.ran);
    EXPECT_TRUE(r.check_passed()) << r.check_decode.comparison.worst_ratio;
  }
}

TEST(RunJob, LayersShareCachesBeyondTheMemoryBudget) {
  RunSpec s = small_spec();
  s.max_cache_bytes = 1;  // forces one cache for every layer
  const RunReport r = run_job(s, [](const kernel::LayerParams& p) { return kernel::reference::make_reference_impl(p); });
  EXPECT_EQ(r.distinct_caches, 1);
  EXPECT_TRUE(r.check_passed());
}

// A kernel that gets one head wrong must fail the check.
class OffByAHead final : public kernel::AttentionImpl {
 public:
  explicit OffByAHead(kernel::LayerParams p) : AttentionImpl(p), inner_(kernel::cpu::make_cpu_attention_impl(p)) {}
  void write_kv_cache(const kernel::TensorView& k, const kernel::TensorView& v, const kernel::KVCacheView& c,
                      const kernel::AttentionMetadata& md) const override {
    inner_->write_kv_cache(k, v, c, md);
  }
  void forward(const kernel::TensorView& q, const kernel::KVCacheView& c, const kernel::AttentionMetadata& md,
               const kernel::TensorView& out) const override {
    inner_->forward(q, c, md, out);
    auto* o = static_cast<std::uint16_t*>(out.data);
    for (int t = 0; t < md.num_actual_tokens; ++t) o[t * out.stride[0] + 3 * out.stride[1] + 5] ^= 0x4000;
  }

 private:
  std::unique_ptr<kernel::AttentionImpl> inner_;
};

TEST(RunJob, CheckCatchesAWrongKernel) {
  const RunReport r =
      run_job(small_spec(), [](const kernel::LayerParams& p) { return std::make_unique<OffByAHead>(p); });
  EXPECT_FALSE(r.check_passed());
  ASSERT_FALSE(r.check_decode.comparison.first_failures.empty());
  EXPECT_EQ(r.check_decode.comparison.first_failures[0].head, 3);
  EXPECT_EQ(r.check_decode.comparison.first_failures[0].dim, 5);
}

TEST(RunJob, Fp8CacheWithPerHeadScales) {
  RunSpec s = small_spec();
  s.kv_cache_dtype = CacheDType::fp8_e4m3;
  s.k_scales = {0.05f, 0.21f};
  s.v_scales = {0.5f, 1.7f};
  EXPECT_EQ(layer_params_for(s).k_scales, s.k_scales);
  EXPECT_EQ(layer_params_for(s).v_scales, s.v_scales);
  auto cpu = [](const kernel::LayerParams& p) { return kernel::cpu::make_cpu_attention_impl(p); };
  EXPECT_TRUE(run_job(s, cpu).check_passed());
  // An implementation that used one scale for every head (here: the per-layer default 1)
  // writes and reads a different cache than the checked layer: the check must fail.
  auto per_layer_only = [](kernel::LayerParams p) {
    p.k_scales.clear();
    p.v_scales.clear();
    return kernel::cpu::make_cpu_attention_impl(p);
  };
  EXPECT_FALSE(run_job(s, per_layer_only).check_passed());
}

TEST(RunJob, RejectsImpossibleSpecs) {
  RunSpec s = small_spec();
  s.batch = 0;
  try {
    run_job(s, [](const kernel::LayerParams& p) { return kernel::reference::make_reference_impl(p); });
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("batch = 0; it must be at least 1"));
  }
}

}  // namespace
}  // namespace attnsel::runtime
