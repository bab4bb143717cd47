// `attnsel run`'s job end to end on the GPU: the workload in device memory, FLASH_ATTN's
// CUDA kernels writing the cache and attending, the sample checked against the reference
// on copies brought back. Skips without a usable GPU (suite *Gpu*: ctest label gpu).
#include <gtest/gtest.h>

#include "kernels/gpu_test_util.hpp"
#include "kernels/attention/cuda/flash_attn_cuda.hpp"
#include "runtime/accuracy.hpp"
#include "runtime/bench_job.hpp"
#include "runtime/run_job.hpp"

namespace attnsel::runtime {
namespace {

ImplFactory cuda_impl() {
  return [](const kernel::LayerParams& p) { return kernel::cuda::make_flash_attn_cuda_impl(p); };
}

RunSpec tiny_spec() {
  RunSpec s;
  s.num_heads = 8;
  s.num_kv_heads = 2;
  s.head_size = 64;
  s.num_layers = 3;
  s.batch = 3;
  s.context = 45;  // odd: the last prefill chunk is partial
  s.decode_steps = 4;
  s.new_tokens = 2;
  s.prefill_chunk_tokens = 60;
  s.check_tokens = 4;
  s.device = kernel::DeviceKind::cuda;
  return s;
}

TEST(RunJobGpu, PrefillThenDecodeOnDeviceMemoryPassesTheCheck) {
  REQUIRE_GPU();
  for (CacheLayout layout : {CacheLayout::nhd, CacheLayout::hnd})
    for (kernel::ScalarType dt : {kernel::ScalarType::bf16, kernel::ScalarType::f16}) {
      SCOPED_TRACE(std::string(kernel::to_string(dt)) + (layout == CacheLayout::nhd ? " NHD" : " HND"));
      RunSpec s = tiny_spec();
      s.layout = layout;
      s.dtype = dt;
      const RunReport r = run_job(s, cuda_impl());
      EXPECT_EQ(r.prefill.steps, 3);
      EXPECT_EQ(r.decode_warmup.steps, 1);
      EXPECT_EQ(r.decode.steps, 3);
      ASSERT_TRUE(r.check_prefill.ran);
      ASSERT_TRUE(r.check_decode.ran);
      EXPECT_TRUE(r.check_passed()) << r.check_prefill.comparison.worst_ratio << " "
                                    << r.check_decode.comparison.worst_ratio;
      EXPECT_GT(r.prefill.seconds, 0.0);
      EXPECT_GT(r.decode.seconds, 0.0);
    }
}

TEST(RunJobGpu, Fp8CacheWithScalesPassesTheCheck) {
  REQUIRE_GPU();
  RunSpec s = tiny_spec();
  s.kv_cache_dtype = CacheDType::fp8_e4m3;
  s.k_scale = 0.02f;  // values in [-1, 1] are stored as up to ±50: well inside e4m3's range
  s.v_scale = 0.5f;
  const RunReport r = run_job(s, cuda_impl());
  EXPECT_TRUE(r.check_passed()) << r.check_prefill.comparison.worst_ratio << " "
                                << r.check_decode.comparison.worst_ratio;
  // The cache is 1 byte per element: decode reads half the bytes of a bf16 cache.
  const double tokens = 3.0 * ((45 + 4) + (45 + 6) + (45 + 8));  // the warm-up step's 47 apart
  EXPECT_DOUBLE_EQ(r.decode.kv_bytes, 3 /*layers*/ * tokens * 2 * 2 * 64 * 1);
}

TEST(RunJobGpu, Fp8PrefillOnHopperChecksE4m3QueriesAgainstTheirTolerance) {
  REQUIRE_GPU();
  // Chunks of 256 / 3 = 85 tokens a sequence: the checked (last) prefill step takes 65 of
  // each, 260 rows per KV head, beyond the decode kernel's 64. On sm_90 that is the Hopper
  // prefill, whose e4m3 products (head size 64) multiply fp8 queries and take the wider
  // tolerance; elsewhere the mma.sync prefill, which keeps bf16's.
  RunSpec s = tiny_spec();
  s.context = 150;
  s.prefill_chunk_tokens = 256;
  s.decode_steps = 1;
  s.kv_cache_dtype = CacheDType::fp8_e4m3;
  s.k_scale = 0.02f;
  s.v_scale = 0.5f;
  const kernel::cuda::DeviceInfo device = kernel::cuda::device_info(0);
  const bool hopper = device.major == 9 && device.minor == 0;
  const RunReport r = run_job(s, cuda_impl());
  EXPECT_EQ(r.prefill.steps, 2);
  ASSERT_TRUE(r.check_prefill.ran);
  EXPECT_EQ(r.check_prefill.fp8_queries, hopper);
  EXPECT_EQ(r.check_prefill.tolerance.atol, tolerance_for(s.dtype, hopper).atol);
  EXPECT_TRUE(r.check_passed()) << r.check_prefill.comparison.worst_ratio << " "
                                << r.check_decode.comparison.worst_ratio;
}

TEST(RunJobGpu, DecodeStepCapturedInACudaGraphPassesTheCheck) {
  REQUIRE_GPU();
  RunSpec s = tiny_spec();
  s.decode_steps = 6;  // one warm-up step as is, then the capture and five replays
  s.cuda_graphs = true;
  const RunReport r = run_job(s, cuda_impl());
  EXPECT_EQ(r.decode_warmup.steps, 1);
  EXPECT_EQ(r.decode.steps, 5);
  // One launch per layer: the execute appends the new keys and values inside the decode
  // kernel (a separate cache write would make it two).
  EXPECT_GE(r.graph_nodes, s.num_layers);
  EXPECT_LT(r.graph_nodes, 2 * s.num_layers);
  ASSERT_TRUE(r.check_decode.ran);
  EXPECT_TRUE(r.check_passed()) << r.check_decode.comparison.worst_ratio;
  EXPECT_GT(r.decode.plan_us_per_step(), 0.0);
  EXPECT_GT(r.decode.host_us_per_layer(), 0.0);
}

TEST(RunJobGpu, BenchCaseRunsOnTheDeviceAgainstItsReadBandwidth) {
  REQUIRE_GPU();
  for (const BenchCase& c : standard_gpu_bench_cases(runtime::WorkloadShape{}, 0.01)) {
    SCOPED_TRACE(c.name);
    const BenchResult r = run_device_bench_case(c, cuda_impl(), 2);
    EXPECT_TRUE(r.check_passed);
    EXPECT_EQ(r.device, "cuda:0");
    EXPECT_GT(r.figure, 0.0);
    EXPECT_EQ(r.timed, "kernels of one plan");
    EXPECT_GT(r.forward_seconds, 0.0);
    EXPECT_GT(r.forward_behind_seconds, 0.0);
    EXPECT_GT(r.append_seconds, 0.0);
    EXPECT_GT(r.execute_host_us, 0.0);
    EXPECT_GT(r.plan_host_us, 0.0);
    if (c.decode) EXPECT_GT(r.ceiling, 100.0);  // GB/s of device memory, not a host figure
    else EXPECT_EQ(r.ceiling, 0.0);
  }
}

}  // namespace
}  // namespace attnsel::runtime
