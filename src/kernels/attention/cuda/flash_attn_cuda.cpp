// FLASH_ATTN's CUDA implementation: host-side validation, the work planner and dispatch.
//
// Planning: every sequence whose packed rows (query tokens × query heads per KV head) fit
// the decode limit goes to the split-KV kernel; long sequences are cut into key slices
// until the grid fills `split_waves` waves, and the last slice to finish merges the partial
// results by their log-sum-exp. The others go to a prefill kernel: the Hopper one (TMA + wgmma) where it
// applies, else the mma.sync one. Work lists are sorted longest-first so causal tiles
// balance. Everything the kernels read is uploaded in one stream-ordered allocation.
#include "kernels/attention/cuda/flash_attn_cuda.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <numeric>

#include "attnsel/errors.hpp"
#include "kernels/device/cuda/cuda_error.hpp"
#include "kernels/device/cuda/device_memory.hpp"
#include "kernels/attention/cuda/launch.hpp"
#include "kernels/attention/cuda/tma_maps.hpp"
#include "kernels/attention/semantics.hpp"

namespace attnsel::kernel::cuda {

namespace {

void check(cudaError_t err, const char* what, const std::string& config = "") {
  if (err != cudaSuccess) throw_cuda_error(static_cast<int>(err), what, config);
}

struct DeviceFacts {
  int major = 0, minor = 0, sms = 0;
};

/// Per-device facts, read once.
DeviceFacts device_facts(int device) {
  static std::mutex mu;
  static std::array<DeviceFacts, 64> cache{};
  static std::array<bool, 64> known{};
  std::lock_guard lock(mu);
  if (device < 0 || device >= 64) throw ValueError(fmt::format("CUDA device index {} is out of range", device));
  if (!known[device]) {
    DeviceFacts f;
    check(cudaDeviceGetAttribute(&f.major, cudaDevAttrComputeCapabilityMajor, device), "cudaDeviceGetAttribute");
    check(cudaDeviceGetAttribute(&f.minor, cudaDevAttrComputeCapabilityMinor, device), "cudaDeviceGetAttribute");
    check(cudaDeviceGetAttribute(&f.sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
    cache[device] = f;
    known[device] = true;
  }
  return cache[device];
}

/// Stream-ordered device allocation (no device-wide synchronisation on free).
class StreamBuffer {
 public:
  StreamBuffer() = default;
  explicit StreamBuffer(std::size_t bytes) : bytes_(bytes) {
    if (bytes) check(cudaMallocAsync(&ptr_, bytes, 0), "cudaMallocAsync", fmt::format("{} bytes", bytes));
  }
  ~StreamBuffer() {
    if (ptr_) cudaFreeAsync(ptr_, 0);
  }
  StreamBuffer(const StreamBuffer&) = delete;
  StreamBuffer& operator=(const StreamBuffer&) = delete;
  StreamBuffer& operator=(StreamBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  void* data() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

/// Whether the layer's cache is e4m3 (the only fp8 format FLASH_ATTN declares); checks that
/// the cache tensor holds what the layer says.
bool uses_fp8_cache(const LayerParams& lp, const TensorView& cache, ScalarType activations) {
  if (cache_encoding(lp.kv_cache_dtype, activations).quantized) {
    if (cache.dtype != ScalarType::fp8_e4m3 && cache.dtype != ScalarType::u8)
      throw ValueError(fmt::format("kv_cache_dtype '{}' needs an fp8_e4m3 (or u8) cache, got {}",
                                   cache_dtype_name(lp.kv_cache_dtype), cache.describe()));
    return true;
  }
  if (cache.dtype != activations)
    throw ValueError(fmt::format("FLASH_ATTN's CUDA kernels need the KV cache dtype ({}) to equal the query dtype ({}) "
                                 "unless kv_cache_dtype is fp8",
                                 to_string(cache.dtype), to_string(activations)));
  return false;
}

void check_device_tensor(const TensorView& t, std::string_view name, int device) {
  if (t.device != DeviceKind::cuda)
    throw ValueError(fmt::format("FLASH_ATTN's CUDA kernels need {} in device memory, but it is on the CPU: {}", name,
                                 t.describe()));
  if (t.device_index != device)
    throw ValueError(fmt::format("{} is on cuda:{} but the query is on cuda:{}", name, t.device_index, device));
  if (reinterpret_cast<std::uintptr_t>(t.data) % 16 != 0)
    throw ValueError(fmt::format("{} must be 16-byte aligned for the CUDA kernels: {}", name, t.describe()));
  for (int d = 0; d + 1 < t.ndim; ++d)
    if (t.shape[d] > 1 && t.stride[d] % 8 != 0)
      throw ValueError(fmt::format("{} stride {} of dimension {} is not a multiple of 8 elements (16 bytes), as the "
                                   "CUDA kernels' vector loads need: {}",
                                   name, t.stride[d], d, t.describe()));
}

/// The products of the Hopper prefill on an fp8 cache: the tuning's choice, or with
/// `automatic` the environment variable ATTNSEL_CUDA_FP8_PREFILL ("e4m3" or "f16"), else e4m3:
/// what vLLM's FLASH_ATTN runs with an fp8 cache on Hopper (FlashAttention-3 with the query
/// quantised), 1.5x the f16 products' rate; f16 keeps the cache's own error bound.
Fp8PrefillProducts fp8_prefill_products(Fp8PrefillProducts want) {
  if (want != Fp8PrefillProducts::automatic) return want;
  static const Fp8PrefillProducts from_env = [] {
    const char* v = std::getenv("ATTNSEL_CUDA_FP8_PREFILL");
    if (v == nullptr || *v == '\0') return Fp8PrefillProducts::e4m3;
    const std::string_view s(v);
    if (s == "e4m3") return Fp8PrefillProducts::e4m3;
    if (s == "f16") return Fp8PrefillProducts::f16;
    throw ValueError(fmt::format("ATTNSEL_CUDA_FP8_PREFILL='{}': expected e4m3 or f16", s));
  }();
  return from_env;
}

int ceil_div(std::int64_t a, std::int64_t b) { return static_cast<int>((a + b - 1) / b); }

/// The decode kernel's copies on a device of compute capability `major`: TMA boxes on sm_90
/// (the padded head size is whole boxes), else cp.async.
DecodeLoads choose_decode_loads(int major) { return major < 9 ? kLoadsCpAsync : kLoadsTma; }

/// Query tokens × query heads per KV head up to this take the split-KV (decode) kernel.
constexpr int kDecodeMaxRows = 64;
/// Decode never cuts a sequence into slices shorter than this many keys.
constexpr int kMinSplitKeys = 256;
/// Decode slices start on multiples of the key tile, so every slice but a sequence's last is
/// made of whole tiles (1 × 32k on the H200: 3.05 TB/s, against 2.94 with 16-key alignment).
constexpr int kSplitAlignKeys = kDecodeKeyTile;

/// The paged cache's [block, token, head] strides, into the cache writer's or the attention
/// kernels' parameters (both name them alike).
template <class Params>
void set_cache_strides(Params& p, const KVCacheView& cache) {
  p.k_stride_block = cache.key.stride[0];
  p.k_stride_tok = cache.key.stride[1];
  p.k_stride_head = cache.key.stride[2];
  p.v_stride_block = cache.value.stride[0];
  p.v_stride_tok = cache.value.stride[1];
  p.v_stride_head = cache.value.stride[2];
}

/// An fp8 cache's inverse scales (the layer's, and the KV heads' where the layer has
/// per-head scales), into the cache writer's or the appending decode's parameters (both
/// name them alike).
template <class Params, class Constants>
void set_inv_scales(Params& p, const LayerParams& lp, const Constants& constants) {
  p.k_inv_scale = 1.0f / lp.k_scale;
  p.v_inv_scale = 1.0f / lp.v_scale;
  p.k_inv_scales = static_cast<const float*>(constants.k_inv_scales.data());
  p.v_inv_scales = static_cast<const float*>(constants.v_inv_scales.data());
}

/// The cache writer's parameters for `num_tokens` tokens of `key` and `value` into `cache`
/// at `slots` (device memory); an fp8 cache's scales are set apart (set_inv_scales).
CacheWriteParams cache_write_params(const TensorView& key, const TensorView& value, const KVCacheView& cache,
                                    const void* slots, int num_tokens, const LayerParams& lp) {
  CacheWriteParams p;
  p.key = key.data;
  p.value = value.data;
  p.key_stride_tok = key.stride[0];
  p.key_stride_head = key.stride[1];
  p.value_stride_tok = value.stride[0];
  p.value_stride_head = value.stride[1];
  p.k_cache = cache.key.data;
  p.v_cache = cache.value.data;
  set_cache_strides(p, cache);
  p.slot_mapping = static_cast<const std::int64_t*>(slots);
  p.num_tokens = num_tokens;
  p.num_kv_heads = lp.num_kv_heads;
  p.head_size = lp.head_size;
  p.block_size = cache.block_size();
  return p;
}

}  // namespace

std::string PlanSummary::describe() const {
  std::string out;
  if (decode_ctas)
    out += fmt::format("split-KV decode ({}): {} sequences, {} CTAs, up to {} splits, {} merged rows", decode_loads,
                       decode_seqs, decode_ctas, max_splits, merge_rows);
  if (prefill_ctas) {
    if (!out.empty()) out += "; ";
    out += fmt::format("prefill ({}{}{}{}{}): {} sequences, {} CTAs", prefill_kernel,
                       prefill_products.empty() ? "" : ", " + prefill_products + " products",
                       prefill_variant & HopperVariant::wide_keys ? ", 176-key tiles" : "",
                       prefill_variant & HopperVariant::v_page_boxes ? ", page-boxed V" : "",
                       prefill_head_dim ? fmt::format(", computed at d={}", prefill_head_dim) : "", prefill_seqs,
                       prefill_ctas);
  }
  return out.empty() ? "nothing to do" : out;
}

struct FlashAttnCuda::DeviceConstants {
  DeviceBuffer sinks;
  DeviceBuffer alibi;
  DeviceBuffer k_scales, v_scales;        // fp8 caches with per-KV-head scales
  DeviceBuffer k_inv_scales, v_inv_scales;  // their inverses, for the cache writer
};

namespace {

/// Pinned host memory that only grows (the plan's staging for uploads).
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() {
    if (ptr_) cudaFreeHost(ptr_);
  }
  void reserve(std::size_t bytes) {
    if (bytes <= bytes_) return;
    if (ptr_) check(cudaFreeHost(ptr_), "cudaFreeHost");
    ptr_ = nullptr;
    bytes_ = 0;
    check(cudaMallocHost(&ptr_, bytes), "cudaMallocHost", fmt::format("{} bytes of pinned staging", bytes));
    bytes_ = bytes;
  }
  std::byte* data() const { return static_cast<std::byte*>(ptr_); }
  std::size_t size() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

/// Stream-ordered device memory that only grows; freed on the stream it was last sized on.
class DeviceArena {
 public:
  DeviceArena() = default;
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;
  ~DeviceArena() {
    if (ptr_) cudaFreeAsync(ptr_, static_cast<cudaStream_t>(stream_));
  }
  /// True when the memory moved (its old contents are gone).
  bool reserve(std::size_t bytes, void* stream) {
    if (bytes <= bytes_) return false;
    if (ptr_) check(cudaFreeAsync(ptr_, static_cast<cudaStream_t>(stream_)), "cudaFreeAsync");
    ptr_ = nullptr;
    bytes_ = 0;
    check(cudaMallocAsync(&ptr_, bytes, static_cast<cudaStream_t>(stream)), "cudaMallocAsync",
          fmt::format("{} bytes", bytes));
    bytes_ = bytes;
    stream_ = stream;
    return true;
  }
  std::byte* data() const { return static_cast<std::byte*>(ptr_); }
  std::size_t size() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
  void* stream_ = nullptr;
};

std::size_t align16(std::size_t n) { return (n + 15) / 16 * 16; }

/// The cache blocks a step's new tokens go to, kept from step to step: a stamp per block
/// (the check that marked it) instead of clearing, and which block-table entry writes it.
struct AppendBlocks {
  std::vector<std::uint32_t> stamp;
  std::vector<std::int64_t> writer;  // seq * max_blocks_per_seq + index in its block table
  std::uint32_t now = 0;
  std::size_t bytes() const { return stamp.capacity() * sizeof(std::uint32_t) + writer.capacity() * sizeof(std::int64_t); }
};

/// Whether the decode kernel can append the step's new tokens itself with the result of a
/// separate cache write before it. Each decode CTA writes the new tokens inside its own key
/// slice and reads back only what it wrote, so: every slot must be -1 or its token's own
/// position in the block table, and no block a token goes to may be read through any other
/// block-table entry of the batch (another sequence sharing it, or the same block twice in a
/// table), where a CTA could read it before the one writing it has.
bool appends_in_place(const AttentionMetadata& md, int block_size, std::int64_t num_blocks, AppendBlocks& m) {
  if (m.stamp.size() != static_cast<std::size_t>(num_blocks)) {
    m.stamp.assign(static_cast<std::size_t>(num_blocks), 0);
    m.writer.assign(static_cast<std::size_t>(num_blocks), -1);
    m.now = 0;
  }
  if (++m.now == 0) {  // the stamps wrapped around: start afresh
    std::fill(m.stamp.begin(), m.stamp.end(), 0);
    m.now = 1;
  }
  const std::int64_t stride = md.max_blocks_per_seq;
  for (int s = 0; s < md.num_seqs; ++s) {
    const int q_begin = md.query_start_loc[s], q_len = md.query_start_loc[s + 1] - q_begin;
    for (int i = 0; i < q_len; ++i) {
      const std::int64_t slot = md.slot_mapping[std::size_t(q_begin) + std::size_t(i)];
      if (slot < 0) continue;
      const std::int64_t pos = std::int64_t(md.seq_lens[s]) - q_len + i;
      const std::int64_t entry = s * stride + pos / block_size;
      const std::int64_t block = md.block_table[std::size_t(entry)];
      if (slot != block * block_size + pos % block_size) return false;
      const auto b = static_cast<std::size_t>(block);
      if (m.stamp[b] == m.now && m.writer[b] != entry) return false;
      m.stamp[b] = m.now;
      m.writer[b] = entry;
    }
  }
  for (int s = 0; s < md.num_seqs; ++s) {
    if (md.query_start_loc[s + 1] == md.query_start_loc[s]) continue;  // no queries: nothing reads
    const std::int64_t blocks = (std::int64_t(md.seq_lens[s]) + block_size - 1) / block_size;
    for (std::int64_t j = 0; j < blocks; ++j) {
      const auto b = static_cast<std::size_t>(md.block_table[std::size_t(s * stride + j)]);
      if (m.stamp[b] == m.now && m.writer[b] != s * stride + j) return false;
    }
  }
  return true;
}

const char kCudaPlanMaker = 0;

}  // namespace

struct FlashAttnCuda::CudaPlan final : public StepPlan {
  // Fixed when the plan is made (the group's geometry and the device).
  int device = 0;
  ScalarType elem = ScalarType::bf16;  // activations: f16 or bf16
  bool kv_fp8 = false;    // e4m3 cache: every kernel copies it raw and widens it exactly
  int decode_head_dim_pad = 0;        // launch.hpp's decode_head_dim_pad
  int prefill_sm80_head_dim_pad = 0;  // and prefill_sm80_head_dim_pad
  int block_size = 16;
  DecodeLoads decode_loads = kLoadsCpAsync;
  int decode_box_rows = 0;  // keys per TMA box in decode (kLoadsTma)
  bool hopper = false;      // prefill on the sm_90a kernel
  KvPath hopper_kv = KvPath::b16;  // its cache and products
  int box_rows = 0;         // keys per TMA box in the Hopper prefill
  int hopper_variant = 0;   // HopperVariant flags of the Hopper prefill
  std::int32_t split_align = kSplitAlignKeys;
  int fixed_splits = 0;     // capturable: slices of every decode sequence (0 = chosen per batch)
  bool programmatic = false;  // cache writes and decode kernels use programmatic dependent launch
  bool early_cache_reads = false;  // PlanOptions::early_cache_reads
  // An execute with new keys and values ran fused on this capturable plan: a graph may hold
  // that launch, so later batches must keep their slots where the kernel writes them.
  mutable std::atomic<bool> fused_captured{false};

  // The batch (rebuilt by update).
  int num_tokens = 0;
  int block_table_stride = 0;
  int num_decode_work = 0, num_prefill_work = 0;
  int part_tokens = 0, max_splits = 1, counters = 0;
  bool fused_append = false;  // see PlanSummary::fused_append
  std::int64_t num_blocks = 0;  // of the group's cache
  AppendBlocks append_blocks;
  std::size_t o_qsl = 0, o_sl = 0, o_bt = 0, o_dw = 0, o_pw = 0, o_slots = 0, meta_bytes = 0;
  std::size_t part_floats = 0;
  PlanSummary summary;
  // Host-side lists, kept for their capacity.
  std::vector<int> decode_seqs, prefill_seqs;
  std::vector<DecodeWork> dwork;
  std::vector<PrefillWork> pwork;
  std::vector<std::pair<std::int64_t, int>> tile_cost;

  // Memory: the batch description is staged in pinned memory and copied on the caller's
  // stream into `meta`; `workspace` holds split-KV partials and arrival counters.
  // Two staging buffers, used in turn: an update waits only for the upload two steps back
  // (done unless the host runs two whole steps ahead of the device).
  PinnedBuffer staging[2];
  cudaEvent_t staged[2] = {nullptr, nullptr};  // each buffer's last upload has read it
  bool staged_pending[2] = {false, false};
  int next_staging = 0;
  int uploaded_from = -1;        // the staging buffer that holds what `meta` holds (-1: none)
  std::size_t uploaded_bytes = 0;
  DeviceArena meta, workspace;
  std::size_t zeroed_counters_at = 0;  // the counters the kernels keep at zero: offset and count
  int zeroed_counters = -1;
  std::shared_ptr<const DeviceConstants> constants;

  ~CudaPlan() override {
    for (cudaEvent_t e : staged)
      if (e) cudaEventDestroy(e);
  }
  std::size_t workspace_bytes() const override {
    return staging[0].size() + staging[1].size() + meta.size() + workspace.size() + append_blocks.bytes();
  }
  std::string describe() const override { return summary.describe(); }
  bool fp8_queries() const override { return summary.prefill_products == "e4m3"; }
  const void* at(std::size_t off) const { return meta.data() + off; }
};

struct FlashAttnCuda::ForwardCache {
  std::mutex mu;
  std::unique_ptr<StepPlan> plan;
};

FlashAttnCuda::FlashAttnCuda(const LayerParams& params, CudaTuning tuning)
    : AttentionImpl(params), tuning_(tuning), forward_cache_(std::make_unique<ForwardCache>()) {
  validate_layer_params(params_);
  if (const std::string why = cuda_kernels_unavailable_reason(); !why.empty()) throw NotImplementedError(why);
  if (params_.head_size % 8 != 0 || params_.head_size > 256)
    throw ValueError(fmt::format("head_size = {} is not supported by FLASH_ATTN's CUDA kernels; supported: multiples "
                                 "of 8 up to 256",
                                 params_.head_size));
  const CacheEncoding enc = cache_encoding(params_.kv_cache_dtype, ScalarType::bf16);
  if (enc.quantized && enc.stored != ScalarType::fp8_e4m3)
    throw NotImplementedError(fmt::format("kv_cache_dtype '{}' is not supported by FLASH_ATTN's CUDA kernels; "
                                          "supported: auto, float16, bfloat16, fp8, fp8_e4m3",
                                          cache_dtype_name(params_.kv_cache_dtype)));
  auto c = std::make_shared<DeviceConstants>();
  auto upload = [](DeviceBuffer& dst, const std::vector<float>& v) {
    if (v.empty()) return;
    dst = DeviceBuffer(v.size() * sizeof(float));
    dst.upload(v.data(), v.size() * sizeof(float));
  };
  upload(c->sinks, params_.sinks);
  upload(c->alibi, params_.alibi_slopes);
  if (enc.quantized) {
    // Per-head inverse scales, 1 / scale in float as the reference computes them.
    std::vector<float> k_inv, v_inv;
    for (int h = 0; h < params_.num_kv_heads; ++h) {
      if (!params_.k_scales.empty()) k_inv.push_back(1.0f / key_scale(params_, h));
      if (!params_.v_scales.empty()) v_inv.push_back(1.0f / value_scale(params_, h));
    }
    upload(c->k_scales, params_.k_scales);
    upload(c->v_scales, params_.v_scales);
    upload(c->k_inv_scales, k_inv);
    upload(c->v_inv_scales, v_inv);
  }
  constants_ = std::move(c);
}

FlashAttnCuda::~FlashAttnCuda() = default;

KernelInfo flash_attn_cuda_kernel_info() {
  KernelInfo k;
  k.device = DeviceKind::cuda;
  k.graph_support = GraphSupport::uniform_batch;  // like vLLM's FlashAttention 3 builder
  k.preferred_layout = KVCacheLayout::LBNHC;      // NHD: a page slice of one head is one TMA box
  k.lse_output = true;    // decode batches: the split-KV kernel writes it, the prefill kernels do not
  k.lse_prefill = false;
  k.available = cuda_kernels_unavailable_reason().empty();
  if (k.available) {
    const DeviceFacts f = device_facts(0);
    k.isa = fmt::format("CUDA sm_{}{}{}", f.major, f.minor, f.major == 9 ? "a" : "");
  }
  return k;
}

KernelInfo FlashAttnCuda::kernel_info() const { return flash_attn_cuda_kernel_info(); }

const void* FlashAttnCuda::plan_maker() const { return &kCudaPlanMaker; }

void FlashAttnCuda::write_kv_cache(const TensorView& key, const TensorView& value, const KVCacheView& cache,
                                   const AttentionMetadata& md) const {
  validate_cache_write_args(params_, key, value, cache, md);
  const int device = key.device_index;
  for (auto [t, name] : {std::pair{&key, "key"}, {&value, "value"}, {&cache.key, "key_cache"}, {&cache.value, "value_cache"}})
    check_device_tensor(*t, name, device);
  if (key.dtype != ScalarType::bf16 && key.dtype != ScalarType::f16)
    throw ValueError(fmt::format("key dtype {} is not supported by FLASH_ATTN's CUDA kernels; supported: f16, bf16",
                                 to_string(key.dtype)));
  const bool fp8 = uses_fp8_cache(params_, cache.key, key.dtype);
  check(cudaSetDevice(device), "cudaSetDevice");
  const int n = md.num_actual_tokens;
  if (n == 0) return;
  StreamBuffer upload(std::size_t(n) * sizeof(std::int64_t));
  check(cudaMemcpyAsync(upload.data(), md.slot_mapping.data(), std::size_t(n) * sizeof(std::int64_t),
                        cudaMemcpyHostToDevice, 0),
        "cudaMemcpyAsync (slot_mapping)");
  CacheWriteParams p = cache_write_params(key, value, cache, upload.data(), n, params_);
  if (fp8) set_inv_scales(p, params_, *constants_);
  launch_cache_write(p, key.dtype, fp8, false, nullptr);
}

std::unique_ptr<StepPlan> FlashAttnCuda::make_plan(const AttentionMetadata& md, const StepShape& shape, Stream stream,
                                                   const PlanOptions& options) const {
  if (shape.device != DeviceKind::cuda)
    throw ValueError("FLASH_ATTN's CUDA kernels need the KV cache in device memory, but it is on the CPU");
  if (shape.dtype != ScalarType::bf16 && shape.dtype != ScalarType::f16)
    throw ValueError(fmt::format("query dtype {} is not supported by FLASH_ATTN's CUDA kernels; supported: f16, bf16",
                                 to_string(shape.dtype)));
  const int device = shape.device_index;
  TensorView geometry;  // the cache's geometry, for the checks below (pointers are not read)
  geometry.dtype = shape.cache_dtype;
  geometry.device = DeviceKind::cuda;
  geometry.device_index = device;
  geometry.ndim = 4;
  for (int d = 0; d < 4; ++d) {
    geometry.shape[d] = shape.cache_shape[d];
    geometry.stride[d] = shape.key_strides[d];
  }
  const bool kv_fp8 = uses_fp8_cache(params_, geometry, shape.dtype);
  for (const std::int64_t* strides : {shape.key_strides, shape.value_strides})
    for (int d = 0; d < 3; ++d)
      if (shape.cache_shape[d] > 1 && strides[d] % 8 != 0)
        throw ValueError(fmt::format("the KV cache's stride {} of dimension {} is not a multiple of 8 elements (16 "
                                     "bytes), as the CUDA kernels' vector loads need",
                                     strides[d], d));
  check(cudaSetDevice(device), "cudaSetDevice");
  const DeviceFacts facts = device_facts(device);
  // vllm/v1/attention/backends/flash_attn.py: an fp8 cache needs FlashAttention 3 (Hopper).
  if (kv_fp8 && facts.major < 9)
    throw ValueError(fmt::format("FLASH_ATTN takes an fp8 KV cache on compute capability 9.0 only (device {} is "
                                 "{}.{}); use kv_cache_dtype auto, float16 or bfloat16 there",
                                 device, facts.major, facts.minor));

  auto plan = std::make_unique<CudaPlan>();
  plan->device = device;
  plan->elem = shape.dtype;
  plan->kv_fp8 = kv_fp8;
  plan->constants = constants_;
  plan->decode_head_dim_pad = decode_head_dim_pad(params_.head_size, kv_fp8);
  plan->prefill_sm80_head_dim_pad = prefill_sm80_head_dim_pad(params_.head_size);
  plan->block_size = static_cast<int>(shape.cache_shape[1]);
  plan->num_blocks = shape.cache_shape[0];
  plan->decode_loads = choose_decode_loads(tuning_.sm90_kernels ? facts.major : 8);
  plan->split_align = kSplitAlignKeys;
  if (plan->decode_loads == kLoadsTma) {
    // A box holds a page slice: box_rows divides the page and the 64-key tile, and slices
    // start on box boundaries (bulk copies, the fallback where a map cannot be encoded,
    // read any alignment). Page boxes hold one warp's 16 keys, whatever the page size.
    plan->decode_box_rows = std::gcd(plan->block_size, kDecodeKeyTile);
    if (decode_page_boxes_apply(params_.head_size, kv_fp8, std::gcd(plan->block_size, 16))) {
      plan->decode_loads = kLoadsTmaPages;
      plan->decode_box_rows = 16;
    }
  }
  // fp8 caches take the Hopper kernel where TMA can address the rows (16-byte strides: head
  // sizes a multiple of 16; the others take the portable prefill). Its e4m3 products take
  // head sizes up to 128 (their transposed V and e4m3 queries fit shared memory there);
  // above, the f16 products run.
  const bool hopper_fp8_ok = params_.head_size % 16 == 0;
  plan->hopper = tuning_.sm90_kernels && (!kv_fp8 || hopper_fp8_ok) && facts.major == 9 && facts.minor == 0 &&
                 params_.head_size <= 256 && plan->block_size % 16 == 0;
  // Only an fp8 cache reads the products' setting (a malformed environment variable must
  // not fail a 16-bit layer's plan).
  const bool e4m3_products = kv_fp8 && params_.head_size <= 128 &&
                             fp8_prefill_products(tuning_.fp8_prefill) == Fp8PrefillProducts::e4m3;
  plan->hopper_kv = !kv_fp8 ? KvPath::b16 : e4m3_products ? KvPath::e4m3 : KvPath::f16_widened;
  if (plan->hopper) {
    const MaskRule rule = MaskRule::from(params_);
    plan->hopper_variant =
        hopper_variant(params_.head_size, plan->hopper_kv, rule.causal || rule.window >= 0, plan->block_size);
    plan->box_rows = std::gcd(plan->block_size,
                              hopper_key_tile(hopper_head_dim(params_.head_size, plan->hopper_kv), plan->hopper_variant));
  }
  plan->programmatic = tuning_.sm90_kernels && facts.major >= 9;
  plan->early_cache_reads = options.early_cache_reads && plan->programmatic;
  for (cudaEvent_t& e : plan->staged) check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");

  const int max_blocks = shape.max_blocks_per_seq;
  if (options.graph_capturable) {
    // Every decode sequence gets the same number of slices, chosen from the batch's shape
    // and the block table's capacity rather than its lengths: the launch shapes and the
    // workspace stay the same for every batch of this shape (empty slices merge as nothing).
    const int group = params_.num_heads / params_.num_kv_heads;
    std::int64_t base_ctas = 0;
    for (int s = 0; s < md.num_seqs; ++s) {
      const int q_len = md.query_start_loc[s + 1] - md.query_start_loc[s];
      if (q_len > 0 && q_len * group <= kDecodeMaxRows)
        base_ctas += std::int64_t(ceil_div(std::int64_t(q_len) * group, kDecodeRows)) * params_.num_kv_heads;
    }
    const double target = tuning_.split_waves * facts.sms * 2.0;
    const std::int64_t capacity_keys = std::int64_t(max_blocks) * plan->block_size;
    int ns = 1;
    if (!params_.batch_invariant && base_ctas > 0 && double(base_ctas) < target)
      ns = std::clamp<int>(static_cast<int>(std::floor(target / double(base_ctas) + 1e-9)), 1,
                           std::max<int>(1, static_cast<int>(capacity_keys / kMinSplitKeys)));
    plan->fixed_splits = ns;
  }
  plan->block_table_stride = max_blocks;
  build(*plan, md, stream.native);
  return plan;
}

void FlashAttnCuda::update_plan(StepPlan& base, const AttentionMetadata& md, Stream stream) const {
  auto& plan = static_cast<CudaPlan&>(base);
  if (!plan.graph_capturable()) plan.block_table_stride = md.max_blocks_per_seq;  // capturable: its capacity
  check(cudaSetDevice(plan.device), "cudaSetDevice");
  const std::size_t before_meta = plan.meta_bytes, before_floats = plan.part_floats;
  const int before_counters = plan.counters, before_dw = plan.num_decode_work, before_pw = plan.num_prefill_work;
  build(plan, md, stream.native);
  if (plan.graph_capturable() &&
      (plan.meta_bytes != before_meta || plan.part_floats != before_floats || plan.counters != before_counters ||
       plan.num_decode_work != before_dw || plan.num_prefill_work != before_pw))
    throw ValueError("update: this batch's query lengths differ from those the graph-capturable plan was built for "
                     "(its launch shapes would change); build a new plan and capture a new graph");
  if (plan.graph_capturable() && plan.fused_captured.load() && !plan.fused_append)
    throw ValueError("update: an execute with new keys and values ran on this graph-capturable plan with the keys "
                     "appended inside the decode launch, which writes each token at its position in the block table; "
                     "this batch has a slot_mapping entry elsewhere, so a replay would write it to the wrong slot — "
                     "build a new plan and capture a new graph");
}

void FlashAttnCuda::build(CudaPlan& plan, const AttentionMetadata& md, void* stream) const {
  const LayerParams& lp = params_;
  const int group = lp.num_heads / lp.num_kv_heads;
  const int n = md.num_seqs;
  const MaskRule rule = MaskRule::from(lp);
  const DeviceFacts facts = device_facts(plan.device);
  plan.num_tokens = md.num_actual_tokens;
  auto key_span = [&](std::int64_t seq_len, std::int64_t q_len, std::int64_t first_row, std::int64_t last_row) {
    // Union of the visible keys of the packed rows [first_row, last_row].
    std::int64_t lo0, hi0, lo1, hi1;
    rule.key_range(query_position(seq_len, q_len, first_row / group), seq_len, lo0, hi0);
    rule.key_range(query_position(seq_len, q_len, last_row / group), seq_len, lo1, hi1);
    return std::max<std::int64_t>(0, hi1 - lo0);
  };

  // ---- classify sequences -------------------------------------------------------------
  plan.decode_seqs.clear();
  plan.prefill_seqs.clear();
  for (int s = 0; s < n; ++s) {
    const int q_len = md.query_start_loc[s + 1] - md.query_start_loc[s];
    if (q_len == 0) continue;
    (q_len * group <= kDecodeMaxRows ? plan.decode_seqs : plan.prefill_seqs).push_back(s);
  }

  // ---- decode: choose splits ------------------------------------------------------------
  plan.dwork.clear();
  int part_tokens = 0, max_splits = 1, counters = 0;
  if (!plan.decode_seqs.empty()) {
    double weighted = 0.0;
    std::int64_t base_ctas = 0;
    for (int s : plan.decode_seqs) {
      const int q_len = md.query_start_loc[s + 1] - md.query_start_loc[s];
      const int tiles = ceil_div(std::int64_t(q_len) * group, kDecodeRows);
      base_ctas += std::int64_t(tiles) * lp.num_kv_heads;
      weighted += double(key_span(md.seq_lens[s], q_len, 0, std::int64_t(q_len) * group - 1)) * tiles * lp.num_kv_heads;
    }
    const double target = tuning_.split_waves * facts.sms * 2.0;  // two decode CTAs fit per SM
    for (int s : plan.decode_seqs) {
      const int q_len = md.query_start_loc[s + 1] - md.query_start_loc[s];
      const int rows = q_len * group;
      const int tiles = ceil_div(rows, kDecodeRows);
      const std::int64_t span = key_span(md.seq_lens[s], q_len, 0, rows - 1);
      int ns = 1;
      if (plan.fixed_splits > 0) {
        ns = plan.fixed_splits;
      } else if (!lp.batch_invariant && double(base_ctas) < target && weighted > 0.0) {
        // Batch invariance: a sequence's slices must not depend on the batch; like vLLM's
        // FLASH_ATTN (max_num_splits = 1), no sequence is split.
        // Rounded down: the grid stays within the wave it fills. One CTA past a wave costs a
        // second round of the whole kernel's latency (H200: 288 CTAs of 4 x 4096 ran at
        // 1.58 TB/s, 256 at 2.29; 384 of 16 x 2048 at 2.39, 256 at 3.09; docs/KERNELS.md).
        ns = static_cast<int>(std::floor(target * double(span) / weighted + 1e-9));
        ns = std::clamp<int>(ns, 1, std::max<int>(1, static_cast<int>(span / kMinSplitKeys)));
      }
      max_splits = std::max(max_splits, ns);
      const int base = ns > 1 ? part_tokens : 0;
      for (int t = 0; t < tiles; ++t)
        for (int h = 0; h < lp.num_kv_heads; ++h) {
          const int counter = ns > 1 ? counters++ : -1;
          for (int sp = 0; sp < ns; ++sp)
            plan.dwork.push_back({s, h, t, sp, base, counter, md.query_start_loc[s], q_len, md.seq_lens[s], ns, {0, 0}});
        }
      if (ns > 1) part_tokens += q_len;
    }
  }

  // ---- prefill: Hopper or mma.sync ---------------------------------------------------------
  plan.pwork.clear();
  if (!plan.prefill_seqs.empty()) {
    // Order: one (sequence, head) after another, its query tiles most expensive first.
    // CTAs running together then share one head's keys and values in L2 (a 16k-token head
    // is 8 MB; interleaving heads would stream every head from memory for every tile),
    // and within a head the long causal tiles start first.
    const int rows_per_cta = plan.hopper ? kHopperRows : kPrefillRows;
    const int heads = plan.hopper ? lp.num_heads : lp.num_kv_heads;
    for (int s : plan.prefill_seqs) {
      const int q_len = md.query_start_loc[s + 1] - md.query_start_loc[s];
      const std::int64_t seq_len = md.seq_lens[s];
      const int rows = plan.hopper ? q_len : q_len * group;  // the Hopper kernel does not pack heads
      const int tiles = ceil_div(rows, rows_per_cta);
      plan.tile_cost.clear();
      for (int t = 0; t < tiles; ++t) {
        const std::int64_t r0 = std::int64_t(t) * rows_per_cta, r1 = std::min<std::int64_t>(rows, r0 + rows_per_cta) - 1;
        const int scale = plan.hopper ? group : 1;
        plan.tile_cost.push_back({key_span(seq_len, q_len, r0 * scale, r1 * scale), t});
      }
      std::stable_sort(plan.tile_cost.begin(), plan.tile_cost.end(),
                       [](const auto& a, const auto& b) { return a.first > b.first; });
      for (int h = 0; h < heads; ++h)
        for (const auto& [cost, t] : plan.tile_cost) plan.pwork.push_back({s, h, t, 0});
    }
  }

  // ---- layout of the upload ---------------------------------------------------------------
  const std::size_t tokens = std::size_t(md.num_actual_tokens);
  const bool slots = md.slot_mapping.size() >= tokens && tokens > 0;
  plan.fused_append =
      slots && plan.pwork.empty() && appends_in_place(md, plan.block_size, plan.num_blocks, plan.append_blocks);
  const std::size_t stride = std::size_t(plan.block_table_stride);
  std::size_t off = 0;
  auto take = [&](std::size_t bytes) {
    const std::size_t at = off;
    off = align16(off + bytes);
    return at;
  };
  plan.o_qsl = take((std::size_t(n) + 1) * sizeof(std::int32_t));
  plan.o_sl = take(std::size_t(n) * sizeof(std::int32_t));
  plan.o_bt = take(std::size_t(n) * stride * sizeof(std::int32_t));
  plan.o_dw = take(plan.dwork.size() * sizeof(DecodeWork));
  plan.o_pw = take(plan.pwork.size() * sizeof(PrefillWork));
  plan.o_slots = take(tokens * sizeof(std::int64_t));
  plan.meta_bytes = std::max<std::size_t>(off, 16);

  // This buffer's last upload must have read it before it is rewritten.
  const int buf = plan.next_staging;
  if (plan.staged_pending[buf]) check(cudaEventSynchronize(plan.staged[buf]), "cudaEventSynchronize (plan staging)");
  plan.staging[buf].reserve(plan.meta_bytes);
  std::byte* h = plan.staging[buf].data();
  auto put = [&](std::size_t at, const void* src, std::size_t bytes) {
    if (bytes) std::memcpy(h + at, src, bytes);
  };
  put(plan.o_qsl, md.query_start_loc.data(), (std::size_t(n) + 1) * sizeof(std::int32_t));
  put(plan.o_sl, md.seq_lens.data(), std::size_t(n) * sizeof(std::int32_t));
  if (stride == std::size_t(md.max_blocks_per_seq)) {
    put(plan.o_bt, md.block_table.data(), std::size_t(n) * stride * sizeof(std::int32_t));
  } else {  // a capturable plan's rows are as long as its capacity
    for (int s = 0; s < n; ++s) {
      auto* row = reinterpret_cast<std::int32_t*>(h + plan.o_bt) + std::size_t(s) * stride;
      std::memcpy(row, md.block_table.data() + std::size_t(s) * md.max_blocks_per_seq,
                  std::size_t(md.max_blocks_per_seq) * sizeof(std::int32_t));
      std::fill(row + md.max_blocks_per_seq, row + stride, 0);
    }
  }
  put(plan.o_dw, plan.dwork.data(), plan.dwork.size() * sizeof(DecodeWork));
  put(plan.o_pw, plan.pwork.data(), plan.pwork.size() * sizeof(PrefillWork));
  if (slots) put(plan.o_slots, md.slot_mapping.data(), tokens * sizeof(std::int64_t));
  const bool moved = plan.meta.reserve(plan.meta_bytes, stream);
  const auto s = static_cast<cudaStream_t>(stream);
  // The same batch again (the one-call forward() of every layer of a step, or a step whose
  // description did not change): the device copy is already what was staged, and the
  // upload, a copy the kernels would wait for, is left out. The other staging buffer still
  // holds the last upload.
  const int prev = plan.uploaded_from;
  const bool unchanged = !moved && prev >= 0 && prev != buf && plan.uploaded_bytes == plan.meta_bytes &&
                         std::memcmp(plan.staging[prev].data(), h, plan.meta_bytes) == 0;
  if (!unchanged) {
    check(cudaMemcpyAsync(plan.meta.data(), h, plan.meta_bytes, cudaMemcpyHostToDevice, s),
          "cudaMemcpyAsync (step plan)");
    check(cudaEventRecord(plan.staged[buf], s), "cudaEventRecord (plan staging)");
    plan.staged_pending[buf] = true;
    plan.uploaded_from = buf;
    plan.uploaded_bytes = plan.meta_bytes;
    plan.next_staging ^= 1;
  }

  plan.num_decode_work = static_cast<int>(plan.dwork.size());
  plan.num_prefill_work = static_cast<int>(plan.pwork.size());
  plan.part_tokens = part_tokens;
  plan.max_splits = max_splits;
  plan.counters = counters;
  plan.part_floats = part_tokens > 0 ? std::size_t(max_splits) * part_tokens * lp.num_heads * (std::size_t(lp.head_size) + 1) : 0;
  if (part_tokens > 0) {
    const bool moved =
        plan.workspace.reserve(plan.part_floats * sizeof(float) + std::size_t(counters) * sizeof(std::int32_t), stream);
    // The counters start at zero and the kernels leave them there: only counters that were
    // not counters before (new memory, another offset, more of them) are cleared.
    const std::size_t at = plan.part_floats * sizeof(float);
    if (moved || at != plan.zeroed_counters_at || counters > plan.zeroed_counters) {
      check(cudaMemsetAsync(plan.workspace.data() + at, 0, std::size_t(counters) * sizeof(std::int32_t), s),
            "cudaMemsetAsync (split counters)");
      plan.zeroed_counters_at = at;
      plan.zeroed_counters = counters;
    }
  }

  PlanSummary& sum = plan.summary;
  sum.decode_seqs = static_cast<int>(plan.decode_seqs.size());
  sum.decode_ctas = plan.num_decode_work;
  sum.max_splits = max_splits;
  sum.merge_rows = part_tokens;
  sum.decode_loads = plan.kv_fp8 ? (plan.decode_loads == kLoadsTma ? "fp8 tma, converted in registers"
                                                                  : "fp8 cp.async, converted in registers")
                     : plan.decode_loads == kLoadsTma  ? "tma"
                     : plan.decode_loads == kLoadsTmaPages ? "tma page boxes"
                     : plan.decode_loads == kLoadsBulk ? "bulk"
                                                       : "cp.async";
  sum.kv_fp8 = plan.kv_fp8;
  sum.fused_append = plan.fused_append;
  sum.prefill_seqs = static_cast<int>(plan.prefill_seqs.size());
  sum.prefill_ctas = plan.num_prefill_work;
  sum.prefill_kernel = plan.prefill_seqs.empty() ? "" : (plan.hopper ? "sm90-wgmma" : "sm80-mma");
  sum.prefill_products = plan.prefill_seqs.empty() || !plan.hopper || !plan.kv_fp8 ? ""
                         : plan.hopper_kv == KvPath::e4m3                           ? "e4m3"
                                                                                    : "f16";
  sum.prefill_variant = plan.hopper && !plan.prefill_seqs.empty() ? plan.hopper_variant : 0;
  sum.prefill_head_dim =
      plan.hopper && !plan.prefill_seqs.empty() ? hopper_head_dim(params_.head_size, plan.hopper_kv) : 0;
}

void FlashAttnCuda::execute_plan(const StepPlan& base, const TensorView& query, const KVCacheView& cache,
                                 const TensorView& output, Stream stream, const TensorView* lse) const {
  launch(static_cast<const CudaPlan&>(base), query, cache, output, stream, lse, nullptr);
}

void FlashAttnCuda::execute_append_plan(const StepPlan& base, const TensorView& query, const NewKeysValues& new_kv,
                                        const KVCacheView& cache, const TensorView& output, Stream stream,
                                        const TensorView* lse) const {
  const auto& plan = static_cast<const CudaPlan&>(base);
  // Every check before anything is written or launched.
  check_launch(plan, query, cache, output, lse);
  for (auto [t, name] : {std::pair{&new_kv.key, "new_kv.key"}, {&new_kv.value, "new_kv.value"}}) {
    if (reinterpret_cast<std::uintptr_t>(t->data) % 16 != 0)
      throw ValueError(fmt::format("{} must be 16-byte aligned for the CUDA kernels: {}", name, t->describe()));
    if ((t->shape[0] > 1 && t->stride[0] % 8 != 0) || (t->shape[1] > 1 && t->stride[1] % 8 != 0))
      throw ValueError(fmt::format("{} strides must be multiples of 8 elements (16 bytes) for the CUDA kernels: {}",
                                   name, t->describe()));
  }
  if (!plan.fused_append) {  // prefill sequences, or slots elsewhere: the write, then the attention
    write_kv_cache_plan(plan, new_kv.key, new_kv.value, cache, stream);
    launch(plan, query, cache, output, stream, lse, nullptr);
    return;
  }
  if (plan.graph_capturable()) plan.fused_captured.store(true);
  launch(plan, query, cache, output, stream, lse, &new_kv);
}

void FlashAttnCuda::check_launch(const CudaPlan& plan, const TensorView& query, const KVCacheView& cache,
                                 const TensorView& output, const TensorView* lse) const {
  if (lse && plan.num_prefill_work > 0)
    throw NotImplementedError(fmt::format(
        "FLASH_ATTN's CUDA kernels write the log-sum-exp for decode batches only, and this plan's batch has {} "
        "sequence(s) for the prefill kernels, which do not write it (a sequence is decode when its query tokens x "
        "query heads per KV head are at most {}); execute it without lse, or plan the decode sequences apart",
        plan.prefill_seqs.size(), kDecodeMaxRows));
  if (lse && reinterpret_cast<std::uintptr_t>(lse->data) % alignof(float) != 0)
    throw ValueError(fmt::format("lse must be 4-byte aligned for the CUDA kernels: {}", lse->describe()));
  if (plan.num_tokens == 0) return;  // nothing is read
  // Alignment of this layer's tensors (16-byte vector loads).
  for (const TensorView* t : {&query, &output, &cache.key, &cache.value})
    if (reinterpret_cast<std::uintptr_t>(t->data) % 16 != 0)
      throw ValueError(fmt::format("{} must be 16-byte aligned for the CUDA kernels: {}",
                                   t == &query ? "query" : t == &output ? "output" : t == &cache.key ? "key_cache" : "value_cache",
                                   t->describe()));
  for (const TensorView* t : {&query, &output})
    if ((t->shape[0] > 1 && t->stride[0] % 8 != 0) || (t->shape[1] > 1 && t->stride[1] % 8 != 0))
      throw ValueError(fmt::format("{} strides must be multiples of 8 elements (16 bytes) for the CUDA kernels: {}",
                                   t == &query ? "query" : "output", t->describe()));
}

void FlashAttnCuda::launch(const CudaPlan& plan, const TensorView& query, const KVCacheView& cache,
                           const TensorView& output, Stream stream, const TensorView* lse,
                           const NewKeysValues* append) const {
  check_launch(plan, query, cache, output, lse);
  if (plan.num_tokens == 0) return;
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess || current != plan.device) check(cudaSetDevice(plan.device), "cudaSetDevice");

  const LayerParams& lp = params_;
  AttnParams p;
  p.q = query.data;
  p.o = output.data;
  p.q_stride_tok = query.stride[0];
  p.q_stride_head = query.stride[1];
  p.o_stride_tok = output.stride[0];
  p.o_stride_head = output.stride[1];
  p.k = cache.key.data;
  p.v = cache.value.data;
  set_cache_strides(p, cache);
  p.block_table_stride = plan.block_table_stride;
  p.num_heads = lp.num_heads;
  p.num_kv_heads = lp.num_kv_heads;
  p.group = lp.num_heads / lp.num_kv_heads;
  p.head_size = lp.head_size;
  p.block_size = plan.block_size;
  p.num_tokens = plan.num_tokens;
  constexpr float kLog2e = 1.4426950408889634f;
  // An fp8 cache holds k / k_scale and v / v_scale: k_scale joins the score scale and
  // v_scale multiplies the normalised output, both in fp32. Per-KV-head scales were
  // uploaded with the layer and multiply both per CTA (the layer's factor here is then 1).
  const bool k_per_head = plan.kv_fp8 && !lp.k_scales.empty();
  const bool v_per_head = plan.kv_fp8 && !lp.v_scales.empty();
  const float k_scale = plan.kv_fp8 && !k_per_head ? lp.k_scale : 1.0f;
  p.v_scale = plan.kv_fp8 && !v_per_head ? lp.v_scale : 1.0f;
  p.scale_log2 = lp.scale * k_scale * kLog2e;
  if (lp.logits_soft_cap > 0.0f) {
    p.softcap_inv = lp.scale * k_scale / lp.logits_soft_cap;
    p.softcap_log2 = lp.logits_soft_cap * kLog2e;
  }
  const MaskRule rule = MaskRule::from(lp);
  p.window_left = static_cast<std::int32_t>(rule.window);
  p.window_right = rule.causal ? 0 : static_cast<std::int32_t>(rule.window);
  p.sinks = lp.sinks.empty() ? nullptr : static_cast<const float*>(constants_->sinks.data());
  p.alibi_slopes = lp.alibi_slopes.empty() ? nullptr : static_cast<const float*>(constants_->alibi.data());
  p.k_scales = k_per_head ? static_cast<const float*>(constants_->k_scales.data()) : nullptr;
  p.v_scales = v_per_head ? static_cast<const float*>(constants_->v_scales.data()) : nullptr;
  p.query_start_loc = static_cast<const std::int32_t*>(plan.at(plan.o_qsl));
  p.seq_lens = static_cast<const std::int32_t*>(plan.at(plan.o_sl));
  p.block_table = static_cast<const std::int32_t*>(plan.at(plan.o_bt));
  p.split_align = plan.split_align;
  if (lse) {
    p.lse = static_cast<float*>(lse->data);
    p.lse_stride_tok = lse->stride[0];
  }
  if (plan.part_tokens > 0) {
    p.part_o = reinterpret_cast<float*>(plan.workspace.data());
    p.part_lse = p.part_o + std::size_t(plan.max_splits) * plan.part_tokens * lp.num_heads * lp.head_size;
    p.num_part_tokens = plan.part_tokens;
    p.split_counters = reinterpret_cast<std::int32_t*>(p.part_o + plan.part_floats);
  }
  if (append) {
    p.new_k = append->key.data;
    p.new_v = append->value.data;
    p.new_k_stride_tok = append->key.stride[0];
    p.new_k_stride_head = append->key.stride[1];
    p.new_v_stride_tok = append->value.stride[0];
    p.new_v_stride_head = append->value.stride[1];
    p.slot_mapping = static_cast<const std::int64_t*>(plan.at(plan.o_slots));
    p.early_kv_reads = plan.early_cache_reads ? 1 : 0;
    if (plan.kv_fp8) set_inv_scales(p, lp, *constants_);
  }
  void* s = stream.native;
  if (plan.num_decode_work) {
    p.work = plan.at(plan.o_dw);
    p.num_work = plan.num_decode_work;
    DecodeLoads loads = plan.decode_loads;
    KVTensorMaps maps;
    const bool tma = loads == kLoadsTma || loads == kLoadsTmaPages;
    if (tma && !encode_kv_tma_maps(cache, plan.decode_box_rows, loads == kLoadsTmaPages, maps).empty())
      loads = plan.kv_fp8 ? kLoadsCpAsync : kLoadsBulk;  // e.g. a stride TMA cannot express
    launch_decode(p, plan.elem, plan.decode_head_dim_pad, loads, plan.kv_fp8, maps.bytes.data(), plan.decode_box_rows,
                  plan.programmatic, s);
  }
  if (plan.num_prefill_work) {
    p.work = plan.at(plan.o_pw);
    p.num_work = plan.num_prefill_work;
    if (plan.hopper) {
      TensorMaps maps;
      const bool v_page_boxes = (plan.hopper_variant & HopperVariant::v_page_boxes) != 0;
      if (const std::string err = encode_tma_maps(query, output, cache, plan.box_rows, v_page_boxes, maps);
          !err.empty())
        throw RuntimeError(fmt::format("the Hopper prefill kernel's tensor maps for this layer: {}", err));
      launch_prefill_sm90(p, plan.elem, p.head_size, plan.hopper_kv, maps.bytes.data(), maps.output, plan.box_rows,
                          plan.hopper_variant, s);
    } else {
      launch_prefill_sm80(p, plan.elem, plan.prefill_sm80_head_dim_pad, plan.kv_fp8, s);
    }
  }
}

void FlashAttnCuda::write_kv_cache_plan(const StepPlan& base, const TensorView& key, const TensorView& value,
                                        const KVCacheView& cache, Stream stream) const {
  const auto& plan = static_cast<const CudaPlan&>(base);
  if (plan.num_tokens == 0) return;
  for (const TensorView* t : {&key, &value, &cache.key, &cache.value})
    if (reinterpret_cast<std::uintptr_t>(t->data) % 16 != 0)
      throw ValueError(fmt::format("the cache write's tensors must be 16-byte aligned: {}", t->describe()));
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess || current != plan.device) check(cudaSetDevice(plan.device), "cudaSetDevice");
  CacheWriteParams p = cache_write_params(key, value, cache, plan.at(plan.o_slots), plan.num_tokens, params_);
  if (plan.kv_fp8) set_inv_scales(p, params_, *constants_);
  launch_cache_write(p, plan.elem, plan.kv_fp8, plan.programmatic, stream.native);
}

PlanSummary FlashAttnCuda::summary(const StepPlan& plan) {
  const auto* p = dynamic_cast<const CudaPlan*>(&plan);
  if (!p) throw ValueError("FlashAttnCuda::summary: the plan was not made by FLASH_ATTN's CUDA kernels");
  return p->summary;
}

void FlashAttnCuda::forward(const TensorView& query, const KVCacheView& cache, const AttentionMetadata& md,
                            const TensorView& output) const {
  // Every argument is checked first, with the one-call form's messages; then the reused
  // plan is updated and executed.
  validate_forward_args(params_, query, cache, md, output);
  const int device = query.device_index;
  for (auto [t, name] : {std::pair{&query, "query"}, {&output, "output"}, {&cache.key, "key_cache"}, {&cache.value, "value_cache"}})
    check_device_tensor(*t, name, device);
  std::lock_guard lock(forward_cache_->mu);
  std::unique_ptr<StepPlan>& cached = forward_cache_->plan;
  const StepShape want = step_shape(params_, cache, query.dtype, md);
  const StepShape* have = cached ? &cached->shape() : nullptr;
  bool same_geometry = have && have->dtype == want.dtype && have->device_index == want.device_index &&
                       have->cache_dtype == want.cache_dtype;
  for (int d = 0; same_geometry && d < 4; ++d)
    same_geometry = have->cache_shape[d] == want.cache_shape[d] && have->key_strides[d] == want.key_strides[d] &&
                    have->value_strides[d] == want.value_strides[d];
  if (same_geometry) {
    // validate_forward_args checked the batch, the cache and the tensors as update() and
    // execute() would: the plan is rebuilt and run without checking them again.
    update_plan(*cached, md, Stream{});
    set_flags(*cached, want, false, false);
  } else {
    cached = plan(md, cache, query.dtype, Stream{});
  }
  execute_plan(*cached, query, cache, output, Stream{}, nullptr);
}

std::unique_ptr<AttentionImpl> make_flash_attn_cuda_impl(const LayerParams& params) {
  return std::make_unique<FlashAttnCuda>(params);
}

}  // namespace attnsel::kernel::cuda
