// CPU_MLA is runnable: in runnable mode on a CPU platform an MLA layer chooses it, its class
// makes the CPU MLA kernel through the kernel registry, and that kernel computes what the
// reference computes.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "attnsel/errors.hpp"
#include "attnsel/kernel.hpp"
#include "attnsel/selector.hpp"
#include "kernels/mla/cpu/cpu_mla.hpp"
#include "kernels/registry/kernel_registry.hpp"
#include "../kernels/mla_test_util.hpp"

namespace attnsel {
namespace {

TEST(CpuMlaBackend, IsRunnableOnTheCpuAndItsKernelMatchesTheReference) {
  reset_registry_for_testing();
  Selector selector(make_platform("cpu", {}, SelectionMode::runnable));
  LayerRequest layer;
  layer.head_size = 576;
  layer.use_mla = true;
  layer.dtype = DType::bfloat16;
  const auto s = selector.select(EngineConfig{}, layer);
  ASSERT_EQ(s->backend, "CPU_MLA");
  EXPECT_TRUE(s->backend_class->has_kernel());
  EXPECT_TRUE(s->backend_class->kernel_gaps(make_selector_config(EngineConfig{}, layer), make_platform("cpu")->env()).empty());
  const kernel::KernelInfo info = s->backend_class->kernel_info(kernel::ScalarType::bf16, CacheDType::auto_);
  EXPECT_TRUE(info.available);
  EXPECT_EQ(info.device, kernel::DeviceKind::cpu);
  EXPECT_EQ(info.graph_support, kernel::GraphSupport::never);

  kernel::mla::testing::MlaSetup setup;
  setup.heads = 8;
  setup.requests = {{70, 1}, {33, 33}};
  kernel::mla::testing::MlaWorkload w(setup);
  const auto impl = s->backend_class->make_mla_impl(w.params);
  const auto plan = impl->plan(w.md, w.cache.view, {}, w.plan_options(false));
  impl->execute(*plan, w.q.view, w.kv_c.view, w.k_pe.view, w.cache.view, w.output.view, {});
  EXPECT_EQ(kernel::mla::testing::compare(kernel::mla::testing::read(w.output.view, w.tokens), w.reference().out,
                                          kernel::mla::testing::kPrefillHalf),
            "");
  // Its kernel has no standard-attention form.
  kernel::LayerParams p;
  p.num_heads = p.num_kv_heads = 1;
  p.head_size = 576;
  p.scale = 0.07f;
  try {
    s->backend_class->make_impl(p);
    ADD_FAILURE() << "CPU_MLA made a standard attention kernel";
  } catch (const NotImplementedError& e) {
    EXPECT_NE(std::string(e.what()).find("make_mla_impl"), std::string::npos) << e.what();
  }
}

TEST(CpuMlaBackend, TheRegistryListsTheKernelAndOtherBackendsHaveNoMlaImpl) {
  const kernel::KernelEntry& e = kernel::find_kernel("cpu_mla");
  EXPECT_EQ(e.family, kernel::KernelFamily::mla);
  EXPECT_EQ(e.make_attention, nullptr);
  ASSERT_NE(e.make_mla, nullptr);
  reset_registry_for_testing();
  const auto cls = std::dynamic_pointer_cast<const AttentionBackend>(
      resolve_class("attnsel::backends::CPUAttentionBackend"));
  ASSERT_NE(cls, nullptr);
  kernel::MlaLayerParams p;
  p.dims.num_heads = 4;
  p.scale = 0.07f;
  EXPECT_THROW(cls->make_mla_impl(p), NotImplementedError);
}

}  // namespace
}  // namespace attnsel
