// The check's tolerances: by output dtype, and widened for plans that multiply fp8 queries.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/attention/cpu/cpu_attention.hpp"
#include "runtime/accuracy.hpp"
#include "runtime/paged_workload.hpp"

namespace attnsel::runtime {
namespace {

using kernel::ScalarType;

/// A plan that says whether it multiplies fp8 queries, as FLASH_ATTN's Hopper prefill on an
/// fp8 cache does.
class PlanWithFp8Queries final : public kernel::StepPlan {
 public:
  PlanWithFp8Queries(ScalarType dtype, bool fp8_queries) : fp8_queries_(fp8_queries) { shape_.dtype = dtype; }
  std::size_t workspace_bytes() const override { return 0; }
  std::string describe() const override { return "test plan"; }
  bool fp8_queries() const override { return fp8_queries_; }

 private:
  bool fp8_queries_;
};

/// One output element, 0.25, against a reference of 0.25 + error.
Comparison compare_one(float got, double error, Tolerance tol) {
  const kernel::TensorView out = kernel::TensorView::contiguous(&got, ScalarType::f32, {1, 1, 1});
  const std::vector<std::int32_t> tokens = {0};
  const std::vector<double> want = {static_cast<double>(got) + error};
  return compare_with_reference(out, tokens, want, tol);
}

TEST(Accuracy, PlansTakeTheirDtypesToleranceUnlessTheyMultiplyFp8Queries) {
  for (ScalarType dt : {ScalarType::f32, ScalarType::f16, ScalarType::bf16}) {
    SCOPED_TRACE(kernel::to_string(dt));
    const Tolerance plain = tolerance_for(PlanWithFp8Queries(dt, false));
    EXPECT_EQ(plain.atol, tolerance_for(dt).atol);
    EXPECT_EQ(plain.rtol, tolerance_for(dt).rtol);
    const Tolerance fp8 = tolerance_for(PlanWithFp8Queries(dt, true));
    EXPECT_GT(fp8.atol, plain.atol);
    EXPECT_GT(fp8.rtol, plain.rtol);
  }
}

TEST(Accuracy, AnFp8QuerysRoundingPassesOnlyTheWidenedToleranceAndAWrongValueNeither) {
  // 0.017: the largest error measured with fp8 queries over a 37-token prompt.
  EXPECT_FALSE(compare_one(0.25f, 0.017, tolerance_for(ScalarType::bf16)).passed());
  EXPECT_TRUE(compare_one(0.25f, 0.017, tolerance_for(ScalarType::bf16, true)).passed());
  // A value from the wrong key row (values in [-1, 1]) fails either way.
  EXPECT_FALSE(compare_one(0.25f, 0.3, tolerance_for(ScalarType::bf16, true)).passed());
}

TEST(Accuracy, CpuPlansOnAnFp8CacheDoNotMultiplyFp8Queries) {
  WorkloadSpec spec;
  spec.num_heads = 4;
  spec.num_kv_heads = 2;
  spec.head_size = 64;
  spec.kv_cache_dtype = CacheDType::fp8_e4m3;
  spec.sequences = {{37, 37}, {100, 1}};
  PagedWorkload w(spec);
  const auto impl = kernel::cpu::make_cpu_attention_impl(layer_params_for(spec));
  const auto plan = impl->plan(w.metadata(), w.cache(), ScalarType::bf16, kernel::Stream{});
  EXPECT_FALSE(plan->fp8_queries());
  EXPECT_EQ(tolerance_for(*plan).atol, tolerance_for(ScalarType::bf16).atol);
}

}  // namespace
}  // namespace attnsel::runtime
