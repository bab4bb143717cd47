#include "capi/request.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

#include "attnsel/engine_args.hpp"
#include "attnsel/engine_facts.hpp"
#include "capi/status.hpp"

namespace attnsel::capi {

std::vector<std::string> assignments(const char* const* items, std::uint32_t count, std::string_view what) {
  if (count > 0) require(items, what);
  std::vector<std::string> out;
  std::map<std::string, std::string, std::less<>> seen;
  for (std::uint32_t i = 0; i < count; ++i) {
    require(items[i], fmt::format("{}[{}]", what, i));
    const std::string_view text = items[i];
    const std::size_t eq = text.find('=');
    if (eq == std::string_view::npos || eq == 0)
      throw ValueError(fmt::format("{}[{}] must be NAME=VALUE, got '{}'", what, i, text));
    const auto [it, fresh] = seen.emplace(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
    if (!fresh && it->second != text.substr(eq + 1))
      throw ValueError(fmt::format("conflicting {} values for {}: '{}' and '{}'", what, it->first, it->second,
                                   text.substr(eq + 1)));
    out.emplace_back(text);
  }
  return out;
}

std::shared_ptr<Platform> make_request_platform(const char* spec, const char* mode,
                                                const std::vector<std::string>& facts) {
  // NULL is "not given"; an empty text is given, and refused as any unknown one.
  std::optional<SelectionMode> m;
  if (mode != nullptr) {
    m = parse_mode(mode);
    if (!m) throw ValueError(fmt::format("unknown mode '{}'; valid values are: reference, runnable", mode));
  }
  if (spec == nullptr) return detect_host_platform(facts, m);
  return make_platform(spec, facts, m);
}

SelectInputs read_select_request(const attnsel_select_request& r) {
  require_struct(r.struct_size, sizeof(attnsel_select_request), "attnsel_select_request");
  SelectInputs in;
  LayerRequest& layer = in.layer;
  if (r.head_size <= 0) throw ValueError(fmt::format("head_size must be positive, got {}", r.head_size));
  layer.head_size = r.head_size;
  if (r.dtype != nullptr) {
    const std::optional<DType> d = parse_dtype(r.dtype);
    if (!d)
      throw ValueError(fmt::format("unknown dtype '{}'; valid values are: {}", r.dtype, fmt::join(dtype_names(), ", ")));
    layer.dtype = *d;
  }
  if (r.kv_cache_dtype != nullptr) layer.kv_cache_dtype = cache_dtype_from(r.kv_cache_dtype);
  layer.use_mla = r.use_mla;
  layer.has_sink = r.has_sink;
  layer.use_sparse = r.use_sparse;
  layer.use_mm_prefix = r.use_mm_prefix;
  layer.use_per_head_quant_scales = r.use_per_head_quant_scales;
  layer.has_sliding_window = r.has_sliding_window;
  layer.attn_type = AttentionType::decoder;
  if (r.attn_type != nullptr) {
    layer.attn_type = parse_attn_type(r.attn_type);
    if (!layer.attn_type)
      throw ValueError(fmt::format("unknown attention type '{}'; valid values are: {}", r.attn_type,
                                   fmt::join(attn_type_names(), ", ")));
  }
  if (r.num_heads < 0) throw ValueError(fmt::format("num_heads must be positive, got {}", r.num_heads));
  if (r.num_heads > 0) layer.num_heads = r.num_heads;
  if (r.block_size < 0) throw ValueError(fmt::format("block_size must be positive, got {}", r.block_size));

  in.engine = read_engine_config(r);
  in.platform = with_engine(make_request_platform(r.platform, r.mode, assignments(r.facts, r.num_facts, "facts")),
                            in.engine);
  in.config = make_selector_config(in.engine, layer);
  in.requested = effective_backend(in.engine, layer);
  return in;
}

EngineConfig read_engine_config(const attnsel_select_request& r) {
  require_struct(r.struct_size, sizeof(attnsel_select_request), "attnsel_select_request");
  EngineConfig engine;
  auto given = [](const char* text) { return text ? std::optional<std::string_view>(text) : std::nullopt; };
  engine.attention = make_attention_config(given(r.attention_backend), given(r.attention_config));
  const std::vector<std::string> per_kind = assignments(r.backend_per_kind, r.num_backend_per_kind, "backend_per_kind");
  for (const std::string& a : per_kind) {
    const std::size_t eq = a.find('=');
    engine.attention.set_backend_per_kind(std::string_view(a).substr(0, eq), std::string_view(a).substr(eq + 1));
  }
  engine.cache.cache_dtype = r.run_cache_dtype != nullptr ? cache_dtype_from(r.run_cache_dtype, "run_cache_dtype")
                            : r.kv_cache_dtype != nullptr  ? cache_dtype_from(r.kv_cache_dtype)
                                                           : CacheDType::auto_;
  if (r.block_size > 0) {
    engine.cache.block_size = r.block_size;
    engine.cache.user_specified_block_size = true;
  }
  engine.attention.use_non_causal = engine.attention.use_non_causal || r.use_non_causal;
  engine.batch_invariant = r.use_batch_invariant;
  engine.kv_transfer_instance = r.use_kv_connector;
  // Only "> 1" reaches the selector; 2 is the smallest parallel size that turns it on.
  engine.prefill_context_parallel_size = r.use_pcp ? 2 : 1;
  engine.decode_context_parallel_size = r.use_dcp ? 2 : 1;
  engine.adaptive_verification = r.use_adaptive_verification;
  // Only "is set" reaches the selector; 128 is the window of vLLM's own R-SWA test.
  if (r.use_rswa) engine.rswa_window = 128;
  return engine;
}

}  // namespace attnsel::capi
