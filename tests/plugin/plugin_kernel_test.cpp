// Plugin kernels behind the kernel interface: the example plugin's kernel against the
// double-precision reference, host-side checks before plugin code, failures as errors, and
// the library kept loaded by a kernel instance.
#include <dlfcn.h>

#include "attnsel/kernel.hpp"
#include "attnsel/platform.hpp"
#include "attnsel/plugin_loader.hpp"
#include "kernels/kernel_test_util.hpp"
#include "plugin_test_support.hpp"

namespace attnsel::testing {
namespace {

using ::testing::HasSubstr;
using kernel::LayerParams;
using kernel::ScalarType;
using runtime::CacheLayout;
using runtime::PagedWorkload;
using runtime::WorkloadSpec;

const std::string kExample = ATTNSEL_EXAMPLE_PLUGIN;

std::shared_ptr<const AttentionBackend> example_backend() {
  return std::dynamic_pointer_cast<const AttentionBackend>(resolve_class(qualified(kExample, "attnsel_plugin_init")));
}

WorkloadSpec spec(ScalarType dtype, int heads, int kv_heads, int head_size, int block_size, CacheLayout layout) {
  WorkloadSpec s;
  s.dtype = dtype;
  s.num_heads = heads;
  s.num_kv_heads = kv_heads;
  s.head_size = head_size;
  s.block_size = block_size;
  s.layout = layout;
  // A prefill, a decode step and a chunked prefill in one batch; awkward lengths.
  s.sequences = {{37, 37}, {23, 1}, {19, 5}};
  return s;
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(nothing thrown)";
}

using PluginKernel = PluginTest;

TEST_F(PluginKernel, ExampleKernelMatchesTheReference) {
  auto backend = example_backend();
  ASSERT_TRUE(backend->has_kernel());
  struct Shape { int heads, kv_heads, head_size, block_size; };
  for (ScalarType dtype : {ScalarType::f32, ScalarType::bf16})
    for (CacheLayout layout : {CacheLayout::nhd, CacheLayout::hnd})
      for (const Shape& sh : {Shape{4, 2, 16, 16}, Shape{6, 1, 40, 5}, Shape{3, 3, 24, 8}}) {
        const WorkloadSpec s = spec(dtype, sh.heads, sh.kv_heads, sh.head_size, sh.block_size, layout);
        PagedWorkload w(s);
        const LayerParams p = runtime::layer_params_for(s);
        auto impl = backend->make_impl(p);
        EXPECT_LE(kernel::testing::expect_matches_reference(*impl, w, kernel::testing::describe(s, p)), 1.0);
      }
}

TEST_F(PluginKernel, ExampleCacheWriteMatchesTheReferenceWriter) {
  for (CacheLayout layout : {CacheLayout::nhd, CacheLayout::hnd}) {
    WorkloadSpec s = spec(ScalarType::bf16, 4, 2, 24, 16, layout);
    s.fill_cache = false;
    PagedWorkload ours(s), theirs(s);
    const LayerParams p = runtime::layer_params_for(s);
    example_backend()->make_impl(p)->write_kv_cache(ours.new_keys(), ours.new_values(), ours.cache(), ours.metadata());
    kernel::reference::write_kv_cache(p, theirs.new_keys(), theirs.new_values(), theirs.cache(), theirs.metadata());
    const kernel::KVCacheView a = ours.cache(), b = theirs.cache();
    const std::size_t bytes = static_cast<std::size_t>(a.key.numel()) * kernel::element_size(a.key.dtype);
    EXPECT_EQ(std::memcmp(a.key.data, b.key.data, bytes), 0);
    EXPECT_EQ(std::memcmp(a.value.data, b.value.data, bytes), 0);
  }
}

TEST_F(PluginKernel, LayerParametersTheKernelDoesNotComputeAreRefusedWithTheReason) {
  auto backend = example_backend();
  const LayerParams base = runtime::layer_params_for(spec(ScalarType::f32, 4, 2, 16, 16, CacheLayout::nhd));
  LayerParams window = base;
  window.sliding_window = 8;
  EXPECT_THAT(error_of([&] { (void)backend->make_impl(window); }),
              HasSubstr("EXAMPLE_ATTN (plugin backend " + file_name(kExample) +
                        ":attnsel_plugin_init) cannot run this layer: EXAMPLE_ATTN has no sliding window"));
  LayerParams sinks = base;
  sinks.sinks.assign(4, 0.5f);
  EXPECT_THAT(error_of([&] { (void)backend->make_impl(sinks); }), HasSubstr("EXAMPLE_ATTN has no attention sinks"));
  LayerParams fp8 = base;
  fp8.kv_cache_dtype = CacheDType::fp8;
  EXPECT_THAT(error_of([&] { (void)backend->make_impl(fp8); }), HasSubstr("kv_cache_dtype 'auto') only"));
}

TEST_F(PluginKernel, PerHeadQuantScalesAreRefusedBeforeThePluginIsAsked) {
  // The C ABI carries one k_scale and one v_scale per layer: a plugin handed only those
  // would compute every head with the wrong scale.
  LayerParams p = runtime::layer_params_for(spec(ScalarType::f32, 4, 2, 16, 16, CacheLayout::nhd));
  p.kv_cache_dtype = CacheDType::fp8;
  p.k_scales = {0.5f, 1.7f};
  EXPECT_THAT(error_of([&] { (void)example_backend()->make_impl(p); }),
              HasSubstr("cannot run this layer: per-KV-head quantization scales (LayerParams::k_scales / v_scales) "
                        "cannot be passed through the plugin ABI"));
  p.k_scales.clear();
  p.v_scales = {0.5f, 1.7f};
  EXPECT_THAT(error_of([&] { (void)example_backend()->make_impl(p); }), HasSubstr("plugin ABI"));
}

TEST_F(PluginKernel, BatchInvariantModeIsRefusedBeforeThePluginIsAsked) {
  LayerParams p = runtime::layer_params_for(spec(ScalarType::f32, 4, 2, 16, 16, CacheLayout::nhd));
  p.batch_invariant = true;
  EXPECT_THAT(error_of([&] { (void)example_backend()->make_impl(p); }),
              HasSubstr("cannot run this layer: batch-invariant mode (LayerParams::batch_invariant) cannot be passed "
                        "through the plugin ABI"));
}

TEST_F(PluginKernel, HostChecksRunBeforeThePluginSeesTheTensors) {
  const WorkloadSpec s = spec(ScalarType::f32, 4, 2, 16, 16, CacheLayout::nhd);
  PagedWorkload w(s);
  auto impl = example_backend()->make_impl(runtime::layer_params_for(s));
  kernel::TensorView wrong = w.output();
  wrong.shape[1] = 3;  // not num_heads
  EXPECT_THROW(impl->forward(w.query(), w.cache(), w.metadata(), wrong), ValueError);
}

TEST_F(PluginKernel, FailuresInsidePluginKernelsAreErrorsWithTheirMessage) {
  auto backend = std::dynamic_pointer_cast<const AttentionBackend>(resolve_class(qualified(kPluginC, "init_failing_kernel")));
  WorkloadSpec s = spec(ScalarType::f32, 4, 2, 16, 16, CacheLayout::nhd);
  PagedWorkload w(s);
  LayerParams unlucky = runtime::layer_params_for(s);
  unlucky.head_size = 13;
  EXPECT_THAT(error_of([&] { (void)backend->make_impl(unlucky); }), HasSubstr("cannot run this layer: head size 13 is unlucky"));
  auto impl = backend->make_impl(runtime::layer_params_for(s));
  EXPECT_NO_THROW(impl->write_kv_cache(w.new_keys(), w.new_values(), w.cache(), w.metadata()));
  try {
    impl->forward(w.query(), w.cache(), w.metadata(), w.output());
    ADD_FAILURE() << "expected RuntimeError";
  } catch (const RuntimeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("C_FAILING_KERNEL (plugin backend " + file_name(kPluginC) +
                                    ":init_failing_kernel): forward failed: device lost after 3 sequences"));
  }
}

TEST_F(PluginKernel, KernelInstancesAreDestroyedByThePlugin) {
  auto backend = std::dynamic_pointer_cast<const AttentionBackend>(resolve_class(qualified(kPluginC, "init_failing_kernel")));
  void* handle = ::dlopen(kPluginC.c_str(), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(handle, nullptr);
  auto destroyed = reinterpret_cast<int (*)()>(::dlsym(handle, "test_plugin_kernels_destroyed"));
  const int before = destroyed();
  (void)backend->make_impl(runtime::layer_params_for(spec(ScalarType::f32, 4, 2, 16, 16, CacheLayout::nhd)));
  EXPECT_EQ(destroyed(), before + 1);
  ::dlclose(handle);
}

TEST_F(PluginKernel, AKernelInstanceKeepsItsLibraryLoaded) {
  const WorkloadSpec s = spec(ScalarType::bf16, 4, 2, 16, 16, CacheLayout::nhd);
  std::unique_ptr<kernel::AttentionImpl> impl = example_backend()->make_impl(runtime::layer_params_for(s));
  plugin::reset_plugins_for_testing();
  reset_registry_for_testing();
  // Only `impl` holds the plugin now; its code must still run.
  PagedWorkload w(s);
  EXPECT_LE(kernel::testing::expect_matches_reference(*impl, w, "after the registry forgot the plugin"), 1.0);
}

TEST_F(PluginKernel, ExampleOverridingCpuAttnIsChosenAndRunnableOnTheCpu) {
  (void)load_plugin(kExample, "attnsel_example_as_cpu_attn");
  auto cpu = make_platform("cpu", {}, SelectionMode::runnable);
  AttentionSelectorConfig c;
  c.head_size = 64;
  c.dtype = DType::float32;
  const Selection s = cpu->get_attn_backend_cls(std::nullopt, c, 8);
  EXPECT_EQ(s.backend, "CPU_ATTN");
  EXPECT_EQ(s.class_path, file_name(kExample) + ":attnsel_example_as_cpu_attn");
  EXPECT_TRUE(s.backend_class->has_kernel());
  // It declares only what it computes: float16 is not among its dtypes.
  c.dtype = DType::float16;
  EXPECT_THAT(error_of([&] { (void)cpu->get_attn_backend_cls(std::nullopt, c, 8); }),
              HasSubstr("CPU_ATTN: [dtype not supported]"));
}

}  // namespace
}  // namespace attnsel::testing
