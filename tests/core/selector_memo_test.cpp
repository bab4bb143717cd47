// The selector's per-thread memo (the lock-free front of its cache): it must never answer
// for another selector, after clear(), or across a registration, on any thread.
#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <thread>

#include "attnsel/selector.hpp"

namespace attnsel {
namespace {

class MemoBackend : public AttentionBackend {
 public:
  explicit MemoBackend(int version) : version_(version) {}
  std::string get_name() const override { return "FLASH_ATTN"; }
  std::string qualname() const override { return "tests::MemoFa" + std::to_string(version_); }

 private:
  int version_;
};

class SelectorMemoTest : public ::testing::Test {
 protected:
  void SetUp() override { reset_registry_for_testing(); }
  void TearDown() override { reset_registry_for_testing(); }
  static LayerRequest layer(int head_size = 128) {
    LayerRequest l;
    l.head_size = head_size;
    return l;
  }
};

TEST_F(SelectorMemoTest, ClearForcesAFreshSelectionOnThisThread) {
  Selector selector(make_platform("cuda:9.0"));
  const EngineConfig engine;
  const auto first = selector.select(engine, layer());
  EXPECT_EQ(selector.select(engine, layer()), first);  // memo hit: the same object
  selector.clear();
  const auto after = selector.select(engine, layer());
  EXPECT_NE(after, first);
  EXPECT_EQ(after->backend, "FLASH_ATTN");
}

TEST_F(SelectorMemoTest, ClearOnOneThreadInvalidatesAnotherThreadsMemo) {
  Selector selector(make_platform("cuda:9.0"));
  const EngineConfig engine;
  std::shared_ptr<const Selection> before, again, after;
  std::thread([&] {
    before = selector.select(engine, layer());
    again = selector.select(engine, layer());
  }).join();
  EXPECT_EQ(before, again);
  selector.clear();
  std::thread([&] { after = selector.select(engine, layer()); }).join();  // a new thread: empty memo
  EXPECT_NE(after, before);
  // The same thread's memo must also notice: run both on one long-lived thread.
  std::atomic<int> phase{0};
  std::shared_ptr<const Selection> t_before, t_after;
  std::thread worker([&] {
    t_before = selector.select(engine, layer());
    phase = 1;
    while (phase.load() != 2) std::this_thread::yield();
    t_after = selector.select(engine, layer());
  });
  while (phase.load() != 1) std::this_thread::yield();
  selector.clear();
  phase = 2;
  worker.join();
  EXPECT_NE(t_after, t_before);
}

TEST_F(SelectorMemoTest, TwoSelectorsOnOneThreadNeverShareEntries) {
  Selector hopper(make_platform("cuda:9.0"));
  Selector blackwell(make_platform("cuda:10.0"));
  const EngineConfig engine;
  for (int i = 0; i < 50; ++i) {
    ASSERT_EQ(hopper.select(engine, layer())->backend, "FLASH_ATTN");
    ASSERT_EQ(blackwell.select(engine, layer())->backend, "FLASHINFER");
  }
}

TEST_F(SelectorMemoTest, ASelectorBuiltWhereAnotherDiedDoesNotInheritItsEntries) {
  const EngineConfig engine;
  std::optional<Selector> selector;
  selector.emplace(make_platform("cuda:9.0"));
  EXPECT_EQ(selector->get_attn_backend(engine, layer())->get_name(), "FLASH_ATTN");
  selector.reset();
  selector.emplace(make_platform("cuda:10.0"));  // same storage, same `this`
  EXPECT_EQ(selector->get_attn_backend(engine, layer())->get_name(), "FLASHINFER");
}

TEST_F(SelectorMemoTest, RegistrationInvalidatesTheMemo) {
  register_class(std::make_shared<MemoBackend>(1));
  register_backend(AttentionBackendEnum["FLASH_ATTN"], "tests::MemoFa1");
  Selector selector(make_platform("cuda:9.0"));
  const EngineConfig engine;
  EXPECT_EQ(selector.get_attn_backend(engine, layer())->qualname(), "tests::MemoFa1");
  EXPECT_EQ(selector.get_attn_backend(engine, layer())->qualname(), "tests::MemoFa1");
  register_class(std::make_shared<MemoBackend>(2));
  register_backend(AttentionBackendEnum["FLASH_ATTN"], "tests::MemoFa2");
  EXPECT_EQ(selector.get_attn_backend(engine, layer())->qualname(), "tests::MemoFa2");
}

TEST_F(SelectorMemoTest, EveryKeyFieldSeparatesEntries) {
  Selector selector(make_platform("cuda:10.0"));
  EngineConfig engine;
  const auto base = selector.select(engine, layer());
  LayerRequest heads = layer();
  heads.num_heads = 8;
  EXPECT_NE(selector.select(engine, heads), base);
  EngineConfig explicit_fa = engine;
  explicit_fa.attention.set_backend("FLASH_ATTN");
  EXPECT_EQ(selector.select(explicit_fa, layer())->backend, "FLASH_ATTN");
  EngineConfig run_dtype = engine;
  run_dtype.cache.cache_dtype = CacheDType::fp8;
  EXPECT_NE(selector.select(run_dtype, layer()), base);
  LayerRequest other_head = layer(64);
  EXPECT_EQ(selector.select(engine, other_head)->backend, "FLASHINFER");
  EXPECT_NE(selector.select(engine, other_head), base);
  EXPECT_EQ(selector.select(engine, layer()), base);  // and the first is still memoised
}

// Threads select, clear and register at once; every answer must name a registered class
// and, once the writers stop, the last registration (run under ThreadSanitizer).
TEST(ConcurrencyTest, SelectorMemoUnderConcurrentClearAndRegistration) {
  reset_registry_for_testing();
  register_class(std::make_shared<MemoBackend>(0));
  register_backend(AttentionBackendEnum["FLASH_ATTN"], "tests::MemoFa0");
  Selector selector(make_platform("cuda:9.0"));
  EngineConfig engine;
  engine.attention.set_backend("FLASH_ATTN");
  constexpr int kVersions = 30;
  std::atomic<bool> failed{false};
  std::vector<std::thread> threads;
  threads.emplace_back([&] {
    for (int v = 1; v <= kVersions; ++v) {
      register_class(std::make_shared<MemoBackend>(v));
      register_backend(AttentionBackendEnum["FLASH_ATTN"], "tests::MemoFa" + std::to_string(v));
      selector.clear();
    }
  });
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 400; ++i) {
        LayerRequest l;
        l.head_size = 64 + 8 * ((i + t) % 3);
        try {
          const auto cls = selector.get_attn_backend(engine, l);
          if (!cls || !cls->qualname().starts_with("tests::MemoFa")) failed = true;
        } catch (const std::exception&) {
          failed = true;
        }
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_FALSE(failed.load());
  LayerRequest l;
  l.head_size = 64;
  EXPECT_EQ(selector.get_attn_backend(engine, l)->qualname(), "tests::MemoFa" + std::to_string(kVersions));
  reset_registry_for_testing();
}

}  // namespace
}  // namespace attnsel
