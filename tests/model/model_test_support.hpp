// Shared by the model tests: where the example configs live, small layer queries, and the
// message of a ValueError.
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "attnsel/errors.hpp"
#include "attnsel/model.hpp"

namespace attnsel::testing_support {

/// examples/models in the source tree.
inline std::filesystem::path examples_dir() {
  return std::filesystem::path(ATTNSEL_SOURCE_DIR) / "examples" / "models";
}

inline ModelSpec load_example(const std::string& name) { return load_model_config(examples_dir() / (name + ".json")); }

/// Indices of the layers with `role` whose predicate holds.
template <class Pred>
std::vector<int> layer_indices(const ModelSpec& m, Pred pred) {
  std::vector<int> out;
  for (const LayerSpec& l : m.layers)
    if (pred(l)) out.push_back(l.index);
  return out;
}

inline bool is_sliding(const LayerSpec& l) { return l.attention && l.attention->sliding_window.has_value(); }
inline bool is_attention(const LayerSpec& l) { return l.mixer == MixerKind::attention; }
inline bool is_mamba(const LayerSpec& l) { return l.mixer == MixerKind::mamba; }

inline std::vector<int> every(int first, int last, int step) {
  std::vector<int> v;
  for (int i = first; i <= last; i += step) v.push_back(i);
  return v;
}

/// The message of the ValueError `f` throws ("" when it throws nothing).
template <class F>
std::string value_error(F&& f) {
  try {
    f();
  } catch (const ValueError& e) {
    return e.what();
  }
  return "";
}

}  // namespace attnsel::testing_support
