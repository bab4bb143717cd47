// Test plugin written with the C++ helper (attnsel/plugin_helper.hpp): backends as
// classes, exceptions turned into messages at the boundary.
#include <cstdlib>
#include <stdexcept>

#include "attnsel/plugin_helper.hpp"

namespace {

using attnsel::plugin_sdk::Capabilities;

class HelperBackend : public attnsel::plugin_sdk::Backend {
 public:
  Capabilities capabilities() const override {
    Capabilities c;
    c.name = "HELPER_ATTN";
    c.dtypes = {ATTNSEL_DTYPE_BFLOAT16, ATTNSEL_DTYPE_FLOAT32};
    c.kv_cache_dtypes = {"auto", "bfloat16", "fp8"};
    c.block_sizes = {{16, 1}, {24, 0}};
    c.head_sizes = {80, 128};
    c.features |= ATTNSEL_FEATURE_SINK | ATTNSEL_FEATURE_BATCH_INVARIANT;
    c.attn_types |= ATTNSEL_ATTN_TYPE_BIT(ATTNSEL_ATTN_TYPE_ENCODER);
    return c;
  }
  std::optional<std::string> check_combination(const attnsel_combination& args) const override {
    if (args.kv_cache_dtype != nullptr && std::string_view(args.kv_cache_dtype) == "fp8" && args.has_sink)
      return "fp8 KV cache with attention sinks is not implemented by HELPER_ATTN";
    if (args.head_size == 80) throw std::runtime_error("check_combination exploded on head size 80");
    return std::nullopt;
  }
};

// A backend for a device this machine lacks.
class NeedsDeviceBackend : public attnsel::plugin_sdk::Backend {
 public:
  Capabilities capabilities() const override {
    Capabilities c;
    c.name = "HELPER_NEEDS_DEVICE";
    c.register_as = {"HELPER_NEEDS_DEVICE"};
    return c;
  }
  std::uint32_t score(std::string& reason) const override {
    reason = "needs a FancyAccelerator device (none found)";
    return 0;
  }
};

// Its capabilities() throws: the helper must report that as the init's error.
class BrokenBackend : public attnsel::plugin_sdk::Backend {
 public:
  Capabilities capabilities() const override { throw std::runtime_error("cannot read the device tables"); }
};

}  // namespace

ATTNSEL_PLUGIN_ENTRY(attnsel_plugin_init, "cpp-helper", "0.9", HelperBackend, NeedsDeviceBackend)
ATTNSEL_PLUGIN_ENTRY(init_broken, "cpp-broken", "0.9", BrokenBackend)

// An init that lets an exception escape despite the ABI's rule: the host survives it.
extern "C" ATTNSEL_PLUGIN_EXPORT const attnsel_plugin* init_throws(const attnsel_host*) {
  throw std::runtime_error("escaped from init");
}
