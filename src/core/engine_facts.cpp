// The engine settings that are runtime facts (attnsel/engine_facts.hpp): what vLLM's
// backends read from its VllmConfig and environment rather than from a kernel library.
#include "attnsel/engine_facts.hpp"

#include <string>

#include "attnsel/selector.hpp"

namespace attnsel {

std::size_t EngineFacts::hash() const noexcept {
  std::size_t h = static_cast<std::size_t>(flash_attn_version);
  h = h * 31 + (use_trtllm_attention ? (*use_trtllm_attention ? 2U : 1U) : 0U);
  h = h * 31 + (batch_invariant ? 1U : 0U);
  h = h * 31 + static_cast<std::size_t>(decode_context_parallel_size);
  h = h * 31 + (kv_connector ? 1U : 0U);
  h = h * 31 + (uses_rswa ? 1U : 0U);
  return h;
}

EngineFacts engine_facts(const EngineConfig& engine) {
  EngineFacts f;
  f.flash_attn_version = engine.attention.flash_attn_version.value_or(0);
  f.use_trtllm_attention = engine.attention.use_trtllm_attention;
  f.batch_invariant = engine.batch_invariant;
  f.decode_context_parallel_size = engine.decode_context_parallel_size;
  f.kv_connector = engine.kv_transfer_instance;
  f.uses_rswa = engine.rswa_window.has_value();
  return f;
}

void apply_engine_facts(RuntimeFacts& facts, const EngineFacts& e) {
  facts.set_from_engine("flash_attn_version", std::int64_t{e.flash_attn_version});
  facts.set_from_engine("flashinfer.use_trtllm_attention",
                        std::string(!e.use_trtllm_attention ? "auto" : *e.use_trtllm_attention ? "true" : "false"));
  facts.set_from_engine("env.vllm_batch_invariant", e.batch_invariant);
  facts.set_from_engine("parallel.decode_context_parallel_size", std::int64_t{e.decode_context_parallel_size});
  facts.set_from_engine("kv_connector.configured", e.kv_connector);
  facts.set_from_engine("model.uses_rswa", e.uses_rswa);
}

std::shared_ptr<const Platform> with_engine(std::shared_ptr<const Platform> platform, const EngineFacts& engine) {
  if (!platform) throw ValueError("with_engine needs a platform");
  RuntimeFacts facts = platform->env().facts;
  apply_engine_facts(facts, engine);
  if (facts.values() == platform->env().facts.values()) return platform;
  return platform->with_facts(std::move(facts));
}

std::shared_ptr<const Platform> with_engine(std::shared_ptr<const Platform> platform, const EngineConfig& engine) {
  return with_engine(std::move(platform), engine_facts(engine));
}

}  // namespace attnsel
