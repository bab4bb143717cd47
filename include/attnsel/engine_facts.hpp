// Layer: core (src/layers.txt)
// The engine settings that are runtime facts. Some of what backends depend on vLLM reads
// from its own configuration rather than from a kernel library or the device:
// AttentionConfig.flash_attn_version and use_trtllm_attention, VLLM_BATCH_INVARIANT (which
// fa_utils' get_flash_attn_version reads besides the selector), the decode-context-parallel
// size, the KV connector and R-SWA. attnsel keeps them as runtime facts (so `--fact` and
// `--list-facts` reach them) and turns an EngineConfig into them here, in one place: every
// entry point — `attnsel select`/`plan`/`run`, the C API, Python and the C++ Selector —
// selects on the platform with_engine() returns, so the same settings give the same answer
// whichever door they came in by.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>

#include "attnsel/export.hpp"
#include "attnsel/platform.hpp"

namespace attnsel {

struct EngineConfig;

/// The engine settings backends read as runtime facts, as one comparable value.
struct ATTNSEL_API EngineFacts {
  int flash_attn_version = 0;                ///< AttentionConfig.flash_attn_version; 0 = not set
  std::optional<bool> use_trtllm_attention;  ///< AttentionConfig.use_trtllm_attention; nullopt = None
  bool batch_invariant = false;              ///< VLLM_BATCH_INVARIANT
  int decode_context_parallel_size = 1;      ///< ParallelConfig.decode_context_parallel_size
  bool kv_connector = false;                 ///< kv_transfer_config.is_kv_transfer_instance
  bool uses_rswa = false;                    ///< model_arch_config.rswa_window is set

  bool operator==(const EngineFacts&) const = default;
  std::size_t hash() const noexcept;
};

/// The facts `engine` sets.
ATTNSEL_API EngineFacts engine_facts(const EngineConfig& engine);

/// Writes them into `facts` (flash_attn_version, flashinfer.use_trtllm_attention,
/// env.vllm_batch_invariant, parallel.decode_context_parallel_size, kv_connector.configured,
/// model.uses_rswa), except those the user set: a user's fact wins.
ATTNSEL_API void apply_engine_facts(RuntimeFacts& facts, const EngineFacts& engine);

/// `platform` as the engine's settings leave it: the same device and mode with
/// apply_engine_facts() applied to its facts; `platform` itself when no value changes.
ATTNSEL_API std::shared_ptr<const Platform> with_engine(std::shared_ptr<const Platform> platform,
                                                        const EngineFacts& engine);
ATTNSEL_API std::shared_ptr<const Platform> with_engine(std::shared_ptr<const Platform> platform,
                                                        const EngineConfig& engine);

}  // namespace attnsel
