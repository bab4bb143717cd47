// Whole-model planning cost. Each figure comes with its floor measured in the same run:
// reading a config against nlohmann's bare parse of the same bytes, and a plan against the
// cached selections it is made of.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "attnsel/plan.hpp"

namespace {

std::string example_text(const std::string& name) {
  const auto path = std::filesystem::path(ATTNSEL_SOURCE_DIR) / "examples" / "models" / (name + ".json");
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The floor of reading a config: parsing its JSON and nothing else.
void BM_JsonParseOnly(benchmark::State& state, const std::string& name) {
  const std::string text = example_text(name);
  for (auto _ : state) benchmark::DoNotOptimize(nlohmann::json::parse(text));
}

void BM_ReadConfig(benchmark::State& state, const std::string& name) {
  const std::string text = example_text(name);
  for (auto _ : state) benchmark::DoNotOptimize(attnsel::parse_model_config(text, name));
}

// A plan with a fresh selector: every distinct configuration is selected once.
void BM_PlanColdCache(benchmark::State& state, const std::string& name) {
  const attnsel::ModelSpec model = attnsel::parse_model_config(example_text(name), name);
  const attnsel::EngineOptions options = attnsel::parse_engine_args({});
  const auto platform = attnsel::make_plan_platform(model, options, "cuda:9.0");
  for (auto _ : state) {
    attnsel::Selector selector(platform);
    benchmark::DoNotOptimize(attnsel::make_plan(model, options, selector));
  }
}

// A plan whose selections are all cached (planning the same model again).
void BM_PlanWarmCache(benchmark::State& state, const std::string& name) {
  const attnsel::ModelSpec model = attnsel::parse_model_config(example_text(name), name);
  const attnsel::EngineOptions options = attnsel::parse_engine_args({});
  attnsel::Selector selector(attnsel::make_plan_platform(model, options, "cuda:9.0"));
  (void)attnsel::make_plan(model, options, selector);
  for (auto _ : state) benchmark::DoNotOptimize(attnsel::make_plan(model, options, selector));
}

// The floor of a warm plan: one cached selection per layer, nothing else.
void BM_CachedSelectsOnly(benchmark::State& state, const std::string& name) {
  const attnsel::ModelSpec model = attnsel::parse_model_config(example_text(name), name);
  const attnsel::EngineOptions options = attnsel::parse_engine_args({});
  attnsel::Selector selector(attnsel::make_plan_platform(model, options, "cuda:9.0"));
  std::vector<attnsel::LayerRequest> layers;
  for (const attnsel::LayerSpec& l : model.layers) {
    if (l.mixer != attnsel::MixerKind::attention) continue;
    attnsel::LayerRequest r;
    r.head_size = l.attention->head_size;
    r.kv_cache_dtype = attnsel::CacheDType::auto_;
    r.use_mla = l.attention->use_mla;
    r.use_sparse = l.attention->use_sparse;
    r.has_sink = l.attention->has_sink;
    r.use_mm_prefix = l.attention->use_mm_prefix;
    r.has_sliding_window = l.attention->sliding_window.has_value();
    r.attn_type = l.attention->attn_type;
    layers.push_back(r);
  }
  for (const auto& r : layers) (void)selector.select(options.engine, r);
  for (auto _ : state)
    for (const auto& r : layers) benchmark::DoNotOptimize(selector.select(options.engine, r));
  state.counters["layers"] = static_cast<double>(layers.size());
}

}  // namespace

BENCHMARK_CAPTURE(BM_JsonParseOnly, gemma3, std::string("gemma3"));
BENCHMARK_CAPTURE(BM_ReadConfig, gemma3, std::string("gemma3"));
BENCHMARK_CAPTURE(BM_JsonParseOnly, gpt_oss, std::string("gpt_oss"));
BENCHMARK_CAPTURE(BM_ReadConfig, gpt_oss, std::string("gpt_oss"));
BENCHMARK_CAPTURE(BM_PlanColdCache, gemma3, std::string("gemma3"));
BENCHMARK_CAPTURE(BM_PlanWarmCache, gemma3, std::string("gemma3"));
BENCHMARK_CAPTURE(BM_CachedSelectsOnly, gemma3, std::string("gemma3"));
BENCHMARK_CAPTURE(BM_PlanColdCache, deepseek_v32, std::string("deepseek_v32"));
BENCHMARK_CAPTURE(BM_PlanWarmCache, deepseek_v32, std::string("deepseek_v32"));
BENCHMARK_CAPTURE(BM_CachedSelectsOnly, deepseek_v32, std::string("deepseek_v32"));
BENCHMARK_CAPTURE(BM_PlanColdCache, qwen3_next, std::string("qwen3_next"));
BENCHMARK_CAPTURE(BM_PlanWarmCache, qwen3_next, std::string("qwen3_next"));
