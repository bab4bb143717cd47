#include "kernels/mla/cuda/decode_cuda.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "attnsel/errors.hpp"
#include "kernels/device/cuda/cuda_error.hpp"
#include "kernels/device/cuda/device_memory.hpp"
#include "kernels/mla/cuda/launch.hpp"
#include "kernels/mla/cuda/tma_maps.hpp"

namespace attnsel::kernel::cuda::mla {
namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw_cuda_error(static_cast<int>(err), what, "");
}

/// The latent cache's geometry: [num_blocks, page_size, (1,) 576].
struct CacheGeometry {
  std::int64_t num_blocks = 0;
  int page_size = 0;
  std::int64_t block_stride = 0, row_stride = 0;
  CacheKind kind = CacheKind::b16;
};

CacheGeometry cache_geometry(const TensorView& cache, ScalarType dtype) {
  if (cache.device != DeviceKind::cuda) throw ValueError("the latent cache must be in CUDA device memory");
  if (cache.ndim != 3 && !(cache.ndim == 4 && cache.shape[2] == 1))
    throw ValueError(fmt::format("the latent cache must be [num_blocks, block_size, 576] or [num_blocks, "
                                 "block_size, 1, 576], got {}",
                                 cache.describe()));
  if (cache.shape[cache.ndim - 1] != kLatentDim || cache.stride[cache.ndim - 1] != 1)
    throw ValueError(fmt::format("the latent cache's rows must be 576 contiguous entries (kv_lora_rank 512 + "
                                 "qk_rope_head_dim 64), got {}",
                                 cache.describe()));
  CacheGeometry g;
  g.num_blocks = cache.shape[0];
  g.page_size = static_cast<int>(cache.shape[1]);
  g.block_stride = cache.stride[0];
  g.row_stride = cache.stride[1];
  if (is_fp8(cache.dtype) || cache.dtype == ScalarType::u8)
    throw NotImplementedError("the MLA decode on Hopper does not read an fp8 latent cache yet");
  if (cache.dtype != dtype)
    throw ValueError(fmt::format("the latent cache holds {} but the queries are {}", to_string(cache.dtype),
                                 to_string(dtype)));
  if (g.page_size <= 0 || g.page_size % 16 != 0)
    throw ValueError(fmt::format("the MLA decode on Hopper needs a block size that is a multiple of 16, got {}",
                                 g.page_size));
  const std::int64_t es = static_cast<std::int64_t>(element_size(cache.dtype));
  if (reinterpret_cast<std::uintptr_t>(cache.data) % 16 != 0 || (g.row_stride * es) % 16 != 0 ||
      (g.block_stride * es) % 16 != 0)
    throw ValueError(fmt::format("the latent cache's address and strides must be multiples of 16 bytes, got {}",
                                 cache.describe()));
  return g;
}

void require_hopper() {
  const std::string why = cuda_kernels_unavailable_reason();
  if (!why.empty()) throw NotImplementedError(why);
  int device = 0, major = 0, sms = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "cudaDeviceGetAttribute");
  if (major != 9)
    throw NotImplementedError(
        fmt::format("the MLA decode kernels need a Hopper GPU (compute capability 9.0); device {} is {}.x", device, major));
  (void)sms;
}

int device_sms() {
  int device = 0, sms = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  return sms;
}

/// The batch's checks against the cache, before anything is uploaded.
void validate_batch(const DecodeBatch& b, const CacheGeometry& g, int max_query_len, int max_blocks_per_seq) {
  const std::size_t n = b.seq_lens.size();
  if (b.query_start_loc.size() != n + 1)
    throw ValueError(fmt::format("query_start_loc has {} entries for {} requests (needs {})",
                                 b.query_start_loc.size(), n, n + 1));
  if (b.block_table.size() < n * std::size_t(std::max(b.max_blocks_per_seq, 0)))
    throw ValueError(fmt::format("block_table has {} entries, fewer than {} requests x max_blocks_per_seq {}",
                                 b.block_table.size(), n, b.max_blocks_per_seq));
  if (b.max_blocks_per_seq > max_blocks_per_seq)
    throw ValueError(fmt::format("max_blocks_per_seq {} exceeds the plan's {}", b.max_blocks_per_seq,
                                 max_blocks_per_seq));
  if (b.query_start_loc[0] != 0) throw ValueError("query_start_loc[0] must be 0");
  for (std::size_t i = 0; i < n; ++i) {
    const int q_len = b.query_start_loc[i + 1] - b.query_start_loc[i];
    const int len = b.seq_lens[i];
    if (q_len < 1 || q_len > max_query_len)
      throw ValueError(fmt::format("decode request {} has {} query tokens; the plan takes 1 to {}", i, q_len,
                                   max_query_len));
    if (len < 0) throw ValueError(fmt::format("seq_lens[{}] = {} is negative", i, len));
    if (len > 0 && len < q_len)
      throw ValueError(fmt::format("decode request {} has {} keys for {} query tokens: a request with keys holds "
                                   "at least its query tokens (seq_lens counts this step's tokens)",
                                   i, len, q_len));
    const std::int64_t blocks = (std::int64_t(len) + g.page_size - 1) / g.page_size;
    if (blocks > b.max_blocks_per_seq)
      throw ValueError(fmt::format("decode request {} needs {} blocks of {} keys for {} keys; the block table has {}",
                                   i, blocks, g.page_size, len, b.max_blocks_per_seq));
    for (std::int64_t k = 0; k < blocks; ++k) {
      const std::int32_t id = b.block_table[i * std::size_t(b.max_blocks_per_seq) + std::size_t(k)];
      if (id < 0 || id >= g.num_blocks)
        throw ValueError(fmt::format("block_table[{}][{}] = {} is outside the cache's {} blocks", i, k, id,
                                     g.num_blocks));
    }
  }
}

/// Pinned host memory that only grows.
class Pinned {
 public:
  Pinned() = default;
  Pinned(const Pinned&) = delete;
  Pinned& operator=(const Pinned&) = delete;
  ~Pinned() {
    if (ptr_) cudaFreeHost(ptr_);
  }
  void* get(std::size_t bytes) {
    if (bytes > size_) {
      if (ptr_) cudaFreeHost(ptr_);
      ptr_ = nullptr;
      check(cudaMallocHost(&ptr_, bytes), "cudaMallocHost (MLA decode plan staging)");
      size_ = bytes;
    }
    return ptr_;
  }

 private:
  void* ptr_ = nullptr;
  std::size_t size_ = 0;
};

struct CudaDecodePlan final : public DecodePlan {
  DecodeOptions options;
  CacheGeometry geometry;
  int row_tiles = 1, num_parts = 1, max_rows = 0, slots = 0;
  int num_requests = 0, num_tokens = 0, max_blocks_per_seq = 0;
  DecodeSchedule sched;
  DeviceBuffer meta;      // requests, parts, block table
  DeviceBuffer partials;  // part_o, then part_lse
  Pinned staging[2];
  cudaEvent_t staged[2] = {nullptr, nullptr};
  int next_staging = 0;
  std::size_t requests_off = 0, parts_off = 0, table_off = 0, meta_bytes = 0, lse_off = 0;

  ~CudaDecodePlan() override {
    for (cudaEvent_t e : staged)
      if (e) cudaEventDestroy(e);
  }
  std::string describe() const override {
    int split = 0;
    for (const DecodeRequest& r : sched.requests) split += r.num_splits > 1;
    return fmt::format("MLA decode rows64: {} requests, {} row tile{} x {} parts, {} split into {} pieces",
                       num_requests, row_tiles, row_tiles == 1 ? "" : "s", num_parts, split, sched.total_splits);
  }
  const DecodeSchedule& schedule() const override { return sched; }
  std::size_t workspace_bytes() const override { return meta.size() + partials.size(); }
};

void build(CudaDecodePlan& plan, const DecodeBatch& b, Stream stream) {
  validate_batch(b, plan.geometry, plan.options.max_query_len, plan.max_blocks_per_seq);
  const int n = static_cast<int>(b.seq_lens.size());
  plan.sched = schedule_decode(b.query_start_loc, b.seq_lens, plan.num_parts, plan.options.batch_invariant);
  if (plan.sched.total_splits > plan.slots)
    throw ValueError(fmt::format("the batch needs {} partial slots; the plan holds {}", plan.sched.total_splits,
                                 plan.slots));
  for (const DecodeRequest& r : plan.sched.requests)
    if (r.num_splits > 256) throw ValueError("a request split into more than 256 pieces (the combine's limit)");
  plan.num_requests = n;
  plan.num_tokens = b.query_start_loc[std::size_t(n)];
  const int slot = plan.next_staging;
  plan.next_staging ^= 1;
  if (plan.staged[slot]) check(cudaEventSynchronize(plan.staged[slot]), "cudaEventSynchronize (MLA plan staging)");
  auto* h = static_cast<std::uint8_t*>(plan.staging[slot].get(plan.meta_bytes));
  std::memset(h, 0, plan.meta_bytes);
  std::memcpy(h + plan.requests_off, plan.sched.requests.data(), plan.sched.requests.size() * sizeof(DecodeRequest));
  std::memcpy(h + plan.parts_off, plan.sched.parts.data(), plan.sched.parts.size() * sizeof(DecodePart));
  auto* table = reinterpret_cast<std::int32_t*>(h + plan.table_off);
  for (int i = 0; i < n; ++i)
    std::copy_n(b.block_table.data() + std::size_t(i) * std::size_t(b.max_blocks_per_seq), b.max_blocks_per_seq,
                table + std::size_t(i) * std::size_t(plan.max_blocks_per_seq));
  const auto s = static_cast<cudaStream_t>(stream.native);
  check(cudaMemcpyAsync(plan.meta.data(), h, plan.meta_bytes, cudaMemcpyHostToDevice, s),
        "cudaMemcpyAsync (MLA decode plan)");
  if (!plan.staged[slot]) check(cudaEventCreateWithFlags(&plan.staged[slot], cudaEventDisableTiming), "cudaEventCreate");
  check(cudaEventRecord(plan.staged[slot], s), "cudaEventRecord (MLA plan staging)");
}

}  // namespace

std::unique_ptr<DecodePlan> plan_decode(const DecodeBatch& batch, const TensorView& cache, const DecodeOptions& o,
                                        Stream stream) {
  require_hopper();
  if (o.dtype != ScalarType::bf16 && o.dtype != ScalarType::f16)
    throw ValueError(fmt::format("the MLA decode takes bf16 or f16 queries, got {}", to_string(o.dtype)));
  if (o.num_heads < 1) throw ValueError(fmt::format("num_heads must be positive, got {}", o.num_heads));
  if (o.max_query_len < 1) throw ValueError(fmt::format("max_query_len must be positive, got {}", o.max_query_len));
  auto plan = std::make_unique<CudaDecodePlan>();
  plan->options = o;
  plan->geometry = cache_geometry(cache, o.dtype);
  const int n = static_cast<int>(batch.seq_lens.size());
  if (n < 1) throw ValueError("a decode plan needs at least one request");
  plan->max_rows = o.max_query_len * o.num_heads;
  plan->row_tiles = (plan->max_rows + decode_row_tile(DecodeForm::rows64) - 1) / decode_row_tile(DecodeForm::rows64);
  plan->num_parts = o.num_parts > 0 ? o.num_parts : std::max(1, device_sms() / plan->row_tiles);
  if (o.batch_invariant) plan->num_parts = std::max(plan->num_parts, n);
  plan->max_blocks_per_seq = std::max(o.max_blocks_per_seq, batch.max_blocks_per_seq);
  plan->slots = o.batch_invariant ? 0 : max_decode_splits(n, plan->num_parts);
  // One device buffer for the batch description, one for the split pieces.
  plan->requests_off = 0;
  plan->parts_off = (std::size_t(n) * sizeof(DecodeRequest) + 255) / 256 * 256;
  plan->table_off = plan->parts_off + (std::size_t(plan->num_parts) * sizeof(DecodePart) + 255) / 256 * 256;
  plan->meta_bytes = plan->table_off + std::size_t(n) * std::size_t(std::max(plan->max_blocks_per_seq, 1)) * 4;
  plan->meta = DeviceBuffer(plan->meta_bytes);
  const std::size_t o_bytes = std::size_t(plan->slots) * std::size_t(plan->max_rows) * kValueDim * sizeof(float);
  plan->lse_off = o_bytes;
  plan->partials = DeviceBuffer(std::max<std::size_t>(
      o_bytes + std::size_t(plan->slots) * std::size_t(plan->max_rows) * sizeof(float), 256));
  build(*plan, batch, stream);
  return plan;
}

void update_decode(DecodePlan& base, const DecodeBatch& batch, Stream stream) {
  auto& plan = dynamic_cast<CudaDecodePlan&>(base);
  if (static_cast<int>(batch.seq_lens.size()) != plan.num_requests)
    throw ValueError(fmt::format("the plan was made for {} decode requests, the batch has {}", plan.num_requests,
                                 batch.seq_lens.size()));
  if (plan.options.graph_capturable) {
    const int tokens = batch.query_start_loc.empty() ? 0 : batch.query_start_loc.back();
    if (tokens != plan.num_tokens)
      throw ValueError(fmt::format("a capturable plan keeps its batch shape: {} decode tokens, not {}", plan.num_tokens,
                                   tokens));
  }
  build(plan, batch, stream);
}

void run_decode(const DecodePlan& base, const TensorView& q, const TensorView& cache, const TensorView& out,
                float scale, float k_scale, Stream stream, const TensorView* lse) {
  const auto& plan = dynamic_cast<const CudaDecodePlan&>(base);
  const DecodeOptions& o = plan.options;
  const CacheGeometry g = cache_geometry(cache, o.dtype);
  if (g.num_blocks != plan.geometry.num_blocks || g.page_size != plan.geometry.page_size)
    throw ValueError(fmt::format("the cache {} is not the plan's geometry ({} blocks of {})", cache.describe(),
                                 plan.geometry.num_blocks, plan.geometry.page_size));
  if (!(scale > 0.0f) || !std::isfinite(scale))
    throw ValueError(fmt::format("the softmax scale must be positive and finite, got {}", scale));
  (void)k_scale;
  auto check_rows = [&](const TensorView& t, const char* name, int width) {
    if (t.device != DeviceKind::cuda || t.ndim != 3 || t.shape[1] != o.num_heads || t.shape[2] != width ||
        t.stride[2] != 1 || t.stride[0] != o.num_heads * t.stride[1] || t.shape[0] < plan.num_tokens ||
        t.dtype != o.dtype)
      throw ValueError(fmt::format("{} must be a CUDA {} tensor [>= {} tokens, {} heads, {}] whose rows (token, head) "
                                   "are evenly strided, got {}",
                                   name, to_string(o.dtype), plan.num_tokens, o.num_heads, width, t.describe()));
    if (reinterpret_cast<std::uintptr_t>(t.data) % 16 != 0 || (t.stride[1] * 2) % 16 != 0)
      throw ValueError(fmt::format("{}'s address and row stride must be multiples of 16 bytes, got {}", name,
                                   t.describe()));
  };
  check_rows(q, "q_latent", kLatentDim);
  check_rows(out, "out", kValueDim);
  if (lse && (lse->device != DeviceKind::cuda || lse->dtype != ScalarType::f32 || lse->ndim != 2 ||
              lse->shape[0] < plan.num_tokens || lse->shape[1] != o.num_heads || lse->stride[1] != 1 ||
              lse->stride[0] != o.num_heads))
    throw ValueError(fmt::format("lse must be a contiguous CUDA f32 tensor [>= {} tokens, {} heads], got {}",
                                 plan.num_tokens, o.num_heads, lse->describe()));

  DecodeMaps maps;
  if (auto e = encode_cache_map(cache, std::gcd(g.page_size, kKeyTile), maps); !e.empty()) throw RuntimeError(e);
  // The queries as [decode tokens · heads, 576] rows: TMA reads zeros past them.
  const std::int64_t q_rows[2] = {std::int64_t(plan.num_tokens) * o.num_heads, kLatentDim};
  const std::int64_t q_strides[2] = {q.stride[1], 1};
  const TensorView q2 = TensorView::strided(q.data, q.dtype, q_rows, q_strides, DeviceKind::cuda);
  if (auto e = encode_query_map(q2, maps); !e.empty()) throw RuntimeError(e);

  DecodeParams p;
  p.q = q.data;
  p.q_row_stride = q.stride[1];
  p.out = out.data;
  p.out_row_stride = out.stride[1];
  p.lse = lse ? lse->as<float>() : nullptr;
  p.cache = cache.data;
  p.cache_block_stride = g.block_stride;
  p.cache_row_stride = g.row_stride;
  auto* meta = static_cast<std::uint8_t*>(plan.meta.data());
  p.block_table = reinterpret_cast<const std::int32_t*>(meta + plan.table_off);
  p.block_table_stride = plan.max_blocks_per_seq;
  p.page_size = g.page_size;
  p.box_rows = std::gcd(g.page_size, kKeyTile);
  p.num_heads = o.num_heads;
  p.max_rows = plan.max_rows;
  p.requests = reinterpret_cast<const DecodeRequest*>(meta + plan.requests_off);
  p.num_requests = plan.num_requests;
  p.parts = reinterpret_cast<const DecodePart*>(meta + plan.parts_off);
  p.num_parts = plan.num_parts;
  p.part_o = static_cast<float*>(plan.partials.data());
  p.part_lse = reinterpret_cast<float*>(static_cast<std::uint8_t*>(plan.partials.data()) + plan.lse_off);
  p.scale_log2 = scale * 1.4426950408889634f;
  p.out_scale = 1.0f;
  launch_decode_rows64(p, o.dtype, plan.row_tiles, &maps, o.programmatic_launch, stream.native);
  // Capturable plans always launch the combine (the batch's splits change between replays).
  if (plan.sched.total_splits > 0 || o.graph_capturable) launch_combine(p, o.dtype, o.programmatic_launch, stream.native);
}

void write_latent_cache(const TensorView& kv_c, const TensorView& k_pe, std::span<const std::int64_t> slots,
                        const std::int64_t* slots_device, const TensorView& cache, float k_scale, Stream stream) {
  require_hopper();
  if (cache.device != DeviceKind::cuda || (cache.ndim != 3 && cache.ndim != 4) ||
      cache.shape[cache.ndim - 1] != kLatentDim || cache.stride[cache.ndim - 1] != 1)
    throw ValueError(fmt::format("the latent cache must be a CUDA [num_blocks, block_size, (1,) 576] tensor, got {}",
                                 cache.describe()));
  const bool fp8 = is_fp8(cache.dtype) || cache.dtype == ScalarType::u8;
  if (fp8 && cache.dtype == ScalarType::fp8_e5m2) throw ValueError("the MLA cache takes e4m3 fp8 only, not e5m2");
  if (!fp8 && cache.dtype != kv_c.dtype)
    throw ValueError(fmt::format("the cache holds {} but kv_c is {}", to_string(cache.dtype), to_string(kv_c.dtype)));
  if (fp8 && !(k_scale > 0.0f && std::isfinite(k_scale)))
    throw ValueError(fmt::format("k_scale must be positive and finite for an fp8 cache, got {}", k_scale));
  const std::int64_t tokens = static_cast<std::int64_t>(slots.size());
  auto check_in = [&](const TensorView& t, const char* name, int width) {
    if (t.device != DeviceKind::cuda || t.ndim != 2 || t.shape[0] < tokens || t.shape[1] != width ||
        t.stride[1] != 1 || (t.dtype != ScalarType::bf16 && t.dtype != ScalarType::f16) || t.dtype != kv_c.dtype ||
        (t.stride[0] * 2) % 16 != 0 || reinterpret_cast<std::uintptr_t>(t.data) % 16 != 0)
      throw ValueError(fmt::format("{} must be a CUDA bf16/f16 tensor [>= {} tokens, {}] with 16-byte aligned rows, "
                                   "got {}",
                                   name, tokens, width, t.describe()));
  };
  check_in(kv_c, "kv_c", kValueDim);
  check_in(k_pe, "k_pe", kLatentDim - kValueDim);
  const std::int64_t capacity = cache.shape[0] * cache.shape[1];
  for (std::int64_t i = 0; i < tokens; ++i)
    if (slots[std::size_t(i)] < -1 || slots[std::size_t(i)] >= capacity)
      throw ValueError(fmt::format("slot_mapping[{}] = {} is outside the cache's {} slots", i, slots[std::size_t(i)],
                                   capacity));
  const std::int64_t es = static_cast<std::int64_t>(element_size(cache.dtype));
  if ((cache.stride[1] * es) % 16 != 0 || reinterpret_cast<std::uintptr_t>(cache.data) % 16 != 0)
    throw ValueError(fmt::format("the latent cache's rows must be 16-byte aligned, got {}", cache.describe()));
  CacheWriteParams p;
  p.kv_c = kv_c.data;
  p.kv_c_stride = kv_c.stride[0];
  p.k_pe = k_pe.data;
  p.k_pe_stride = k_pe.stride[0];
  p.cache = cache.data;
  p.cache_block_stride = cache.stride[0];
  p.cache_row_stride = cache.stride[1];
  p.page_size = static_cast<int>(cache.shape[1]);
  p.slot_mapping = slots_device;
  p.num_tokens = static_cast<int>(tokens);
  p.k_scale = k_scale;
  launch_cache_write(p, kv_c.dtype, fp8 ? CacheKind::e4m3 : CacheKind::b16, false, stream.native);
}

}  // namespace attnsel::kernel::cuda::mla
