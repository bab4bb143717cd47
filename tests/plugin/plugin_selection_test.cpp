// Plugin backends in selections: an overridden built-in is what the priority walk
// validates and returns, and a plugin that cannot load is a reason, never a crash.
#include "attnsel/platform.hpp"
#include "attnsel/plugin_loader.hpp"
#include "attnsel/selector.hpp"
#include "plugin_test_support.hpp"

namespace attnsel::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

AttentionSelectorConfig config(int head_size) {
  AttentionSelectorConfig c;
  c.head_size = head_size;
  c.dtype = DType::bfloat16;
  return c;
}

const Candidate& candidate(const Selection& s, std::string_view name) {
  for (const Candidate& c : s.candidates)
    if (c.backend == name) return c;
  throw std::runtime_error("no candidate " + std::string(name));
}

using PluginSelection = PluginTest;

TEST_F(PluginSelection, OverriddenBuiltinIsWhatThePriorityWalkValidatesAndReturns) {
  register_backend(AttentionBackendEnum["FLASH_ATTN"], qualified(kPluginC, "attnsel_plugin_init"));
  auto h100 = make_platform("cuda:9.0", {}, SelectionMode::reference);
  const Selection s = h100->get_attn_backend_cls(std::nullopt, config(128), 32);
  EXPECT_EQ(s.backend, "FLASH_ATTN");
  EXPECT_EQ(s.backend_class->get_name(), "C_BASIC");
  EXPECT_EQ(s.class_path, file_name(kPluginC) + ":attnsel_plugin_init");
  EXPECT_EQ(s.priority, 0);
  // The plugin's capabilities decide: head size 96 is not among them, so the walk moves on.
  const Selection other = h100->get_attn_backend_cls(std::nullopt, config(96), 32);
  EXPECT_NE(other.backend, "FLASH_ATTN");
  EXPECT_THAT(candidate(other, "FLASH_ATTN").reasons, ElementsAre("head_size not supported"));
}

TEST_F(PluginSelection, PluginThatCannotLoadIsAReasonInTheWalk) {
  register_backend(AttentionBackendEnum["FLASH_ATTN"], qualified(kPluginC, "init_major_mismatch"));
  auto h100 = make_platform("cuda:9.0", {}, SelectionMode::reference);
  const Selection s = h100->get_attn_backend_cls(std::nullopt, config(128), 32);
  EXPECT_EQ(s.backend, "FLASHINFER");
  const Candidate& fa = candidate(s, "FLASH_ATTN");
  ASSERT_EQ(fa.reasons.size(), 1u);
  EXPECT_THAT(fa.reasons[0], HasSubstr("ImportError: cannot load plugin"));
  EXPECT_THAT(fa.reasons[0], HasSubstr("built for plugin ABI 2.0, but this attnsel provides plugin ABI 1.0"));
}

TEST_F(PluginSelection, ScoreZeroIsAReasonInTheWalk) {
  register_backend(AttentionBackendEnum["FLASH_ATTN"], qualified(kPluginC, "init_score_zero"));
  auto h100 = make_platform("cuda:9.0", {}, SelectionMode::reference);
  const Selection s = h100->get_attn_backend_cls(std::nullopt, config(128), 32);
  EXPECT_EQ(s.backend, "FLASHINFER");
  EXPECT_THAT(candidate(s, "FLASH_ATTN").reasons,
              ElementsAre(HasSubstr("ImportError: C_UNAVAILABLE (plugin backend " + file_name(kPluginC) +
                                    ":init_score_zero) cannot run on this machine: needs AVX-1024")));
}

TEST_F(PluginSelection, ExplicitChoiceOfAPluginThatCannotLoadIsAnErrorWithTheImportError) {
  register_backend(AttentionBackendEnum["CUSTOM"], "/nonexistent/libgone.so:attnsel_plugin_init");
  auto h100 = make_platform("cuda:9.0", {}, SelectionMode::reference);
  try {
    (void)h100->get_attn_backend_cls(AttentionBackendEnum["CUSTOM"], config(128), 32);
    FAIL() << "expected SelectionError";
  } catch (const SelectionError& e) {
    EXPECT_EQ(std::string(e.what()),
              "Selected backend CUSTOM is not valid for this configuration. Reason: [ImportError: plugin library "
              "'/nonexistent/libgone.so' does not exist]");
  }
}

TEST_F(PluginSelection, ExplicitChoiceOfANewPluginMember) {
  (void)load_plugin(kPluginC, "init_register_as");
  auto h100 = make_platform("cuda:9.0", {}, SelectionMode::reference);
  const Selection s = h100->get_attn_backend_cls(AttentionBackendEnum["C_REG_NEW"], config(256), 8);
  EXPECT_TRUE(s.explicit_choice);
  EXPECT_EQ(s.backend, "C_REG_NEW");
  EXPECT_EQ(s.backend_class->get_name(), "C_REG");
}

TEST_F(PluginSelection, CpuAttnOverrideWithoutKernelIsRejectedWhenRunnable) {
  (void)load_plugin(kPluginC, "init_register_as");  // registers as CPU_ATTN too
  auto reference = make_platform("cpu", {}, SelectionMode::reference);
  EXPECT_EQ(reference->get_attn_backend_cls(std::nullopt, config(128), 8).backend_class->get_name(), "C_REG");
  auto runnable = make_platform("cpu", {}, SelectionMode::runnable);
  try {
    (void)runnable->get_attn_backend_cls(std::nullopt, config(128), 8);
    FAIL() << "expected SelectionError";
  } catch (const SelectionError& e) {
    EXPECT_THAT(e.what(), HasSubstr("CPU_ATTN: [ImportError: C_REG (plugin backend " + file_name(kPluginC) +
                                    ":init_register_as) declares no kernel entry points]"));
  }
}

TEST_F(PluginSelection, LoadingAPluginInvalidatesCachedSelections) {
  Selector selector(make_platform("cpu", {}, SelectionMode::reference));
  EngineConfig engine;
  LayerRequest layer;
  layer.head_size = 128;
  const std::string builtin = selector.get_attn_backend(engine, layer)->get_name();
  EXPECT_EQ(builtin, "CPU_ATTN");
  (void)load_plugin(kPluginC, "init_register_as");
  EXPECT_EQ(selector.get_attn_backend(engine, layer)->get_name(), "C_REG");
}

}  // namespace
}  // namespace attnsel::testing
