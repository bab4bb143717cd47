// The GPU merge kernel against the host merge, and NCCL's collectives on one GPU (skip
// without a device, or without NCCL in the build).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "distributed/merge_states.hpp"
#include "distributed/nccl_communicator.hpp"
#include "kernels/device/cuda/device_memory.hpp"
#include "kernels/attention/cuda/merge_states.hpp"

namespace attnsel::distributed {
namespace {

TEST(DcpMergeGpu, KernelMatchesTheHostMerge) {
  if (kernel::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const int world = 3, T = 5, H = 7, D = 131;
  const std::size_t th = static_cast<std::size_t>(T) * H, thd = th * D;
  std::vector<float> lses(th * world), out(thd);
  for (std::size_t i = 0; i < lses.size(); ++i) lses[i] = std::sin(0.7f * static_cast<float>(i)) * 20;
  lses[3] = -std::numeric_limits<float>::infinity();  // an empty shard
  lses[th + 3] = std::numeric_limits<float>::quiet_NaN();
  lses[2 * th + 3] = -std::numeric_limits<float>::infinity();  // token 0 head 3: nobody saw it
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = std::cos(0.11f * static_cast<float>(i));
  out[3 * D] = std::numeric_limits<float>::quiet_NaN();
  for (int rank = 0; rank < world; ++rank) {
    std::vector<float> want = out, want_lse(th);
    correct_partial_output(lses, world, rank, T, H, D, want, want_lse);
    kernel::cuda::DeviceBuffer d_lses(lses.size() * 4), d_out(out.size() * 4), d_lse(th * 4);
    d_lses.upload(lses.data(), lses.size() * 4);
    d_out.upload(out.data(), out.size() * 4);
    kernel::cuda::correct_partial_output(static_cast<const float*>(d_lses.data()), world, rank, T, H, D,
                                         static_cast<float*>(d_out.data()), static_cast<float*>(d_lse.data()), nullptr);
    kernel::cuda::synchronize("DCP merge kernel");
    std::vector<float> got(out.size()), got_lse(th);
    d_out.download(got.data(), got.size() * 4);
    d_lse.download(got_lse.data(), got_lse.size() * 4);
    for (std::size_t i = 0; i < thd; ++i) ASSERT_NEAR(got[i], want[i], 1e-5f * (1 + std::abs(want[i]))) << i;
    for (std::size_t i = 0; i < th; ++i) {
      if (std::isinf(want_lse[i])) EXPECT_EQ(got_lse[i], want_lse[i]) << i;
      else EXPECT_NEAR(got_lse[i], want_lse[i], 1e-4f * (1 + std::abs(want_lse[i]))) << i;
    }
  }
}

TEST(DcpNcclGpu, OneRankCollectivesCopyTheirInput) {
  if (kernel::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  if (!nccl_built()) GTEST_SKIP() << "built without NCCL";
  auto comm = make_single_rank_nccl_communicator(0);
  EXPECT_EQ(comm->size(), 1);
  std::vector<float> host(37);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = 0.5f * static_cast<float>(i) - 3;
  kernel::cuda::DeviceBuffer a(host.size() * 4), b(host.size() * 4), c(host.size() * 4);
  a.upload(host.data(), host.size() * 4);
  comm->all_gather(a.data(), b.data(), host.size() * 4);
  comm->reduce_scatter_sum(static_cast<const float*>(b.data()), static_cast<float*>(c.data()), host.size());
  comm->synchronize();
  std::vector<float> got(host.size());
  c.download(got.data(), got.size() * 4);
  EXPECT_EQ(got, host);
}

}  // namespace
}  // namespace attnsel::distributed
