// FLASH_ATTN's CUDA implementation: host-side validation, the work planner and dispatch.
//
// Planning: every sequence whose packed rows (query tokens × query heads per KV head) fit
// the decode limit goes to the split-KV kernel; long sequences are cut into key slices
// until the grid fills `split_waves` waves, and the last slice to finish merges the partial
// results by their log-sum-exp. The others go to a prefill kernel: the Hopper one (TMA + wgmma) where it
// applies, else the mma.sync one. Work lists are sorted longest-first so causal tiles
// balance. Everything the kernels read is uploaded in one stream-ordered allocation.
#include "kernels/cuda/flash_attn_cuda.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <mutex>
#include <numeric>

#include "attnsel/errors.hpp"
#include "kernels/cuda/device_memory.hpp"
#include "kernels/cuda/launch.hpp"
#include "kernels/cuda/tma_maps.hpp"
#include "kernels/semantics.hpp"

namespace attnsel::kernel::cuda {

[[noreturn]] void throw_cuda_error(int code, const char* what, const std::string& config) {
  const auto err = static_cast<cudaError_t>(code);
  throw RuntimeError(fmt::format("CUDA error in {}: {} ({}){}{}", what, cudaGetErrorString(err), cudaGetErrorName(err),
                                 config.empty() ? "" : "; configuration: ", config));
}

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

/// Packs host arrays into one upload, each 16-byte aligned.
class Packer {
 public:
  template <class T>
  std::size_t add(const T* data, std::size_t count) {
    const std::size_t off = (bytes_.size() + 15) / 16 * 16;
    bytes_.resize(off + count * sizeof(T));
    if (count) std::memcpy(bytes_.data() + off, data, count * sizeof(T));
    return off;
  }
  const std::vector<std::byte>& bytes() const { return bytes_; }

 private:
  std::vector<std::byte> bytes_;
};

Elem elem_of(ScalarType t) { return t == ScalarType::bf16 ? Elem::bf16 : Elem::f16; }

/// Whether the layer's cache is e4m3 (the only fp8 format FLASH_ATTN declares); checks that
/// the cache tensor holds what the layer says.
bool uses_fp8_cache(const LayerParams& lp, const TensorView& cache, ScalarType activations) {
  if (cache_encoding(lp.kv_cache_dtype, activations).quantized) {
    if (cache.dtype != ScalarType::fp8_e4m3 && cache.dtype != ScalarType::u8)
      throw ValueError(fmt::format("kv_cache_dtype '{}' needs an fp8_e4m3 (or u8) cache, got {}", lp.kv_cache_dtype,
                                   cache.describe()));
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

int ceil_div(std::int64_t a, std::int64_t b) { return static_cast<int>((a + b - 1) / b); }

/// The decode kernel's copies for a tuning choice on a device of compute capability `major`.
/// TMA boxes are 128 bytes wide: 64 columns of a 16-bit cache, 128 of an fp8 one, so the
/// padded head size must be a multiple of that. An fp8 cache has no row-copy variant.
DecodeLoads choose_decode_loads(DecodeCopies want, int major, bool kv_fp8, int head_dim_pad) {
  if (major < 9 || want == DecodeCopies::cp_async) return kLoadsCpAsync;
  if (kv_fp8) return want != DecodeCopies::bulk_rows && head_dim_pad % 128 == 0 ? kLoadsTma : kLoadsCpAsync;
  if (want == DecodeCopies::bulk_rows || head_dim_pad % 64 != 0) return kLoadsBulk;
  return kLoadsTma;
}

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

}  // namespace

bool cuda_kernels_built() { return true; }

std::string cuda_kernels_unavailable_reason() {
  static const std::string reason = [] {
    int n = 0;
    const cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return fmt::format("no CUDA device: {}", cudaGetErrorString(err));
    }
    if (n == 0) return std::string("no CUDA device: the driver reports none");
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess) {
      (void)cudaGetLastError();
      return std::string("no CUDA device: its compute capability cannot be read");
    }
    if (major < 8) return fmt::format("attnsel's CUDA kernels need compute capability 8.0 or newer (device 0 is {}.x)", major);
    if (major > 9)
      return fmt::format("attnsel's CUDA kernels are built for sm_80 and sm_90a; compute capability {}.x has no kernel "
                         "image in this build",
                         major);
    return std::string();
  }();
  return reason;
}

std::string PlanSummary::describe() const {
  std::string out;
  if (decode_ctas)
    out += fmt::format("split-KV decode ({}): {} sequences, {} CTAs, up to {} splits, {} merged rows", decode_loads,
                       decode_seqs, decode_ctas, max_splits, merge_rows);
  if (prefill_ctas) {
    if (!out.empty()) out += "; ";
    out += fmt::format("prefill ({}): {} sequences, {} CTAs", prefill_kernel, prefill_seqs, prefill_ctas);
  }
  return out.empty() ? "nothing to do" : out;
}

struct FlashAttnCuda::DeviceConstants {
  DeviceBuffer sinks;
  DeviceBuffer alibi;
};

struct FlashAttnCuda::Plan {
  AttnParams params;
  Elem elem = Elem::bf16;
  int head_dim_pad = 0;
  StreamBuffer meta;
  StreamBuffer workspace;
  const DecodeWork* decode_work = nullptr;
  int num_decode_work = 0;
  const PrefillWork* prefill_work = nullptr;
  int num_prefill_work = 0;
  bool hopper = false;
  DecodeLoads decode_loads = kLoadsCpAsync;
  int decode_box_rows = 0;  // keys per TMA box in decode (kLoadsTma)
  KVTensorMaps decode_maps;
  int box_rows = 0;         // keys per TMA box in the Hopper prefill
  TensorMaps maps;
  int device = 0;
  bool kv_fp8 = false;  // e4m3 cache: decode and the portable prefill stage it raw and widen it
  PlanSummary summary;
  std::shared_ptr<const DeviceConstants> constants;  // keeps sinks/slopes alive
};

FlashAttnCuda::FlashAttnCuda(const LayerParams& params, CudaTuning tuning)
    : AttentionImpl(params), tuning_(tuning) {
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
                                          params_.kv_cache_dtype));
  auto c = std::make_shared<DeviceConstants>();
  if (!params_.sinks.empty()) {
    c->sinks = DeviceBuffer(params_.sinks.size() * sizeof(float));
    c->sinks.upload(params_.sinks.data(), params_.sinks.size() * sizeof(float));
  }
  if (!params_.alibi_slopes.empty()) {
    c->alibi = DeviceBuffer(params_.alibi_slopes.size() * sizeof(float));
    c->alibi.upload(params_.alibi_slopes.data(), params_.alibi_slopes.size() * sizeof(float));
  }
  constants_ = std::move(c);
}

FlashAttnCuda::~FlashAttnCuda() = default;

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
  // Per-head inverse scales, 1 / scale in float as the reference computes them, travel
  // with the slot mapping in one upload.
  std::vector<float> k_inv, v_inv;
  if (fp8)
    for (int h = 0; h < params_.num_kv_heads; ++h) {
      if (!params_.k_scales.empty()) k_inv.push_back(1.0f / key_scale(params_, h));
      if (!params_.v_scales.empty()) v_inv.push_back(1.0f / value_scale(params_, h));
    }
  Packer pk;
  const std::size_t o_slots = pk.add(md.slot_mapping.data(), std::size_t(n));
  const std::size_t o_k_inv = pk.add(k_inv.data(), k_inv.size());
  const std::size_t o_v_inv = pk.add(v_inv.data(), v_inv.size());
  StreamBuffer upload(pk.bytes().size());
  check(cudaMemcpyAsync(upload.data(), pk.bytes().data(), pk.bytes().size(), cudaMemcpyHostToDevice, 0),
        "cudaMemcpyAsync (slot_mapping and scales)");
  auto at = [&](std::size_t off) { return static_cast<const void*>(static_cast<const std::byte*>(upload.data()) + off); };
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
  p.slot_mapping = static_cast<const std::int64_t*>(at(o_slots));
  p.num_tokens = n;
  p.num_kv_heads = params_.num_kv_heads;
  p.head_size = params_.head_size;
  p.block_size = cache.block_size();
  if (fp8) {
    p.k_inv_scale = 1.0f / params_.k_scale;
    p.v_inv_scale = 1.0f / params_.v_scale;
    if (!k_inv.empty()) p.k_inv_scales = static_cast<const float*>(at(o_k_inv));
    if (!v_inv.empty()) p.v_inv_scales = static_cast<const float*>(at(o_v_inv));
  }
  launch_cache_write(p, elem_of(key.dtype), fp8, nullptr);
}

std::shared_ptr<const FlashAttnCuda::Plan> FlashAttnCuda::plan(const TensorView& query, const KVCacheView& cache,
                                                               const AttentionMetadata& md,
                                                               const TensorView& output) const {
  validate_forward_args(params_, query, cache, md, output);
  const int device = query.device_index;
  check_device_tensor(query, "query", device);
  check_device_tensor(output, "output", device);
  check_device_tensor(cache.key, "key_cache", device);
  check_device_tensor(cache.value, "value_cache", device);
  if (query.dtype != ScalarType::bf16 && query.dtype != ScalarType::f16)
    throw ValueError(fmt::format("query dtype {} is not supported by FLASH_ATTN's CUDA kernels; supported: f16, bf16",
                                 to_string(query.dtype)));
  const bool kv_fp8 = uses_fp8_cache(params_, cache.key, query.dtype);
  check(cudaSetDevice(device), "cudaSetDevice");
  const DeviceFacts facts = device_facts(device);

  auto plan = std::make_shared<Plan>();
  plan->device = device;
  plan->elem = elem_of(query.dtype);
  plan->kv_fp8 = kv_fp8;
  plan->constants = constants_;
  const LayerParams& lp = params_;
  const int group = lp.num_heads / lp.num_kv_heads;
  const int hs = lp.head_size;
  plan->head_dim_pad = (hs + 31) / 32 * 32;

  AttnParams& p = plan->params;
  p.q = query.data;
  p.o = output.data;
  p.q_stride_tok = query.stride[0];
  p.q_stride_head = query.stride[1];
  p.o_stride_tok = output.stride[0];
  p.o_stride_head = output.stride[1];
  p.k = cache.key.data;
  p.v = cache.value.data;
  set_cache_strides(p, cache);
  p.block_table_stride = md.max_blocks_per_seq;
  p.num_heads = lp.num_heads;
  p.num_kv_heads = lp.num_kv_heads;
  p.group = group;
  p.head_size = hs;
  p.block_size = cache.block_size();
  p.num_tokens = md.num_actual_tokens;
  constexpr float kLog2e = 1.4426950408889634f;
  // An fp8 cache holds k / k_scale and v / v_scale: k_scale joins the score scale and
  // v_scale multiplies the normalised output, both in fp32. Per-KV-head scales are uploaded
  // with the batch and multiply both per CTA (the layer's factor here is then 1).
  const bool k_per_head = kv_fp8 && !lp.k_scales.empty();
  const bool v_per_head = kv_fp8 && !lp.v_scales.empty();
  const float k_scale = kv_fp8 && !k_per_head ? lp.k_scale : 1.0f;
  p.v_scale = kv_fp8 && !v_per_head ? lp.v_scale : 1.0f;
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

  // ---- classify sequences -------------------------------------------------------------
  const int n = md.num_seqs;
  auto key_span = [&](std::int64_t seq_len, std::int64_t q_len, std::int64_t first_row, std::int64_t last_row) {
    // Union of the visible keys of the packed rows [first_row, last_row].
    std::int64_t lo0, hi0, lo1, hi1;
    rule.key_range(query_position(seq_len, q_len, first_row / group), seq_len, lo0, hi0);
    rule.key_range(query_position(seq_len, q_len, last_row / group), seq_len, lo1, hi1);
    return std::max<std::int64_t>(0, hi1 - lo0);
  };
  std::vector<int> decode_seqs, prefill_seqs;
  for (int s = 0; s < n; ++s) {
    const int q_len = md.query_start_loc[s + 1] - md.query_start_loc[s];
    if (q_len == 0) continue;
    (q_len * group <= tuning_.decode_max_rows ? decode_seqs : prefill_seqs).push_back(s);
  }

  // ---- decode: choose splits ------------------------------------------------------------
  std::vector<int> seq_splits(std::max(n, 1), 1);
  std::vector<DecodeWork> dwork;
  int part_tokens = 0, max_splits = 1, counters = 0;
  if (!decode_seqs.empty()) {
    double weighted = 0.0;
    std::int64_t base_ctas = 0;
    for (int s : decode_seqs) {
      const int q_len = md.query_start_loc[s + 1] - md.query_start_loc[s];
      const int tiles = ceil_div(std::int64_t(q_len) * group, kDecodeRows);
      base_ctas += std::int64_t(tiles) * lp.num_kv_heads;
      weighted += double(key_span(md.seq_lens[s], q_len, 0, std::int64_t(q_len) * group - 1)) * tiles * lp.num_kv_heads;
    }
    const double target = tuning_.split_waves * facts.sms * 2.0;  // two decode CTAs fit per SM
    for (int s : decode_seqs) {
      const int q_len = md.query_start_loc[s + 1] - md.query_start_loc[s];
      const int rows = q_len * group;
      const int tiles = ceil_div(rows, kDecodeRows);
      const std::int64_t span = key_span(md.seq_lens[s], q_len, 0, rows - 1);
      int ns = 1;
      // Batch invariance: a sequence's slices must not depend on the batch; like vLLM's
      // FLASH_ATTN (max_num_splits = 1), no sequence is split.
      if (!lp.batch_invariant && double(base_ctas) < target && weighted > 0.0) {
        ns = static_cast<int>(std::ceil(target * double(span) / weighted));
        ns = std::clamp<int>(ns, 1, std::max<int>(1, static_cast<int>(span / std::max(1, tuning_.min_split_keys))));
      }
      seq_splits[s] = ns;
      max_splits = std::max(max_splits, ns);
      const int base = ns > 1 ? part_tokens : 0;
      for (int t = 0; t < tiles; ++t)
        for (int h = 0; h < lp.num_kv_heads; ++h) {
          const int counter = ns > 1 ? counters++ : -1;
          for (int sp = 0; sp < ns; ++sp)
            dwork.push_back({s, h, t, sp, base, counter, md.query_start_loc[s], q_len, md.seq_lens[s], {0, 0, 0}});
        }
      if (ns > 1) part_tokens += q_len;
    }
  }

  // ---- prefill: Hopper or mma.sync ---------------------------------------------------------
  std::vector<PrefillWork> pwork;
  bool hopper = false;
  if (!prefill_seqs.empty()) {
    // fp8 caches take the portable kernel: the Hopper kernel's TMA copies land in shared
    // memory as stored, and its wgmma reads them from there (no register widening step).
    hopper = tuning_.use_hopper && !kv_fp8 && facts.major == 9 && facts.minor == 0 && hopper_head_dim(hs) != 0 &&
             p.block_size % 16 == 0;
    if (hopper) {
      plan->box_rows = std::gcd(p.block_size, hopper_key_tile(hopper_head_dim(hs)));
      if (const std::string err = encode_tma_maps(query, cache, plan->box_rows, plan->maps); !err.empty())
        hopper = false;  // e.g. a stride TMA cannot express: the portable kernel computes the same
    }
    // Order: one (sequence, head) after another, its query tiles most expensive first.
    // CTAs running together then share one head's keys and values in L2 (a 16k-token head
    // is 8 MB; interleaving heads would stream every head from memory for every tile),
    // and within a head the long causal tiles start first.
    const int rows_per_cta = hopper ? kHopperRows : kPrefillRows;
    const int heads = hopper ? lp.num_heads : lp.num_kv_heads;
    std::vector<std::pair<std::int64_t, int>> tile_cost;
    for (int s : prefill_seqs) {
      const int q_len = md.query_start_loc[s + 1] - md.query_start_loc[s];
      const std::int64_t seq_len = md.seq_lens[s];
      const int rows = hopper ? q_len : q_len * group;  // the Hopper kernel does not pack heads
      const int tiles = ceil_div(rows, rows_per_cta);
      tile_cost.clear();
      for (int t = 0; t < tiles; ++t) {
        const std::int64_t r0 = std::int64_t(t) * rows_per_cta, r1 = std::min<std::int64_t>(rows, r0 + rows_per_cta) - 1;
        const int scale = hopper ? group : 1;
        tile_cost.push_back({key_span(seq_len, q_len, r0 * scale, r1 * scale), t});
      }
      std::stable_sort(tile_cost.begin(), tile_cost.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
      for (int h = 0; h < heads; ++h)
        for (const auto& [cost, t] : tile_cost) pwork.push_back({s, h, t, 0});
    }
  }

  // ---- upload --------------------------------------------------------------------------
  Packer pk;
  const std::size_t o_qsl = pk.add(md.query_start_loc.data(), std::size_t(n) + 1);
  const std::size_t o_sl = pk.add(md.seq_lens.data(), std::size_t(n));
  const std::size_t o_bt = pk.add(md.block_table.data(), std::size_t(n) * md.max_blocks_per_seq);
  const std::size_t o_sp = pk.add(seq_splits.data(), seq_splits.size());
  const std::size_t o_dw = pk.add(dwork.data(), dwork.size());
  const std::size_t o_pw = pk.add(pwork.data(), pwork.size());
  const std::size_t o_ks = pk.add(lp.k_scales.data(), k_per_head ? lp.k_scales.size() : 0);
  const std::size_t o_vs = pk.add(lp.v_scales.data(), v_per_head ? lp.v_scales.size() : 0);
  plan->meta = StreamBuffer(pk.bytes().size());
  check(cudaMemcpyAsync(plan->meta.data(), pk.bytes().data(), pk.bytes().size(), cudaMemcpyHostToDevice, 0),
        "cudaMemcpyAsync (attention metadata)");
  auto at = [&](std::size_t off) { return static_cast<const void*>(static_cast<const std::byte*>(plan->meta.data()) + off); };
  p.query_start_loc = static_cast<const std::int32_t*>(at(o_qsl));
  p.seq_lens = static_cast<const std::int32_t*>(at(o_sl));
  p.block_table = static_cast<const std::int32_t*>(at(o_bt));
  p.seq_splits = static_cast<const std::int32_t*>(at(o_sp));
  p.k_scales = k_per_head ? static_cast<const float*>(at(o_ks)) : nullptr;
  p.v_scales = v_per_head ? static_cast<const float*>(at(o_vs)) : nullptr;
  plan->decode_work = static_cast<const DecodeWork*>(at(o_dw));
  plan->num_decode_work = static_cast<int>(dwork.size());
  plan->prefill_work = static_cast<const PrefillWork*>(at(o_pw));
  plan->num_prefill_work = static_cast<int>(pwork.size());
  plan->hopper = hopper;
  plan->decode_loads = choose_decode_loads(tuning_.decode_copies, facts.major, kv_fp8, plan->head_dim_pad);
  p.split_align = static_cast<std::int32_t>(std::bit_ceil(static_cast<unsigned>(std::max(16, tuning_.split_align_keys))));
  if (plan->decode_loads == kLoadsTma && !dwork.empty()) {
    // A box holds a page slice: box_rows divides the page and the 64-key tile, and slices
    // start on box boundaries.
    plan->decode_box_rows = std::gcd(p.block_size, kDecodeKeyTile);
    p.split_align = std::max(p.split_align, plan->decode_box_rows);
    if (!encode_kv_tma_maps(cache, plan->decode_box_rows, plan->decode_maps).empty())
      plan->decode_loads = kv_fp8 ? kLoadsCpAsync : kLoadsBulk;  // e.g. a stride TMA cannot express
  }
  if (part_tokens > 0) {
    const std::size_t rows = std::size_t(max_splits) * part_tokens * lp.num_heads;
    const std::size_t floats = rows * (std::size_t(hs) + 1);
    plan->workspace = StreamBuffer(floats * sizeof(float) + std::size_t(counters) * sizeof(std::int32_t));
    p.part_o = static_cast<float*>(plan->workspace.data());
    p.part_lse = p.part_o + rows * hs;
    p.num_part_tokens = part_tokens;
    p.split_counters = reinterpret_cast<std::int32_t*>(p.part_o + floats);
    check(cudaMemsetAsync(p.split_counters, 0, std::size_t(counters) * sizeof(std::int32_t), 0),
          "cudaMemsetAsync (split counters)");
  }

  PlanSummary& sum = plan->summary;
  sum.decode_seqs = static_cast<int>(decode_seqs.size());
  sum.decode_ctas = plan->num_decode_work;
  sum.max_splits = max_splits;
  sum.merge_rows = part_tokens;
  sum.decode_loads = kv_fp8 ? (plan->decode_loads == kLoadsTma ? "fp8 tma, converted in registers"
                                                                : "fp8 cp.async, converted in registers")
                     : plan->decode_loads == kLoadsTma  ? "tma"
                     : plan->decode_loads == kLoadsBulk ? "bulk"
                                                        : "cp.async";
  sum.kv_fp8 = kv_fp8;
  sum.prefill_seqs = static_cast<int>(prefill_seqs.size());
  sum.prefill_ctas = plan->num_prefill_work;
  sum.prefill_kernel = prefill_seqs.empty() ? "" : (hopper ? "sm90-wgmma" : "sm80-mma");
  return plan;
}

void FlashAttnCuda::run(const Plan& plan) const {
  check(cudaSetDevice(plan.device), "cudaSetDevice");
  AttnParams p = plan.params;
  if (plan.num_decode_work) {
    p.work = plan.decode_work;
    p.num_work = plan.num_decode_work;
    launch_decode(p, plan.elem, plan.head_dim_pad, plan.decode_loads, plan.kv_fp8, plan.decode_maps.bytes.data(),
                  plan.decode_box_rows, nullptr);
  }
  if (plan.num_prefill_work) {
    p.work = plan.prefill_work;
    p.num_work = plan.num_prefill_work;
    if (plan.hopper)
      launch_prefill_sm90(p, plan.elem, p.head_size, plan.maps.bytes.data(), plan.box_rows, nullptr);
    else
      launch_prefill_sm80(p, plan.elem, plan.head_dim_pad, plan.kv_fp8, nullptr);
  }
}

PlanSummary FlashAttnCuda::summary(const Plan& plan) { return plan.summary; }

void FlashAttnCuda::forward(const TensorView& query, const KVCacheView& cache, const AttentionMetadata& md,
                            const TensorView& output) const {
  const auto p = plan(query, cache, md, output);
  run(*p);
}

std::unique_ptr<AttentionImpl> make_flash_attn_cuda_impl(const LayerParams& params) {
  return std::make_unique<FlashAttnCuda>(params);
}

}  // namespace attnsel::kernel::cuda
