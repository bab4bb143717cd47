// Whole-model plans for every example config, on a simulated Hopper (cuda:9.0) and on the
// CPU, in reference mode: the groups, their kinds and backends, the block size, the layout
// and the KV-cache bytes per token; then per-kind overrides, the cache, the block-size and
// layout rules with their errors, tensor parallelism and the KV connector.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "attnsel/errors.hpp"
#include "attnsel/plan.hpp"
#include "attnsel/registry.hpp"
#include "model_test_support.hpp"

namespace attnsel {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing_support::load_example;

struct GroupExpect {
  std::string layers;
  std::string kind;
  std::string backend;
};

struct PlanExpect {
  std::string model;
  std::vector<GroupExpect> groups;
  int block_size;
  std::string layout;
  std::int64_t kv_bytes_per_token;
};

ModelPlan plan_on(const ModelSpec& model, const EngineOptions& options, const std::string& platform) {
  Selector selector(make_plan_platform(model, options, platform, {}, SelectionMode::reference));
  return make_plan(model, options, selector);
}

ModelPlan plan_on(const std::string& example, const std::string& platform, const EngineArgs& args = {}) {
  return plan_on(load_example(example), parse_engine_args(args), platform);
}

// The PlanError `f` throws ("" when none).
template <class F>
std::string plan_error(F&& f) {
  try {
    f();
  } catch (const PlanError& e) {
    return e.what();
  }
  return "";
}

void expect_plan(const ModelPlan& plan, const PlanExpect& e, const std::string& platform) {
  SCOPED_TRACE(e.model + " on " + platform);
  ASSERT_EQ(plan.groups.size(), e.groups.size());
  for (std::size_t i = 0; i < e.groups.size(); ++i) {
    EXPECT_EQ(plan.groups[i].layers_text, e.groups[i].layers);
    EXPECT_EQ(kind_value(plan.groups[i].kind), e.groups[i].kind);
    EXPECT_EQ(plan.groups[i].backend, e.groups[i].backend);
    EXPECT_FALSE(plan.groups[i].error);
  }
  EXPECT_EQ(plan.block_size.block_size, e.block_size);
  ASSERT_TRUE(plan.layout);
  EXPECT_EQ(layout_name(plan.layout->layout), e.layout);
  EXPECT_EQ(plan.kv_bytes_per_token, e.kv_bytes_per_token);
}

const std::vector<PlanExpect>& hopper_expectations() {
  static const std::vector<PlanExpect> kExpect = {
      {"llama", {{"0-31", "full_attention", "FLASH_ATTN"}}, 16, "LBNHC", 131072},
      {"mistral", {{"0-31", "sliding_window", "FLASH_ATTN"}}, 16, "LBNHC", 131072},
      {"qwen2", {{"0-27", "full_attention", "FLASH_ATTN"}}, 16, "LBNHC", 57344},
      {"qwen3", {{"0-35", "full_attention", "FLASH_ATTN"}}, 16, "LBNHC", 147456},
      {"gemma2",
       {{"0-40 (every 2nd)", "sliding_window", "FLASH_ATTN"}, {"1-41 (every 2nd)", "full_attention", "FLASH_ATTN"}},
       16, "LBNHC", 344064},
      {"gemma3_text",
       {{"0-4,6-10,12-16,18-22,24-25", "sliding_window", "FLASH_ATTN"},
        {"5-23 (every 6th)", "full_attention", "FLASH_ATTN"}},
       16, "LBNHC", 26624},
      // Multimodal prefix-LM on Hopper: the Triton/FA composite (vllm/platforms/cuda.py).
      {"gemma3",
       {{"0-4,6-10,12-16,18-22,24-28,30-33", "sliding_window", "TRITON_FLASH_ATTN"},
        {"5-29 (every 6th)", "full_attention", "TRITON_FLASH_ATTN"}},
       16, "LBNHC", 139264},
      {"gpt_oss",
       {{"0-22 (every 2nd)", "sliding_window", "FLASH_ATTN"}, {"1-23 (every 2nd)", "full_attention", "FLASH_ATTN"}},
       16, "LBNHC", 49152},
      {"deepseek_v2", {{"0-26", "mla_attention", "FLASH_ATTN_MLA"}}, 16, "LBNHC", 31104},
      {"deepseek_v3", {{"0-60", "mla_attention", "FLASH_ATTN_MLA"}}, 16, "LBNHC", 70272},
      {"kimi_k2", {{"0-60", "mla_attention", "FLASH_ATTN_MLA"}}, 16, "LBNHC", 70272},
      // Sparse MLA and its indexer: block 64 from the sparse backend; the indexer's
      // block-outermost layouts.
      {"deepseek_v32",
       {{"0-60", "mla_attention", "FLASH_ATTN_MLA_SPARSE"}, {"0-60 (indexer)", "mla_attention", "DEEPSEEK_V32_INDEXER"}},
       64, "BLNHC", 78324},
      {"qwen3_next",
       {{"0-2,4-6,8-10,12-14,16-18,20-22,24-26,28-30,32-34,36-38,40-42,44-46", "mamba", "GDN_ATTN"},
        {"3-47 (every 4th)", "full_attention", "FLASH_ATTN"}},
       544, "LBNHC", 24576},
      {"jamba",
       {{"0-3,5-11,13-19,21-27,29-31", "mamba", "MAMBA1"}, {"4-28 (every 8th)", "full_attention", "FLASH_ATTN"}},
       80, "LBNHC", 16384},
      {"granite4",
       {{"0-4,6-14,16-24,26-34,36-39", "mamba", "MAMBA2"}, {"5-35 (every 10th)", "full_attention", "FLASH_ATTN"}},
       400, "LBNHC", 8192},
      {"nemotron_h",
       {{"0,2,4,6,9,11,13,15,18,20,22,24,27,29,31,33,36,38,40,42,45,47,49,51,53", "mamba", "MAMBA2"},
        {"7-43 (every 9th)", "full_attention", "FLASH_ATTN"}},
       1040, "LBNHC", 20480},
      {"minimax",
       {{"0-6,8-14,16-22,24-30,32-38,40-46,48-54,56-62,64-70,72-78", "mamba", "LINEAR"},
        {"7-79 (every 8th)", "full_attention", "FLASH_ATTN"}},
       512, "LBNHC", 40960},
      {"lfm2",
       {{"0-1,3-4,6-7,9,11,13,15", "mamba", "SHORT_CONV"}, {"2,5,8,10,12,14", "full_attention", "FLASH_ATTN"}},
       16, "LBNHC", 12288},
      {"mamba", {{"0-63", "mamba", "MAMBA1"}}, 16, "LBNHC", 0},
      {"bert", {{"0-11", "encoder_only_attention", "FLASH_ATTN"}}, 16, "LBNHC", 0},
      {"whisper",
       {{"encoder 0-31", "full_attention", "FLASH_ATTN"},
        {"decoder 0-31", "full_attention", "FLASH_ATTN"},
        {"decoder 0-31 (cross)", "cross_attention", "FLASH_ATTN"}},
       16, "LBNHC", 163840},
      {"t5",
       {{"encoder 0-11", "full_attention", "FLASH_ATTN"},
        {"decoder 0-11", "full_attention", "FLASH_ATTN"},
        {"decoder 0-11 (cross)", "cross_attention", "FLASH_ATTN"}},
       16, "LBNHC", 36864},
  };
  return kExpect;
}

TEST(PlanExamples, EveryFamilyOnHopper) {
  for (const PlanExpect& e : hopper_expectations()) expect_plan(plan_on(e.model, "cuda:9.0"), e, "cuda:9.0");
}

TEST(PlanExamples, EveryExampleConfigIsPlannedHere) {
  std::set<std::string> planned;
  for (const PlanExpect& e : hopper_expectations()) planned.insert(e.model);
  std::set<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(testing_support::examples_dir()))
    if (entry.path().extension() == ".json") files.insert(entry.path().stem().string());
  EXPECT_EQ(files, planned);
}

// On the CPU the route is fixed (vllm/platforms/cpu.py): CPU_ATTN, CPU_MLA for MLA models (block 16);
// the block size is the CPU's 128; Mamba-like layers and the indexer are unchanged.
// CPU_ATTN declares HND (LBHNC) first, as vLLM's CPU cache is [blocks, heads, tokens, dims].
TEST(PlanExamples, EveryFamilyOnCpu) {
  for (PlanExpect e : hopper_expectations()) {
    if (e.model == "deepseek_v32") continue;  // sparse attention has no CPU route (below)
    const bool mla = e.groups.front().kind == "mla_attention";
    bool attention = false;
    for (GroupExpect& g : e.groups)
      if (g.kind != "mamba") {
        g.backend = mla ? "CPU_MLA" : "CPU_ATTN";
        attention = true;
      }
    e.block_size = mla ? 16 : 128;
    if (attention && !mla) e.layout = "LBHNC";
    expect_plan(plan_on(e.model, "cpu"), e, "cpu");
  }
}

TEST(PlanExamples, SparseMlaHasNoCpuRouteAndThePartialPlanSaysWhere) {
  try {
    (void)plan_on("deepseek_v32", "cpu");
    FAIL() << "expected a PlanError";
  } catch (const PlanError& e) {
    EXPECT_EQ(std::string(e.what()), "Sparse Attention is not supported on CPU.");
    EXPECT_EQ(e.kind(), ErrorKind::not_implemented);
    const ModelPlan& partial = e.partial_plan();
    ASSERT_EQ(partial.groups.size(), 2u);
    EXPECT_EQ(partial.groups[0].error, "Sparse Attention is not supported on CPU.");
    EXPECT_EQ(partial.groups[1].backend, "DEEPSEEK_V32_INDEXER");
    EXPECT_TRUE(partial.block_size.source.empty());  // not chosen
    EXPECT_EQ(partial.kv_bytes_per_token, 78324);    // sizes do not depend on the backends
  }
}

TEST(PlanExamples, DefaultModelIsLlama3Like) {
  const ModelPlan plan = plan_on(default_model(), parse_engine_args({}), "cuda:9.0");
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_EQ(plan.groups[0].layers_text, "0-31");
  EXPECT_EQ(plan.groups[0].backend, "FLASH_ATTN");
  EXPECT_EQ(plan.kv_bytes_per_token, 131072);
}

TEST(PlanCache, LayersWithOneConfigShareOneCachedSelection) {
  const ModelSpec model = load_example("gemma2");
  const EngineOptions options = parse_engine_args({});
  Selector selector(make_plan_platform(model, options, "cuda:9.0"));
  const ModelPlan plan = make_plan(model, options, selector);
  EXPECT_EQ(plan.distinct_selections, 2u);  // sliding and full: 42 layers, two selections
  EXPECT_EQ(selector.cache_size(), 2u);
  // Planning again reuses the cached selections (the same objects).
  const ModelPlan again = make_plan(model, options, selector);
  EXPECT_EQ(again.groups[0].selection.get(), plan.groups[0].selection.get());
  EXPECT_EQ(selector.cache_size(), 2u);
}

TEST(PlanOverrides, BackendPerKindReplacesTheGlobalBackendForItsKindOnly) {
  EngineArgs args;
  args.attention_config = R"({"backend_per_kind": {"sliding_window": "TRITON_ATTN"}})";
  const ModelPlan plan = plan_on("gemma2", "cuda:9.0", args);
  EXPECT_EQ(plan.groups[0].backend, "TRITON_ATTN");
  EXPECT_EQ(plan.groups[0].request_source, "backend_per_kind[sliding_window]");
  EXPECT_EQ(plan.groups[0].requested_backend, "TRITON_ATTN");
  EXPECT_EQ(plan.groups[1].backend, "FLASH_ATTN");
  EXPECT_EQ(plan.groups[1].request_source, "automatic");
  EXPECT_FALSE(plan.groups[1].requested_backend);
  // vLLM's block size comes from the first non-SSM backend: layer 0 is sliding (TRITON_ATTN).
  EXPECT_EQ(plan.block_size.source, "TRITON_ATTN.get_preferred_block_size(16)");
}

TEST(PlanOverrides, AnExplicitBackendNeverFallsBackAndEveryFailingGroupIsNamed) {
  EngineArgs args;
  args.attention_backend = "TRITON_MLA";
  const std::string message = plan_error([&] { (void)plan_on("gemma2", "cuda:9.0", args); });
  EXPECT_THAT(message, StartsWith("Selected backend TRITON_MLA is not valid for this configuration. Reason: "));
  EXPECT_THAT(message, HasSubstr("\n1 more group of layers cannot be served:\n  layers 1-41 (every 2nd) "
                                 "[full_attention]: Selected backend TRITON_MLA is not valid"));
}

TEST(PlanBlockSize, UserBlockSizeReachesEverySelection) {
  EngineArgs args;
  args.block_size = 32;
  const ModelPlan plan = plan_on("llama", "cuda:9.0", args);
  EXPECT_TRUE(plan.block_size.user_specified);
  EXPECT_EQ(plan.block_size.source, "--block-size");
  EXPECT_EQ(plan.groups[0].config->block_size, 32);
  EXPECT_EQ(plan.groups[0].kernel_block_size, 32);
}

TEST(PlanBlockSize, CpuKernelBlockDividesTheManagerBlock) {
  EngineArgs args;
  args.block_size = 128;
  const ModelPlan plan = plan_on("deepseek_v3", "cpu", args);
  EXPECT_EQ(plan.groups[0].backend, "CPU_MLA");
  EXPECT_EQ(plan.block_size.block_size, 128);
  EXPECT_EQ(plan.groups[0].kernel_block_size, 16);  // select_common_block_size's exact kernel size
}

// vLLM's failure mode for sparse MLA at TP 8 on Blackwell: 16 heads per rank put
// FLASHINFER_MLA_SPARSE first (_get_backend_priorities), whose preferred block size (32) the indexer's
// kernel (64) cannot use.
TEST(PlanBlockSize, SparseMlaAtTensorParallel8FailsLikeVllmAndSaysWhatWorks) {
  EngineArgs args;
  args.tensor_parallel_size = 8;
  const std::string message = plan_error([&] { (void)plan_on("deepseek_v32", "cuda:10.0", args); });
  EXPECT_EQ(message,
            "No common block size for 32. \nKV-cache groups that cannot use block size 32:\n  layers 0-60 (indexer) "
            "[mla_attention] DEEPSEEK_V32_INDEXER: kernel block sizes [64]\nEvery KV-cache group supports block size "
            "64: pass --block-size 64.");
  // At TP 1 (128 heads per rank) FLASHMLA_SPARSE comes first and prefers 64.
  const ModelPlan tp1 = plan_on("deepseek_v32", "cuda:10.0");
  EXPECT_EQ(tp1.groups[0].backend, "FLASHMLA_SPARSE");
  EXPECT_EQ(tp1.block_size.block_size, 64);
  // And the suggested size works.
  args.block_size = 64;
  EXPECT_EQ(plan_on("deepseek_v32", "cuda:10.0", args).groups[0].backend, "FLASHINFER_MLA_SPARSE");
}

// A backend whose kernel takes only 64-token blocks, for groups that need it.
class Block64Backend : public AttentionBackend {
 public:
  std::string get_name() const override { return "CUSTOM"; }
  std::string qualname() const override { return "tests::Block64Backend"; }
  BackendCapabilities capabilities(const RuntimeEnv&) const override {
    BackendCapabilities c;
    c.kernel_block_sizes = {64};
    c.sliding_window = true;
    return c;
  }
};

class PlanWithCustomBackend : public ::testing::Test {
 protected:
  void SetUp() override {
    reset_registry_for_testing();
    register_backend_class<Block64Backend>(AttentionBackendEnum["CUSTOM"]);
  }
  void TearDown() override { reset_registry_for_testing(); }
};

// vLLM stops at the first KV-cache group that cannot use the block size; the plan lists
// every one (docs/DECISIONS.md).
TEST_F(PlanWithCustomBackend, EveryKvCacheGroupThatCannotUseTheBlockSizeIsReported) {
  ModelSpec model;
  model.source = "handmade";
  model.model_type = "llama";
  AttentionLayerSpec full;
  full.num_heads = 8;
  full.num_kv_heads = 8;
  full.head_size = 128;
  full.head_size_v = 128;
  AttentionLayerSpec wide_window = full, narrow_window = full;
  wide_window.sliding_window = 4096;
  narrow_window.sliding_window = 4096;
  narrow_window.num_kv_heads = 4;  // another cache shape: another KV-cache group
  for (int i = 0; i < 3; ++i) {
    LayerSpec l;
    l.index = i;
    l.role = "self_attn";
    l.attention = i == 0 ? full : i == 1 ? wide_window : narrow_window;
    model.layers.push_back(l);
  }
  EngineArgs args;
  args.attention_config = R"({"backend_per_kind": {"sliding_window": "CUSTOM"}})";
  const std::string message = plan_error([&] { (void)plan_on(model, parse_engine_args(args), "cuda:9.0"); });
  EXPECT_EQ(message,
            "No common block size for 16. \nKV-cache groups that cannot use block size 16:\n  layers 1 "
            "[sliding_window] CUSTOM: kernel block sizes [64]\n  layers 2 [sliding_window] CUSTOM: kernel block "
            "sizes [64]\nEvery KV-cache group supports block size 64: pass --block-size 64.");
}

TEST(PlanLayout, KvConnectorPreferenceAndRequestedLayout) {
  EngineArgs nixl;
  nixl.kv_transfer_config = R"({"kv_connector": "NixlConnector", "kv_role": "kv_both"})";
  const ModelPlan with_nixl = plan_on("llama", "cuda:9.0", nixl);
  EXPECT_EQ(with_nixl.layout->layout, KVCacheLayout::LBHNC);  // "HND"
  EXPECT_EQ(with_nixl.layout->decided_by, "connector");
  EXPECT_TRUE(with_nixl.groups[0].config->use_kv_connector);
  // An MLA model: the connector states no layout.
  EXPECT_EQ(plan_on("deepseek_v2", "cuda:9.0", nixl).layout->decided_by, "first candidate");

  EngineArgs requested;
  requested.kv_cache_layout = "BLHNC";
  EXPECT_EQ(plan_on("qwen3_next", "cuda:9.0", requested).layout->layout, KVCacheLayout::BLHNC);
  requested.kv_cache_layout = "LHBNC";  // not block-compact, and the hybrid mixes cache shapes
  EXPECT_EQ(plan_error([&] { (void)plan_on("qwen3_next", "cuda:9.0", requested); }),
            "VLLM_KV_CACHE_LAYOUT=LHBNC does not satisfy every supported set; valid layouts: ['LBNHC', 'LBHNC', "
            "'BLNHC', 'BLHNC'].");
  EXPECT_EQ(plan_on("llama", "cuda:9.0", requested).layout->layout, KVCacheLayout::LHBNC);
}

TEST(PlanSizes, TensorParallelismAndCacheDtypes) {
  EngineArgs tp8;
  tp8.tensor_parallel_size = 8;
  const ModelPlan llama_tp8 = plan_on("llama", "cuda:9.0", tp8);
  EXPECT_EQ(llama_tp8.groups[0].num_kv_heads, 1);
  EXPECT_EQ(llama_tp8.kv_bytes_per_token, 32 * 2 * 1 * 128 * 2);
  EXPECT_EQ(plan_on("deepseek_v3", "cuda:9.0", tp8).kv_bytes_per_token, 70272);  // MLA: replicated

  EngineArgs fp8;
  fp8.kv_cache_dtype = "fp8";
  EXPECT_EQ(plan_on("llama", "cuda:9.0", fp8).kv_bytes_per_token, 65536);
  // Packed formats' scale layouts are not modelled: the total is unknown, not wrong.
  EngineArgs nvfp4;
  nvfp4.kv_cache_dtype = "nvfp4";
  const ModelPlan packed = plan_on("llama", "cuda:10.0", nvfp4);
  EXPECT_FALSE(packed.kv_bytes_per_token);
  EXPECT_THAT(packed.groups[0].notes, ::testing::Contains("KV-cache bytes for --kv-cache-dtype nvfp4 are not modelled"));
  EngineArgs ds_mla;
  ds_mla.kv_cache_dtype = "fp8_ds_mla";
  EXPECT_EQ(plan_on("deepseek_v32", "cuda:9.0", ds_mla).kv_bytes_per_token, 61 * (656 + 132));
  // DeepseekV32's hook: a bfloat16 cache is the model dtype, spelled "auto".
  EngineArgs bf16;
  bf16.kv_cache_dtype = "bfloat16";
  const ModelPlan v32 = plan_on("deepseek_v32", "cuda:9.0", bf16);
  EXPECT_EQ(v32.kv_cache_dtype, CacheDType::auto_);
  EXPECT_EQ(v32.groups[0].config->kv_cache_dtype, CacheDType::auto_);
}

TEST(PlanSizes, EncoderDecoderAndMambaState) {
  const ModelPlan whisper = plan_on("whisper", "cuda:9.0");
  EXPECT_FALSE(whisper.groups[0].has_kv_cache);  // encoder self-attention
  EXPECT_EQ(whisper.cross_kv_bytes_per_encoder_token, 32 * 2 * 20 * 64 * 2);
  const ModelPlan jamba = plan_on("jamba", "cuda:9.0");
  // Mamba1 per layer: conv (4 - 1) x 8192 plus SSM 8192 x 16, in bfloat16.
  EXPECT_EQ(jamba.groups[0].state_bytes_per_sequence, (3 * 8192 + 8192 * 16) * 2);
  EXPECT_EQ(jamba.state_bytes_per_sequence, 28 * (3 * 8192 + 8192 * 16) * 2);
  // Nemotron-H keeps its SSM state in float32 (vLLM's default for it).
  const ModelPlan nemotron = plan_on("nemotron_h", "cuda:9.0");
  const std::int64_t conv = 3 * (128 * 64 + 2 * 8 * 128), ssm = 128 * 64 * 128;
  EXPECT_EQ(nemotron.groups[0].state_bytes_per_sequence, conv * 2 + ssm * 4);
}

// vLLM's update_block_size_for_backend, phase 2 (_align_hybrid_block_size): the attention
// block size grows, in steps of the kernel alignment, until one attention page holds one
// Mamba state page; then the Mamba page is padded to the attention page.
struct HybridExpect {
  const char* model;
  std::int64_t attn_bytes_per_token;  // one attention layer, bf16
  std::int64_t mamba_page;            // one Mamba-like layer's state
  int block_size;
};

TEST(PlanHybrid, TheAttentionPageHoldsAMambaStatePage) {
  const std::int64_t qwen3_next_state = (3 * (2 * 16 * 128 + 32 * 128) + 32 * 128 * 128) * 2;
  const std::int64_t granite_state = (3 * (3072 + 2 * 128) + 48 * 64 * 128) * 2;
  const HybridExpect cases[] = {
      {"qwen3_next", 2 * 2 * 256 * 2, qwen3_next_state, 544},  // 16 x ceil(1097728 / 32768)
      {"jamba", 2 * 8 * 128 * 2, (3 * 8192 + 8192 * 16) * 2, 80},
      {"granite4", 2 * 4 * 128 * 2, granite_state, 400},
      {"nemotron_h", 2 * 8 * 128 * 2, 3 * (8192 + 2 * 8 * 128) * 2 + 128 * 64 * 128 * 4, 1040},
      {"lfm2", 2 * 8 * 64 * 2, 2 * 2048 * 2, 16},  // the state fits a 16-token page: only padded
  };
  for (const HybridExpect& c : cases) {
    SCOPED_TRACE(c.model);
    const ModelPlan plan = plan_on(c.model, "cuda:9.0");
    EXPECT_EQ(plan.block_size.block_size, c.block_size);
    EXPECT_EQ(plan.block_size.block_size % 16, 0);
    EXPECT_GE(plan.block_size.block_size * c.attn_bytes_per_token, c.mamba_page);
    EXPECT_LT((plan.block_size.block_size - 16) * c.attn_bytes_per_token, c.mamba_page);
    EXPECT_EQ(plan.block_size.mamba_page_bytes, c.mamba_page);
    EXPECT_EQ(plan.block_size.mamba_page_padded, plan.block_size.block_size * c.attn_bytes_per_token);
    EXPECT_EQ(plan.block_size.raised_from, c.block_size == 16 ? std::nullopt : std::optional<int>(16));
    for (const PlanGroup& g : plan.groups) {
      if (g.has_kv_cache) {
        EXPECT_EQ(g.kernel_block_size, c.block_size);
      }
    }
  }
  const ModelPlan qwen = plan_on("qwen3_next", "cuda:9.0");
  std::vector<std::string> info;
  for (const LogLine& l : qwen.logs)
    if (l.level == LogLine::Level::info) info.push_back(l.text);
  EXPECT_THAT(info, ::testing::Contains("Setting attention block size to 544 tokens to ensure that attention page size "
                                        "is >= mamba page size."));
  EXPECT_THAT(info, ::testing::Contains("Padding mamba page size by 1.49% to ensure that mamba page size and attention "
                                        "page size are exactly equal."));
  EXPECT_EQ(qwen.block_size.source, "FLASH_ATTN.get_preferred_block_size(16)");
}

TEST(PlanHybrid, AnExactFitIsNotPadded) {
  // MiniMax-Text-01: a 64 x 128 x 128 bf16 linear-attention state is exactly 512 tokens of
  // 8 KV heads x 128 x 2 states in bf16.
  const ModelPlan minimax = plan_on("minimax", "cuda:9.0");
  EXPECT_EQ(minimax.block_size.block_size, 512);
  EXPECT_EQ(minimax.block_size.mamba_page_bytes, 64 * 128 * 128 * 2);
  EXPECT_FALSE(minimax.block_size.mamba_page_padded);
  EngineArgs fp8;
  fp8.kv_cache_dtype = "fp8";  // half the attention page: Qwen3-Next's state is 67 x 16 tokens exactly
  const ModelPlan qwen = plan_on("qwen3_next", "cuda:9.0", fp8);
  EXPECT_EQ(qwen.block_size.block_size, 1072);
  EXPECT_FALSE(qwen.block_size.mamba_page_padded);
}

TEST(PlanHybrid, AUserBlockSizeIsTheAlignmentAndIsRaisedOnlyWhenTooSmall) {
  EngineArgs args;
  args.block_size = 48;  // 48 x ceil(1097728 / (48 x 2048)) = 576
  ModelPlan plan = plan_on("qwen3_next", "cuda:9.0", args);
  EXPECT_EQ(plan.block_size.block_size, 576);
  EXPECT_EQ(plan.block_size.raised_from, 48);
  EXPECT_TRUE(plan.block_size.user_specified);
  args.block_size = 1024;
  plan = plan_on("qwen3_next", "cuda:9.0", args);
  EXPECT_EQ(plan.block_size.block_size, 1024);
  EXPECT_FALSE(plan.block_size.raised_from);
  EXPECT_EQ(plan.block_size.mamba_page_padded, 1024 * 2048);
}

TEST(PlanHybrid, TheCpuKeepsItsBlockSizeAndAnUnmodelledCacheIsNotAligned) {
  // The CPU platform's update_block_size_for_backend does nothing.
  const ModelPlan cpu = plan_on("qwen3_next", "cpu");
  EXPECT_EQ(cpu.block_size.block_size, 128);
  EXPECT_FALSE(cpu.block_size.raised_from);
  EXPECT_FALSE(cpu.block_size.mamba_page_bytes);
  EngineArgs nvfp4;
  nvfp4.kv_cache_dtype = "nvfp4";
  const ModelPlan packed = plan_on("qwen3_next", "cuda:10.0", nvfp4);
  EXPECT_FALSE(packed.block_size.raised_from);
  bool noted = false;
  for (const LogLine& l : packed.logs) noted = noted || l.text.find("attention page is not modelled") != std::string::npos;
  EXPECT_TRUE(noted);
}

// vLLM's Attention(attn_backend=...): a layer that brings its own backend is never selected.
TEST(PlanLayerBackend, ALayerThatBringsItsOwnBackendSkipsSelection) {
  ModelSpec model = load_example("llama");
  model.layers[0].attention->backend_class = "attnsel::backends::FlexAttentionBackend";
  EngineArgs args;
  args.attention_backend = "FLASHINFER";  // applies to selected layers only
  const ModelPlan plan = plan_on(model, parse_engine_args(args), "cuda:9.0");
  ASSERT_EQ(plan.groups.size(), 2u);
  const PlanGroup& own = plan.groups[0];
  EXPECT_EQ(own.layers_text, "0");
  EXPECT_EQ(own.backend, "FLEX_ATTENTION");
  EXPECT_EQ(own.class_path, "attnsel::backends::FlexAttentionBackend");
  EXPECT_EQ(own.request_source, "the layer's own backend (no selection)");
  EXPECT_FALSE(own.selection);
  EXPECT_FALSE(own.config);
  EXPECT_FALSE(own.error);
  EXPECT_TRUE(own.has_kv_cache);
  EXPECT_EQ(own.kernel_block_size, 16);
  EXPECT_EQ(plan.groups[1].layers_text, "1-31");
  EXPECT_EQ(plan.groups[1].backend, "FLASHINFER");
  EXPECT_EQ(plan.distinct_selections, 1u);
}

TEST(PlanLayerBackend, AnUnknownOwnBackendIsAnImportError) {
  ModelSpec model = load_example("llama");
  model.layers[3].attention->backend_class = "no::SuchBackend";
  const std::string message = plan_error([&] { (void)plan_on(model, parse_engine_args({}), "cuda:9.0"); });
  EXPECT_THAT(message, HasSubstr("No backend class named 'no::SuchBackend'"));
}

TEST(PlanMamba, BatchInvarianceGoesThroughTheMambaSelector) {
  EngineArgs args;
  args.batch_invariant = true;
  const std::string message = plan_error([&] { (void)plan_on("jamba", "cuda:9.0", args); });
  EXPECT_THAT(message, StartsWith("VLLM batch_invariant mode is not supported for "));
}

TEST(PlanFacts, ModelAndEngineFactsReachThePlatform) {
  EngineArgs args;
  args.attention_config = R"({"flash_attn_version": 2})";
  args.tensor_parallel_size = 2;
  const ModelSpec gemma = load_example("gemma2");
  const auto platform = make_plan_platform(gemma, parse_engine_args(args), "cuda:9.0");
  const RuntimeFacts& f = platform->env().facts;
  EXPECT_EQ(f.get_int("model.head_size"), 256);
  EXPECT_EQ(f.get_int("model.num_attention_heads"), 8);  // per rank
  EXPECT_EQ(f.get_int("model.num_kv_heads"), 4);
  EXPECT_TRUE(f.get_bool("model.attn_logit_softcapping"));
  EXPECT_EQ(f.get_int("flash_attn_version"), 2);
  // The user's --fact values come last and win.
  const auto overridden = make_plan_platform(gemma, parse_engine_args(args), "cuda:9.0", {"flash_attn_version=3"});
  EXPECT_EQ(overridden->env().facts.get_int("flash_attn_version"), 3);
}

}  // namespace
}  // namespace attnsel
