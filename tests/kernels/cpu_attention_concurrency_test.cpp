// AttentionImpl's thread-safety rule: const methods may run concurrently on distinct
// outputs. Small batches keep the kernels on the calling thread (no OpenMP team), so this
// also runs cleanly under ThreadSanitizer.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "kernels/attention/cpu/cpu_attention.hpp"
#include "kernels/attention/reference.hpp"
#include "runtime/accuracy.hpp"
#include "runtime/paged_workload.hpp"

namespace attnsel::kernel {
namespace {

TEST(ConcurrencyCpuAttention, OneImplForwardsFromManyThreads) {
  runtime::WorkloadSpec spec;
  spec.num_heads = 4;
  spec.num_kv_heads = 2;
  spec.head_size = 64;
  spec.sequences = {{40, 1}, {9, 9}};
  LayerParams p;
  p.num_heads = 4;
  p.num_kv_heads = 2;
  p.head_size = 64;
  p.scale = 0.125f;
  const auto impl = cpu::make_cpu_attention_impl(p, {.allow_bf16_dot = true, .num_threads = 1});
  constexpr int kThreads = 4;
  std::vector<std::unique_ptr<runtime::PagedWorkload>> work;
  for (int i = 0; i < kThreads; ++i) {
    spec.seed = static_cast<std::uint64_t>(i + 1);
    work.push_back(std::make_unique<runtime::PagedWorkload>(spec));
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      for (int rep = 0; rep < 5; ++rep) impl->forward(work[i]->query(), work[i]->cache(), work[i]->metadata(), work[i]->output());
    });
  for (auto& t : threads) t.join();
  const std::vector<std::int32_t> tokens = {0, 1, 9};
  for (auto& w : work) {
    const auto want = reference::attend(p, w->query(), w->cache(), w->metadata(), tokens);
    EXPECT_TRUE(runtime::compare_with_reference(w->output(), tokens, want, runtime::tolerance_for(spec.dtype)).passed());
  }
}

}  // namespace
}  // namespace attnsel::kernel
