// ROCm, CPU and XPU selection, ported from vLLM's
// tests/v1/attention/rocm/test_rocm_attention_backends_selection.py, the CPU cases of
// tests/kernels/attention/test_attention_selector.py, and the XPU routing tests.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "platforms/selection_fixture.hpp"

namespace attnsel {
namespace {

using ::testing::HasSubstr;
using testing_support::SelectionTest;

LayerRequest rocm_layer(std::optional<CacheDType> kv = CacheDType::auto_) {
  LayerRequest l;
  l.head_size = 128;
  l.dtype = DType::float16;
  l.kv_cache_dtype = kv;
  return l;
}

EngineConfig block16(std::optional<std::string_view> backend = std::nullopt, bool dcp = false) {
  EngineConfig e;
  if (backend) e.attention.set_backend(*backend);
  e.cache = {16, true, CacheDType::auto_};
  e.decode_context_parallel_size = dcp ? 2 : 1;
  return e;
}

// vLLM: test_standard_attention_backend_selection.
TEST_F(SelectionTest, RocmStandardBackendsAndTheirSwitches) {
  const struct {
    std::vector<std::string> facts;
    std::optional<std::string_view> selected;
    const char* expected;
  } cases[] = {{{}, "FLEX_ATTENTION", "FLEX_ATTENTION"},
               {{}, std::nullopt, "ROCM_ATTN"},
               {{}, "TRITON_ATTN", "TRITON_ATTN"},
               {{}, "ROCM_ATTN", "ROCM_ATTN"},
               {{}, "ROCM_AITER_FA", "ROCM_AITER_FA"},
               {{}, "ROCM_AITER_UNIFIED_ATTN", "ROCM_AITER_UNIFIED_ATTN"},
               {{"rocm.use_aiter=1"}, std::nullopt, "ROCM_ATTN"},
               {{"rocm.use_aiter=1"}, "TRITON_ATTN", "TRITON_ATTN"},
               {{"rocm.use_aiter=1", "rocm.use_aiter_mha=0"}, std::nullopt, "ROCM_ATTN"},
               {{"rocm.use_aiter=1"}, "ROCM_ATTN", "ROCM_ATTN"}};
  for (const auto& c : cases) {
    EXPECT_EQ(pick("rocm:gfx942", block16(c.selected), rocm_layer(), c.facts), c.expected)
        << c.selected.value_or("auto");
    EXPECT_THAT(error_of("rocm:gfx942", block16(c.selected, true), rocm_layer(), c.facts),
                HasSubstr("DCP not supported"))
        << c.selected.value_or("auto");
  }
}

// vLLM's rocm_aiter_ops.is_mla_enabled() / is_mha_enabled() carry @if_aiter_supported
// (vllm/_aiter_ops.py): off a gfx9 device, or without the aiter package, the switches turn
// nothing on, whatever VLLM_ROCM_USE_AITER* say (vllm/platforms/rocm.py reads only these).
TEST_F(SelectionTest, RocmAiterSwitchesNeedAiterFoundOnGfx9) {
  const std::vector<std::string> on = {"rocm.use_aiter=1", "rocm.use_aiter_mla=1", "rocm.use_aiter_mha=1",
                                       "rocm.aiter_found=1"};
  std::vector<std::string> not_found = on;
  not_found.push_back("rocm.aiter_found=0");
  AttentionSelectorConfig mla;
  mla.head_size = 576;
  mla.use_mla = true;
  AttentionSelectorConfig mha;
  mha.head_size = 128;
  auto names = [](const std::vector<BackendMember>& list) {
    std::vector<std::string> out;
    for (const BackendMember& m : list) out.push_back(m.name());
    return out;
  };
  const auto mi300 = make_platform("rocm:gfx942", on);
  EXPECT_EQ(names(mi300->backend_priorities(mla, std::nullopt)),
            (std::vector<std::string>{"ROCM_AITER_MLA", "TRITON_MLA", "ROCM_AITER_TRITON_MLA"}));
  EXPECT_THAT(names(mi300->backend_priorities(mha, std::nullopt)), ::testing::Contains("ROCM_AITER_FA"));
  for (const auto& [spec, facts] : {std::pair{"rocm:gfx1100", on}, std::pair{"rocm:gfx942", not_found}}) {
    const auto platform = make_platform(spec, facts);
    EXPECT_EQ(names(platform->backend_priorities(mla, std::nullopt)), std::vector<std::string>{"TRITON_MLA"}) << spec;
    EXPECT_THAT(names(platform->backend_priorities(mha, std::nullopt)),
                ::testing::Not(::testing::Contains("ROCM_AITER_FA")))
        << spec;
  }
  LayerRequest l = rocm_layer();
  l.head_size = 576;
  l.use_mla = true;
  EXPECT_EQ(pick("rocm:gfx1100", block16(), l, on), "TRITON_MLA");
}

// vLLM: test_sparse_mla_backend_rejects_dcp and test_sparse_not_supported.
TEST_F(SelectionTest, RocmSparseMla) {
  LayerRequest l;
  l.head_size = 576;
  l.kv_cache_dtype = CacheDType::auto_;
  l.use_mla = true;
  l.use_sparse = true;
  for (std::optional<std::string_view> selected : {std::optional<std::string_view>{}, std::optional<std::string_view>{"ROCM_AITER_MLA_SPARSE"}}) {
    EXPECT_EQ(pick("rocm:gfx942", block16(selected), l), "ROCM_AITER_MLA_SPARSE");
    EXPECT_THAT(error_of("rocm:gfx942", block16(selected, true), l), HasSubstr("DCP not supported"));
  }
  LayerRequest not_mla = rocm_layer();
  not_mla.use_sparse = true;
  EXPECT_THAT(error_of("rocm:gfx942", block16(), not_mla), HasSubstr("No valid attention backend found"));
}

// vLLM: test_specialized_attention_backends_reject_dcp.
TEST_F(SelectionTest, RocmSpecialisedBackendsRejectDcp) {
  LayerRequest diffkv;
  diffkv.head_size = 192;
  diffkv.kv_cache_dtype = CacheDType::bfloat16;
  LayerRequest tq;
  tq.head_size = 59;  // a 128-dim head packed by turboquant_k3v4_nc
  tq.kv_cache_dtype = CacheDType::turboquant_k3v4_nc;
  EXPECT_EQ(pick("rocm:gfx942", block16("TRITON_ATTN_DIFFKV"), diffkv), "TRITON_ATTN_DIFFKV");
  EXPECT_THAT(error_of("rocm:gfx942", block16("TRITON_ATTN_DIFFKV", true), diffkv), HasSubstr("DCP not supported"));
  EXPECT_EQ(pick("rocm:gfx942", block16("TURBOQUANT"), tq), "TURBOQUANT");
  EXPECT_THAT(error_of("rocm:gfx942", block16("TURBOQUANT", true), tq), HasSubstr("DCP not supported"));
}

// vLLM: test_aiter_fa_requires_mi3xx and test_turboquant_run_does_not_mask_unsupported_selected_backend.
TEST_F(SelectionTest, RocmAiterFaNeedsCdna3) {
  EXPECT_THAT(error_of("rocm:gfx908", block16("ROCM_AITER_FA"), rocm_layer()),
              HasSubstr("compute capability not supported"));
  EngineConfig tq_run = block16("ROCM_AITER_FA");
  tq_run.cache.cache_dtype = CacheDType::turboquant_k8v4;
  EXPECT_THAT(error_of("rocm:gfx908", tq_run, rocm_layer()), HasSubstr("compute capability not supported"));
}

// vLLM: test_turboquant_boundary_layers_share_a_layout.
TEST_F(SelectionTest, RocmTurboQuantBoundaryLayersShareALayout) {
  for (std::optional<std::string_view> selected :
       {std::optional<std::string_view>{}, std::optional<std::string_view>{"ROCM_ATTN"},
        std::optional<std::string_view>{"ROCM_AITER_FA"}, std::optional<std::string_view>{"TURBOQUANT"}}) {
    EngineConfig e = block16(selected);
    e.cache.cache_dtype = CacheDType::turboquant_k8v4;
    auto platform = make_platform("rocm:gfx942");
    Selector selector(platform);
    auto boundary = selector.get_attn_backend(e, rocm_layer(CacheDType::auto_));
    auto quantized = selector.get_attn_backend(e, rocm_layer(CacheDType::turboquant_k8v4));
    EXPECT_EQ(quantized->get_name(), "TURBOQUANT") << selected.value_or("auto");
    auto a = boundary->supported_kv_cache_layouts(platform->env());
    auto b = quantized->supported_kv_cache_layouts(platform->env());
    ASSERT_TRUE(b.has_value());
    const bool shared = !a || std::any_of(a->begin(), a->end(), [&](KVCacheLayout x) {
      return std::find(b->begin(), b->end(), x) != b->end();
    });
    EXPECT_TRUE(shared) << boundary->get_name() << " for " << selected.value_or("auto");
  }
}

// A layer with a TurboQuant cache: a valid explicit choice is vLLM's explicit path and its
// log; a requested backend that cannot serve the layer gives way to the automatic walk, named
// among the incompatible backends of vLLM's closing line.
TEST_F(SelectionTest, RocmTurboQuantLayerLogs) {
  LayerRequest tq = rocm_layer(CacheDType::turboquant_k8v4);
  auto chosen = select("rocm:gfx942", block16("TURBOQUANT"), tq);
  EXPECT_EQ(chosen->backend, "TURBOQUANT");
  EXPECT_TRUE(chosen->explicit_choice);
  EXPECT_EQ(chosen->logs.back().text, "Using TURBOQUANT backend (selected via --attention-backend).");

  auto replaced = select("rocm:gfx942", block16("ROCM_AITER_FA"), tq);
  EXPECT_EQ(replaced->backend, "TURBOQUANT");
  EXPECT_FALSE(replaced->explicit_choice);
  EXPECT_EQ(replaced->logs.back().text,
            "Found incompatible backend(s) [ROCM_AITER_FA, ROCM_ATTN, ROCM_AITER_UNIFIED_ATTN, TRITON_ATTN] with "
            "decoder. Overriding with TURBOQUANT out of potential backends: ['TURBOQUANT'].");

  auto automatic = select("rocm:gfx942", block16(), tq);
  EXPECT_EQ(automatic->backend, "TURBOQUANT");
  EXPECT_EQ(automatic->logs.back().text,
            "Found incompatible backend(s) [ROCM_ATTN, ROCM_AITER_UNIFIED_ATTN, TRITON_ATTN] with decoder. "
            "Overriding with TURBOQUANT out of potential backends: ['TURBOQUANT'].");
  EXPECT_THAT(error_of("rocm:gfx942", block16("TURBOQUANT", true), tq),
              ::testing::StartsWith("Selected backend TURBOQUANT is not valid for this configuration. Reason: "));
}

// vLLM: test_turboquant_boundary_selection_is_not_cached_from_ordinary_run.
TEST_F(SelectionTest, RocmBoundarySelectionIsNotReusedByAnOrdinaryRun) {
  Selector selector(make_platform("rocm:gfx942"));
  EngineConfig ordinary;
  EngineConfig turboquant;
  turboquant.cache.cache_dtype = CacheDType::turboquant_k8v4;
  EXPECT_EQ(selector.get_attn_backend(ordinary, rocm_layer())->get_name(), "ROCM_ATTN");
  EXPECT_NE(selector.get_attn_backend(turboquant, rocm_layer())->get_name(), "ROCM_ATTN");
  EXPECT_EQ(selector.get_attn_backend(turboquant, rocm_layer(CacheDType::turboquant_k8v4))->get_name(), "TURBOQUANT");
}

// vLLM: test_unified_attn_supports_kv_connector / test_rocm_attn_rejects_kv_connector /
// test_auto_selection_for_kv_connector.
TEST_F(SelectionTest, RocmKvConnector) {
  EngineConfig e = block16("ROCM_AITER_UNIFIED_ATTN");
  e.kv_transfer_instance = true;
  EXPECT_EQ(pick("rocm:gfx942", e, rocm_layer()), "ROCM_AITER_UNIFIED_ATTN");
  e.attention.set_backend("ROCM_ATTN");
  EXPECT_THAT(error_of("rocm:gfx942", e, rocm_layer()), HasSubstr("KV connector not supported"));
  e.attention.set_backend("auto");
  EXPECT_EQ(pick("rocm:gfx942", e, rocm_layer(), {"rocm.use_aiter=1", "rocm.aiter_found=1"}), "ROCM_AITER_FA");
  EXPECT_EQ(pick("rocm:gfx942", e, rocm_layer(), {"rocm.use_aiter=0", "rocm.aiter_found=1"}),
            "ROCM_AITER_UNIFIED_ATTN");
  EXPECT_EQ(pick("rocm:gfx942", e, rocm_layer(), {"rocm.use_aiter=0", "rocm.aiter_found=0"}), "TRITON_ATTN");
}

TEST_F(SelectionTest, RocmLogsIncompatibleBackendsWhenOverriding) {
  EngineConfig e = block16();
  e.kv_transfer_instance = true;
  auto s = select("rocm:gfx942", e, rocm_layer(), {"rocm.aiter_found=0"});
  ASSERT_FALSE(s->logs.empty());
  EXPECT_EQ(s->logs.back().text,
            "Found incompatible backend(s) [ROCM_ATTN, TURBOQUANT] with decoder. Overriding with TRITON_ATTN out "
            "of potential backends: ['TRITON_ATTN'].");
}

// vLLM: the CPU cases of test_backend_selection, test_fp32_fallback, test_auto_backend_selection_behavior.
TEST_F(SelectionTest, CpuAlwaysRoutesToCpuAttn) {
  for (const char* requested : {"FLASH_ATTN", "TRITON_ATTN", "CPU_ATTN"}) {
    auto s = select("cpu", engine_with_backend(requested), layer(16, DType::float16));
    EXPECT_EQ(s->backend, "CPU_ATTN");
    if (std::string(requested) != "CPU_ATTN") {
      EXPECT_EQ(s->logs.front().text, std::string("Cannot use ") + requested + " backend on CPU.");
    }
  }
  EngineConfig automatic;
  automatic.attention.set_backend("auto");
  EXPECT_EQ(pick("cpu", automatic, layer(16, DType::float16)), pick("cpu", EngineConfig{}, layer(16, DType::float16)));
}

// CpuPlatform.check_and_update_config's warning, for a block size the user gave; the
// platform's own (128) never warns.
TEST_F(SelectionTest, CpuWarnsOfABlockSizeThatIsNotAMultipleOf32) {
  const std::string warning =
      "CPU backend prefers block_size is multiples of 32, otherwise the performance is not optimized.";
  EXPECT_EQ(select("cpu", block16(), layer(64))->warnings(), std::vector<std::string>{warning});
  EngineConfig block48;
  block48.cache.block_size = 48;
  block48.cache.user_specified_block_size = true;
  EXPECT_EQ(select("cpu", block48, layer(64))->warnings(), std::vector<std::string>{warning});
  EngineConfig block64 = block48;
  block64.cache.block_size = 64;
  EXPECT_TRUE(select("cpu", block64, layer(64))->warnings().empty());
  EXPECT_TRUE(select("cpu", EngineConfig{}, layer(64))->warnings().empty());
}

TEST_F(SelectionTest, CpuMlaAndSparse) {
  LayerRequest mla = layer(576);
  mla.use_mla = true;
  EXPECT_EQ(pick("cpu", EngineConfig{}, mla), "CPU_MLA");
  EXPECT_EQ(pick("cpu", EngineConfig{}, mla, {"cpu.amx=1"}), "AMX_MLA");
  LayerRequest sparse = mla;
  sparse.use_sparse = true;
  EXPECT_EQ(error_of("cpu", EngineConfig{}, sparse), "Sparse Attention is not supported on CPU.");
}

TEST_F(SelectionTest, CpuRunnableModeValidatesTheRoute) {
  auto s = [&] {
    try {
      return select("cpu", EngineConfig{}, layer(16), {}, SelectionMode::runnable)->backend;
    } catch (const Error& e) {
      return std::string(e.what());
    }
  }();
  EXPECT_THAT(s, ::testing::StartsWith("No valid attention backend found for cpu with"));
  EXPECT_THAT(s, HasSubstr("CPU_ATTN: ["));
}

TEST_F(SelectionTest, CpuRunnableModeRunsAmxMlaLayersOnCpuMlaAndSaysWhy) {
  LayerRequest mla = layer(576);
  mla.use_mla = true;
  const auto s = select("cpu", EngineConfig{}, mla, {"cpu.amx=1"}, SelectionMode::runnable);
  EXPECT_EQ(s->backend, "CPU_MLA");
  ASSERT_EQ(s->candidates.size(), 2u);
  EXPECT_EQ(s->candidates[0].backend, "AMX_MLA");
  EXPECT_FALSE(s->candidates[0].valid);
  EXPECT_FALSE(s->candidates[0].reasons.empty());
  EXPECT_TRUE(s->candidates[1].valid);
  bool says_why = false;
  for (const LogLine& l : s->logs)
    says_why |= l.text.find("AMX_MLA on this CPU, which attnsel cannot run here") != std::string::npos;
  EXPECT_TRUE(says_why);
  // Reference mode still answers what vLLM does.
  EXPECT_EQ(pick("cpu", EngineConfig{}, mla, {"cpu.amx=1"}), "AMX_MLA");
}

// XPU routing (XPUPlatform.get_attn_backend_cls, with validation of the chosen backend).
TEST_F(SelectionTest, XpuRouting) {
  EXPECT_EQ(pick("xpu", EngineConfig{}, layer(128)), "FLASH_ATTN");
  EXPECT_EQ(pick("xpu", EngineConfig{}, layer(60)), "TRITON_ATTN");  // FA rejects head 60
  EXPECT_EQ(pick("xpu", EngineConfig{}, layer(128, DType::float32)), "TRITON_ATTN");
  LayerRequest mm = layer(128);
  mm.use_mm_prefix = true;
  EXPECT_EQ(pick("xpu", EngineConfig{}, mm), "TRITON_ATTN");
  EXPECT_THAT(error_of("xpu", engine_with_backend("FLASH_ATTN"), mm), HasSubstr("prefix"));
  EXPECT_THAT(error_of("xpu", engine_with_backend("FLASH_ATTN"), layer(60)), HasSubstr("head_size"));
  EngineConfig invariant;
  invariant.batch_invariant = true;
  EXPECT_EQ(pick("xpu", invariant, layer(128)), "TRITON_ATTN");
  invariant.attention.set_backend("FLASH_ATTN");
  EXPECT_THAT(error_of("xpu", invariant, layer(128)), HasSubstr("batch invariance"));
  EXPECT_EQ(error_of("xpu", engine_with_backend("FLASH_ATTN_DIFFKV"), layer(128)),
            "Invalid attention backend for xpu, with use_mla: False");
  LayerRequest mla = layer(576);
  mla.use_mla = true;
  EXPECT_EQ(pick("xpu", EngineConfig{}, mla), "TRITON_MLA");
  LayerRequest tq = layer(59);
  tq.kv_cache_dtype = CacheDType::turboquant_k3v4_nc;
  EXPECT_EQ(pick("xpu", EngineConfig{}, tq), "TURBOQUANT");
}

TEST_F(SelectionTest, PlatformSpecsAreValidated) {
  for (const char* bad : {"cuda", "cuda:9", "cuda:x.0", "rocm:942", "tpu", "other:", "other:a b"})
    EXPECT_THAT([&] { (void)make_platform(bad); },
                ::testing::ThrowsMessage<ValueError>(HasSubstr("Valid forms: cuda:MAJOR.MINOR (e.g. cuda:9.0), "
                                                               "rocm:gfxNNN (e.g. rocm:gfx942), xpu, cpu, other:NAME")))
        << bad;
  EXPECT_EQ(make_platform("rocm:gfx942")->get_device_capability(), (DeviceCapability{9, 4}));
  EXPECT_EQ(make_platform("rocm:gfx90a")->get_device_capability(), (DeviceCapability{9, 0}));
  EXPECT_EQ(make_platform("ROCM:GFX1100")->get_device_capability(), (DeviceCapability{11, 0}));
  EXPECT_EQ(make_platform("cuda:12.1")->spec(), "cuda:12.1");
  EXPECT_EQ(make_platform("other:npu")->device_name(), "npu");
  EXPECT_EQ(make_platform("cpu")->mode(), SelectionMode::reference);
}

TEST_F(SelectionTest, FactsAreValidatedByNameAndType) {
  EXPECT_THAT([] { (void)make_platform("cuda:9.0", {"no_such_fact=1"}); },
              ::testing::ThrowsMessage<ValueError>(HasSubstr("Unknown fact 'no_such_fact'. Valid facts are: ")));
  EXPECT_THAT([] { (void)make_platform("cuda:9.0", {"rocm.use_aiter=maybe"}); },
              ::testing::ThrowsMessage<ValueError>(HasSubstr("expected a bool")));
  EXPECT_THAT([] { (void)make_platform("cuda:9.0", {"flash_attn_version"}); },
              ::testing::ThrowsMessage<ValueError>(HasSubstr("expected NAME=VALUE")));
}

TEST_F(SelectionTest, HostIsDetectedInRunnableMode) {
  auto host = detect_host_platform();
  EXPECT_EQ(host->mode(), SelectionMode::runnable);
  EXPECT_FALSE(host->host_detail.empty());
}

// vLLM: test_mla_backend_selection.
TEST_F(SelectionTest, RocmMlaBackendsAndBlockSizeOne) {
  for (bool dcp : {false, true}) {
    LayerRequest l = rocm_layer();
    l.use_mla = true;
    auto with_block = [&](std::optional<std::string_view> backend, int block) {
      EngineConfig e = block16(backend, dcp);
      e.cache.block_size = block;
      return e;
    };
    EXPECT_EQ(pick("rocm:gfx942", with_block("TRITON_MLA", 16), l), "TRITON_MLA");
    EXPECT_THAT(error_of("rocm:gfx942", with_block("TRITON_MLA", 1), l), HasSubstr("Selected backend TRITON_MLA"));
    EXPECT_EQ(pick("rocm:gfx942", with_block("ROCM_AITER_MLA", 1), l), "ROCM_AITER_MLA");
    EXPECT_EQ(pick("rocm:gfx942", with_block("ROCM_AITER_MLA", 16), l), "ROCM_AITER_MLA");
    EXPECT_EQ(pick("rocm:gfx942", with_block(std::nullopt, 1), l, {"rocm.use_aiter=1"}), "ROCM_AITER_MLA");
    EXPECT_EQ(pick("rocm:gfx942", with_block(std::nullopt, 16), l, {"rocm.use_aiter=1"}), "ROCM_AITER_MLA");
    EXPECT_EQ(pick("rocm:gfx942", with_block("TRITON_MLA", 16), l, {"rocm.use_aiter=1"}), "TRITON_MLA");
    EXPECT_EQ(pick("rocm:gfx942", with_block("ROCM_AITER_TRITON_MLA", 16), l), "ROCM_AITER_TRITON_MLA");
  }
}

}  // namespace
}  // namespace attnsel
