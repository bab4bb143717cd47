// Decode context parallelism's partial states from FLASH_ATTN's CUDA kernel, through the
// job's PartialAttention: two shards of one batch, each attended on the GPU with the
// kernel's LSE output (one plan, two layers), merged by their LSEs, give the single-rank
// reference over the whole cache (output and LSE). Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <span>
#include <limits>
#include <vector>

#include "distributed/dcp_layout.hpp"
#include "distributed/kv_shard.hpp"
#include "distributed/merge_states.hpp"
#include "distributed/partial_attention.hpp"
#include "kernels/attention/cuda/flash_attn_cuda.hpp"
#include "kernels/gpu_test_util.hpp"
#include "kernels/attention/reference.hpp"
#include "runtime/accuracy.hpp"
#include "runtime/paged_workload.hpp"

namespace attnsel::distributed {
namespace {

using kernel::ScalarType;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(DcpCudaPartialGpu, TwoShardsThroughTheCudaKernelMergeToTheWholeCache) {
  REQUIRE_GPU();
  for (CacheDType cache_dtype : {CacheDType::auto_, CacheDType::fp8_e4m3}) {
    SCOPED_TRACE(std::string(cache_dtype_name(cache_dtype)));
    runtime::WorkloadSpec ws;
    ws.num_heads = 32;
    ws.num_kv_heads = 8;
    ws.head_size = 128;
    ws.dtype = ScalarType::bf16;
    ws.block_size = 16;
    ws.kv_cache_dtype = cache_dtype;
    // Interleave 16: rank 1 owns tokens 16-31, 48-63, ...; the 5-token sequence has none
    // there (its output 0, its LSE -inf on rank 1).
    ws.sequences = {{37, 1}, {1000, 1}, {5, 1}, {4099, 1}, {69, 1}};
    ws.seed = 17;
    runtime::PagedWorkload full(ws);
    kernel::LayerParams p = runtime::layer_params_for(ws);
    const int world = 2;
    const DcpLayout layout = make_dcp_layout(world, 16, ws.block_size);
    const int T = full.num_tokens(), H = ws.num_heads, D = ws.head_size;
    const std::size_t thd = static_cast<std::size_t>(T) * H * D, th = static_cast<std::size_t>(T) * H;
    std::vector<float> outs(thd * world, std::numeric_limits<float>::quiet_NaN());
    std::vector<float> lses(th * world, std::numeric_limits<float>::quiet_NaN());
    for (int r = 0; r < world; ++r) {
      // As the DCP job runs a rank: the shard's cache stays on the host, PartialAttention
      // mirrors it to the device, plans once and executes two layers on the plan.
      KVShard shard(full.cache(), full.metadata(), layout, r);
      PartialAttention attention(kernel::cuda::make_flash_attn_cuda_impl(p));
      attention.plan(shard.metadata(), shard.cache(), ScalarType::bf16);
      std::span<float> out_r = std::span(outs).subspan(thd * r, thd), lse_r = std::span(lses).subspan(th * r, th);
      std::vector<float> first(thd, std::numeric_limits<float>::quiet_NaN()), first_lse(th, kNaN);
      attention.execute(full.query(), shard.cache(), first, first_lse);
      attention.execute(full.query(), shard.cache(), out_r, lse_r);
      for (std::size_t i = 0; i < thd; ++i) ASSERT_EQ(first[i], out_r[i]) << "rank " << r << " element " << i;
      for (std::size_t i = 0; i < th; ++i)
        ASSERT_TRUE(first_lse[i] == lse_r[i] || (std::isinf(first_lse[i]) && std::isinf(lse_r[i])))
            << "rank " << r << " row " << i;
      EXPECT_NE(attention.describe().find("split-KV decode"), std::string::npos) << attention.describe();
    }
    for (float x : outs) ASSERT_FALSE(std::isnan(x)) << "an output the kernel did not write";
    for (float x : lses) ASSERT_FALSE(std::isnan(x)) << "an LSE the kernel did not write";
    std::vector<float> out(thd), lse(th);
    merge_partials(outs, lses, world, T, H, D, out, lse);

    std::vector<std::int32_t> tokens(static_cast<std::size_t>(T));
    for (int t = 0; t < T; ++t) tokens[static_cast<std::size_t>(t)] = t;
    const std::vector<double> want = kernel::reference::attend(p, full.query(), full.cache(), full.metadata(), tokens);
    std::vector<std::uint16_t> ref_out(thd);
    std::vector<float> want_lse(th);
    const kernel::TensorView want_lse_view = kernel::TensorView::contiguous(want_lse.data(), ScalarType::f32, {T, H});
    kernel::reference::forward(p, full.query(), full.cache(), full.metadata(),
                               kernel::TensorView::contiguous(ref_out.data(), ws.dtype, {T, H, D}), &want_lse_view);
    const runtime::Tolerance tol = runtime::tolerance_for(ws.dtype);
    for (std::size_t i = 0; i < thd; ++i)
      ASSERT_NEAR(out[i], want[i], tol.atol + tol.rtol * std::abs(want[i])) << "element " << i;
    for (std::size_t i = 0; i < th; ++i) ASSERT_NEAR(lse[i], want_lse[i], 2e-3 * (1 + std::abs(want_lse[i]))) << i;
  }
}

}  // namespace
}  // namespace attnsel::distributed
