// CPU_ATTN is runnable: in runnable mode on a CPU platform it is chosen, its class builds
// the CPU kernel, and that kernel computes what the reference computes.
#include <gtest/gtest.h>

#include "attnsel/selector.hpp"
#include "kernels/reference.hpp"
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
  layer.kv_cache_dtype = "fp8_e5m2";
  const auto s = selector.select(EngineConfig{}, layer);
  ASSERT_EQ(s->backend, "CPU_ATTN");
  EXPECT_TRUE(s->backend_class->has_kernel());
  EXPECT_TRUE(s->backend_class->kernel_gaps(make_selector_config(EngineConfig{}, layer), make_platform("cpu")->env()).empty());

  runtime::WorkloadSpec spec;
  spec.num_heads = 8;
  spec.num_kv_heads = 2;
  spec.head_size = 128;
  spec.kv_cache_dtype = "fp8_e5m2";
  spec.sequences = {{70, 1}, {33, 33}};
  runtime::PagedWorkload w(spec);
  kernel::LayerParams p;
  p.num_heads = 8;
  p.num_kv_heads = 2;
  p.head_size = 128;
  p.scale = 0.088f;
  p.kv_cache_dtype = "fp8_e5m2";
  const auto impl = s->backend_class->make_impl(p);
  impl->forward(w.query(), w.cache(), w.metadata(), w.output());
  const std::vector<std::int32_t> tokens = {0, 1, 20, 33};
  const auto want = kernel::reference::attend(p, w.query(), w.cache(), w.metadata(), tokens);
  EXPECT_TRUE(runtime::compare_with_reference(w.output(), tokens, want, runtime::tolerance_for(spec.dtype)).passed());
}

}  // namespace
}  // namespace attnsel
