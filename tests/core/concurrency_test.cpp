// Registering and selecting from several threads at once (run under ThreadSanitizer by
// scripts/test.sh). The rule under test: registry and Selector may be used concurrently,
// and after the last registration returns, every selection sees it.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "attnsel/selector.hpp"

namespace attnsel {
namespace {

class NamedBackend : public AttentionBackend {
 public:
  explicit NamedBackend(int version) : version_(version) {}
  std::string get_name() const override { return "FLASH_ATTN"; }
  std::string qualname() const override { return "tests::Fa" + std::to_string(version_); }

 private:
  int version_;
};

TEST(ConcurrencyTest, RegisterAndSelectFromManyThreads) {
  reset_registry_for_testing();
  register_class(std::make_shared<NamedBackend>(0));
  register_backend(AttentionBackendEnum["FLASH_ATTN"], "tests::Fa0");
  Selector selector(make_platform("cuda:9.0"));
  EngineConfig engine;
  engine.attention.set_backend("FLASH_ATTN");

  constexpr int kVersions = 40;
  std::atomic<int> selections{0};
  std::atomic<bool> failed{false};
  std::vector<std::thread> threads;
  threads.emplace_back([&] {
    for (int v = 1; v <= kVersions; ++v) {
      register_class(std::make_shared<NamedBackend>(v));
      register_backend(AttentionBackendEnum["FLASH_ATTN"], "tests::Fa" + std::to_string(v));
      (void)register_backend("DYN_" + std::to_string(v), "tests::Fa" + std::to_string(v));
    }
  });
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        LayerRequest layer;
        layer.head_size = 64 + 8 * ((i + t) % 4);
        try {
          auto cls = selector.get_attn_backend(engine, layer);
          if (!cls || !cls->qualname().starts_with("tests::Fa")) failed = true;
          (void)AttentionBackendEnum.members();
          ++selections;
        } catch (const std::exception&) {
          failed = true;
        }
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_FALSE(failed.load());
  EXPECT_EQ(selections.load(), 900);
  LayerRequest layer;
  layer.head_size = 64;
  EXPECT_EQ(selector.get_attn_backend(engine, layer)->qualname(), "tests::Fa" + std::to_string(kVersions));
  EXPECT_EQ(AttentionBackendEnum["DYN_40"].get_path(), "tests::Fa40");
  reset_registry_for_testing();
}

}  // namespace
}  // namespace attnsel
