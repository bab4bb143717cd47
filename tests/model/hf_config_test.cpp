// Reading config.json: every example family into its per-layer specs, vLLM's dtype rule,
// the tensor-parallel split, and every bad-input message (file, field, what was expected).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "attnsel/errors.hpp"
#include "attnsel/plan.hpp"
#include "model/hf_config.hpp"
#include "model_test_support.hpp"

namespace attnsel {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using testing_support::every;
using testing_support::is_attention;
using testing_support::is_mamba;
using testing_support::is_sliding;
using testing_support::layer_indices;
using testing_support::load_example;
using testing_support::value_error;

std::string parse_error(const std::string& json) {
  return value_error([&] { (void)parse_model_config(json, "test.json"); });
}

TEST(HfConfigFamilies, TablesAreSortedSoTheErrorListsNamesInOrder) {
  const auto f = model::families();
  EXPECT_TRUE(std::is_sorted(f.begin(), f.end(),
                             [](const model::Family& a, const model::Family& b) { return a.model_type < b.model_type; }));
  const auto a = model::architectures();
  EXPECT_TRUE(std::adjacent_find(a.begin(), a.end(), [](const model::Architecture& x, const model::Architecture& y) {
                return x.name >= y.name;
              }) == a.end());
  EXPECT_EQ(supported_architectures().size(), a.size());
}

// vLLM resolves the model class from `architectures`: the first entry it registers decides.
TEST(HfConfigFamilies, ArchitectureDecidesOverModelType) {
  const std::string mla = R"("num_hidden_layers":2,"num_attention_heads":64,"kv_lora_rank":512,"qk_rope_head_dim":64,
                             "qk_nope_head_dim":128,"v_head_dim":128)";
  // Kimi-K2: a model_type of its own, vLLM's DeepseekV3ForCausalLM.
  const ModelSpec kimi =
      parse_model_config(R"({"model_type":"kimi_k2","architectures":["DeepseekV3ForCausalLM"],)" + mla + "}", "k.json");
  EXPECT_EQ(kimi.model_type, "kimi_k2");
  EXPECT_EQ(kimi.architecture, "DeepseekV3ForCausalLM");
  ASSERT_EQ(kimi.layers.size(), 2u);
  EXPECT_TRUE(kimi.layers[0].attention->use_mla);
  EXPECT_EQ(kimi.layers[0].attention->head_size, 576);

  // The first entry vLLM registers wins, even over a known model_type: Mistral's reader
  // slides every layer, Qwen2's would not without use_sliding_window.
  const ModelSpec m = parse_model_config(
      R"({"model_type":"qwen2","architectures":["MyWrapperForCausalLM","MistralForCausalLM","Qwen2ForCausalLM"],
          "num_attention_heads":8,"num_key_value_heads":2,"hidden_size":512,"num_hidden_layers":2,"sliding_window":64})",
      "m.json");
  EXPECT_EQ(m.architecture, "MistralForCausalLM");
  EXPECT_EQ(layer_indices(m, is_sliding), every(0, 1, 1));
}

TEST(HfConfigFamilies, ModelTypeDecidesWhenNoArchitectureIsKnown) {
  const std::string body = R"("num_attention_heads":8,"num_key_value_heads":2,"hidden_size":512,"num_hidden_layers":2,
                              "sliding_window":64})";
  // Not registered by vLLM (T5, Bart) or not given: the model_type's family reads it.
  const ModelSpec t5 = load_example("t5");
  EXPECT_EQ(t5.architecture, "T5ForConditionalGeneration");
  EXPECT_EQ(t5.layers.size(), 36u);
  const ModelSpec unknown = parse_model_config(R"({"model_type":"qwen2","architectures":["Qwen2ForRewardModel"],)" + body,
                                               "q.json");
  EXPECT_EQ(unknown.architecture, "Qwen2ForRewardModel");
  EXPECT_TRUE(layer_indices(unknown, is_sliding).empty());  // Qwen2's reader
  for (const std::string arch : {"", R"("architectures":[],)", R"("architectures":null,)"}) {
    const ModelSpec m = parse_model_config(R"({"model_type":"mistral",)" + arch + body, "m.json");
    EXPECT_EQ(m.architecture, "") << arch;
    EXPECT_EQ(layer_indices(m, is_sliding), every(0, 1, 1)) << arch;
  }
}

TEST(HfConfigLlama, GqaHeadsFromHiddenSize) {
  const ModelSpec m = load_example("llama");
  EXPECT_EQ(m.model_type, "llama");
  EXPECT_EQ(m.architecture, "LlamaForCausalLM");
  ASSERT_EQ(m.layers.size(), 32u);
  const AttentionLayerSpec& a = *m.layers[7].attention;
  EXPECT_EQ(a.num_heads, 32);
  EXPECT_EQ(a.num_kv_heads, 8);
  EXPECT_EQ(a.head_size, 128);
  EXPECT_FALSE(a.sliding_window);
  EXPECT_EQ(a.attn_type, AttentionType::decoder);
  EXPECT_EQ(resolve_model_dtype(m, "auto"), DType::bfloat16);
}

TEST(HfConfigMistral, ModelLevelSlidingWindowAppliesToEveryLayer) {
  const ModelSpec m = load_example("mistral");
  EXPECT_EQ(layer_indices(m, is_sliding), every(0, 31, 1));
  EXPECT_EQ(*m.layers[0].attention->sliding_window, 4096);
}

TEST(HfConfigQwen, SlidingWindowNeedsUseSlidingWindow) {
  const ModelSpec q2 = load_example("qwen2");
  EXPECT_EQ(q2.layers.size(), 28u);
  EXPECT_EQ(q2.layers[0].attention->head_size, 128);  // 3584 / 28
  EXPECT_EQ(q2.layers[0].attention->num_kv_heads, 4);
  EXPECT_TRUE(layer_indices(q2, is_sliding).empty());  // sliding_window is set, use_sliding_window is not
  const ModelSpec q3 = load_example("qwen3");
  EXPECT_EQ(q3.layers.size(), 36u);
  EXPECT_EQ(q3.layers[0].attention->head_size, 128);

  // With use_sliding_window, the layers from max_window_layers on slide.
  const ModelSpec w = parse_model_config(
      R"({"model_type":"qwen2","num_attention_heads":8,"num_key_value_heads":2,"hidden_size":512,
          "num_hidden_layers":6,"use_sliding_window":true,"sliding_window":1024,"max_window_layers":4})",
      "qwen.json");
  EXPECT_THAT(layer_indices(w, is_sliding), ElementsAre(4, 5));
}

TEST(HfConfigGemma2, AlternatingSlidingLayersSoftcapAndFloat32Checkpoint) {
  const ModelSpec m = load_example("gemma2");
  ASSERT_EQ(m.layers.size(), 42u);
  EXPECT_EQ(layer_indices(m, is_sliding), every(0, 40, 2));
  const AttentionLayerSpec& a = *m.layers[1].attention;
  EXPECT_EQ(a.head_size, 256);
  EXPECT_EQ(a.num_heads, 16);
  EXPECT_EQ(a.num_kv_heads, 8);
  EXPECT_EQ(a.logits_soft_cap, 50.0);
  EXPECT_EQ(*m.layers[0].attention->sliding_window, 4096);
  // vLLM runs float32 checkpoints in bfloat16 unless --dtype says otherwise.
  EXPECT_TRUE(m.config_dtype_float32);
  EXPECT_EQ(resolve_model_dtype(m, "auto"), DType::bfloat16);
  EXPECT_EQ(resolve_model_dtype(m, "float32"), DType::float32);
  EXPECT_EQ(resolve_model_dtype(m, "half"), DType::float16);
}

TEST(HfConfigGemma2, SoftcapDefaultsTo50ButAnExplicitNullTurnsItOff) {
  const std::string base = R"({"model_type":"gemma2","num_hidden_layers":2)";
  EXPECT_EQ(parse_model_config(base + "}", "g.json").layers[0].attention->logits_soft_cap, 50.0);
  EXPECT_FALSE(parse_model_config(base + R"(,"attn_logit_softcapping":null})", "g.json").layers[0].attention->logits_soft_cap);
}

TEST(HfConfigGemma3, TextModelEverySixthLayerIsFull) {
  const ModelSpec m = load_example("gemma3_text");
  ASSERT_EQ(m.layers.size(), 26u);
  EXPECT_EQ(layer_indices(m, [](const LayerSpec& l) { return !is_sliding(l); }), every(5, 23, 6));
  EXPECT_EQ(*m.layers[0].attention->sliding_window, 512);
  EXPECT_EQ(m.layers[0].attention->num_kv_heads, 1);
  EXPECT_FALSE(m.is_mm_prefix_lm);
  EXPECT_FALSE(m.layers[0].attention->use_mm_prefix);
}

TEST(HfConfigGemma3, VisionModelUsesTextConfigDefaultsAndMultimodalPrefix) {
  const ModelSpec m = load_example("gemma3");
  ASSERT_EQ(m.layers.size(), 34u);
  EXPECT_TRUE(m.is_mm_prefix_lm);
  for (const LayerSpec& l : m.layers) EXPECT_TRUE(l.attention->use_mm_prefix);
  const AttentionLayerSpec& a = *m.layers[0].attention;
  EXPECT_EQ(a.num_heads, 8);       // transformers' Gemma3TextConfig defaults
  EXPECT_EQ(a.num_kv_heads, 4);
  EXPECT_EQ(a.head_size, 256);
  EXPECT_EQ(a.heads_field, "text_config.num_attention_heads");
  EXPECT_EQ(layer_indices(m, [](const LayerSpec& l) { return !is_sliding(l); }), every(5, 29, 6));
  EXPECT_EQ(*a.sliding_window, 1024);
}

TEST(HfConfigGptOss, SinksOnEveryLayerAndAlternatingWindow) {
  const ModelSpec m = load_example("gpt_oss");
  ASSERT_EQ(m.layers.size(), 24u);
  for (const LayerSpec& l : m.layers) EXPECT_TRUE(l.attention->has_sink);
  EXPECT_EQ(layer_indices(m, is_sliding), every(0, 22, 2));
  EXPECT_EQ(*m.layers[0].attention->sliding_window, 128);
  EXPECT_EQ(m.layers[0].attention->head_size, 64);
}

TEST(HfConfigDeepSeek, MlaHeadSizeIsLatentPlusRope) {
  const ModelSpec v2 = load_example("deepseek_v2");
  ASSERT_EQ(v2.layers.size(), 27u);
  const AttentionLayerSpec& a = *v2.layers[0].attention;
  EXPECT_TRUE(a.use_mla);
  EXPECT_FALSE(a.use_sparse);
  EXPECT_EQ(a.head_size, 576);  // 512 + 64
  EXPECT_EQ(a.num_kv_heads, 1);
  EXPECT_EQ(a.num_heads, 16);
  EXPECT_EQ(a.mla->qk_nope_head_dim, 128);
  EXPECT_EQ(a.mla->kv_lora_rank, 512);
  EXPECT_FALSE(a.mla->q_lora_rank);  // V2-Lite: a plain q_proj
  const ModelSpec v3 = load_example("deepseek_v3");
  EXPECT_EQ(v3.layers.size(), 61u);
  EXPECT_EQ(v3.layers[60].attention->num_heads, 128);
}

// The example configs carry their checkpoints' rope_scaling blocks; the scales are vLLM's,
// computed in double precision as it computes them.
TEST(HfConfigDeepSeek, ExamplesHaveTheirCheckpointsSoftmaxScale) {
  const std::vector<std::pair<std::string, double>> expected = {{"deepseek_v2", 0.1147213867929261},
                                                                {"deepseek_v3", 0.1352337788608801},
                                                                {"deepseek_v32", 0.1352337788608801},
                                                                {"kimi_k2", 0.13086079996295005}};
  for (const auto& [name, scale] : expected) {
    const ModelSpec m = load_example(name);
    const MlaShape& s = *m.layers[0].attention->mla;
    EXPECT_NEAR(s.softmax_scale, scale, 1e-12 * scale) << name;
    EXPECT_EQ(s.rope_type, "deepseek_yarn") << name;
    EXPECT_EQ(s.qk_head_size(), 192) << name;
    EXPECT_EQ(s.latent_size(), 576) << name;
  }
}

TEST(HfConfigDeepSeek, KimiK2IsDeepSeekV3WithItsOwnModelType) {
  const ModelSpec m = load_example("kimi_k2");
  EXPECT_EQ(m.model_type, "kimi_k2");
  EXPECT_EQ(m.architecture, "DeepseekV3ForCausalLM");
  ASSERT_EQ(m.layers.size(), 61u);
  const AttentionLayerSpec& a = *m.layers[0].attention;
  EXPECT_TRUE(a.use_mla);
  EXPECT_FALSE(a.use_sparse);
  EXPECT_EQ(a.num_heads, 64);
  EXPECT_EQ(a.head_size, 576);
  EXPECT_EQ(a.mla->q_lora_rank, 1536);
  EXPECT_EQ(a.mla->rope_factor, 32.0);
  EXPECT_EQ(shard_model(m, 8).layers[0].attention->num_heads, 8);
}

TEST(HfConfigDeepSeek, V32IsSparseMlaWithAnIndexerPerLayer) {
  const ModelSpec m = load_example("deepseek_v32");
  ASSERT_EQ(m.layers.size(), 122u);
  EXPECT_EQ(layer_indices(m, is_attention), every(0, 60, 1));
  EXPECT_EQ(layer_indices(m, [](const LayerSpec& l) { return l.mixer == MixerKind::indexer; }), every(0, 60, 1));
  EXPECT_TRUE(m.layers[0].attention->use_sparse);
  EXPECT_EQ(m.layers[0].attention->index_topk, 2048);
  EXPECT_EQ(m.layers[1].role, "indexer");
  EXPECT_EQ(m.layers[1].attention->head_size, 128);
}

// vLLM's DeepseekV2Attention: one KV head per query head (num_key_value_heads is not read),
// and the 128-wide value padded to the 192-wide query before it is cached.
TEST(HfConfigDeepSeek, WithoutKvLoraRankItIsPlainAttentionWithThePaddedValue) {
  const ModelSpec m = parse_model_config(
      R"({"model_type":"deepseek_v2","num_hidden_layers":2,"num_attention_heads":16,"num_key_value_heads":4,
          "qk_nope_head_dim":128,"qk_rope_head_dim":64,"v_head_dim":128,"kv_lora_rank":null})",
      "d.json");
  const AttentionLayerSpec& a = *m.layers[0].attention;
  EXPECT_FALSE(a.use_mla);
  EXPECT_FALSE(a.mla);
  EXPECT_EQ(a.num_kv_heads, 16);
  EXPECT_EQ(a.head_size, 192);
  EXPECT_EQ(a.head_size_v, 192);
  EXPECT_THAT(parse_error(R"({"model_type":"deepseek_v2","num_hidden_layers":2,"num_attention_heads":16,
                              "qk_nope_head_dim":64,"qk_rope_head_dim":32,"v_head_dim":128})"),
              HasSubstr("field 'v_head_dim': v_head_dim (128) must not exceed qk_nope_head_dim + qk_rope_head_dim (96)"));
}

TEST(HfConfigHybrids, Qwen3NextGdnWithFullAttentionEveryFourthLayer) {
  const ModelSpec m = load_example("qwen3_next");
  ASSERT_EQ(m.layers.size(), 48u);
  EXPECT_EQ(layer_indices(m, is_attention), every(3, 47, 4));
  EXPECT_EQ(layer_indices(m, is_mamba).size(), 36u);
  const MambaLayerSpec& g = *m.layers[0].mamba;
  EXPECT_EQ(g.backend, "GDN_ATTN");
  EXPECT_EQ(g.num_heads, 32);
  EXPECT_EQ(g.num_k_heads, 16);
  EXPECT_EQ(m.layers[3].attention->head_size, 256);
  EXPECT_EQ(m.layers[3].attention->num_kv_heads, 2);
}

TEST(HfConfigHybrids, JambaAttentionAtOffsetOfEachPeriod) {
  const ModelSpec m = load_example("jamba");
  EXPECT_EQ(layer_indices(m, is_attention), every(4, 28, 8));
  EXPECT_EQ(m.layers[0].mamba->backend, "MAMBA1");
  EXPECT_EQ(m.layers[0].mamba->intermediate_size, 8192);  // mamba_expand * hidden_size
}

TEST(HfConfigHybrids, GraniteLayerTypesAndMamba2Heads) {
  const ModelSpec m = load_example("granite4");
  EXPECT_THAT(layer_indices(m, is_attention), ElementsAre(5, 15, 25, 35));
  const MambaLayerSpec& s = *m.layers[0].mamba;
  EXPECT_EQ(s.backend, "MAMBA2");
  EXPECT_EQ(s.num_heads, 48);
  EXPECT_EQ(s.head_dim, 64);
  EXPECT_EQ(s.d_state, 128);
}

TEST(HfConfigHybrids, NemotronHPatternSkipsMlpLayers) {
  const ModelSpec m = load_example("nemotron_h");
  EXPECT_EQ(m.num_hidden_layers, 55);
  EXPECT_EQ(layer_indices(m, is_attention), every(7, 43, 9));
  EXPECT_EQ(layer_indices(m, is_mamba).size(), 25u);
  EXPECT_EQ(m.layers[0].mamba->n_groups, 8);
  EXPECT_EQ(m.layers[0].mamba->intermediate_size, 128 * 64);
}

TEST(HfConfigHybrids, MiniMaxLinearAttentionAndLfm2ShortConv) {
  const ModelSpec mm = load_example("minimax");
  EXPECT_EQ(layer_indices(mm, is_attention), every(7, 79, 8));
  EXPECT_EQ(mm.layers[0].mamba->backend, "LINEAR");
  const ModelSpec lfm = load_example("lfm2");
  EXPECT_THAT(layer_indices(lfm, is_attention), ElementsAre(2, 5, 8, 10, 12, 14));
  EXPECT_EQ(lfm.layers[0].mamba->backend, "SHORT_CONV");
  // The older full_attn_idxs spelling gives the same layers.
  const ModelSpec old = parse_model_config(
      R"({"model_type":"lfm2","num_hidden_layers":4,"num_attention_heads":4,"hidden_size":256,
          "full_attn_idxs":[1,3]})",
      "lfm2.json");
  EXPECT_THAT(layer_indices(old, is_attention), ElementsAre(1, 3));
  const ModelSpec mamba = load_example("mamba");
  EXPECT_EQ(layer_indices(mamba, is_mamba).size(), 64u);
}

TEST(HfConfigEncoders, BertIsEncoderOnlyAndPoolingDtypeIsFloat16) {
  const ModelSpec m = load_example("bert");
  ASSERT_EQ(m.layers.size(), 12u);
  EXPECT_TRUE(m.is_encoder_only);
  EXPECT_EQ(m.layers[0].attention->attn_type, AttentionType::encoder_only);
  EXPECT_EQ(m.layers[0].attention->head_size, 64);
  EXPECT_FALSE(m.config_dtype);
  EXPECT_EQ(resolve_model_dtype(m, "auto"), DType::float16);
}

TEST(HfConfigEncoders, WhisperAndT5HaveEncoderDecoderAndCrossAttention) {
  for (const std::string name : {"whisper", "t5"}) {
    const ModelSpec m = load_example(name);
    auto count = [&](std::string_view stack, std::string_view role, AttentionType t) {
      return std::count_if(m.layers.begin(), m.layers.end(), [&](const LayerSpec& l) {
        return l.stack == stack && l.role == role && l.attention->attn_type == t;
      });
    };
    const long n = name == "whisper" ? 32 : 12;
    EXPECT_EQ(count("encoder", "self_attn", AttentionType::encoder), n) << name;
    EXPECT_EQ(count("decoder", "self_attn", AttentionType::decoder), n) << name;
    EXPECT_EQ(count("decoder", "cross_attn", AttentionType::encoder_decoder), n) << name;
    EXPECT_EQ(m.layers[0].attention->head_size, 64) << name;
  }
}

TEST(HfConfigLoad, FolderHoldingConfigJson) {
  const auto dir = std::filesystem::temp_directory_path() / "attnsel_model_folder_test";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(testing_support::examples_dir() / "llama.json", dir / "config.json",
                             std::filesystem::copy_options::overwrite_existing);
  EXPECT_EQ(load_model_config(dir).layers.size(), 32u);
  std::filesystem::remove_all(dir);
  EXPECT_THAT(value_error([&] { (void)load_model_config(dir); }), HasSubstr("no such file or folder"));
  std::filesystem::create_directories(dir);
  EXPECT_THAT(value_error([&] { (void)load_model_config(dir); }), HasSubstr("no config.json in this folder"));
  std::filesystem::remove_all(dir);
}

TEST(HfConfigDefault, Llama3Shape) {
  const ModelSpec m = default_model();
  ASSERT_EQ(m.layers.size(), 32u);
  EXPECT_EQ(m.layers[0].attention->num_kv_heads, 8);
  EXPECT_EQ(m.source, "<built-in default>");
}

TEST(HfConfigLayerIndices, ReadableRanges) {
  auto f = [](std::vector<int> v) { return format_layer_indices(v); };
  EXPECT_EQ(f({}), "");
  EXPECT_EQ(f({3}), "3");
  EXPECT_EQ(f({0, 1, 2, 3}), "0-3");
  EXPECT_EQ(f({0, 2, 4, 6}), "0-6 (every 2nd)");
  EXPECT_EQ(f({5, 11, 17}), "5-17 (every 6th)");
  EXPECT_EQ(f({3, 14, 25}), "3-25 (every 11th)");
  EXPECT_EQ(f({0, 1, 2, 4, 5, 7}), "0-2,4-5,7");
  EXPECT_EQ(f({1, 3}), "1,3");
}

// --- Bad input: every message names the file, the field and what was expected ----------

TEST(HfConfigBadInput, MalformedJson) {
  EXPECT_THAT(parse_error(R"({"model_type": "llama",)"),
              AllOf(HasSubstr("test.json: malformed JSON: "), HasSubstr("parse error"),
                    ::testing::Not(HasSubstr("[json.exception"))));
  EXPECT_THAT(parse_error("[1, 2]"), HasSubstr("test.json: expected a JSON object at the top level, got an array"));
  EXPECT_THAT(parse_error("\"\xff\""), HasSubstr("test.json: malformed JSON"));
}

TEST(HfConfigBadInput, MissingOrUnknownModelType) {
  EXPECT_THAT(parse_error("{}"),
              AllOf(HasSubstr("test.json: missing field 'model_type' (expected one of: bart, bert,"),
                    HasSubstr("xlm-roberta")));
  // A known architecture does not make up for a missing model_type (transformers needs it).
  EXPECT_THAT(parse_error(R"({"architectures":["LlamaForCausalLM"]})"), HasSubstr("missing field 'model_type'"));
  EXPECT_THAT(parse_error(R"({"model_type":"gpt_neo"})"),
              AllOf(HasSubstr("test.json: unsupported model: there is no field 'architectures', and field "
                              "'model_type' (\"gpt_neo\") is not a supported model type. Supported architectures: "
                              "BertForSequenceClassification, "),
                    HasSubstr("Supported model types: bart, bert, "), HasSubstr("xlm-roberta.")));
  EXPECT_THAT(parse_error(R"({"model_type":7})"), HasSubstr("field 'model_type': expected a string, got 7"));
}

TEST(HfConfigBadInput, UnknownArchitectureAndModelTypeNameBothFields) {
  EXPECT_THAT(parse_error(R"({"model_type":"kimi_k3","architectures":["KimiK3ForCausalLM","Foo\u0001"]})"),
              AllOf(HasSubstr("test.json: unsupported model: field 'architectures' ([\"KimiK3ForCausalLM\", "
                              "\"Foo\\x01\"]) names no supported architecture, and field 'model_type' "
                              "(\"kimi_k3\") is not a supported model type. Supported architectures: "),
                    HasSubstr("DeepseekV3ForCausalLM"), HasSubstr("Supported model types: bart, ")));
  // Long lists are cut.
  EXPECT_THAT(parse_error(R"({"model_type":"x","architectures":["A","B","C","D","E","F"]})"),
              HasSubstr(R"(["A", "B", "C", "D", ... (6 in all)])"));
  EXPECT_THAT(parse_error(R"({"model_type":"llama","architectures":["LlamaForCausalLM",7]})"),
              HasSubstr("test.json: field 'architectures': element 1: expected a string, got 7"));
}

TEST(HfConfigBadInput, MissingAndMistypedFields) {
  EXPECT_THAT(parse_error(R"({"model_type":"llama","num_hidden_layers":2})"),
              HasSubstr("test.json: missing field 'num_attention_heads' (expected an integer from 1 to 65536)"));
  EXPECT_THAT(parse_error(R"({"model_type":"llama","num_attention_heads":"32"})"),
              HasSubstr("test.json: field 'num_attention_heads': expected an integer from 1 to 65536, got string \"32\""));
  EXPECT_THAT(parse_error(R"({"model_type":"llama","num_attention_heads":32.5})"),
              HasSubstr("field 'num_attention_heads': expected an integer from 1 to 65536, got 32.5"));
  EXPECT_THAT(parse_error(R"({"model_type":"llama","num_attention_heads":-4})"),
              HasSubstr("got -4"));
  EXPECT_THAT(parse_error(R"({"model_type":"llama","num_attention_heads":32.0})"), HasSubstr("got 32.0"));
  // Regression: describing a huge float must not cast it to an integer (undefined behaviour).
  EXPECT_THAT(parse_error(R"({"model_type":"llama","num_attention_heads":1e300})"), HasSubstr("got 1e+300"));
  EXPECT_THAT(parse_error(R"({"model_type":"llama","num_attention_heads":4,"head_dim":64,"num_hidden_layers":1000000000})"),
              HasSubstr("field 'num_hidden_layers': expected an integer from 1 to 4096, got 1000000000"));
  EXPECT_THAT(parse_error(R"({"model_type":"llama","num_attention_heads":4,"head_dim":64,"num_hidden_layers":2,
                              "torch_dtype":"int8"})"),
              HasSubstr("field 'torch_dtype': expected one of \"float16\", \"bfloat16\", \"float32\", got string \"int8\""));
  EXPECT_THAT(parse_error(R"({"model_type":"gemma3","text_config":[]})"),
              HasSubstr("field 'text_config': expected an object, got an array of 0 elements"));
  EXPECT_THAT(parse_error(R"({"model_type":"gemma3","text_config":{"num_attention_heads":"x"}})"),
              HasSubstr("field 'text_config.num_attention_heads': expected an integer"));
  EXPECT_THAT(parse_error(R"({"model_type":"llama","architectures":"Llama"})"),
              HasSubstr("field 'architectures': expected an array of strings, got string \"Llama\""));
  EXPECT_THAT(parse_error(R"({"model_type":"qwen2","num_attention_heads":4,"hidden_size":256,"num_hidden_layers":2,
                              "use_sliding_window":"yes"})"),
              HasSubstr("field 'use_sliding_window': expected true or false, got string \"yes\""));
}

TEST(HfConfigBadInput, InconsistentHeads) {
  EXPECT_THAT(parse_error(R"({"model_type":"llama","num_attention_heads":32,"num_key_value_heads":5,
                              "hidden_size":4096,"num_hidden_layers":2})"),
              HasSubstr("test.json: field 'num_key_value_heads': num_heads (32) is not divisible by num_kv_heads (5)"));
  EXPECT_THAT(parse_error(R"({"model_type":"llama","num_attention_heads":3,"hidden_size":1000,"num_hidden_layers":2})"),
              HasSubstr("field 'hidden_size': hidden_size (1000) is not divisible by num_attention_heads (3), and no "
                        "head_dim is given"));
  EXPECT_THAT(parse_error(R"({"model_type":"whisper","d_model":1280,"encoder_attention_heads":3,
                              "decoder_attention_heads":20,"encoder_layers":2,"decoder_layers":2})"),
              HasSubstr("field 'encoder_attention_heads': d_model (1280) is not divisible by encoder_attention_heads (3)"));
}

TEST(HfConfigBadInput, LayerPatterns) {
  EXPECT_THAT(parse_error(R"({"model_type":"gpt_oss","num_attention_heads":4,"head_dim":64,"num_hidden_layers":3,
                              "sliding_window":128,"layer_types":["sliding_attention","full_attention"]})"),
              HasSubstr("field 'layer_types': expected an array of 3 strings, each one of \"full_attention\", "
                        "\"sliding_attention\", got an array of 2 elements"));
  EXPECT_THAT(parse_error(R"({"model_type":"gpt_oss","num_attention_heads":4,"head_dim":64,"num_hidden_layers":2,
                              "sliding_window":128,"layer_types":["sliding_attention","global"]})"),
              HasSubstr("field 'layer_types': element 1: expected one of \"full_attention\", \"sliding_attention\", "
                        "got string \"global\""));
  EXPECT_THAT(parse_error(R"({"model_type":"llama","num_attention_heads":4,"head_dim":64,"num_hidden_layers":2,
                              "layer_types":["sliding_attention","full_attention"]})"),
              HasSubstr("missing field 'sliding_window' (expected a positive integer, since layer_types has "
                        "sliding_attention layers)"));
  EXPECT_THAT(parse_error(R"({"model_type":"nemotron_h","num_hidden_layers":3,"hybrid_override_pattern":"M*X",
                              "num_attention_heads":4,"hidden_size":256})"),
              HasSubstr("field 'hybrid_override_pattern': character 2 is not one of M (Mamba2), * (attention), - (MLP), E (MoE)"));
  EXPECT_THAT(parse_error(R"({"model_type":"nemotron_h","num_hidden_layers":3,"hybrid_override_pattern":"M*"})"),
              HasSubstr("field 'hybrid_override_pattern': expected a string of 3 characters (num_hidden_layers)"));
  EXPECT_THAT(parse_error(R"({"model_type":"granitemoehybrid","num_hidden_layers":2,"num_attention_heads":4,
                              "hidden_size":256})"),
              HasSubstr("missing field 'layer_types' (expected an array of 2 strings, each \"mamba\" or \"attention\")"));
  EXPECT_THAT(parse_error(R"({"model_type":"minimax","num_hidden_layers":2,"num_attention_heads":4,"hidden_size":256,
                              "attn_type_list":[0,2]})"),
              HasSubstr("field 'attn_type_list': element 1: expected an integer from 0 to 1, got 2"));
  EXPECT_THAT(parse_error(R"({"model_type":"jamba","num_hidden_layers":8,"num_attention_heads":4,"hidden_size":256,
                              "attn_layer_period":4,"attn_layer_offset":4})"),
              HasSubstr("field 'attn_layer_offset': attn_layer_offset (4) must be smaller than attn_layer_period (4)"));
  EXPECT_THAT(parse_error(R"({"model_type":"deepseek_v32","num_hidden_layers":2,"num_attention_heads":4,
                              "qk_rope_head_dim":64,"qk_nope_head_dim":128,"v_head_dim":128,"index_topk":2048})"),
              HasSubstr("missing field 'kv_lora_rank' (expected a positive integer: sparse attention (index_topk) needs MLA)"));
}

TEST(HfConfigBadInput, TensorParallelSplit) {
  const ModelSpec llama = load_example("llama");
  EXPECT_THAT(value_error([&] { (void)shard_model(llama, 3); }),
              HasSubstr("llama.json: field 'num_attention_heads': Total number of attention heads (32) must be "
                        "divisible by tensor parallel size (3)."));
  // Fewer KV heads than ranks are replicated.
  const ModelSpec tp16 = shard_model(llama, 16);
  EXPECT_EQ(tp16.layers[0].attention->num_heads, 2);
  EXPECT_EQ(tp16.layers[0].attention->num_kv_heads, 1);
  EXPECT_EQ(tp16.tensor_parallel_size, 16);
  const ModelSpec six = parse_model_config(
      R"({"model_type":"llama","num_attention_heads":12,"num_key_value_heads":6,"head_dim":64,"num_hidden_layers":1})",
      "six.json");
  EXPECT_THAT(value_error([&] { (void)shard_model(six, 4); }),
              HasSubstr("six.json: field 'num_key_value_heads': Total number of KV heads (6) must be divisible by "
                        "tensor parallel size (4)."));
  // MLA keeps its latent whole on every rank.
  const ModelSpec v3 = shard_model(load_example("deepseek_v3"), 8);
  EXPECT_EQ(v3.layers[0].attention->num_heads, 16);
  EXPECT_EQ(v3.layers[0].attention->num_kv_heads, 1);
  // Mamba heads split too.
  EXPECT_THAT(value_error([&] { (void)shard_model(load_example("qwen3_next"), 3); }),
              HasSubstr("field 'linear_num_value_heads': Total number of Mamba heads (32) must be divisible by tensor "
                        "parallel size (3)."));
  const ModelSpec granite = shard_model(load_example("granite4"), 4);
  EXPECT_EQ(granite.layers[0].mamba->num_heads, 12);
  EXPECT_EQ(granite.layers[0].mamba->n_groups, 1);  // one group is replicated
}

TEST(HfConfigBadInput, DtypeOverride) {
  EXPECT_THAT(value_error([] { (void)resolve_model_dtype(default_model(), "int4"); }),
              HasSubstr("Unknown dtype 'int4'. Valid choices are: auto, half, float16, bfloat16, float, float32"));
}

}  // namespace
}  // namespace attnsel
