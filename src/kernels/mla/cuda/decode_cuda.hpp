// The absorbed MLA decode on Hopper (FlashMLA's flash_mla_with_kvcache, attnsel's own
// kernels), as the MLA implementation, the tests and the benchmark drive it: a plan per
// step (all host checks, the work split, one upload of the batch description), then one
// run per layer (launches on the caller's stream, nothing else), and vLLM's
// concat_and_cache_mla.
//
// Shapes: q_latent [tokens, num_heads, 576] (W_UK already applied, rope last), the latent
// cache [num_blocks, page_size, 576] or [num_blocks, page_size, 1, 576], out [tokens,
// num_heads, 512], lse [tokens, num_heads] f32 (natural log; −inf where a row sees no key,
// its output then 0). Request i's query j sees keys [0, L_i − s_q_i + j].
//
// Without CUDA every entry point throws NotImplementedError saying why.
// Thread-safety: a plan is read by run_decode from any thread; update_decode must not
// overlap its users.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "attnsel/kernel.hpp"
#include "kernels/mla/cuda/decode_schedule.hpp"

namespace attnsel::kernel::cuda::mla {

/// The decode requests of a step, host copies (validated by plan_decode / update_decode).
struct DecodeBatch {
  std::span<const std::int32_t> query_start_loc;  ///< [num_requests + 1], over the decode tokens
  std::span<const std::int32_t> seq_lens;         ///< [num_requests], this step's tokens included
  std::span<const std::int32_t> block_table;      ///< [num_requests, max_blocks_per_seq] row-major
  int max_blocks_per_seq = 0;
};

struct DecodeOptions {
  int num_heads = 0;
  ScalarType dtype = ScalarType::bf16;  ///< queries and outputs (bf16 or f16; the cache holds the same)
  int max_query_len = 1;                ///< most query tokens of a request (1-4 with MTP; capturable: fixed)
  bool graph_capturable = false;        ///< fixed buffers and launch shapes; update() for the same batch shape
  int max_blocks_per_seq = 0;           ///< capturable: block-table rows the buffers hold (0 = the first batch's)
  bool batch_invariant = false;         ///< never split a request (its result does not depend on the batch)
  bool programmatic_launch = true;      ///< the combine overlaps the decode's tail
  int num_parts = 0;                    ///< parts of the work split; 0 = one wave of the device's SMs
};

/// A decode step's plan: the batch description and the split-KV workspace in device memory.
class DecodePlan {
 public:
  virtual ~DecodePlan() = default;
  virtual std::string describe() const = 0;  ///< e.g. "MLA decode rows64: 128 requests, 1 row tile x 132 parts, 57 split"
  virtual const DecodeSchedule& schedule() const = 0;  ///< the host copy of the work split
  virtual std::size_t workspace_bytes() const = 0;

 protected:
  DecodePlan() = default;
};

/// Validates the batch against the cache geometry (`cache`'s data is not read) and splits
/// the work. ValueError naming the problem; NotImplementedError without a Hopper GPU.
std::unique_ptr<DecodePlan> plan_decode(const DecodeBatch& batch, const TensorView& cache, const DecodeOptions& options,
                                        Stream stream);
/// Rebuilds a plan for a new batch in place (capturable plans: the same requests and query
/// lengths; their buffers and launch shapes stay).
void update_decode(DecodePlan& plan, const DecodeBatch& batch, Stream stream);
/// The decode of one layer: scale is the softmax scale; k_scale the e4m3 cache's (1 for a
/// 16-bit cache). lse may be null.
void run_decode(const DecodePlan& plan, const TensorView& q_latent, const TensorView& cache, const TensorView& out,
                float scale, float k_scale, Stream stream, const TensorView* lse = nullptr);

/// vLLM's concat_and_cache_mla: kv_c [tokens, 512], k_pe [tokens, 64] (activation dtype, on
/// the device), slot_mapping_host [tokens] (checked against the cache on the host; −1
/// skips) and its device copy; the cache as above, 16-bit or e4m3 (k_scale > 0).
void write_latent_cache(const TensorView& kv_c, const TensorView& k_pe, std::span<const std::int64_t> slot_mapping_host,
                        const std::int64_t* slot_mapping_device, const TensorView& cache, float k_scale,
                        Stream stream);

}  // namespace attnsel::kernel::cuda::mla
