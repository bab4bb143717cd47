// Shared helpers for selection tests: a fresh registry per test and one-line selections
// on a simulated platform.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "attnsel/errors.hpp"
#include "attnsel/selector.hpp"

namespace attnsel::testing_support {

class SelectionTest : public ::testing::Test {
 protected:
  void SetUp() override { reset_registry_for_testing(); }
  void TearDown() override { reset_registry_for_testing(); }

  static LayerRequest layer(int head_size, DType dtype = DType::bfloat16) {
    LayerRequest l;
    l.head_size = head_size;
    l.dtype = dtype;
    return l;
  }
  static EngineConfig engine_with_backend(std::string_view name) {
    EngineConfig e;
    e.attention.set_backend(name);
    return e;
  }
  static std::shared_ptr<const Selection> select(std::string_view platform, const EngineConfig& engine,
                                                 const LayerRequest& l, const std::vector<std::string>& facts = {},
                                                 std::optional<SelectionMode> mode = std::nullopt) {
    Selector selector(make_platform(platform, facts, mode));
    return selector.select(engine, l);
  }
  /// The chosen backend's name (the class's get_name()), or the error text prefixed "error: ".
  static std::string pick(std::string_view platform, const EngineConfig& engine, const LayerRequest& l,
                          const std::vector<std::string>& facts = {}) {
    try {
      return select(platform, engine, l, facts)->backend_class->get_name();
    } catch (const Error& e) {
      return std::string("error: ") + e.what();
    }
  }
  /// The error's message, or "no error: chose X".
  static std::string error_of(std::string_view platform, const EngineConfig& engine, const LayerRequest& l,
                              const std::vector<std::string>& facts = {}) {
    try {
      return "no error: chose " + select(platform, engine, l, facts)->backend;
    } catch (const Error& e) {
      return e.what();
    }
  }
};

}  // namespace attnsel::testing_support
