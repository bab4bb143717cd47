// A bench result's shape line, as the CPU and the GPU benchmarks both write it.
#include <gtest/gtest.h>

#include "runtime/bench_job.hpp"

namespace attnsel::runtime {
namespace {

TEST(BenchCaseShape, NamesTheBatchHeadsCacheAndBlocks) {
  WorkloadShape shape;
  shape.block_size = 32;
  shape.layout = CacheLayout::hnd;
  const BenchCase decode = shape_decode_case(shape, 8, 4096);
  EXPECT_EQ(bench_case_shape(decode, kernel::ScalarType::bf16),
            "8 × 4096 tokens, 32/8 heads, d=128, bf16 KV HND, block 32");
}

TEST(BenchCaseShape, MarksAPrefillCausal) {
  BenchCase prefill = shape_decode_case(WorkloadShape{}, 1, 1024);
  prefill.decode = false;
  EXPECT_EQ(bench_case_shape(prefill, kernel::ScalarType::fp8_e4m3),
            "1 × 1024 tokens (causal), 32/8 heads, d=128, fp8_e4m3 KV NHD, block 16");
}

}  // namespace
}  // namespace attnsel::runtime
