// FLASHMLA_SPARSE and FLASH_ATTN_MLA_SPARSE reach attnsel's sparse MLA CUDA kernel through
// the kernel registry. Runnable mode chooses them where the kernel runs and rejects them,
// saying why, where it cannot (the missing kernel) or where a configuration asks what the
// kernel does not compute (a kernel gap each). Reference mode is untouched. Runs on every
// build and host.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "attnsel/errors.hpp"
#include "attnsel/kernel.hpp"
#include "attnsel/registry.hpp"
#include "attnsel/selector.hpp"
#include "attnsel/sparse_mla.hpp"
#include "backends/test_env.hpp"
#include "kernels/registry/kernel_registry.hpp"

namespace attnsel {
namespace {

using testing::sparse_layer;

AttentionSelectorConfig sparse_config(DType dtype = DType::bfloat16, CacheDType kv = CacheDType::auto_) {
  AttentionSelectorConfig c;
  c.head_size = 576;
  c.dtype = dtype;
  c.kv_cache_dtype = kv;
  c.use_mla = true;
  c.use_sparse = true;
  return c;
}

bool mentions(const std::vector<std::string>& reasons, std::string_view needle) {
  return std::any_of(reasons.begin(), reasons.end(),
                     [&](const std::string& r) { return r.find(needle) != std::string::npos; });
}

TEST(CudaSparseMlaBackend, TheRegistryListsTheCudaKernels) {
  const kernel::KernelEntry& attention = kernel::find_kernel("cuda_sparse_mla");
  EXPECT_EQ(attention.family, kernel::KernelFamily::sparse_mla);
  EXPECT_EQ(attention.device, kernel::DeviceKind::cuda);
  EXPECT_NE(attention.make_sparse_mla, nullptr);
  EXPECT_EQ(attention.make_indexer, nullptr);
  const kernel::KernelEntry& indexer = kernel::find_kernel("cuda_indexer");
  EXPECT_EQ(indexer.family, kernel::KernelFamily::sparse_mla);
  EXPECT_EQ(indexer.device, kernel::DeviceKind::cuda);
  EXPECT_NE(indexer.make_indexer, nullptr);
  const kernel::KernelInfo info = attention.info(kernel::ScalarType::bf16, CacheDType::fp8_ds_mla);
  EXPECT_EQ(info.device, kernel::DeviceKind::cuda);
  EXPECT_TRUE(info.lse_output);
  EXPECT_EQ(info.available, attention.unavailable_reason().empty());
}

TEST(CudaSparseMlaBackend, BothBackendsRunTheKernelAndStateItsGaps) {
  reset_registry_for_testing();
  const RuntimeEnv hopper = make_platform("cuda:9.0")->env();
  for (const char* name : {"FLASHMLA_SPARSE", "FLASH_ATTN_MLA_SPARSE"}) {
    SCOPED_TRACE(name);
    const auto cls = AttentionBackendEnum[name].get_attention_class();
    EXPECT_EQ(cls->has_kernel(), kernel::find_kernel("cuda_sparse_mla").unavailable_reason().empty());
    EXPECT_EQ(cls->kernel_info(kernel::ScalarType::bf16, CacheDType::auto_).device, kernel::DeviceKind::cuda);
    // DeepSeek-V3.2's layers: the bf16 cache and fp8_ds_mla, bf16 or f16 activations.
    EXPECT_TRUE(cls->kernel_gaps(sparse_config(), hopper).empty());
    EXPECT_TRUE(cls->kernel_gaps(sparse_config(DType::bfloat16, CacheDType::fp8_ds_mla), hopper).empty());
    EXPECT_TRUE(cls->kernel_gaps(sparse_config(DType::float16, CacheDType::float16), hopper).empty());
    EXPECT_TRUE(cls->kernel_gaps(sparse_config(), make_platform("cuda:8.0")->env()).empty());
    // What the kernel does not compute, one reason each.
    EXPECT_TRUE(mentions(cls->kernel_gaps(sparse_config(DType::float32), hopper), "dtype float32"));
    EXPECT_TRUE(
        mentions(cls->kernel_gaps(sparse_config(DType::bfloat16, CacheDType::fp8), hopper), "kv_cache_dtype 'fp8'"));
    EXPECT_TRUE(mentions(cls->kernel_gaps(sparse_config(DType::float16, CacheDType::fp8_ds_mla), hopper),
                         "fp8_ds_mla with bfloat16"));
    AttentionSelectorConfig small = sparse_config();
    small.head_size = 320;
    EXPECT_TRUE(mentions(cls->kernel_gaps(small, hopper), "head size 320"));
    EXPECT_TRUE(mentions(cls->kernel_gaps(sparse_config(), make_platform("cuda:10.0")->env()),
                         "compute capability 10.0 has no kernel image"));
    kernel::LayerParams lp;
    lp.num_heads = lp.num_kv_heads = 1;
    lp.head_size = 576;
    lp.scale = 0.1f;
    EXPECT_THROW(cls->make_impl(lp), NotImplementedError);
    if (!cls->has_kernel()) {
      kernel::SparseMlaLayerParams sp;
      sp.dims.num_heads = 16;
      sp.scale = 0.1f;
      EXPECT_THROW(cls->make_sparse_mla_impl(sp), NotImplementedError);
    }
  }
}

TEST(CudaSparseMlaBackend, RunnableSelectionChoosesThemWhereTheKernelRuns) {
  reset_registry_for_testing();
  Selector selector(make_platform("cuda:9.0", {}, SelectionMode::runnable));
  if (kernel::find_kernel("cuda_sparse_mla").unavailable_reason().empty()) {
    // vLLM's Hopper order for a bf16 sparse layer: FLASH_ATTN_MLA_SPARSE, FLASHMLA_SPARSE.
    EXPECT_EQ(selector.select(EngineConfig{}, sparse_layer())->backend, "FLASH_ATTN_MLA_SPARSE");
    return;
  }
  try {
    selector.select(EngineConfig{}, sparse_layer());
    FAIL() << "a sparse MLA backend was chosen although its CUDA kernel cannot run here";
  } catch (const SelectionError& e) {
    int seen = 0;
    for (const auto& c : e.candidates()) {
      if (c.backend != "FLASHMLA_SPARSE" && c.backend != "FLASH_ATTN_MLA_SPARSE") continue;
      ++seen;
      EXPECT_FALSE(c.valid);
      EXPECT_TRUE(mentions(c.reasons, "CUDA kernel cannot run here")) << c.backend;
    }
    EXPECT_EQ(seen, 2) << e.what();
  }
}

TEST(CudaSparseMlaBackend, ReferenceModeStillAnswersAsVllm) {
  reset_registry_for_testing();
  Selector selector(make_platform("cuda:9.0"));
  const auto s = selector.select(EngineConfig{}, sparse_layer());
  EXPECT_EQ(s->backend, "FLASH_ATTN_MLA_SPARSE");  // vLLM's first choice on Hopper for a bf16 sparse layer
}

}  // namespace
}  // namespace attnsel
