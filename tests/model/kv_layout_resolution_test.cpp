// KV-cache layout resolution (vllm/v1/attention/backends/utils.py) and vLLM's select_common_block_size, with backends
// that declare what each case needs — as vLLM's own tests do. Cases named "Vllm..." follow
// vLLM's tests (test_backend_per_kind.py, the layout resolver's tests).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "attnsel/errors.hpp"
#include "attnsel/kv_layout_resolution.hpp"
#include "attnsel/plan.hpp"
#include "model_test_support.hpp"

namespace attnsel {
namespace {

using ::testing::ElementsAre;
using testing_support::value_error;
using L = KVCacheLayout;

class DeclaringBackend : public AttentionBackend {
 public:
  DeclaringBackend(std::optional<std::vector<KVCacheLayout>> layouts, std::vector<KernelBlockSize> sizes = {MultipleOf{1}})
      : layouts_(std::move(layouts)), sizes_(std::move(sizes)) {}
  std::string get_name() const override { return "TEST"; }
  std::string qualname() const override { return "tests::DeclaringBackend"; }
  BackendCapabilities capabilities(const RuntimeEnv&) const override {
    BackendCapabilities c;
    c.kv_cache_layouts = layouts_;
    c.kernel_block_sizes = sizes_;
    return c;
  }

 private:
  std::optional<std::vector<KVCacheLayout>> layouts_;
  std::vector<KernelBlockSize> sizes_;
};

std::vector<KVCacheLayout> supported(std::vector<const AttentionBackend*> backends) {
  return get_supported_kv_cache_layouts(backends, RuntimeEnv{});
}

const std::vector<KVCacheShape> kUniform = {{8, 2, 4096}, {8, 2, 4096}};
const std::vector<KVCacheShape> kMixed = {{1, 1, 4096}, {8, 2, 4096}};

// --- get_supported_kv_cache_layouts: per worker -------------------------------------

TEST(KvLayoutSupported, VllmDefaultPreferenceWhenNothingDeclares) {
  const DeclaringBackend none(std::nullopt);
  EXPECT_THAT(supported({}), ElementsAre(L::LBNHC, L::LBHNC, L::BLNHC, L::BLHNC, L::BHLNC, L::LHBNC));
  EXPECT_EQ(supported({&none})[0], L::LBNHC);
}

TEST(KvLayoutSupported, IdenticalDeclarationsKeepTheirOrderAndUndeclaredTakeNoPart) {
  const DeclaringBackend a({{L::BLHNC, L::LBHNC}}), b({{L::BLHNC, L::LBHNC}}), none(std::nullopt);
  EXPECT_THAT(supported({&a, &none, &b}), ElementsAre(L::BLHNC, L::LBHNC));
}

TEST(KvLayoutSupported, IntersectionOrderedByFirstChoicesThenEnumOrder) {
  // BLNHC and BLHNC are in both; each is one backend's first choice: enum order decides.
  const DeclaringBackend a({{L::BLNHC, L::LBNHC, L::BLHNC}}), b({{L::BLHNC, L::BLNHC}});
  EXPECT_THAT(supported({&a, &b}), ElementsAre(L::BLHNC, L::BLNHC));
  // Two backends put BLNHC first: it wins.
  const DeclaringBackend c({{L::BLNHC, L::BLHNC}});
  EXPECT_THAT(supported({&a, &b, &c}), ElementsAre(L::BLNHC, L::BLHNC));
}

TEST(KvLayoutSupported, DisjointDeclarationsFail) {
  const DeclaringBackend a({{L::LBNHC}}), b({{L::BLHNC}});
  EXPECT_EQ(value_error([&] { supported({&a, &b}); }),
            "No KV cache layout satisfies every supported set: [['LBNHC'], ['BLHNC']].");
}

// --- resolve_kv_cache_layout: engine core ------------------------------------------

TEST(KvLayoutResolve, FirstCandidateWithAnInfoLine) {
  const ResolvedLayout r = resolve_kv_cache_layout({}, {{"LBNHC", "LBHNC"}, {"LBNHC", "LBHNC"}}, kUniform);
  EXPECT_EQ(r.layout, L::LBNHC);
  EXPECT_EQ(r.decided_by, "first candidate");
  EXPECT_FALSE(r.mixed_hnc_shapes);
  ASSERT_EQ(r.logs.size(), 1u);
  EXPECT_EQ(r.logs[0].text, "Using LBNHC KV cache layout.");
}

TEST(KvLayoutResolve, RecordedLayoutWinsOutright) {
  LayoutInputs in;
  in.recorded = "BHLNC";
  in.requested = "LBNHC";
  EXPECT_EQ(resolve_kv_cache_layout(in, {{"LBNHC"}}, kMixed).layout, L::BHLNC);
}

TEST(KvLayoutResolve, WorkersMustReportAndAgree) {
  EXPECT_EQ(value_error([] { resolve_kv_cache_layout({}, {}, kUniform); }),
            "No worker reported supported KV cache layouts.");
  EXPECT_EQ(value_error([] { resolve_kv_cache_layout({}, {{"LBNHC"}, {}}, kUniform); }),
            "No worker reported supported KV cache layouts.");
  // The per-backend design (resolve_kv_cache_layout) asserts agreement; an older revision intersected
  // across workers instead and chose BLNHC here (see docs/DECISIONS.md).
  EXPECT_EQ(value_error([] {
              resolve_kv_cache_layout({}, {{"LBNHC", "LBHNC", "BLNHC", "BLHNC"}, {"BLHNC", "BLNHC"}}, kUniform);
            }),
            "Workers disagree on supported KV cache layouts: [['LBNHC', 'LBHNC', 'BLNHC', 'BLHNC'], ['BLHNC', "
            "'BLNHC']].");
}

TEST(KvLayoutResolve, VllmMixedCacheShapesStillRequireBlockCompactLayout) {
  const ResolvedLayout r = resolve_kv_cache_layout({}, {{"LHBNC", "BLHNC"}}, kMixed);
  EXPECT_TRUE(r.mixed_hnc_shapes);
  EXPECT_EQ(r.layout, L::BLHNC);
  EXPECT_THAT(r.candidates, ElementsAre(L::BLHNC));
  LayoutInputs in;
  in.requested = "LHBNC";
  EXPECT_EQ(value_error([&] { resolve_kv_cache_layout(in, {{"LHBNC", "BLHNC"}}, kMixed); }),
            "VLLM_KV_CACHE_LAYOUT=LHBNC does not satisfy every supported set; valid layouts: ['BLHNC'].");
  EXPECT_EQ(value_error([] { resolve_kv_cache_layout({}, {{"LHBNC", "BHLNC"}}, kMixed); }),
            "Specs with mixed HNC shapes need a block-compact layout, but none is in every supported set: "
            "[['LHBNC', 'BHLNC']].");
  // The same shapes twice are not mixed: LHBNC stays allowed.
  EXPECT_EQ(resolve_kv_cache_layout({}, {{"LHBNC", "BLHNC"}}, kUniform).layout, L::LHBNC);
}

TEST(KvLayoutResolve, VllmExplicitBlockOutermostLayoutFailsLoud) {
  LayoutInputs in;
  in.requested = "BLHNC";
  EXPECT_EQ(value_error([&] { resolve_kv_cache_layout(in, {{"LBNHC"}}, kMixed); }),
            "VLLM_KV_CACHE_LAYOUT=BLHNC does not satisfy every supported set; valid layouts: ['LBNHC'].");
}

TEST(KvLayoutResolve, VllmExplicitLayoutAndAliasRemainSupported) {
  for (const auto& [requested, expected] : std::vector<std::pair<std::string, L>>{
           {"BLHNC", L::BLHNC}, {"LBHNC", L::LBHNC}, {"HND", L::LBHNC}, {"NHD", L::LBNHC}}) {
    LayoutInputs in;
    in.requested = requested;
    const ResolvedLayout r = resolve_kv_cache_layout(in, {{"LBNHC", "LBHNC", "BLHNC"}}, kUniform);
    EXPECT_EQ(r.layout, expected) << requested;
    EXPECT_EQ(r.decided_by, "requested");
  }
}

TEST(KvLayoutResolve, ConnectorPreferenceIsSoft) {
  LayoutInputs in;
  in.connector_layout = "HND";
  const ResolvedLayout used = resolve_kv_cache_layout(in, {{"LBNHC", "LBHNC"}}, kUniform);
  EXPECT_EQ(used.layout, L::LBHNC);
  EXPECT_EQ(used.decided_by, "connector");

  const ResolvedLayout ignored = resolve_kv_cache_layout(in, {{"BLNHC", "BLHNC"}}, kUniform);
  EXPECT_EQ(ignored.layout, L::BLNHC);
  ASSERT_EQ(ignored.logs.size(), 2u);
  EXPECT_EQ(ignored.logs[0].level, LogLine::Level::warning);
  EXPECT_EQ(ignored.logs[0].text,
            "KV connector cache layout HND does not satisfy every supported set; valid layouts: ['BLNHC', 'BLHNC']. "
            "Using BLNHC instead.");

  // The requested layout (a hard constraint) beats the connector's preference.
  in.requested = "BLHNC";
  EXPECT_EQ(resolve_kv_cache_layout(in, {{"LBNHC", "LBHNC", "BLHNC"}}, kUniform).layout, L::BLHNC);
}

TEST(KvLayoutResolve, UnknownNamesUseVllmMessage) {
  EXPECT_EQ(value_error([] { resolve_kv_cache_layout({}, {{"NHC"}}, kUniform); }),
            "Unknown KV cache layout 'NHC'. Valid layouts: ['LBHNC', 'LBNHC', 'LHBNC', 'BLHNC', 'BLNHC', 'BHLNC']");
  EXPECT_EQ(layout_from_name("HND"), L::LBHNC);
}

// --- select_common_block_size --------------------------------------------------------

int common(int bs, std::vector<const AttentionBackend*> backends) {
  return select_common_block_size(bs, backends, RuntimeEnv{});
}

TEST(CommonBlockSize, ManagerBlockWhenEveryKernelTakesIt) {
  const DeclaringBackend m16(std::nullopt, {MultipleOf{16}}), m32(std::nullopt, {MultipleOf{32}});
  EXPECT_EQ(common(64, {&m16, &m32}), 64);
}

TEST(CommonBlockSize, LargestExactKernelSizeThatDividesTheManagerBlock) {
  const DeclaringBackend m16(std::nullopt, {MultipleOf{16}}), exact(std::nullopt, {32, 64});
  EXPECT_EQ(common(128, {&m16, &exact}), 64);
  const DeclaringBackend rocm_indexer(std::nullopt, {1, 64});
  EXPECT_EQ(common(16, {&rocm_indexer}), 1);
}

TEST(CommonBlockSize, NoCommonSizeUsesVllmMessage) {
  const DeclaringBackend m16(std::nullopt, {MultipleOf{16}}), exact64(std::nullopt, {64});
  EXPECT_EQ(value_error([&] { common(16, {&m16, &exact64}); }), "No common block size for 16. ");
  const DeclaringBackend m32(std::nullopt, {MultipleOf{32}});
  EXPECT_EQ(value_error([&] { common(48, {&m16, &m32}); }), "No common block size for 48. ");
}

}  // namespace
}  // namespace attnsel
