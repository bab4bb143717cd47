// Shared by the plugin tests: a fixture that starts and ends every test with a clean
// registry and loader, and the paths of the test plugins.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>

#include "attnsel/errors.hpp"
#include "attnsel/registry.hpp"
#include "plugin/loader.hpp"

namespace attnsel::testing {

inline const std::string kPluginC = ATTNSEL_TEST_PLUGIN_C;
inline const std::string kPluginCpp = ATTNSEL_TEST_PLUGIN_CPP;
inline const std::string kPluginUndefined = ATTNSEL_TEST_PLUGIN_UNDEFINED;
inline const std::string kNotALibrary = ATTNSEL_TEST_NOT_A_LIBRARY;

/// "<path>:<symbol>"
inline std::string qualified(const std::string& path, const std::string& symbol) { return path + ":" + symbol; }

/// The file name of a path ("libattnsel_test_plugin_c.so").
inline std::string file_name(const std::string& path) { return std::filesystem::path(path).filename().string(); }

/// The C test plugin's init whose backend registers as CPU_ATTN (among others), and the
/// class path that backend then has.
inline const std::string kRegisterAs = qualified(kPluginC, "init_register_as");
inline const std::string kRegisterAsClass = file_name(kPluginC) + ":init_register_as";

class PluginTest : public ::testing::Test {
 protected:
  void SetUp() override { clean(); }
  void TearDown() override { clean(); }
  static void clean() {
    ::unsetenv("ATTNSEL_PLUGIN_PATH");
    ::unsetenv("ATTNSEL_PLUGINS");
    plugin::reset_plugins_for_testing();
    reset_registry_for_testing();
  }
};

/// Runs `f`, expects an ImportError, returns its message.
inline std::string import_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ImportError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected ImportError, got another exception: " << e.what();
    return {};
  }
  ADD_FAILURE() << "expected ImportError, nothing was thrown";
  return {};
}

}  // namespace attnsel::testing
