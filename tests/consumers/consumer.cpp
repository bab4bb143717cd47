// A program that uses attnsel only through its public headers and library, built by the
// consumer projects beside this file (find_package, add_subdirectory, pkg-config; see
// scripts/check-install.sh). It exercises what crosses the library boundary: functions,
// classes with virtual methods subclassed here, exceptions caught by type, and plugins.
//
//   consumer [PLUGIN]   exit status 0 when every check passed
#include <attnsel/errors.hpp>
#include <attnsel/kernel.hpp>
#include <attnsel/platform.hpp>
#include <attnsel/plugin_loader.hpp>
#include <attnsel/registry.hpp>
#include <attnsel/selector.hpp>
#include <attnsel/version.h>

#include <cmath>
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
  attnsel::BackendCapabilities capabilities(const attnsel::RuntimeEnv&) const override {
    attnsel::BackendCapabilities c;
    c.head_sizes = {128};
    return c;
  }
};

// One prefill of 3 tokens (2 query heads sharing 1 KV head, head size 32) through a
// backend's kernel: its cache writer, then its forward. Returns the output.
std::vector<float> run_kernel(const attnsel::AttentionBackend& backend) {
  using namespace attnsel::kernel;
  constexpr int kTokens = 3, kHeads = 2, kKvHeads = 1, kDim = 32, kBlock = 16, kBlocks = 2;
  std::vector<float> q(kTokens * kHeads * kDim), k(kTokens * kKvHeads * kDim), v(k.size()), out(q.size());
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.37f * static_cast<float>(i));
  for (std::size_t i = 0; i < k.size(); ++i) {
    k[i] = std::cos(0.23f * static_cast<float>(i));
    v[i] = std::sin(0.11f * static_cast<float>(i) + 1.0f);
  }
  std::vector<float> key_cache(kBlocks * kBlock * kKvHeads * kDim), value_cache(key_cache.size());
  const std::vector<std::int32_t> query_start_loc{0, kTokens}, seq_lens{kTokens}, block_table{1};
  const std::vector<std::int64_t> slots{kBlock, kBlock + 1, kBlock + 2};  // block 1
  AttentionMetadata md;
  md.num_seqs = 1;
  md.num_actual_tokens = kTokens;
  md.query_start_loc = query_start_loc;
  md.seq_lens = seq_lens;
  md.block_table = block_table;
  md.max_blocks_per_seq = 1;
  md.slot_mapping = slots;
  md.max_query_len = kTokens;
  md.max_seq_len = kTokens;
  LayerParams p;
  p.num_heads = kHeads;
  p.num_kv_heads = kKvHeads;
  p.head_size = kDim;
  p.scale = 1.0f / std::sqrt(static_cast<float>(kDim));
  KVCacheView cache{TensorView::contiguous(key_cache.data(), ScalarType::f32, {kBlocks, kBlock, kKvHeads, kDim}),
                    TensorView::contiguous(value_cache.data(), ScalarType::f32, {kBlocks, kBlock, kKvHeads, kDim})};
  auto impl = backend.make_impl(p);
  impl->write_kv_cache(TensorView::contiguous(k.data(), ScalarType::f32, {kTokens, kKvHeads, kDim}),
                       TensorView::contiguous(v.data(), ScalarType::f32, {kTokens, kKvHeads, kDim}), cache, md);
  impl->forward(TensorView::contiguous(q.data(), ScalarType::f32, {kTokens, kHeads, kDim}), cache, md,
                TensorView::contiguous(out.data(), ScalarType::f32, {kTokens, kHeads, kDim}));
  return out;
}

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
    // The built-in CPU kernel and the plugin's kernel compute the same attention.
    const std::vector<float> builtin = run_kernel(*AttentionBackendEnum["CPU_ATTN"].get_attention_class());
    const std::vector<float> theirs = run_kernel(*AttentionBackendEnum["CUSTOM"].get_attention_class());
    double worst = 0.0, magnitude = 0.0;
    for (std::size_t i = 0; i < builtin.size(); ++i) {
      worst = std::max(worst, std::fabs(double(builtin[i]) - theirs[i]));
      magnitude = std::max(magnitude, std::fabs(double(builtin[i])));
    }
    char text[160];
    std::snprintf(text, sizeof text, "the plugin's kernel agrees with CPU_ATTN's (outputs up to %.3g, max difference %.3g)",
                  magnitude, worst);
    check(magnitude > 0.1 && worst < 1e-4, text);
  }
  std::printf("%s\n", failures == 0 ? "consumer: all checks passed" : "consumer: FAILED");
  return failures == 0 ? 0 : 1;
}
