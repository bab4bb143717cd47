// Where `attnsel run`/`bench` put their workload, and what a GPU workload says on a host
// without a usable GPU (runs everywhere; the GPU runs are in run_job_gpu_test.cpp).
#include <gtest/gtest.h>

#include "attnsel/backend.hpp"
#include "attnsel/errors.hpp"
#include "attnsel/registry.hpp"
#include "kernels/attention/cpu/cpu_attention.hpp"
#include "kernels/attention/cuda/flash_attn_cuda.hpp"
#include "runtime/device_ceilings.hpp"
#include "runtime/job_memory.hpp"
#include "runtime/run_job.hpp"
#include "runtime/workload_device.hpp"

namespace attnsel::runtime {
namespace {

TEST(WorkloadDevice, TheBackendsKernelSaysWhereItsTensorsLive) {
  auto kernel_of = [](std::string_view name) {
    const auto cls = AttentionBackendEnum[name].get_attention_class();
    return cls->kernel_info(kernel::ScalarType::bf16, CacheDType::auto_);
  };
  const kernel::KernelInfo flash = kernel_of("FLASH_ATTN");
  EXPECT_EQ(workload_device(flash), kernel::DeviceKind::cuda);
  EXPECT_EQ(flash.graph_support, kernel::GraphSupport::uniform_batch);
  EXPECT_EQ(flash.preferred_layout, KVCacheLayout::LBNHC);
  EXPECT_TRUE(flash.lse_output);  // decode batches
  EXPECT_FALSE(flash.lse_prefill);
  EXPECT_EQ(flash.available, kernel::cuda::cuda_kernels_unavailable_reason().empty());
  const kernel::KernelInfo cpu = kernel_of("CPU_ATTN");
  EXPECT_EQ(workload_device(cpu), kernel::DeviceKind::cpu);
  EXPECT_TRUE(cpu.available);
  EXPECT_EQ(cpu.graph_support, kernel::GraphSupport::never);
  EXPECT_TRUE(cpu.lse_output);
  EXPECT_TRUE(cpu.lse_prefill);
  EXPECT_NE(cpu.isa, "-");
  // A backend without a kernel here declares nothing: host memory, not available.
  const kernel::KernelInfo triton = kernel_of("TRITON_ATTN");
  EXPECT_FALSE(triton.available);
  EXPECT_EQ(workload_device(triton), kernel::DeviceKind::cpu);
}

TEST(WorkloadDevice, Labels) {
  EXPECT_EQ(device_label(kernel::DeviceKind::cpu), "cpu");
  EXPECT_EQ(device_label(kernel::DeviceKind::cuda), "cuda:0");
  EXPECT_EQ(device_label(kernel::DeviceKind::cuda, 3), "cuda:3");
}

TEST(WorkloadDevice, HostMemoryHandsOutItsInputsAndTimesWithTheClock) {
  JobInputs in;
  in.query.assign(64, 7);
  in.new_keys.assign(32, 1);
  in.new_values.assign(32, 2);
  auto mem = make_job_memory(kernel::DeviceKind::cpu, {2, 4096}, std::move(in));
  EXPECT_EQ(mem->device(), kernel::DeviceKind::cpu);
  EXPECT_EQ(mem->query(), static_cast<const void*>(mem->query_on_host()));
  EXPECT_EQ(static_cast<std::uint8_t*>(mem->query())[63], 7);
  EXPECT_EQ(static_cast<std::uint8_t*>(mem->new_values())[0], 2);
  EXPECT_NE(mem->key_cache(0), mem->key_cache(1));
  EXPECT_EQ(mem->cache_on_host(1).first, mem->key_cache(1));
  mem->begin_step();
  EXPECT_GE(mem->end_step(), 0.0);
}

TEST(WorkloadDevice, GpuWorkloadWithoutAGpuSaysWhy) {
  if (kernel::cuda::cuda_kernels_unavailable_reason().empty()) GTEST_SKIP() << "a usable GPU is present";
  RunSpec s;
  s.num_heads = 4;
  s.num_kv_heads = 2;
  s.head_size = 64;
  s.num_layers = 1;
  s.batch = 1;
  s.context = 16;
  s.decode_steps = 1;
  s.device = kernel::DeviceKind::cuda;
  try {
    (void)run_job(s, [](const kernel::LayerParams& p) { return kernel::cpu::make_cpu_attention_impl(p); });
    FAIL() << "expected NotImplementedError";
  } catch (const NotImplementedError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("belongs in GPU memory"), std::string::npos) << what;
    EXPECT_NE(what.find(kernel::cuda::cuda_kernels_unavailable_reason()), std::string::npos) << what;
  }
  EXPECT_THROW(DeviceReadProbe{}, NotImplementedError);
}

}  // namespace
}  // namespace attnsel::runtime
