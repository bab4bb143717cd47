#include "kernels/mla/cpu/merge_attn_states.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <cstring>
#include <string>
#include <string_view>

#include "attnsel/errors.hpp"
#include "kernels/element_access.hpp"
#include "kernels/mla/validation.hpp"
#include "kernels/tensor_checks.hpp"

namespace attnsel::kernel::mla::cpu {

namespace {


bool is_activation(ScalarType t) { return t == ScalarType::f32 || t == ScalarType::f16 || t == ScalarType::bf16; }

void check_output(const TensorView& t, std::string_view name, std::int64_t tokens, std::int64_t heads,
                  std::int64_t size) {
  if (t.ndim != 3 || t.shape[0] != tokens || t.shape[1] != heads || t.shape[2] != size)
    fail(fmt::format("merge_attn_states: {} must be [{}, {}, {}] like the suffix output, got {}", name, tokens, heads,
                     size, t.describe()));
  if (!is_activation(t.dtype))
    fail(fmt::format("merge_attn_states: {} dtype {} is not supported; supported: f32, f16, bf16", name,
                     to_string(t.dtype)));
  if (t.stride[0] < 0 || t.stride[1] < 0 || (size > 1 && t.stride[2] != 1))
    fail(fmt::format("merge_attn_states: {} must have unit stride over its last dimension and no negative stride, got "
                     "{}",
                     name, t.describe()));
}

void check_lse(const TensorView& t, std::string_view name, std::int64_t tokens, std::int64_t heads) {
  if (t.ndim != 2 || t.shape[0] != heads || t.shape[1] != tokens || t.dtype != ScalarType::f32)
    fail(fmt::format("merge_attn_states: {} must be f32 [heads, tokens] = [{}, {}], got {}", name, heads, tokens,
                     t.describe()));
  if (t.stride[0] < 0 || t.stride[1] < 0)
    fail(fmt::format("merge_attn_states: {} has a negative stride: {}", name, t.describe()));
}

bool same_view(const TensorView& a, const TensorView& b) {
  if (a.data != b.data || a.dtype != b.dtype || a.ndim != b.ndim) return false;
  for (int d = 0; d < a.ndim; ++d)
    if (a.shape[d] != b.shape[d] || a.stride[d] != b.stride[d]) return false;
  return true;
}

float load(const TensorView& t, std::int64_t i) { return load_activation(t.dtype, t.data, i); }

void store(const TensorView& t, std::int64_t i, float v) { store_activation(t.dtype, t.data, i, v); }

}  // namespace

void merge_attn_states(const TensorView& output, const TensorView* output_lse, const TensorView& prefix_output,
                       const TensorView& prefix_lse, const TensorView& suffix_output, const TensorView& suffix_lse,
                       std::optional<std::int64_t> prefill_tokens_with_context) {
  if (suffix_output.ndim != 3)
    fail(fmt::format("merge_attn_states: suffix_output must be [tokens, heads, head_size], got {}",
                     suffix_output.describe()));
  const std::int64_t T = suffix_output.shape[0], H = suffix_output.shape[1], D = suffix_output.shape[2];
  check_output(suffix_output, "suffix_output", T, H, D);
  check_output(prefix_output, "prefix_output", T, H, D);
  check_output(output, "output", T, H, D);
  check_lse(prefix_lse, "prefix_lse", T, H);
  check_lse(suffix_lse, "suffix_lse", T, H);
  if (output_lse) check_lse(*output_lse, "output_lse", T, H);
  for (const TensorView* t : {&output, &prefix_output, &suffix_output, &prefix_lse, &suffix_lse})
    if (t->device != DeviceKind::cpu) fail("merge_attn_states: every tensor must be in host memory");
  if (output_lse && output_lse->device != DeviceKind::cpu) fail("merge_attn_states: every tensor must be in host memory");
  const std::int64_t with_context = prefill_tokens_with_context.value_or(T);
  if (with_context < 0 || with_context > T)
    fail(fmt::format("merge_attn_states: prefill_tokens_with_context = {} must be in [0, {}] (the tokens)", with_context,
                     T));
  // Outputs may rewrite an input in place, element by element; nothing else may overlap.
  const std::pair<const TensorView*, const char*> inputs[] = {{&prefix_output, "prefix_output"},
                                                              {&suffix_output, "suffix_output"},
                                                              {&prefix_lse, "prefix_lse"},
                                                              {&suffix_lse, "suffix_lse"}};
  for (const auto& [in, name] : inputs) {
    if (!same_view(output, *in)) check_no_overlap(output, "output", *in, name);
    if (output_lse && !same_view(*output_lse, *in)) check_no_overlap(*output_lse, "output_lse", *in, name);
  }
  if (output_lse) check_no_overlap(*output_lse, "output_lse", output, "output");

  const bool parallel = T * H * D >= (std::int64_t{1} << 16);
#pragma omp parallel for schedule(static) if (parallel)
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t h = 0; h < H; ++h) {
      const std::int64_t po = t * prefix_output.stride[0] + h * prefix_output.stride[1];
      const std::int64_t so = t * suffix_output.stride[0] + h * suffix_output.stride[1];
      const std::int64_t oo = t * output.stride[0] + h * output.stride[1];
      const float s_lse = static_cast<const float*>(suffix_lse.data)[h * suffix_lse.stride[0] + t * suffix_lse.stride[1]];
      float lse;
      if (t >= with_context) {  // no context: the suffix as it is
        for (std::int64_t d = 0; d < D; ++d) store(output, oo + d, load(suffix_output, so + d));
        lse = s_lse;
      } else {
        float p = static_cast<const float*>(prefix_lse.data)[h * prefix_lse.stride[0] + t * prefix_lse.stride[1]];
        float s = s_lse;
        if (p == HUGE_VALF) p = -HUGE_VALF;
        if (s == HUGE_VALF) s = -HUGE_VALF;
        const float m = std::max(p, s);
        if (std::isnan(p) || std::isnan(s)) {  // a broken input stays visible
          for (std::int64_t d = 0; d < D; ++d) store(output, oo + d, NAN);
          lse = NAN;
        } else if (m == -HUGE_VALF) {
          for (std::int64_t d = 0; d < D; ++d) store(output, oo + d, 0.0f);
          lse = -HUGE_VALF;
        } else {
          const float a = std::exp(p - m), c = std::exp(s - m);
          const float wp = a / (a + c), ws = c / (a + c);
          for (std::int64_t d = 0; d < D; ++d) {
            const float x = (wp > 0.0f ? load(prefix_output, po + d) * wp : 0.0f) +
                            (ws > 0.0f ? load(suffix_output, so + d) * ws : 0.0f);
            store(output, oo + d, x);
          }
          lse = std::log(a + c) + m;
        }
      }
      if (output_lse) static_cast<float*>(output_lse->data)[h * output_lse->stride[0] + t * output_lse->stride[1]] = lse;
    }
}

}  // namespace attnsel::kernel::mla::cpu
