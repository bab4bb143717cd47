// A program that uses attnsel only through its public headers and library, built by the
// consumer projects beside this file (find_package, add_subdirectory, pkg-config; see
// scripts/check-install.sh). It exercises what crosses the library boundary: functions,
// classes with virtual methods subclassed here, exceptions caught by type, and plugins.
//
//   consumer [PLUGIN]   exit status 0 when every check passed
#include <attnsel/errors.hpp>
#include <attnsel/platform.hpp>
#include <attnsel/plugin_loader.hpp>
#include <attnsel/registry.hpp>
#include <attnsel/selector.hpp>
#include <attnsel/version.h>

#include <cstdio>
#include <string>

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

// A backend defined outside the library: the library calls its virtual methods and
// returns it from a selection.
class ConsumerBackend : public attnsel::AttentionBackend {
 public:
  std::string get_name() const override { return "CONSUMER_ATTN"; }
  std::string qualname() const override { return "consumer::ConsumerBackend"; }
  std::vector<int> get_supported_head_sizes(const attnsel::RuntimeEnv&) const override { return {128}; }
};

}  // namespace

int main(int argc, char** argv) {
  using namespace attnsel;
  register_builtin_backends();
  check(std::string(ATTNSEL_VERSION_STRING).size() > 0, std::string("version ") + ATTNSEL_VERSION_STRING);
  check(AttentionBackendEnum["FLASH_ATTN"].get_path() == "attnsel::backends::FlashAttentionBackend",
        "enum members and their class paths");

  try {
    (void)AttentionBackendEnum["NO_SUCH_BACKEND"];
    check(false, "ValueError for an unknown backend");
  } catch (const ValueError& e) {
    check(std::string(e.what()).find("Unknown attention backend: 'NO_SUCH_BACKEND'") == 0,
          "ValueError caught by type across the library boundary");
  }
  try {
    (void)resolve_class("libattnsel_no_such_plugin.so:attnsel_plugin_init");
    check(false, "ImportError for a missing plugin");
  } catch (const ImportError& e) {
    check(std::string(e.what()).find("cannot find plugin library") == 0, "ImportError caught by type");
  }

  auto platform = make_platform("cuda:9.0");
  AttentionSelectorConfig config;
  config.head_size = 128;
  config.dtype = DType::bfloat16;
  const Selection chosen = platform->get_attn_backend_cls(std::nullopt, config, 32);
  check(chosen.backend == "FLASH_ATTN", "automatic selection on cuda:9.0 chooses " + chosen.backend);

  register_backend_class<ConsumerBackend>("CONSUMER_ATTN");
  EngineConfig engine;
  engine.attention.set_backend("consumer_attn");
  LayerRequest layer;
  layer.head_size = 128;
  Selector selector(platform);
  check(selector.get_attn_backend(engine, layer)->qualname() == "consumer::ConsumerBackend",
        "a backend class defined by the consumer is selected explicitly");
  layer.head_size = 64;
  try {
    (void)selector.select(engine, layer);
    check(false, "explicit choice with an unsupported head size fails");
  } catch (const SelectionError& e) {
    check(std::string(e.what()).find("head_size not supported") != std::string::npos,
          "SelectionError with the consumer backend's reason");
  }

  if (argc > 1) {
    const PluginInfo plugin = load_plugin(argv[1]);
    check(!plugin.backends.empty(), "plugin " + plugin.name + " loaded from " + plugin.library);
    register_backend(AttentionBackendEnum["CUSTOM"], plugin.backends.front().qualname);
    check(AttentionBackendEnum["CUSTOM"].get_class()->get_name() == plugin.backends.front().name,
          "CUSTOM resolves to the plugin's backend " + plugin.backends.front().name);
  }
  std::printf("%s\n", failures == 0 ? "consumer: all checks passed" : "consumer: FAILED");
  return failures == 0 ? 0 : 1;
}
