// CUDA build of device_memory.hpp, plus the read-bandwidth probe kernel.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "attnsel/errors.hpp"
#include "kernels/device/cuda/device_memory.hpp"
#include "kernels/device/cuda/cuda_check.cuh"
#include "kernels/device/cuda/device_ops.cuh"

namespace attnsel::kernel::cuda {
namespace {

void check(cudaError_t err, const std::string& what) {
  if (err != cudaSuccess) throw_cuda_error(static_cast<int>(err), what.c_str(), "");
}

/// Sums 16-byte words so the loads cannot be elided; one atomic per block.
__global__ void __launch_bounds__(256) read_probe_kernel(const uint4* data, std::size_t n, unsigned* sink) {
  unsigned acc = 0;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    const uint4 v = __ldcs(data + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) atomicAdd(sink, 1u);  // practically never; keeps the loads alive
}

__device__ __forceinline__ std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

template <class T>
__global__ void fill_uniform_kernel(T* data, std::size_t n, std::uint64_t seed, float range) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    const std::uint64_t r = mix64(seed + 0x9E3779B97F4A7C15ull * (i + 1));
    const float u = (float(r >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f) * range;
    if constexpr (std::is_same_v<T, __nv_bfloat16>) data[i] = __float2bfloat16(u);
    else data[i] = __float2half(u);
  }
}

}  // namespace

DeviceTensor device_like(const TensorView& like, int device) {
  check(cudaSetDevice(device), "cudaSetDevice");
  DeviceTensor d;
  d.buffer = DeviceBuffer(span_bytes(like));
  d.view = like;
  d.view.data = d.buffer.data();
  d.view.device = DeviceKind::cuda;
  d.view.device_index = device;
  return d;
}

DeviceTensor to_device(const TensorView& host, int device) {
  DeviceTensor d = device_like(host, device);
  d.buffer.upload(host.data, span_bytes(host));
  return d;
}

void copy_to_host(const DeviceTensor& dev, const TensorView& host) {
  if (span_bytes(host) != span_bytes(dev.view)) throw ValueError("copy_to_host: the views span different sizes");
  dev.buffer.download(host.data, span_bytes(host));
}

void fill_uniform(const DeviceTensor& t, std::uint64_t seed, float range) {
  const std::size_t n = span_bytes(t.view) / 2;
  if (t.view.dtype == ScalarType::bf16)
    fill_uniform_kernel<<<1024, 256>>>(static_cast<__nv_bfloat16*>(t.buffer.data()), n, seed, range);
  else if (t.view.dtype == ScalarType::f16)
    fill_uniform_kernel<<<1024, 256>>>(static_cast<__half*>(t.buffer.data()), n, seed, range);
  else
    throw ValueError("fill_uniform: only f16 and bf16 tensors");
  check(cudaGetLastError(), "fill_uniform_kernel launch");
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes > 0) check(cudaMalloc(&ptr_, bytes), "cudaMalloc(" + std::to_string(bytes) + " bytes)");
}
DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = o.ptr_, bytes_ = o.bytes_;
    o.ptr_ = nullptr, o.bytes_ = 0;
  }
  return *this;
}
void DeviceBuffer::upload(const void* host, std::size_t bytes, std::size_t offset) {
  if (offset + bytes > bytes_) throw ValueError("DeviceBuffer::upload past the end of the buffer");
  check(cudaMemcpy(static_cast<char*>(ptr_) + offset, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
}
void DeviceBuffer::download(void* host, std::size_t bytes, std::size_t offset) const {
  if (offset + bytes > bytes_) throw ValueError("DeviceBuffer::download past the end of the buffer");
  check(cudaMemcpy(host, static_cast<const char*>(ptr_) + offset, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
}
void DeviceBuffer::fill_bytes(std::uint8_t value) {
  check(cudaMemset(ptr_, value, bytes_), "cudaMemset");
}

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

DeviceInfo device_info(int device) {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  DeviceInfo d;
  d.name = prop.name;
  d.major = prop.major;
  d.minor = prop.minor;
  d.multiprocessors = prop.multiProcessorCount;
  d.l2_bytes = static_cast<std::size_t>(prop.l2CacheSize);
  d.memory_bytes = prop.totalGlobalMem;
  return d;
}

void synchronize(const std::string& what) {
  const cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) throw_cuda_error(static_cast<int>(err), what.c_str(), "while synchronising");
}

EventTimer::EventTimer() {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  start_ = a;
  stop_ = b;
}
EventTimer::~EventTimer() {
  cudaEventDestroy(static_cast<cudaEvent_t>(start_));
  cudaEventDestroy(static_cast<cudaEvent_t>(stop_));
}
void EventTimer::start(Stream stream) {
  check(cudaEventRecord(static_cast<cudaEvent_t>(start_), static_cast<cudaStream_t>(stream.native)), "cudaEventRecord");
}
float EventTimer::stop(Stream stream) {
  check(cudaEventRecord(static_cast<cudaEvent_t>(stop_), static_cast<cudaStream_t>(stream.native)), "cudaEventRecord");
  check(cudaEventSynchronize(static_cast<cudaEvent_t>(stop_)), "cudaEventSynchronize");
  float ms = 0.0f;
  check(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start_), static_cast<cudaEvent_t>(stop_)),
        "cudaEventElapsedTime");
  return ms;
}

OwnedStream::OwnedStream(int device) {
  check(cudaSetDevice(device), "cudaSetDevice");
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  stream_ = s;
}
OwnedStream::~OwnedStream() {
  if (stream_) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}
void OwnedStream::synchronize(const std::string& what) const {
  const cudaError_t err = cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
  if (err != cudaSuccess) throw_cuda_error(static_cast<int>(err), what.c_str(), "while synchronising a stream");
}

CudaGraph::~CudaGraph() {
  if (exec_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_) cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
}
void CudaGraph::begin_capture(Stream stream) {
  if (stream.native == nullptr)
    throw ValueError("CUDA graphs are captured from a stream of one's own, not the legacy default stream");
  check(cudaStreamBeginCapture(static_cast<cudaStream_t>(stream.native), cudaStreamCaptureModeThreadLocal),
        "cudaStreamBeginCapture");
}
void CudaGraph::end_capture(Stream stream) {
  cudaGraph_t g = nullptr;
  check(cudaStreamEndCapture(static_cast<cudaStream_t>(stream.native), &g), "cudaStreamEndCapture");
  if (exec_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_) cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
  graph_ = g;
  exec_ = nullptr;
  std::size_t n = 0;
  check(cudaGraphGetNodes(g, nullptr, &n), "cudaGraphGetNodes");
  nodes_ = static_cast<int>(n);
  cudaGraphExec_t e = nullptr;
  check(cudaGraphInstantiate(&e, g, 0), "cudaGraphInstantiate");
  exec_ = e;
}
void CudaGraph::launch(Stream stream) const {
  if (!exec_) throw ValueError("CudaGraph::launch: nothing was captured");
  check(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), static_cast<cudaStream_t>(stream.native)),
        "cudaGraphLaunch");
}

DeviceMemoryUse device_memory_use(int device) {
  check(cudaSetDevice(device), "cudaSetDevice");
  DeviceMemoryUse u;
  check(cudaMemGetInfo(&u.free_bytes, &u.total_bytes), "cudaMemGetInfo");
  cudaMemPool_t pool = nullptr;
  check(cudaDeviceGetDefaultMemPool(&pool, device), "cudaDeviceGetDefaultMemPool");
  std::uint64_t used = 0;
  check(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used), "cudaMemPoolGetAttribute");
  u.pool_used_bytes = static_cast<std::size_t>(used);
  return u;
}

void flush_l2(DeviceBuffer& scratch) {
  // A read-only pass: it evicts the cache without leaving dirty lines to write back
  // during the timed kernel (a memset would).
  static DeviceBuffer sink(sizeof(unsigned));
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "cudaDeviceGetAttribute");
  read_probe_kernel<<<sms * 8, 256>>>(static_cast<const uint4*>(scratch.data()), scratch.size() / sizeof(uint4),
                                      static_cast<unsigned*>(sink.data()));
  check(cudaGetLastError(), "flush_l2 launch");
}

double measure_read_bandwidth(const DeviceBuffer& buf, int reps) {
  DeviceBuffer sink(sizeof(unsigned));
  sink.fill_bytes(0);
  const std::size_t n = buf.size() / sizeof(uint4);
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "cudaDeviceGetAttribute");
  EventTimer timer;
  std::vector<float> ms;
  for (int r = 0; r < reps + 2; ++r) {
    timer.start();
    read_probe_kernel<<<sms * 8, 256>>>(static_cast<const uint4*>(buf.data()), n, static_cast<unsigned*>(sink.data()));
    check(cudaGetLastError(), "read_probe_kernel launch");
    const float t = timer.stop();
    if (r >= 2) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return double(n * sizeof(uint4)) / (ms[ms.size() / 2] * 1e-3) / 1e9;
}

}  // namespace attnsel::kernel::cuda
