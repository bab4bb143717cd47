// A platform makes each backend class's capability record once and reuses it, with the
// same reasons validate_configuration gives; a registration drops the records, and a class
// registered in place of another gets its own.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "attnsel/platform.hpp"
#include "attnsel/registry.hpp"
#include "backends/test_env.hpp"

namespace attnsel::testing {
namespace {

class CountingBackend : public AttentionBackend {
 public:
  explicit CountingBackend(std::vector<int> head_sizes) : head_sizes_(std::move(head_sizes)) {}
  std::string get_name() const override { return "COUNTING"; }
  std::string qualname() const override { return "attnsel::testing::CountingBackend"; }
  BackendCapabilities capabilities(const RuntimeEnv&) const override {
    calls.fetch_add(1);
    BackendCapabilities c;
    c.head_sizes = head_sizes_;
    return c;
  }
  mutable std::atomic<int> calls{0};

 private:
  std::vector<int> head_sizes_;
};

class RecordCache : public ::testing::Test {
 protected:
  void SetUp() override { reset_registry_for_testing(); }
  void TearDown() override { reset_registry_for_testing(); }
  static std::shared_ptr<const CountingBackend> install(std::vector<int> head_sizes) {
    auto cls = std::make_shared<const CountingBackend>(std::move(head_sizes));
    register_class(cls);
    register_backend(AttentionBackendEnum["CUSTOM"], cls->qualname());
    return cls;
  }
};

TEST_F(RecordCache, EachClassRecordIsMadeOncePerPlatformAndGivesValidationsReasons) {
  const auto cls = install({64, 128});
  const auto platform = make_platform("cuda:9.0");
  const BackendMember custom = AttentionBackendEnum["CUSTOM"];
  for (int head_size : {128, 72, 128, 72}) {
    const Platform::Checked checked = platform->check_backend(custom, decoder_config(head_size));
    EXPECT_EQ(checked.cls, cls);
    EXPECT_EQ(checked.reasons, cls->validate_configuration(decoder_config(head_size), platform->env()));
  }
  EXPECT_THAT(platform->check_backend(custom, decoder_config(72)).reasons, ::testing::ElementsAre("head_size not supported"));
  // One record for the platform's four checks; validate_configuration made its own each time.
  EXPECT_EQ(cls->calls.load(), 1 + 4);
  const auto other = make_platform("cuda:9.0");
  (void)other->check_backend(custom, decoder_config());
  EXPECT_EQ(cls->calls.load(), 1 + 4 + 1);  // records belong to one platform
}

TEST_F(RecordCache, ARegistrationDropsTheRecordsAndAReplacementClassGetsItsOwn) {
  const auto first = install({128});
  const auto platform = make_platform("cuda:9.0");
  const BackendMember custom = AttentionBackendEnum["CUSTOM"];
  EXPECT_TRUE(platform->check_backend(custom, decoder_config(128)).reasons.empty());
  const auto second = install({64});  // the same name, another class
  const Platform::Checked checked = platform->check_backend(custom, decoder_config(128));
  EXPECT_EQ(checked.cls, second);
  EXPECT_THAT(checked.reasons, ::testing::ElementsAre("head_size not supported"));
  (void)platform->check_backend(custom, decoder_config(128));
  EXPECT_EQ(first->calls.load(), 1);
  EXPECT_EQ(second->calls.load(), 1);
}

// Run under ThreadSanitizer by scripts/test.sh (the tsan preset selects "Concurrency").
TEST(RecordCacheConcurrency, ManyThreadsCheckingOnePlatformAgree) {
  reset_registry_for_testing();
  const auto platform = make_platform("cuda:9.0");
  constexpr int kThreads = 8;
  std::vector<std::vector<std::string>> got(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      for (const char* name : {"FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION"})
        for (const std::string& r : platform->check_backend(AttentionBackendEnum[name], decoder_config(72)).reasons)
          got[static_cast<std::size_t>(i)].push_back(r);
    });
  for (std::thread& t : threads) t.join();
  for (const auto& g : got) EXPECT_EQ(g, got[0]);
  EXPECT_FALSE(got[0].empty());
}

}  // namespace
}  // namespace attnsel::testing
