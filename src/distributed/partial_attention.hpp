// One DCP rank's attention over its shard, through the backend's own kernel: each query
// token's output over the keys the rank holds, with the log-sum-exp (natural log) of its
// logits — what the merge needs. The kernel's step plan is built once per step with
// PlanOptions::lse and every layer executes on it (kernel.hpp, docs/STEP_PLAN.md). This
// file is the one place where DCP meets a kernel; it adds no arithmetic of its own.
//
// Decode only (one query token per sequence): the query then sees every key of the
// sequence, so the kernel's causal rule masks nothing in a shard (vLLM's FlashAttention DCP
// path likewise attends the gathered queries over the local context without a mask:
// vllm/v1/attention/backends/flash_attn.py, _forward_with_dcp). A sequence with no token
// on this rank is left out of the kernel's batch (a decoder kernel refuses a query with
// no key of its own) and gets output 0 and LSE -inf, as FlashAttention gives an empty
// split; the merge then gives it no weight.
//
// A kernel whose tensors live on a GPU (KernelInfo::device) gets device copies: the shard's
// cache is mirrored to the device when a step is planned on a cache it has not seen (the
// job's shard is fixed for the run), and each layer's query rows go up and its output and
// LSE come back, so the job keeps its buffers and its transport on the host either way.
// Thread-safety: one PartialAttention per thread; the kernel may parallelise inside.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "attnsel/kernel.hpp"
#include "kernels/device/cuda/device_memory.hpp"

namespace attnsel::distributed {

/// Checks that a layer can run under DCP here (ValueError naming the feature otherwise):
/// position-dependent terms (sliding window, ALiBi) and sinks are refused.
void validate_dcp_layer(const kernel::LayerParams& p);

/// Checks that a backend's kernel can give DCP what it needs, from what the kernel declares
/// (NotImplementedError naming the backend otherwise): it writes the LSE of its rows
/// (KernelInfo::lse_output; decode batches are enough, DCP runs decode steps only) and
/// exists in this build on this host. Host and GPU kernels both qualify.
void require_dcp_kernel(const kernel::KernelInfo& k, std::string_view backend);

class PartialAttention {
 public:
  /// `impl`: the backend's kernel for the layer (its parameters pass validate_dcp_layer).
  /// `device`: the CUDA device a GPU kernel runs on (ignored by host kernels).
  explicit PartialAttention(std::unique_ptr<kernel::AttentionImpl> impl, int device = 0);

  /// Once per step: plans the shard's batch (`md`, `cache`: KVShard's, in host memory) for
  /// queries and outputs of `dtype`. ValueError for a query length other than 1.
  void plan(const kernel::AttentionMetadata& md, const kernel::KVCacheView& cache, kernel::ScalarType dtype);

  /// Once per layer: query [num_tokens, num_heads, head_size] (host, the planned dtype),
  /// the layer's shard cache (the planned one, for a GPU kernel); writes out
  /// [num_tokens, num_heads, head_size] and lse [num_tokens, num_heads], both fp32.
  void execute(const kernel::TensorView& query, const kernel::KVCacheView& cache, std::span<float> out,
               std::span<float> lse);

  const kernel::AttentionImpl& impl() const { return *impl_; }
  /// The plan's one-line description ("" before the first plan or with no local token).
  std::string describe() const;

 private:
  /// The cache the kernel reads: `cache` itself, or its device mirror for a GPU kernel.
  kernel::KVCacheView kernel_cache(const kernel::KVCacheView& cache) const;
  /// Runs the kernel on `n` planned rows: query, output and lse are host views.
  void run_kernel(const kernel::TensorView& q, const kernel::KVCacheView& cache, const kernel::TensorView& o,
                  const kernel::TensorView& l);

  std::unique_ptr<kernel::AttentionImpl> impl_;
  bool on_device_ = false;            // the kernel's tensors live on a GPU
  int device_ = 0;
  // GPU kernels: the mirrored shard cache (and the host cache it copies), query, output, LSE.
  const void* mirrored_key_ = nullptr;
  const void* mirrored_value_ = nullptr;
  kernel::cuda::DeviceTensor dev_key_, dev_value_;
  kernel::cuda::DeviceBuffer dev_query_, dev_output_, dev_lse_;
  std::unique_ptr<kernel::StepPlan> plan_;
  kernel::ScalarType dtype_ = kernel::ScalarType::bf16;
  int tokens_ = 0;                    // query tokens of the whole batch
  std::vector<std::int32_t> rows_;    // the batch's token of each planned row (empty: all, in order)
  std::vector<std::int32_t> qsl_, seq_lens_, block_table_;  // the planned batch when it is a subset
  std::vector<std::int64_t> slots_;
  std::vector<std::uint8_t> query_rows_, output_;  // planned rows of the query and the kernel's output
  std::vector<float> lse_rows_;                     // the kernel's LSEs of the planned rows (a subset)
};

}  // namespace attnsel::distributed
