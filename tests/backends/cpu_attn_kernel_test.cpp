// CPU_ATTN is runnable: in runnable mode on a CPU platform it is chosen, its class builds
// the CPU kernel, and that kernel computes what the reference computes.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "attnsel/selector.hpp"
#include "kernels/attention/cpu/cpu_attention.hpp"
#include "kernels/attention/reference.hpp"
#include "runtime/accuracy.hpp"
#include "runtime/paged_workload.hpp"

namespace attnsel {
namespace {

TEST(CpuAttnBackend, IsRunnableOnTheCpuAndItsKernelMatchesTheReference) {
  reset_registry_for_testing();
  Selector selector(make_platform("cpu", {}, SelectionMode::runnable));
  LayerRequest layer;
  layer.head_size = 128;
  layer.dtype = DType::bfloat16;
  layer.kv_cache_dtype = CacheDType::fp8_e5m2;
  const auto s = selector.select(EngineConfig{}, layer);
  ASSERT_EQ(s->backend, "CPU_ATTN");
  EXPECT_TRUE(s->backend_class->has_kernel());
  EXPECT_TRUE(s->backend_class->kernel_gaps(make_selector_config(EngineConfig{}, layer), make_platform("cpu")->env()).empty());

  runtime::WorkloadSpec spec;
  spec.num_heads = 8;
  spec.num_kv_heads = 2;
  spec.head_size = 128;
  spec.kv_cache_dtype = CacheDType::fp8_e5m2;
  spec.sequences = {{70, 1}, {33, 33}};
  runtime::PagedWorkload w(spec);
  kernel::LayerParams p;
  p.num_heads = 8;
  p.num_kv_heads = 2;
  p.head_size = 128;
  p.scale = 0.088f;
  p.kv_cache_dtype = CacheDType::fp8_e5m2;
  const auto impl = s->backend_class->make_impl(p);
  impl->forward(w.query(), w.cache(), w.metadata(), w.output());
  const std::vector<std::int32_t> tokens = {0, 1, 20, 33};
  const auto want = kernel::reference::attend(p, w.query(), w.cache(), w.metadata(), tokens);
  EXPECT_TRUE(runtime::compare_with_reference(w.output(), tokens, want, runtime::tolerance_for(spec.dtype)).passed());
}

// CPU_ATTN declares vLLM's head sizes (cpu_attn.py) and its kernel keeps its own list of what
// it computes: the two must be the same set, so a capability is never a promise the kernel
// does not keep, nor a kernel size left undeclared.
TEST(CpuAttnBackend, DeclaresExactlyTheHeadSizesItsKernelComputes) {
  reset_registry_for_testing();
  const auto cls = std::dynamic_pointer_cast<const AttentionBackend>(
      resolve_class("attnsel::backends::CPUAttentionBackend"));
  ASSERT_NE(cls, nullptr);
  std::vector<int> declared = cls->capabilities(make_platform("cpu")->env()).head_sizes;
  const auto computed = kernel::cpu::supported_head_sizes();
  std::vector<int> kernel_sizes(computed.begin(), computed.end());
  std::sort(declared.begin(), declared.end());
  std::sort(kernel_sizes.begin(), kernel_sizes.end());
  EXPECT_EQ(declared, kernel_sizes);
}

}  // namespace
}  // namespace attnsel
