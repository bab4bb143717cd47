// Test helpers: simulated devices and short access to the built-in backend classes.
#pragma once

#include <memory>
#include <string_view>

#include "attnsel/engine_config.hpp"
#include "attnsel/facts.hpp"
#include "attnsel/registry.hpp"
#include "attnsel/selector_config.hpp"

namespace attnsel::testing {

inline RuntimeEnv make_env(DeviceDescription d) {
  RuntimeFacts facts(d);
  return RuntimeEnv{std::move(d), std::move(facts)};
}

inline RuntimeEnv cuda_env(int major, int minor) {
  return make_env(DeviceDescription{PlatformKind::cuda, DeviceCapability{major, minor}, "cuda", "", 0});
}

inline RuntimeEnv rocm_env(std::string arch, int cdna) {
  return make_env(DeviceDescription{PlatformKind::rocm, std::nullopt, "rocm", std::move(arch), cdna});
}

inline RuntimeEnv cpu_env() { return make_env(DeviceDescription{PlatformKind::cpu, std::nullopt, "cpu", "", 0}); }
inline RuntimeEnv xpu_env() { return make_env(DeviceDescription{PlatformKind::xpu, std::nullopt, "xpu", "", 0}); }

/// Sets a fact from its text form (a string literal would also convert to FactValue's bool).
inline void set_fact(RuntimeEnv& env, std::string_view name, std::string_view text) { env.facts.set(name, text); }

inline std::shared_ptr<const AttentionBackend> backend(std::string_view name) {
  register_builtin_backends();
  return AttentionBackendEnum[name].get_attention_class();
}

/// A plain decoder layer: head 128, bf16, nothing else asked for.
inline AttentionSelectorConfig decoder_config(int head_size = 128) {
  AttentionSelectorConfig c;
  c.head_size = head_size;
  c.dtype = DType::bfloat16;
  return c;
}

inline AttentionSelectorConfig mla_config(int head_size = 576) {
  AttentionSelectorConfig c = decoder_config(head_size);
  c.use_mla = true;
  return c;
}

/// A sparse MLA layer: head 576, bf16.
inline LayerRequest sparse_layer() {
  LayerRequest layer;
  layer.head_size = 576;
  layer.use_mla = true;
  layer.use_sparse = true;
  layer.dtype = DType::bfloat16;
  return layer;
}

}  // namespace attnsel::testing
