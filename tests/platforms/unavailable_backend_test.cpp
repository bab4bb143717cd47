// A backend whose class cannot be loaded: vLLM catches (ImportError, OSError) around
// get_class, logs "Attention backend %s is unavailable" at debug level and records
// "<type>: <message>" as the candidate's reason (an explicit choice fails with it).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "attnsel/registry.hpp"
#include "platforms/selection_fixture.hpp"

namespace attnsel {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using testing_support::SelectionTest;

constexpr const char* kBroken = "tests::BrokenSharedLibrary";
constexpr const char* kLoadError = "libbroken.so: cannot open shared object file: No such file or directory";

class UnavailableBackendTest : public SelectionTest {
 protected:
  void SetUp() override {
    SelectionTest::SetUp();
    // Resolvers outlive a registry reset; this one answers only its own name.
    static const bool added = [] {
      add_class_resolver([](std::string_view name) -> std::shared_ptr<const BackendClass> {
        if (name == kBroken) throw OSError(kLoadError);
        return nullptr;
      });
      return true;
    }();
    (void)added;
    register_backend(AttentionBackendEnum["FLASH_ATTN"], kBroken);
  }
};

TEST_F(UnavailableBackendTest, OSErrorMakesTheCandidateInvalidAndIsLogged) {
  const auto s = select("cuda:9.0", EngineConfig{}, layer(128));
  EXPECT_EQ(s->backend, "FLASHINFER");
  ASSERT_FALSE(s->candidates.empty());
  EXPECT_EQ(s->candidates[0].backend, "FLASH_ATTN");
  EXPECT_FALSE(s->candidates[0].valid);
  EXPECT_THAT(s->candidates[0].reasons, ElementsAre(std::string("OSError: ") + kLoadError));
  std::vector<std::string> debug;
  for (const LogLine& l : s->logs)
    if (l.level == LogLine::Level::debug) debug.push_back(l.text);
  EXPECT_THAT(debug, Contains("Attention backend FLASH_ATTN is unavailable"));
}

TEST_F(UnavailableBackendTest, AnExplicitChoiceFailsWithTheOSError) {
  EXPECT_EQ(error_of("cuda:9.0", engine_with_backend("FLASH_ATTN"), layer(128)),
            std::string("Selected backend FLASH_ATTN is not valid for this configuration. Reason: [OSError: ") +
                kLoadError + "]");
}

}  // namespace
}  // namespace attnsel
