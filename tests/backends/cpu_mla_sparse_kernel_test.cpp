// Sparse MLA on the CPU: reference mode answers what vLLM does (it raises), runnable mode
// routes sparse layers to attnsel's own CPU_MLA_SPARSE and says so; its class makes the CPU
// sparse kernel through the kernel registry, DEEPSEEK_V32_INDEXER the host's indexer (the
// CPU one where no GPU runs the CUDA one), and both compute what the reference computes.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "attnsel/errors.hpp"
#include "attnsel/kernel.hpp"
#include "attnsel/selector.hpp"
#include "attnsel/sparse_mla.hpp"
#include "backends/deepseek_v32_indexer.hpp"
#include "backends/test_env.hpp"
#include "kernels/registry/kernel_registry.hpp"
#include "../kernels/sparse_mla_test_util.hpp"

namespace attnsel {
namespace {

using testing::sparse_layer;

TEST(CpuMlaSparseBackend, RunnableModeRoutesSparseLayersToAttnselsOwnKernel) {
  reset_registry_for_testing();
  Selector selector(make_platform("cpu", {}, SelectionMode::runnable));
  const auto s = selector.select(EngineConfig{}, sparse_layer());
  ASSERT_EQ(s->backend, "CPU_MLA_SPARSE");
  EXPECT_EQ(s->class_path, "attnsel::backends::CPUMLASparseBackend");
  bool says_why = false;
  for (const LogLine& l : s->logs)
    says_why |= l.text.find("vLLM has no sparse attention on CPU") != std::string::npos &&
                l.text.find("its own CPU_MLA_SPARSE kernel") != std::string::npos;
  EXPECT_TRUE(says_why);
  EXPECT_TRUE(s->backend_class->has_kernel());
  const kernel::KernelInfo info = s->backend_class->kernel_info(kernel::ScalarType::bf16, CacheDType::fp8_ds_mla);
  EXPECT_TRUE(info.available);
  EXPECT_EQ(info.device, kernel::DeviceKind::cpu);
  EXPECT_TRUE(info.lse_output);

  kernel::sparse_mla::testing::SparseSetup setup;
  setup.heads = 8;
  setup.topk = 48;
  setup.kv_cache_dtype = CacheDType::fp8_ds_mla;
  setup.requests = {{70, 1}, {33, 2}};
  kernel::sparse_mla::testing::SparseWorkload w(setup);
  const auto impl = s->backend_class->make_sparse_mla_impl(w.params);
  kernel::SparseMlaPlanOptions o;
  o.decode_query_len = 2;
  const auto plan = impl->plan(w.batch.md, w.cache.view, {}, o);
  impl->execute(*plan, w.q.view, w.local_buf.view, w.cache.view, w.output.view, {});
  EXPECT_EQ(kernel::mla::testing::compare(kernel::mla::testing::read(w.output.view, w.batch.tokens), w.reference().out,
                                          kernel::mla::testing::Tolerance{4e-3, 2.01 / 128, 1e-5}),
            "");
  // No standard-attention or dense-MLA form.
  kernel::LayerParams p;
  p.num_heads = p.num_kv_heads = 1;
  p.head_size = 576;
  p.scale = 0.07f;
  EXPECT_THROW(s->backend_class->make_impl(p), NotImplementedError);
  kernel::MlaLayerParams m;
  m.dims.num_heads = 4;
  m.scale = 0.07f;
  EXPECT_THROW(s->backend_class->make_mla_impl(m), NotImplementedError);
}

TEST(CpuMlaSparseBackend, ReferenceModeKeepsVllmsError) {
  reset_registry_for_testing();
  Selector selector(make_platform("cpu", {}, SelectionMode::reference));
  try {
    selector.select(EngineConfig{}, sparse_layer());
    FAIL() << "reference mode selected a sparse backend on the CPU";
  } catch (const SelectionError& e) {
    EXPECT_STREQ(e.what(), "Sparse Attention is not supported on CPU.");
    EXPECT_EQ(e.kind(), ErrorKind::not_implemented);
  }
}

TEST(CpuMlaSparseBackend, RunnableModeRefusesWhatTheKernelCannotCompute) {
  reset_registry_for_testing();
  Selector selector(make_platform("cpu", {}, SelectionMode::runnable));
  LayerRequest layer = sparse_layer();
  layer.kv_cache_dtype = CacheDType::fp8;  // a per-tensor fp8 cache: not a sparse format
  try {
    selector.select(EngineConfig{}, layer);
    FAIL() << "an fp8 per-tensor cache was accepted";
  } catch (const SelectionError& e) {
    EXPECT_NE(std::string(e.what()).find("No valid attention backend found for cpu"), std::string::npos) << e.what();
    ASSERT_EQ(e.candidates().size(), 1u);
    EXPECT_EQ(e.candidates()[0].backend, "CPU_MLA_SPARSE");
  }
}

TEST(DeepseekV32IndexerBackend, MakesTheHostsIndexerThroughTheRegistry) {
  const auto backend = backends::deepseek_v32_indexer_backend();
  EXPECT_TRUE(backend->has_kernel());
  const std::string cuda_unavailable = kernel::find_kernel("cuda_indexer").unavailable_reason();
  const kernel::KernelInfo info = backend->kernel_info(kernel::ScalarType::bf16, CacheDType::auto_);
  EXPECT_TRUE(info.available);
  EXPECT_EQ(info.device, cuda_unavailable.empty() ? kernel::DeviceKind::cuda : kernel::DeviceKind::cpu);
  // The model fixes this backend everywhere. On the CPU its kernel is the CPU indexer; on CUDA
  // the GPU indexer, which computes every configuration vLLM declares where it can run.
  EXPECT_TRUE(backend->kernel_gaps(AttentionSelectorConfig{}, make_platform("cpu")->env()).empty());
  EXPECT_EQ(backend->kernel_gaps(AttentionSelectorConfig{}, make_platform("rocm:gfx942")->env()),
            std::vector<std::string>{"the lightning indexer's kernel in this build runs on the CPU"});
  const std::vector<std::string> cuda_gaps =
      backend->kernel_gaps(AttentionSelectorConfig{}, make_platform("cuda:9.0")->env());
  if (cuda_unavailable.empty()) {
    EXPECT_TRUE(cuda_gaps.empty()) << ::testing::PrintToString(cuda_gaps);
  } else {
    ASSERT_FALSE(cuda_gaps.empty());
    EXPECT_NE(cuda_gaps[0].find("the lightning indexer's CUDA kernel cannot run here"), std::string::npos)
        << cuda_gaps[0];
  }
  AttentionSelectorConfig wide;
  wide.head_size = 192;
  bool names_the_width = false;
  for (const std::string& gap : backend->kernel_gaps(wide, make_platform("cuda:9.0")->env()))
    names_the_width |= gap.find("index_head_dim 192") != std::string::npos;
  EXPECT_TRUE(names_the_width);
  kernel::LayerParams p;
  p.num_heads = p.num_kv_heads = 1;
  p.head_size = 128;
  p.scale = 0.07f;
  EXPECT_THROW(backend->make_impl(p), NotImplementedError);
  // The kernel run below reads host memory: the CPU indexer's.
  if (info.device != kernel::DeviceKind::cpu) return;

  kernel::sparse_mla::testing::IndexerSetup setup;
  setup.requests = {{300, 1}, {90, 2}};
  setup.topk = 64;
  kernel::sparse_mla::testing::IndexerWorkload w(setup);
  const auto impl = backend->make_indexer_impl(w.params);
  kernel::IndexerPlanOptions o;
  o.decode_query_len = 2;
  const auto plan = impl->plan(w.batch.md, w.key_cache.view, {}, o);
  impl->logits(*plan, w.q.view, w.weights.view, w.key_cache.view, w.logits.view, {});
  EXPECT_LT(kernel::sparse_mla::testing::calc_diff(w.scores(), w.reference_scores()), 1e-3);
}

TEST(CpuMlaSparseBackend, TheRegistryListsBothKernelsAndOtherBackendsHaveNone) {
  const kernel::KernelEntry& sparse = kernel::find_kernel("cpu_sparse_mla");
  EXPECT_EQ(sparse.family, kernel::KernelFamily::sparse_mla);
  EXPECT_NE(sparse.make_sparse_mla, nullptr);
  EXPECT_EQ(sparse.make_mla, nullptr);
  const kernel::KernelEntry& indexer = kernel::find_kernel("cpu_indexer");
  EXPECT_EQ(indexer.family, kernel::KernelFamily::sparse_mla);
  EXPECT_NE(indexer.make_indexer, nullptr);
  reset_registry_for_testing();
  const auto cpu_mla = AttentionBackendEnum["CPU_MLA"].get_attention_class();
  kernel::SparseMlaLayerParams sp;
  sp.dims.num_heads = 4;
  sp.scale = 0.07f;
  EXPECT_THROW(cpu_mla->make_sparse_mla_impl(sp), NotImplementedError);
  EXPECT_THROW(cpu_mla->make_indexer_impl(kernel::IndexerLayerParams{}), NotImplementedError);
}

}  // namespace
}  // namespace attnsel
