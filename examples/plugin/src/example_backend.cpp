// An example attnsel plugin: EXAMPLE_ATTN, a plain and correct CPU attention kernel over
// the paged KV cache — float32 or bfloat16, decoder self-attention, causal, any head size,
// grouped-query attention (num_heads a multiple of num_kv_heads). It declares exactly
// that and nothing more: capabilities are promises.
//
// Two init symbols:
//   attnsel_plugin_init          registers the backend as the new member EXAMPLE_ATTN;
//   attnsel_example_as_cpu_attn  registers it as CPU_ATTN, overriding the built-in, so
//                                that the CPU platform (which always routes to CPU_ATTN)
//                                selects and runs it.
#include <attnsel/plugin_helper.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using attnsel::plugin_sdk::Capabilities;

float bf16_to_float(std::uint16_t bits) {
  const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

std::uint16_t float_to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if (std::isnan(f)) return static_cast<std::uint16_t>((u >> 16) | 0x40);  // stay a (quiet) NaN
  u += 0x7fff + ((u >> 16) & 1);  // round to nearest, ties to even
  return static_cast<std::uint16_t>(u >> 16);
}

// Element [i0, i1, i2, ...] of a strided view, as float.
class Elements {
 public:
  explicit Elements(const attnsel_tensor& t) : t_(t) {
    if (t.dtype != ATTNSEL_SCALAR_F32 && t.dtype != ATTNSEL_SCALAR_BF16)
      throw std::invalid_argument("EXAMPLE_ATTN computes float32 and bfloat16 tensors only");
  }
  float load(std::int64_t offset) const {
    if (t_.dtype == ATTNSEL_SCALAR_F32) return static_cast<const float*>(t_.data)[offset];
    return bf16_to_float(static_cast<const std::uint16_t*>(t_.data)[offset]);
  }
  void store(std::int64_t offset, float v) const {
    if (t_.dtype == ATTNSEL_SCALAR_F32) static_cast<float*>(t_.data)[offset] = v;
    else static_cast<std::uint16_t*>(t_.data)[offset] = float_to_bf16(v);
  }
  std::int64_t offset(std::int64_t a, std::int64_t b, std::int64_t c) const {
    return a * t_.stride[0] + b * t_.stride[1] + c * t_.stride[2];
  }
  std::int64_t offset(std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) const {
    return a * t_.stride[0] + b * t_.stride[1] + c * t_.stride[2] + d * t_.stride[3];
  }

 private:
  attnsel_tensor t_;
};

class ExampleKernel : public attnsel::plugin_sdk::Kernel {
 public:
  explicit ExampleKernel(const attnsel_plugin_layer_params& p)
      : num_heads_(p.num_heads), num_kv_heads_(p.num_kv_heads), head_size_(p.head_size), scale_(p.scale) {}

  void write_kv_cache(const attnsel_tensor& key, const attnsel_tensor& value, const attnsel_kv_cache& cache,
                      const attnsel_metadata& md) const override {
    const Elements k(key), v(value), kc(cache.key), vc(cache.value);
    const std::int64_t block_size = cache.key.shape[1];
    for (std::int64_t i = 0; i < md.num_actual_tokens; ++i) {
      const std::int64_t slot = md.slot_mapping[i];
      if (slot < 0) continue;  // padding
      const std::int64_t block = slot / block_size, in_block = slot % block_size;
      for (int h = 0; h < num_kv_heads_; ++h)
        for (int d = 0; d < head_size_; ++d) {
          kc.store(kc.offset(block, in_block, h, d), k.load(k.offset(i, h, d)));
          vc.store(vc.offset(block, in_block, h, d), v.load(v.offset(i, h, d)));
        }
    }
  }

  // For each new token at position p of its sequence: softmax(scale * q·k_j) over the
  // keys j <= p, applied to the values; accumulated in double.
  void forward(const attnsel_tensor& query, const attnsel_kv_cache& cache, const attnsel_metadata& md,
               const attnsel_tensor& output) const override {
    const Elements q(query), out(output), kc(cache.key), vc(cache.value);
    const std::int64_t block_size = cache.key.shape[1];
    const int group = num_heads_ / num_kv_heads_;
    std::vector<double> scores, acc(static_cast<std::size_t>(head_size_));
    for (int s = 0; s < md.num_seqs; ++s) {
      const std::int32_t first = md.query_start_loc[s];
      const std::int32_t query_len = md.query_start_loc[s + 1] - first;
      const std::int32_t context_len = md.seq_lens[s] - query_len;
      const std::int32_t* blocks = md.block_table + static_cast<std::int64_t>(s) * md.max_blocks_per_seq;
      for (std::int32_t t = 0; t < query_len; ++t) {
        const std::int64_t token = first + t;
        const std::int64_t visible = context_len + t + 1;  // causal: itself and everything before
        for (int h = 0; h < num_heads_; ++h) {
          const int kv_head = h / group;
          scores.assign(static_cast<std::size_t>(visible), 0.0);
          double max_score = -INFINITY;
          for (std::int64_t j = 0; j < visible; ++j) {
            const std::int64_t block = blocks[j / block_size], in_block = j % block_size;
            double dot = 0.0;
            for (int d = 0; d < head_size_; ++d)
              dot += static_cast<double>(q.load(q.offset(token, h, d))) *
                     kc.load(kc.offset(block, in_block, kv_head, d));
            scores[static_cast<std::size_t>(j)] = dot * scale_;
            max_score = std::max(max_score, scores[static_cast<std::size_t>(j)]);
          }
          double denominator = 0.0;
          std::fill(acc.begin(), acc.end(), 0.0);
          for (std::int64_t j = 0; j < visible; ++j) {
            const double w = std::exp(scores[static_cast<std::size_t>(j)] - max_score);
            denominator += w;
            const std::int64_t block = blocks[j / block_size], in_block = j % block_size;
            for (int d = 0; d < head_size_; ++d)
              acc[static_cast<std::size_t>(d)] += w * vc.load(vc.offset(block, in_block, kv_head, d));
          }
          for (int d = 0; d < head_size_; ++d)
            out.store(out.offset(token, h, d), static_cast<float>(acc[static_cast<std::size_t>(d)] / denominator));
        }
      }
    }
  }

 private:
  int num_heads_, num_kv_heads_, head_size_;
  double scale_;
};

class ExampleBackend : public attnsel::plugin_sdk::Backend {
 public:
  explicit ExampleBackend(std::vector<std::string> register_as = {"EXAMPLE_ATTN"})
      : register_as_(std::move(register_as)) {}

  Capabilities capabilities() const override {
    Capabilities c;
    c.name = "EXAMPLE_ATTN";
    c.register_as = register_as_;
    c.dtypes = {ATTNSEL_DTYPE_FLOAT32, ATTNSEL_DTYPE_BFLOAT16};
    c.kv_cache_dtypes = {"auto"};  // the cache holds the model dtype
    c.block_sizes = {{1, 1}};      // any block size
    c.attn_types = ATTNSEL_ATTN_TYPE_BIT(ATTNSEL_ATTN_TYPE_DECODER);
    c.features = ATTNSEL_FEATURE_VLLM_DEFAULTS;  // causal, no sinks, no sliding window, no MLA
    return c;
  }

  bool has_kernel() const override { return true; }

  // The layer parameters a kernel would have to honour but this one does not compute are
  // refused here with the reason, never silently ignored.
  std::unique_ptr<attnsel::plugin_sdk::Kernel> make_kernel(const attnsel_plugin_layer_params& p) const override {
    if (p.attn_type != ATTNSEL_ATTN_TYPE_DECODER) throw std::invalid_argument("EXAMPLE_ATTN computes decoder attention only");
    if (p.causal == 0) throw std::invalid_argument("EXAMPLE_ATTN computes causal attention only");
    if (p.has_sliding_window != 0) throw std::invalid_argument("EXAMPLE_ATTN has no sliding window");
    if (p.logits_soft_cap != 0.0f) throw std::invalid_argument("EXAMPLE_ATTN has no logits soft cap");
    if (p.num_alibi_slopes != 0) throw std::invalid_argument("EXAMPLE_ATTN has no ALiBi");
    if (p.num_sinks != 0) throw std::invalid_argument("EXAMPLE_ATTN has no attention sinks");
    if (p.kv_cache_dtype == nullptr || std::string(p.kv_cache_dtype) != "auto")
      throw std::invalid_argument("EXAMPLE_ATTN stores the cache in the model dtype (kv_cache_dtype 'auto') only");
    if (p.num_kv_heads <= 0 || p.num_heads % p.num_kv_heads != 0)
      throw std::invalid_argument("EXAMPLE_ATTN needs num_heads to be a multiple of num_kv_heads");
    return std::make_unique<ExampleKernel>(p);
  }

 private:
  std::vector<std::string> register_as_;
};

class ExampleAsCpuAttn : public ExampleBackend {
 public:
  ExampleAsCpuAttn() : ExampleBackend({"CPU_ATTN"}) {}
};

}  // namespace

ATTNSEL_PLUGIN_ENTRY(attnsel_plugin_init, "attnsel-example", "1.0", ExampleBackend)
ATTNSEL_PLUGIN_ENTRY(attnsel_example_as_cpu_attn, "attnsel-example-cpu-attn", "1.0", ExampleAsCpuAttn)
