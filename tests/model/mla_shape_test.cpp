// MLA models' config.json → the layer's widths, its heads per rank and its softmax scale, as
// vLLM's DeepseekV2MLAAttention derives them; the RoPE parameters behind the scale (both
// spellings, vLLM's renames), and every bad-config message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "attnsel/errors.hpp"
#include "attnsel/plan.hpp"
#include "model_test_support.hpp"

namespace attnsel {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Expected scales, computed in double precision as vLLM computes them in Python
// (qk_head_dim**-0.5 * m * m with m = 0.1 * mscale_all_dim * math.log(factor) + 1.0).
constexpr double kPlainScale192 = 0.07216878364870322;  // 192^-0.5
constexpr double kV2LiteScale = 0.1147213867929261;     // factor 40, mscale_all_dim 0.707
constexpr double kV3Scale = 0.1352337788608801;         // factor 40, mscale_all_dim 1
constexpr double kKimiK2Scale = 0.13086079996295005;    // factor 32, mscale_all_dim 1
constexpr double kKimi256kScale = 0.14467962580268923;  // factor 64, mscale_all_dim 1

// The MLA fields of DeepSeek-V3 without its rope block, closing the JSON object after `extra`.
std::string v3_config(const std::string& extra, const std::string& model_type = "deepseek_v3") {
  return R"({"model_type":")" + model_type + R"(","architectures":["DeepseekV3ForCausalLM"],"num_hidden_layers":2,
             "num_attention_heads":128,"q_lora_rank":1536,"kv_lora_rank":512,"qk_rope_head_dim":64,
             "qk_nope_head_dim":128,"v_head_dim":128)" +
         (extra.empty() ? "" : "," + extra) + "}";
}

std::string yarn(double factor, const std::string& mscale_all_dim, const std::string& key = "rope_scaling") {
  std::string block = R"({"type":"yarn","factor":)" + std::to_string(factor) +
                      R"(,"original_max_position_embeddings":4096,"beta_fast":32,"beta_slow":1,"mscale":1.0)";
  if (!mscale_all_dim.empty()) block += R"(,"mscale_all_dim":)" + mscale_all_dim;
  return "\"" + key + "\":" + block + "}";
}

MlaShape mla_of(const std::string& json) {
  const ModelSpec m = parse_model_config(json, "m.json");
  EXPECT_TRUE(m.layers.at(0).attention->mla.has_value());
  return m.layers.at(0).attention->mla.value_or(MlaShape{});
}

double scale_of(const std::string& json) { return mla_of(json).softmax_scale; }

std::string error_of(const std::string& json) {
  try {
    (void)parse_model_config(json, "m.json");
  } catch (const ValueError& e) {
    return e.what();
  }
  return "";
}

void expect_close(double actual, double expected) { EXPECT_NEAR(actual, expected, 1e-12 * expected); }

TEST(MlaShape, WidthsAndDerivedSizes) {
  const MlaShape v3 = mla_of(v3_config(""));
  EXPECT_EQ(v3.kv_lora_rank, 512);
  EXPECT_EQ(v3.qk_rope_head_dim, 64);
  EXPECT_EQ(v3.qk_nope_head_dim, 128);
  EXPECT_EQ(v3.v_head_dim, 128);
  EXPECT_EQ(v3.q_lora_rank, 1536);
  EXPECT_EQ(v3.latent_size(), 576);
  EXPECT_EQ(v3.qk_head_size(), 192);
  // A plain q_proj (DeepSeek-V2-Lite) and other widths.
  const MlaShape odd = mla_of(R"({"model_type":"deepseek_v2","num_hidden_layers":1,"num_attention_heads":12,
                                  "q_lora_rank":null,"kv_lora_rank":256,"qk_rope_head_dim":32,"qk_nope_head_dim":64,
                                  "v_head_dim":96})");
  EXPECT_FALSE(odd.q_lora_rank);
  EXPECT_EQ(odd.latent_size(), 288);
  EXPECT_EQ(odd.qk_head_size(), 96);
  EXPECT_EQ(odd.v_head_dim, 96);
  const ModelSpec m = parse_model_config(v3_config(""), "m.json");
  const AttentionLayerSpec& a = *m.layers[0].attention;
  EXPECT_EQ(a.head_size, 576);
  EXPECT_EQ(a.head_size_v, 512);
  EXPECT_EQ(a.num_kv_heads, 1);
}

TEST(MlaSoftmaxScale, TheCheckpointsToTheLastBits) {
  expect_close(scale_of(v3_config(yarn(40, "0.707"), "deepseek_v2")), kV2LiteScale);
  expect_close(scale_of(v3_config(yarn(40, "1.0"))), kV3Scale);
  expect_close(scale_of(v3_config(yarn(40, "1.0"), "deepseek_v32")), kV3Scale);
  expect_close(scale_of(v3_config(yarn(32, "1.0"), "kimi_k2")), kKimiK2Scale);
  expect_close(scale_of(v3_config(yarn(64, "1.0"), "kimi_k2")), kKimi256kScale);
  const MlaShape v3 = mla_of(v3_config(yarn(40, "1.0")));
  EXPECT_EQ(v3.rope_type, "deepseek_yarn");
  EXPECT_EQ(v3.rope_factor, 40.0);
  EXPECT_EQ(v3.mscale_all_dim, 1.0);
  EXPECT_NEAR(v3.yarn_mscale, 1.3688879454113936, 1e-15);
}

TEST(MlaSoftmaxScale, WithoutRopeScalingItIsQkHeadSizeToTheMinusHalf) {
  const MlaShape s = mla_of(v3_config(R"("rope_theta":10000)"));
  expect_close(s.softmax_scale, kPlainScale192);  // not 576^-0.5, not 128^-0.5
  EXPECT_EQ(s.rope_type, "default");
  EXPECT_EQ(s.yarn_mscale, 1.0);
  EXPECT_FALSE(s.rope_factor);
  // The scale follows the widths: 64 + 32 → 96^-0.5.
  const std::string narrow = R"({"model_type":"deepseek_v3","num_hidden_layers":1,"num_attention_heads":8,
      "kv_lora_rank":512,"qk_rope_head_dim":32,"qk_nope_head_dim":64,"v_head_dim":64)";
  expect_close(scale_of(narrow + "}"), 0.10206207261596575);
  expect_close(scale_of(narrow + "," + yarn(40, "1") + "}"), 0.19124944415602058);
}

TEST(MlaSoftmaxScale, FactorAtMostOneBringsNoMscale) {
  for (double factor : {1.0, 0.5}) {
    const MlaShape s = mla_of(v3_config(yarn(factor, "1.0")));
    EXPECT_EQ(s.rope_type, "deepseek_yarn");
    EXPECT_EQ(s.yarn_mscale, 1.0) << factor;
    expect_close(s.softmax_scale, kPlainScale192);
  }
}

TEST(MlaSoftmaxScale, OnlyMscaleAllDimEntersAndAMissingOneCountsAsZero) {
  // mscale only shapes the rotary table.
  const std::string other_mscale = R"("rope_scaling":{"type":"yarn","factor":40,"original_max_position_embeddings":4096,
                                      "mscale":0.5,"mscale_all_dim":1.0})";
  expect_close(scale_of(v3_config(other_mscale)), kV3Scale);
  const MlaShape none = mla_of(v3_config(yarn(40, "")));
  EXPECT_EQ(none.mscale_all_dim, 0.0);
  EXPECT_EQ(none.yarn_mscale, 1.0);
  expect_close(none.softmax_scale, kPlainScale192);
}

TEST(MlaSoftmaxScale, BothSpellingsOfTheRopeParameters) {
  // transformers 5 writes rope_parameters with rope_type (and rope_theta inside).
  const std::string v5 = R"("rope_parameters":{"rope_type":"yarn","rope_theta":10000,"factor":40,
                            "original_max_position_embeddings":4096,"mscale":1.0,"mscale_all_dim":1.0})";
  expect_close(scale_of(v3_config(v5)), kV3Scale);
  // rope_scaling with "rope_type" instead of the legacy "type".
  const std::string modern_key = R"("rope_scaling":{"rope_type":"yarn","factor":40,
                                    "original_max_position_embeddings":4096,"mscale_all_dim":1.0})";
  expect_close(scale_of(v3_config(modern_key)), kV3Scale);
  // Both spellings, equal; both type keys, equal.
  const std::string block = R"({"type":"yarn","rope_type":"yarn","factor":32,"original_max_position_embeddings":4096,
                               "mscale_all_dim":1.0})";
  expect_close(scale_of(v3_config(R"("rope_scaling":)" + block + R"(,"rope_parameters":)" + block)), kKimiK2Scale);
  // A null block is no block.
  expect_close(scale_of(v3_config(R"("rope_scaling":null)")), kPlainScale192);
}

// vLLM's DeepSeek layers rename every non-default type: deepseek_yarn, or
// deepseek_llama_scaling (no mscale) when apply_yarn_scaling is false.
TEST(MlaSoftmaxScale, VllmRenamesTheRopeTypeBeforeItScales) {
  const MlaShape linear = mla_of(v3_config(R"("rope_scaling":{"type":"linear","factor":40,
      "original_max_position_embeddings":4096,"mscale_all_dim":1.0})"));
  EXPECT_EQ(linear.rope_type, "deepseek_yarn");
  expect_close(linear.softmax_scale, kV3Scale);
  const MlaShape llama = mla_of(v3_config(R"("rope_scaling":{"type":"yarn","factor":40,"apply_yarn_scaling":false,
      "original_max_position_embeddings":4096,"mscale_all_dim":1.0})"));
  EXPECT_EQ(llama.rope_type, "deepseek_llama_scaling");
  EXPECT_EQ(llama.yarn_mscale, 1.0);
  expect_close(llama.softmax_scale, kPlainScale192);
  // "default" keeps its factor out of the scale.
  const MlaShape def = mla_of(v3_config(R"("rope_scaling":{"rope_type":"default","factor":40,"mscale_all_dim":1.0})"));
  EXPECT_EQ(def.rope_type, "default");
  expect_close(def.softmax_scale, kPlainScale192);
  // vLLM copies a top-level original_max_position_embeddings into the block.
  expect_close(scale_of(v3_config(R"("original_max_position_embeddings":4096,
      "rope_scaling":{"type":"yarn","factor":40,"mscale_all_dim":1.0})")), kV3Scale);
}

// vLLM's ModelArchConfigConvertorBase.is_deepseek_mla: MLA only for its list of model types.
TEST(MlaShape, OtherModelTypesRunPlainAttentionWithThePaddedValue) {
  const ModelSpec m = parse_model_config(v3_config("", "my_deepseek_finetune"), "m.json");
  EXPECT_EQ(m.architecture, "DeepseekV3ForCausalLM");
  const AttentionLayerSpec& a = *m.layers[0].attention;
  EXPECT_FALSE(a.use_mla);
  EXPECT_FALSE(a.mla);
  EXPECT_EQ(a.num_kv_heads, 128);  // DeepseekV2Attention: one KV head per query head
  EXPECT_EQ(a.head_size, 192);
  EXPECT_EQ(a.head_size_v, 192);  // the value is padded to the query width before it is cached
  EXPECT_THAT(error_of(v3_config(R"("index_topk":2048)", "my_deepseek_finetune")),
              HasSubstr("m.json: field 'model_type': sparse attention (index_topk) needs MLA, which vLLM runs only for "
                        "the model types axk1, "));
}

TEST(MlaShape, TensorParallelSplitsTheHeadsNotTheLatent) {
  const ModelSpec v3 = parse_model_config(v3_config(yarn(40, "1.0")), "v3.json");
  for (int tp : {1, 2, 4, 8, 16, 32, 64, 128}) {
    const ModelSpec s = shard_model(v3, tp);
    const AttentionLayerSpec& a = *s.layers[0].attention;
    EXPECT_EQ(a.num_heads, 128 / tp);
    EXPECT_EQ(a.num_kv_heads, 1);
    EXPECT_EQ(a.head_size, 576);
    EXPECT_EQ(a.mla->kv_lora_rank, 512);
    expect_close(a.mla->softmax_scale, kV3Scale);
  }
  EXPECT_EQ(shard_model(parse_model_config(v3_config("", "kimi_k2"), "k.json"), 8).layers[0].attention->num_heads, 16);
  for (int tp : {3, 6, 256}) {
    try {
      (void)shard_model(v3, tp);
      ADD_FAILURE() << "TP " << tp << " should not divide 128 heads";
    } catch (const ValueError& e) {
      EXPECT_EQ(std::string(e.what()),
                "v3.json: field 'num_attention_heads': Total number of attention heads (128) must be divisible by "
                "tensor parallel size (" +
                    std::to_string(tp) + ").");
    }
  }
}

TEST(MlaShape, APlanGivesTheKernelDimensionsPerRankAndTheScale) {
  const ModelSpec kimi = parse_model_config(v3_config(yarn(32, "1.0"), "kimi_k2"), "k.json");
  EngineArgs args;
  args.tensor_parallel_size = 8;
  const EngineOptions options = parse_engine_args(args);
  Selector selector(make_plan_platform(kimi, options, "cuda:9.0", {}, SelectionMode::reference));
  const ModelPlan plan = make_plan(kimi, options, selector);
  ASSERT_EQ(plan.groups.size(), 1u);
  const kernel::MlaDims dims = mla_kernel_dims(plan.groups[0]);
  EXPECT_EQ(dims.num_heads, 16);  // 128 / 8
  EXPECT_EQ(dims.kv_lora_rank, 512);
  EXPECT_EQ(dims.qk_rope_head_dim, 64);
  EXPECT_EQ(dims.qk_nope_head_dim, 128);
  EXPECT_EQ(dims.v_head_dim, 128);
  EXPECT_EQ(dims.latent_size(), 576);
  expect_close(plan.groups[0].mla->softmax_scale, kKimiK2Scale);

  const ModelSpec llama = testing_support::load_example("llama");
  Selector llama_selector(make_plan_platform(llama, options, "cuda:9.0", {}, SelectionMode::reference));
  const ModelPlan dense = make_plan(llama, options, llama_selector);
  EXPECT_FALSE(dense.groups[0].mla);
  try {
    (void)mla_kernel_dims(dense.groups[0]);
    ADD_FAILURE() << "a dense group has no MLA dimensions";
  } catch (const ValueError& e) {
    EXPECT_EQ(std::string(e.what()), "layers 0-31: not an MLA group (it has no MLA dimensions)");
  }
}

// --- Bad configs: each names the file and the field ------------------------------------

TEST(MlaShapeBadInput, MissingOrNonPositiveWidths) {
  const std::string head = R"({"model_type":"deepseek_v3","num_hidden_layers":1,"num_attention_heads":8,)";
  EXPECT_THAT(error_of(head + R"("kv_lora_rank":512,"qk_nope_head_dim":128,"v_head_dim":128})"),
              HasSubstr("m.json: missing field 'qk_rope_head_dim' (expected an integer from 1 to 65536, which MLA "
                        "needs (kv_lora_rank is set))"));
  EXPECT_THAT(error_of(head + R"("kv_lora_rank":512,"qk_rope_head_dim":64,"v_head_dim":128})"),
              HasSubstr("missing field 'qk_nope_head_dim'"));
  EXPECT_THAT(error_of(head + R"("kv_lora_rank":512,"qk_rope_head_dim":64,"qk_nope_head_dim":128})"),
              HasSubstr("missing field 'v_head_dim'"));
  const std::string widths = R"("qk_rope_head_dim":64,"qk_nope_head_dim":128,"v_head_dim":128)";
  EXPECT_THAT(error_of(head + R"("kv_lora_rank":0,)" + widths + "}"),
              HasSubstr("m.json: field 'kv_lora_rank': expected an integer from 1 to 65536, got 0"));
  EXPECT_THAT(error_of(head + R"("kv_lora_rank":512,"qk_rope_head_dim":0,"qk_nope_head_dim":128,"v_head_dim":128})"),
              HasSubstr("field 'qk_rope_head_dim': expected an integer from 1 to 65536, got 0"));
  EXPECT_THAT(error_of(head + R"("kv_lora_rank":512,"qk_rope_head_dim":64,"qk_nope_head_dim":-128,"v_head_dim":128})"),
              HasSubstr("field 'qk_nope_head_dim': expected an integer from 1 to 65536, got -128"));
  EXPECT_THAT(error_of(head + R"("kv_lora_rank":512,"qk_rope_head_dim":64,"qk_nope_head_dim":128,"v_head_dim":"128"})"),
              HasSubstr("field 'v_head_dim': expected an integer from 1 to 65536, got string \"128\""));
  EXPECT_THAT(error_of(head + R"("kv_lora_rank":512,"q_lora_rank":0,)" + widths + "}"),
              HasSubstr("field 'q_lora_rank': expected an integer from 1 to 65536, got 0"));
}

TEST(MlaShapeBadInput, RopeFactorMustBeAPositiveNumber) {
  for (const std::string factor : {"0", "-4", "\"40\"", "true", "[40]"}) {
    EXPECT_THAT(error_of(v3_config(R"("rope_scaling":{"type":"yarn","original_max_position_embeddings":4096,"factor":)" +
                                   factor + "}")),
                HasSubstr("m.json: field 'rope_scaling.factor': expected a positive number (the RoPE scaling factor), "
                          "got "))
        << factor;
  }
  EXPECT_THAT(error_of(v3_config(R"("rope_parameters":{"rope_type":"yarn","factor":-1})")),
              HasSubstr("field 'rope_parameters.factor': expected a positive number (the RoPE scaling factor), got -1"));
}

TEST(MlaShapeBadInput, YarnNeedsAFactorAndTheOriginalLength) {
  EXPECT_THAT(error_of(v3_config(R"("rope_scaling":{"type":"yarn","original_max_position_embeddings":4096})")),
              HasSubstr("m.json: missing field 'rope_scaling.factor' (expected a positive number: vLLM's DeepSeek "
                        "layers run rope type \"yarn\" as deepseek_yarn, which needs it)"));
  EXPECT_THAT(error_of(v3_config(R"("rope_scaling":{"type":"yarn","factor":40})")),
              HasSubstr("missing field 'rope_scaling.original_max_position_embeddings' (expected a positive integer "
                        "(here or at the top level): vLLM's DeepSeek layers run rope type \"yarn\" as deepseek_yarn"));
}

TEST(MlaShapeBadInput, RopeTypeUnknownMissingOrConflicting) {
  EXPECT_THAT(error_of(v3_config(R"("rope_scaling":{"type":"yarnn","factor":40})")),
              HasSubstr("m.json: field 'rope_scaling.type': Unknown RoPE scaling type yarnn (vLLM's get_rope knows "
                        "default, linear, dynamic, ntk, yarn, longrope, llama3, "));
  EXPECT_THAT(error_of(v3_config(R"("rope_parameters":{"rope_type":"Yarn","factor":40})")),
              HasSubstr("field 'rope_parameters.rope_type': Unknown RoPE scaling type Yarn"));
  EXPECT_THAT(error_of(v3_config(R"("rope_scaling":{"factor":40,"original_max_position_embeddings":4096})")),
              HasSubstr("m.json: missing field 'rope_scaling.rope_type' (expected a string, or the legacy 'type' "
                        "(vLLM: rope_parameters should have a 'rope_type' key))"));
  EXPECT_THAT(error_of(v3_config(R"("rope_scaling":{"type":"linear","rope_type":"yarn","factor":40})")),
              HasSubstr("field 'rope_scaling.rope_type': Found conflicts between 'rope_type=yarn' (modern field) and "
                        "'type=linear' (legacy field). You should only specify one of them."));
  EXPECT_THAT(error_of(v3_config(R"("rope_scaling":{"type":7,"factor":40})")),
              HasSubstr("field 'rope_scaling.type': expected a string, got 7"));
  EXPECT_THAT(error_of(v3_config(R"("rope_scaling":{"type":"mrope"})")),
              HasSubstr("missing field 'rope_scaling.mrope_section' (expected an array (vLLM: Legacy rope_type "
                        "'mrope' requires 'mrope_section' in rope_parameters))"));
}

TEST(MlaShapeBadInput, MalformedRopeBlocks) {
  EXPECT_THAT(error_of(v3_config(R"("rope_scaling":"yarn")")),
              HasSubstr("m.json: field 'rope_scaling': expected an object, got string \"yarn\""));
  EXPECT_THAT(error_of(v3_config(R"("rope_scaling":{"type":"yarn","factor":40},"rope_parameters":{"rope_type":"yarn",
                                    "factor":32})")),
              HasSubstr("m.json: field 'rope_parameters': differs from field 'rope_scaling'; give the RoPE parameters "
                        "once"));
  EXPECT_THAT(error_of(v3_config(R"("rope_scaling":{"type":"yarn","factor":40,"original_max_position_embeddings":4096,
                                    "mscale_all_dim":"1.0"})")),
              HasSubstr("field 'rope_scaling.mscale_all_dim': expected a number, got string \"1.0\""));
  EXPECT_THAT(error_of(v3_config(R"("rope_scaling":{"type":"yarn","factor":40,"original_max_position_embeddings":4096,
                                    "beta_fast":"32"})")),
              HasSubstr("field 'rope_scaling.beta_fast': expected a number, got string \"32\""));
  EXPECT_THAT(error_of(v3_config(R"("rope_scaling":{"type":"yarn","factor":40,"original_max_position_embeddings":0})")),
              HasSubstr("field 'rope_scaling.original_max_position_embeddings': expected an integer from 1 to"));
  EXPECT_THAT(error_of(v3_config(R"("rope_scaling":{"type":"yarn","factor":40,"original_max_position_embeddings":4096,
                                    "apply_yarn_scaling":"no"})")),
              HasSubstr("field 'rope_scaling.apply_yarn_scaling': expected true or false"));
  // Regression: a huge mscale_all_dim made the scale infinite (JSON null in the report).
  EXPECT_THAT(error_of(v3_config(R"("rope_scaling":{"type":"yarn","factor":40,"original_max_position_embeddings":4096,
                                    "mscale_all_dim":1e300})")),
              HasSubstr("field 'rope_scaling.mscale_all_dim': 1e+300 makes yarn's factor m = 0.1 * mscale_all_dim * "
                        "ln(factor) + 1 so large that the softmax scale (times m^2) is not a finite number"));
  // The same rules hold where the model runs plain attention.
  EXPECT_THAT(error_of(v3_config(R"("rope_scaling":{"type":"yarn","factor":0})", "my_deepseek_finetune")),
              HasSubstr("field 'rope_scaling.factor': expected a positive number"));
}

}  // namespace
}  // namespace attnsel
