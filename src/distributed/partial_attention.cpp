#include "distributed/partial_attention.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "attnsel/errors.hpp"
#include "kernels/element_access.hpp"
#include "runtime/host_batch.hpp"

namespace attnsel::distributed {

namespace {

using kernel::ScalarType;

// Widens `n` activations of type `t` to fp32 (the merge's arithmetic).
void widen(const std::uint8_t* src, ScalarType t, std::size_t n, float* dst) {
  if (t != ScalarType::f32 && t != ScalarType::bf16 && t != ScalarType::f16)
    throw ValueError(fmt::format("DCP partial outputs of type {} cannot be merged", kernel::to_string(t)));
  for (std::size_t i = 0; i < n; ++i) dst[i] = kernel::load_activation(t, src, static_cast<std::int64_t>(i));
}

}  // namespace

void validate_dcp_layer(const kernel::LayerParams& p) {
  if (p.sliding_window)
    throw ValueError("decode context parallelism with a sliding window is not supported here (the window is in "
                     "global positions); run without a sliding window");
  if (!p.alibi_slopes.empty())
    throw ValueError("decode context parallelism with ALiBi is not supported here (the bias is in global positions)");
  if (!p.sinks.empty())
    throw ValueError("decode context parallelism with attention sinks is not supported here (a sink must enter the "
                     "softmax once, not once per rank)");
}

void require_dcp_kernel(const kernel::KernelInfo& k, std::string_view backend) {
  const std::string isa = k.isa.empty() || k.isa == "-" ? std::string() : fmt::format(" ({})", k.isa);
  if (!k.lse_output)
    throw NotImplementedError(fmt::format("decode context parallelism merges the ranks' partial outputs with their "
                                          "log-sum-exps, and {}'s kernel{} does not write one (its KernelInfo "
                                          "declares lse_output = false)",
                                          backend, isa));
  if (!k.available)
    throw NotImplementedError(fmt::format("{}'s kernel is not available in this build on this host, so decode context "
                                          "parallelism has nothing to run",
                                          backend));
}

PartialAttention::PartialAttention(std::unique_ptr<kernel::AttentionImpl> impl, int device)
    : impl_(std::move(impl)), device_(device) {
  if (!impl_) throw ValueError("PartialAttention needs a kernel implementation");
  validate_dcp_layer(impl_->params());
  on_device_ = impl_->kernel_info().device == kernel::DeviceKind::cuda;
}

kernel::KVCacheView PartialAttention::kernel_cache(const kernel::KVCacheView& cache) const {
  if (!on_device_) return cache;
  if (cache.key.data != mirrored_key_ || cache.value.data != mirrored_value_)
    throw ValueError("DCP attention on the GPU reads the cache its step was planned with; plan the step with this "
                     "cache first");
  return {dev_key_.view, dev_value_.view};
}

void PartialAttention::run_kernel(const kernel::TensorView& q, const kernel::KVCacheView& cache,
                                  const kernel::TensorView& o, const kernel::TensorView& l) {
  if (!on_device_) {
    impl_->execute(*plan_, q, cache, o, kernel::Stream{}, &l);
    return;
  }
  // Device buffers grow to the largest batch seen; the copies are ordered on the legacy
  // default stream with the kernel (upload, execute, download).
  auto fit = [this](kernel::cuda::DeviceBuffer& b, std::size_t bytes) {
    if (b.size() < bytes) b = kernel::cuda::DeviceBuffer(bytes);
  };
  auto on_device = [this](const kernel::TensorView& host, const kernel::cuda::DeviceBuffer& b) {
    kernel::TensorView d = host;
    d.data = b.data();
    d.device = kernel::DeviceKind::cuda;
    d.device_index = device_;
    return d;
  };
  const std::size_t q_bytes = static_cast<std::size_t>(q.numel()) * kernel::element_size(q.dtype);
  const std::size_t o_bytes = static_cast<std::size_t>(o.numel()) * kernel::element_size(o.dtype);
  const std::size_t l_bytes = static_cast<std::size_t>(l.numel()) * sizeof(float);
  fit(dev_query_, q_bytes);
  fit(dev_output_, o_bytes);
  fit(dev_lse_, l_bytes);
  dev_query_.upload(q.data, q_bytes);
  const kernel::TensorView dl = on_device(l, dev_lse_);
  impl_->execute(*plan_, on_device(q, dev_query_), kernel_cache(cache), on_device(o, dev_output_), kernel::Stream{},
                 &dl);
  dev_output_.download(o.data, o_bytes);
  dev_lse_.download(l.data, l_bytes);
}

void PartialAttention::plan(const kernel::AttentionMetadata& md, const kernel::KVCacheView& cache,
                            kernel::ScalarType dtype) {
  for (int s = 0; s < md.num_seqs; ++s)
    if (md.query_start_loc[static_cast<std::size_t>(s) + 1] - md.query_start_loc[static_cast<std::size_t>(s)] != 1)
      throw ValueError("decode context parallelism runs decode steps: every sequence needs exactly one query token");
  dtype_ = dtype;
  tokens_ = md.num_actual_tokens;
  // The sequences this rank holds a token of; the others stay out of the kernel's batch.
  rows_.clear();
  bool all = true;
  for (int s = 0; s < md.num_seqs; ++s) {
    if (md.seq_lens[static_cast<std::size_t>(s)] > 0)
      rows_.push_back(md.query_start_loc[static_cast<std::size_t>(s)]);
    else
      all = false;
  }
  kernel::AttentionMetadata batch = md;
  if (all) {
    rows_.clear();
  } else {
    const auto n = static_cast<int>(rows_.size());
    const auto mb = static_cast<std::size_t>(md.max_blocks_per_seq);
    qsl_.assign(1, 0);
    seq_lens_.clear();
    block_table_.clear();
    slots_.clear();
    for (int s = 0; s < md.num_seqs; ++s) {
      const auto i = static_cast<std::size_t>(s);
      if (md.seq_lens[i] == 0) continue;
      qsl_.push_back(static_cast<std::int32_t>(qsl_.size()));
      seq_lens_.push_back(md.seq_lens[i]);
      block_table_.insert(block_table_.end(), md.block_table.begin() + static_cast<std::ptrdiff_t>(i * mb),
                          md.block_table.begin() + static_cast<std::ptrdiff_t>((i + 1) * mb));
      if (!md.slot_mapping.empty())
        slots_.push_back(md.slot_mapping[static_cast<std::size_t>(md.query_start_loc[i])]);
    }
    if (n == 0) {  // nothing of this batch on this rank
      plan_.reset();
      return;
    }
    batch = runtime::batch_metadata(qsl_, seq_lens_, block_table_, md.max_blocks_per_seq, slots_);
  }
  const std::size_t rows = all ? static_cast<std::size_t>(tokens_) : rows_.size();
  const std::size_t row_bytes =
      static_cast<std::size_t>(impl_->params().num_heads) * impl_->params().head_size * kernel::element_size(dtype);
  output_.resize(rows * row_bytes);
  if (!all) {
    query_rows_.resize(rows * row_bytes);
    lse_rows_.resize(rows * static_cast<std::size_t>(impl_->params().num_heads));
  }
  kernel::KVCacheView planned = cache;
  if (on_device_) {
    // The shard's cache is copied to the device once; a plan for another cache starts afresh.
    if (cache.key.data != mirrored_key_ || cache.value.data != mirrored_value_) {
      plan_.reset();
      dev_key_ = kernel::cuda::to_device(cache.key, device_);
      dev_value_ = kernel::cuda::to_device(cache.value, device_);
      mirrored_key_ = cache.key.data;
      mirrored_value_ = cache.value.data;
    }
    planned = {dev_key_.view, dev_value_.view};
  }
  // A plan of this group is rebuilt in place from the second step on (its buffers reused).
  if (plan_ && plan_->shape().dtype == dtype) {
    impl_->update(*plan_, batch, kernel::Stream{});
  } else {
    kernel::PlanOptions options;
    options.lse = true;
    plan_ = impl_->plan(batch, planned, dtype, kernel::Stream{}, options);
  }
}

void PartialAttention::execute(const kernel::TensorView& query, const kernel::KVCacheView& cache, std::span<float> out,
                               std::span<float> lse) {
  const int H = impl_->params().num_heads, D = impl_->params().head_size;
  const auto T = static_cast<std::size_t>(tokens_);
  const std::size_t hd = static_cast<std::size_t>(H) * D;
  if (out.size() < T * hd || lse.size() < T * H)
    throw ValueError(fmt::format("DCP attention: the output ({} floats) or LSE ({} floats) buffer is smaller than the "
                                 "batch ({} tokens x {} heads x {} dims)",
                                 out.size(), lse.size(), T, H, D));
  if (query.dtype != dtype_ || query.ndim != 3 || static_cast<std::size_t>(query.shape[0]) < T ||
      query.shape[1] != H || query.shape[2] != D || !query.is_contiguous())
    throw ValueError(fmt::format("DCP attention expects a contiguous {} query [{}, {}, {}], got {}",
                                 kernel::to_string(dtype_), T, H, D, query.describe()));
  if (!plan_) {  // no sequence has a token here: every row is empty
    std::fill_n(out.begin(), T * hd, 0.0f);
    std::fill_n(lse.begin(), T * H, -std::numeric_limits<float>::infinity());
    return;
  }
  const std::size_t esize = kernel::element_size(dtype_);
  const std::size_t row_bytes = hd * esize;
  const auto n = static_cast<std::int64_t>(rows_.empty() ? T : rows_.size());
  kernel::TensorView q = query;
  if (!rows_.empty()) {
    const auto* src = static_cast<const std::uint8_t*>(query.data);
    for (std::size_t i = 0; i < rows_.size(); ++i)
      std::memcpy(query_rows_.data() + i * row_bytes, src + static_cast<std::size_t>(rows_[i]) * row_bytes, row_bytes);
    q = kernel::TensorView::contiguous(query_rows_.data(), dtype_, {n, H, D});
  }
  const kernel::TensorView o = kernel::TensorView::contiguous(output_.data(), dtype_, {n, H, D});
  if (rows_.empty()) {
    // The whole batch: the kernel writes the LSEs in place.
    const kernel::TensorView l = kernel::TensorView::contiguous(lse.data(), ScalarType::f32, {n, H});
    run_kernel(q, cache, o, l);
    widen(output_.data(), dtype_, T * hd, out.data());
    return;
  }
  const kernel::TensorView l = kernel::TensorView::contiguous(lse_rows_.data(), ScalarType::f32, {n, H});
  run_kernel(q, cache, o, l);
  std::fill_n(out.begin(), T * hd, 0.0f);
  std::fill_n(lse.begin(), T * H, -std::numeric_limits<float>::infinity());
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    const auto t = static_cast<std::size_t>(rows_[i]);
    widen(output_.data() + i * row_bytes, dtype_, hd, out.data() + t * hd);
    std::copy_n(lse_rows_.begin() + static_cast<std::ptrdiff_t>(i * H), H,
                lse.begin() + static_cast<std::ptrdiff_t>(t * H));
  }
}

std::string PartialAttention::describe() const { return plan_ ? plan_->describe() : std::string(); }

}  // namespace attnsel::distributed
