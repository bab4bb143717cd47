// Host detection: an NVIDIA GPU through the CUDA driver library, loaded at run time with
// dlopen (no link-time CUDA dependency); otherwise the CPU and its ISA features.
#include "platforms/host_detect.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace attnsel::platforms {

namespace {
// The few driver API entry points we need, with the driver's C signatures.
using CuInit = int (*)(unsigned int);
using CuDeviceGetCount = int (*)(int*);
using CuDeviceGet = int (*)(int*, int);
using CuDeviceGetAttribute = int (*)(int*, int, int);
using CuDeviceGetName = int (*)(char*, int, int);
constexpr int kComputeCapabilityMajor = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kComputeCapabilityMinor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR

template <class Fn>
Fn symbol(void* lib, const char* name) {
  return reinterpret_cast<Fn>(dlsym(lib, name));
}
}  // namespace

std::optional<CudaDeviceInfo> detect_cuda_device() {
  // The handle is kept for the life of the process: the driver must not be unloaded.
  static void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return std::nullopt;
  auto init = symbol<CuInit>(lib, "cuInit");
  auto count_fn = symbol<CuDeviceGetCount>(lib, "cuDeviceGetCount");
  auto get = symbol<CuDeviceGet>(lib, "cuDeviceGet");
  auto attr = symbol<CuDeviceGetAttribute>(lib, "cuDeviceGetAttribute");
  auto name_fn = symbol<CuDeviceGetName>(lib, "cuDeviceGetName");
  if (!init || !count_fn || !get || !attr || !name_fn) return std::nullopt;
  int count = 0;
  int device = 0;
  if (init(0) != 0 || count_fn(&count) != 0 || count < 1 || get(&device, 0) != 0) return std::nullopt;
  CudaDeviceInfo info;
  char name[256] = {};
  if (attr(&info.capability.major, kComputeCapabilityMajor, device) != 0 ||
      attr(&info.capability.minor, kComputeCapabilityMinor, device) != 0 || name_fn(name, sizeof(name), device) != 0)
    return std::nullopt;
  info.name = name;
  info.device_count = count;
  return info;
}

CpuFeatures detect_cpu_features() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.avx2 = (b >> 5) & 1U;
    f.avx512f = (b >> 16) & 1U;
    f.amx_bf16 = (d >> 22) & 1U;
    f.amx_tile = (d >> 24) & 1U;
  }
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avx512_bf16 = (a >> 5) & 1U;
#endif
  return f;
}

std::string CpuFeatures::describe() const {
  std::vector<std::string> names;
  if (avx2) names.emplace_back("AVX2");
  if (avx512f) names.emplace_back("AVX-512");
  if (avx512_bf16) names.emplace_back("AVX-512-BF16");
  if (amx_tile && amx_bf16) names.emplace_back("AMX-BF16");
  if (names.empty()) return "no SIMD extensions detected";
  return fmt::format("{}", fmt::join(names, " "));
}

}  // namespace attnsel::platforms
