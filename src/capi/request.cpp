#include "capi/request.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

#include "attnsel/capability_checks.hpp"
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
  require_struct(r.struct_size, kSelectRequestMinimumSize, "attnsel_select_request");
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
  const std::vector<bool> flags = requested_flags(r);
  for (std::size_t i = 0; i < flags.size(); ++i)
    if (const CapabilityCheck& flag = *selector_flags()[i]; flag.layer_argument != nullptr)
      layer.*flag.layer_argument = flags[i];
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
  require_struct(r.struct_size, kSelectRequestMinimumSize, "attnsel_select_request");
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
  // A flag only turns its setting on: a switch the attention config set stays set.
  const std::vector<bool> flags = requested_flags(r);
  for (std::size_t i = 0; i < flags.size(); ++i)
    if (const CapabilityCheck& flag = *selector_flags()[i]; flag.to_engine != nullptr && flags[i])
      flag.to_engine(engine, true);
  return engine;
}

}  // namespace attnsel::capi
