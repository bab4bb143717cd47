#include "model/mla_shape.hpp"

#include <cmath>
#include <fmt/format.h>

#include "model/rope_parameters.hpp"

namespace attnsel::model {

double yarn_get_mscale(double factor, double mscale) {
  if (factor <= 1) return 1.0;
  return 0.1 * mscale * std::log(factor) + 1.0;
}

DeepseekRope read_deepseek_rope(const ConfigReader& c) {
  const RopeParameters p = read_rope_parameters(c);
  DeepseekRope rope;
  rope.factor = p.factor;
  rope.mscale_all_dim = p.mscale_all_dim.value_or(0.0);
  if (p.rope_type == "default") return rope;
  rope.rope_type = p.apply_yarn_scaling ? "deepseek_yarn" : "deepseek_llama_scaling";
  const ConfigReader block = *c.opt_object(p.field);
  const std::string why = fmt::format("vLLM's DeepSeek layers run rope type \"{}\" as {}, which needs it", p.rope_type,
                                      rope.rope_type);
  if (!p.factor) block.fail_missing("factor", "a positive number: " + why);
  if (!p.original_max_position_embeddings)
    block.fail_missing("original_max_position_embeddings", "a positive integer (here or at the top level): " + why);
  if (rope.rope_type == "deepseek_yarn") rope.yarn_mscale = yarn_get_mscale(*p.factor, rope.mscale_all_dim);
  if (!std::isfinite(rope.yarn_mscale * rope.yarn_mscale))
    block.fail("mscale_all_dim", fmt::format("{:g} makes yarn's factor m = 0.1 * mscale_all_dim * ln(factor) + 1 so "
                                             "large that the softmax scale (times m^2) is not a finite number",
                                             rope.mscale_all_dim));
  return rope;
}

MlaShape read_mla_shape(const ConfigReader& c) {
  auto width = [&](std::string_view field) {
    if (!c.has(field))
      c.fail_missing(field,
                     fmt::format("an integer from 1 to {}, which MLA needs (kv_lora_rank is set)", kMaxHeadSize));
    return c.get_int(field, 1, kMaxHeadSize);
  };
  MlaShape s;
  s.kv_lora_rank = width("kv_lora_rank");
  s.qk_rope_head_dim = width("qk_rope_head_dim");
  s.qk_nope_head_dim = width("qk_nope_head_dim");
  s.v_head_dim = width("v_head_dim");
  s.q_lora_rank = c.opt_int("q_lora_rank", 1, kMaxHeadSize);
  const DeepseekRope rope = read_deepseek_rope(c);
  s.rope_type = rope.rope_type;
  s.rope_factor = rope.factor;
  s.mscale_all_dim = rope.mscale_all_dim;
  s.yarn_mscale = rope.yarn_mscale;
  // In vLLM's order of operations, so that the double matches its float to the last bit.
  s.softmax_scale = std::pow(static_cast<double>(s.qk_head_size()), -0.5);
  if (rope.rope_type == "deepseek_yarn") s.softmax_scale = s.softmax_scale * rope.yarn_mscale * rope.yarn_mscale;
  return s;
}

}  // namespace attnsel::model
