// Internal: a config's RoPE parameters as vLLM reads them (vllm/transformers_utils/config.py,
// patch_rope_parameters): transformers 5's `rope_parameters` or the older `rope_scaling`,
// with the legacy "type" key, checked as vLLM and transformers check them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "model/config_reader.hpp"

namespace attnsel::model {

struct RopeParameters {
  std::string field;                  ///< "rope_parameters" or "rope_scaling"; "" when the config has neither
  /// After vLLM's renames of the legacy types ("su" → "longrope", "mrope" → "default").
  std::string rope_type = "default";
  std::optional<double> factor;       ///< positive when given
  std::optional<double> mscale_all_dim;
  bool apply_yarn_scaling = true;
  /// From the block, else the config's top level (vLLM copies it into the block).
  std::optional<std::int64_t> original_max_position_embeddings;
};

/// Reads and checks the block: ValueError naming the field for a block that is not an
/// object, two spellings that disagree, a missing, conflicting or unknown type (vLLM's
/// messages), a factor that is not a positive number, or a mistyped numeric field.
RopeParameters read_rope_parameters(const ConfigReader& c);

}  // namespace attnsel::model
