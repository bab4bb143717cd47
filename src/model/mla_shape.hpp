// Internal: the attention of vLLM's DeepSeek models (vllm/model_executor/models/deepseek_v2.py)
// from config.json — the MLA widths, the RoPE as those layers run it, the softmax scale.
#pragma once

#include <optional>
#include <string>

#include "attnsel/model.hpp"
#include "model/config_reader.hpp"

namespace attnsel::model {

/// The RoPE of vLLM's DeepSeek attention layers (MLA or not).
struct DeepseekRope {
  std::string rope_type = "default";  ///< "default", "deepseek_yarn" or "deepseek_llama_scaling"
  std::optional<double> factor;
  double mscale_all_dim = 0.0;  ///< absent: 0
  double yarn_mscale = 1.0;     ///< m, whose square multiplies the softmax scale (deepseek_yarn only)
};

/// vLLM's yarn_get_mscale: 1 for factor <= 1, else 0.1 · mscale · ln(factor) + 1.
double yarn_get_mscale(double factor, double mscale);

/// The config's RoPE parameters as vLLM's DeepSeek layers take them: every type but
/// "default" becomes deepseek_yarn (deepseek_llama_scaling when apply_yarn_scaling is false),
/// whose rotary embedding needs a factor and original_max_position_embeddings. ValueError
/// naming the field otherwise (and for whatever read_rope_parameters refuses).
DeepseekRope read_deepseek_rope(const ConfigReader& c);

/// An MLA layer's widths and softmax scale (DeepseekV2MLAAttention); ValueError naming the
/// field for a width that is missing, not an integer or not positive.
MlaShape read_mla_shape(const ConfigReader& c);

}  // namespace attnsel::model
