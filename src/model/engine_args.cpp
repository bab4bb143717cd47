#include "attnsel/engine_args.hpp"

#include <algorithm>
#include <array>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "attnsel/errors.hpp"
#include "attnsel/kv_layout_resolution.hpp"
#include "model/config_reader.hpp"

namespace attnsel {

namespace {

using model::ConfigReader;
using model::describe_json;

enum class FieldType { boolean, integer, number, string, object, any };

struct KnownField {
  std::string_view name;
  FieldType type;
  bool nullable;
};

std::string_view type_text(FieldType t) {
  switch (t) {
    case FieldType::boolean: return "true or false";
    case FieldType::integer: return "an integer";
    case FieldType::number: return "a number";
    case FieldType::string: return "a string";
    case FieldType::object: return "an object";
    case FieldType::any: return "any value";
  }
  return "any value";
}

bool has_type(const nlohmann::json& v, FieldType t) {
  switch (t) {
    case FieldType::boolean: return v.is_boolean();
    case FieldType::integer: return v.is_number_integer();
    case FieldType::number: return v.is_number();
    case FieldType::string: return v.is_string();
    case FieldType::object: return v.is_object();
    case FieldType::any: return true;
  }
  return true;
}

// Every key must be known and of its declared type (vLLM's configs forbid extra fields).
template <std::size_t N>
void check_fields(const nlohmann::json& object, std::string_view option, const std::array<KnownField, N>& known) {
  for (auto it = object.begin(); it != object.end(); ++it) {
    const KnownField* field = nullptr;
    for (const KnownField& k : known)
      if (k.name == it.key()) field = &k;
    if (!field) {
      std::vector<std::string_view> names;
      for (const KnownField& k : known) names.push_back(k.name);
      throw ValueError(fmt::format("{}: unknown field '{}'. Valid fields are: {}", option,
                                   model::printable(it.key()), fmt::join(names, ", ")));
    }
    if (it->is_null() && field->nullable) continue;
    if (!has_type(*it, field->type))
      throw ValueError(fmt::format("{}: field '{}': expected {}{}, got {}", option, field->name, type_text(field->type),
                                   field->nullable ? " or null" : "", describe_json(*it)));
  }
}

// Parses `text` as a JSON object whose every key is known and of its declared type (vLLM's
// configs forbid extra fields); `option` names the flag in messages.
template <std::size_t N>
nlohmann::json parse_object(std::string_view text, std::string_view option, const std::array<KnownField, N>& known) {
  // Given but empty is not "not given": say so rather than report a parse error at column 0.
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    throw ValueError(fmt::format("{} is empty: give a JSON object, e.g. {{}}", option));
  const nlohmann::json j = model::parse_json(text, option);
  if (!j.is_object()) throw ValueError(fmt::format("{}: expected a JSON object, got {}", option, describe_json(j)));
  check_fields(j, option, known);
  return j;
}

constexpr std::array<KnownField, 22> kAttentionConfigFields = {{
    {"backend", FieldType::string, true},
    {"backend_per_kind", FieldType::object, false},
    {"use_non_causal", FieldType::boolean, false},
    {"flash_attn_version", FieldType::integer, true},
    {"use_trtllm_attention", FieldType::boolean, true},
    {"mla_prefill_backend", FieldType::string, true},
    {"minimax_m3_msa_decode_backend", FieldType::string, false},
    // Kernel tuning: accepted and type-checked, no effect on selection.
    {"use_prefill_decode_attention", FieldType::boolean, false},
    {"flash_attn_max_num_splits_for_cuda_graph", FieldType::integer, false},
    {"tq_max_kv_splits_for_cuda_graph", FieldType::integer, false},
    {"use_cudnn_prefill", FieldType::boolean, false},
    {"use_trtllm_ragged_deepseek_prefill", FieldType::boolean, false},
    {"disable_flashinfer_prefill", FieldType::boolean, false},
    {"disable_flashinfer_q_quantization", FieldType::boolean, false},
    {"use_prefill_query_quantization", FieldType::boolean, false},
    {"use_fp4_indexer_cache", FieldType::boolean, false},
    {"indexer_kv_dtype", FieldType::string, true},
    {"sparse_mla_force_mqa", FieldType::boolean, false},
    {"flex_attn_block_m", FieldType::integer, true},
    {"flex_attn_block_n", FieldType::integer, true},
    {"hisparse_config", FieldType::any, true},
    {"tokenspeed_mla_config", FieldType::any, true},
}};

constexpr std::array<KnownField, 14> kKVTransferFields = {{
    {"kv_connector", FieldType::string, true},
    {"kv_role", FieldType::string, true},
    {"engine_id", FieldType::string, true},
    {"kv_buffer_device", FieldType::string, true},
    {"kv_buffer_size", FieldType::number, false},
    {"kv_rank", FieldType::integer, true},
    {"kv_parallel_size", FieldType::integer, false},
    {"kv_ip", FieldType::string, false},
    {"kv_port", FieldType::integer, false},
    {"kv_connector_extra_config", FieldType::object, false},
    {"kv_connector_module_path", FieldType::string, true},
    {"enable_permute_local_kv", FieldType::boolean, false},
    {"kv_load_failure_policy", FieldType::string, false},
    {"kv_lookup_rpc_port", FieldType::integer, true},
}};

// vLLM's KVRole literal, flattened as typing.get_args prints it.
constexpr std::array<std::string_view, 3> kKVRoles = {"kv_producer", "kv_both", "kv_consumer"};

std::string roles_tuple() {
  std::vector<std::string> q;
  for (std::string_view r : kKVRoles) q.push_back(fmt::format("'{}'", r));
  return fmt::format("({})", fmt::join(q, ", "));
}

// Parses `text`, the JSON object given to flag `option`, whose fields `read` turns into the
// flag's config once parse_object has checked them against `known`.
template <std::size_t N, class Read>
auto parse_config(std::string_view text, std::string_view option, const std::array<KnownField, N>& known, Read read) {
  const nlohmann::json j = parse_object(text, option, known);
  return read(ConfigReader(j, std::string(option)));
}

AttentionConfig read_attention_config(const ConfigReader& c) {
  AttentionConfig config;
  if (auto msa = c.opt_choice("minimax_m3_msa_decode_backend", {"triton", "cutlass"}))
    config.minimax_m3_msa_decode_backend = *msa;
  // The MSA alias rule runs after the fields are set (vLLM's __post_init__), so backend last.
  if (auto backend = c.opt_string("backend")) config.set_backend(*backend);
  if (const nlohmann::json* per_kind = c.value("backend_per_kind")) {
    for (auto it = per_kind->begin(); it != per_kind->end(); ++it) {
      if (!it->is_string())
        throw ValueError(fmt::format("{}: field 'backend_per_kind.{}': expected a backend name, got {}", c.source(),
                                     model::printable(it.key()), describe_json(*it)));
      config.set_backend_per_kind(it.key(), it->get_ref<const std::string&>());
    }
  }
  config.use_non_causal = c.opt_bool("use_non_causal", false);
  if (c.has("flash_attn_version")) {
    const int v = c.get_int("flash_attn_version", 2, 4);
    config.flash_attn_version = v;
  }
  if (c.has("use_trtllm_attention")) config.use_trtllm_attention = c.opt_bool("use_trtllm_attention", false);
  return config;
}

KVTransferConfig read_kv_transfer_config(const ConfigReader& c) {
  KVTransferConfig config;
  config.kv_connector = c.opt_string("kv_connector");
  config.kv_role = c.opt_string("kv_role");
  if (config.kv_role &&
      std::find(kKVRoles.begin(), kKVRoles.end(), std::string_view(*config.kv_role)) == kKVRoles.end())
    throw ValueError(fmt::format("Unsupported kv_role: {}. Supported roles are {}", *config.kv_role, roles_tuple()));
  if (config.kv_connector && !config.kv_role)
    throw ValueError(fmt::format("Please specify kv_disagg_role when kv_connector is set, supported roles are {}",
                                 roles_tuple()));
  return config;
}

void require_positive(int value, std::string_view option) {
  if (value < 1) throw ValueError(fmt::format("{}: expected a positive integer, got {}", option, value));
}

}  // namespace

bool KVTransferConfig::is_kv_transfer_instance() const {
  if (!kv_connector || !kv_role) return false;
  for (std::string_view r : kKVRoles)
    if (*kv_role == r) return true;
  return false;
}

AttentionConfig parse_attention_config(std::string_view json_text) {
  return parse_config(json_text, "--attention-config", kAttentionConfigFields, read_attention_config);
}

KVTransferConfig parse_kv_transfer_config(std::string_view json_text) {
  return parse_config(json_text, "--kv-transfer-config", kKVTransferFields, read_kv_transfer_config);
}

std::optional<std::string> kv_connector_cache_layout(const KVTransferConfig& config, bool model_uses_mla) {
  if (!config.kv_connector) return std::nullopt;
  // NixlConnector transfers heads contiguously ("HND"); for MLA the layout does not matter.
  if (*config.kv_connector == "NixlConnector" && !model_uses_mla) return "HND";
  return std::nullopt;
}

AttentionConfig make_attention_config(std::optional<std::string_view> attention_backend,
                                      std::optional<std::string_view> attention_config_json) {
  AttentionConfig config;
  if (attention_config_json) config = parse_attention_config(*attention_config_json);
  if (attention_backend) {
    if (config.backend) throw ValueError("attention_backend and attention_config.backend are mutually exclusive");
    config.set_backend(*attention_backend);
  }
  return config;
}

EngineOptions parse_engine_args(const EngineArgs& args) {
  EngineOptions out;
  EngineConfig& e = out.engine;
  e.attention = make_attention_config(args.attention_backend, args.attention_config);

  e.cache.cache_dtype = cache_dtype_from(args.kv_cache_dtype, "--kv-cache-dtype");
  if (args.block_size) {
    require_positive(*args.block_size, "--block-size");
    e.cache.block_size = *args.block_size;
    e.cache.user_specified_block_size = true;
  }

  const std::string dtype = to_lower(args.dtype);
  if (dtype != "auto" && !parse_dtype(dtype))
    throw ValueError(fmt::format("--dtype: invalid choice '{}' (choose from 'auto', 'half', 'float16', 'bfloat16', "
                                 "'float', 'float32')",
                                 args.dtype));
  out.dtype = dtype;

  require_positive(args.tensor_parallel_size, "--tensor-parallel-size");
  require_positive(args.decode_context_parallel_size, "--decode-context-parallel-size");
  require_positive(args.prefill_context_parallel_size, "--prefill-context-parallel-size");
  if (args.tensor_parallel_size % args.decode_context_parallel_size != 0)
    throw ValueError(fmt::format("tensor_parallel_size ({}) must be divisible by decode_context_parallel_size ({})",
                                 args.tensor_parallel_size, args.decode_context_parallel_size));
  out.tensor_parallel_size = args.tensor_parallel_size;
  e.decode_context_parallel_size = args.decode_context_parallel_size;
  e.prefill_context_parallel_size = args.prefill_context_parallel_size;
  e.batch_invariant = args.batch_invariant;

  if (args.kv_transfer_config) {
    out.kv_transfer = parse_kv_transfer_config(*args.kv_transfer_config);
    e.kv_transfer_instance = out.kv_transfer->is_kv_transfer_instance();
  }
  if (args.kv_cache_layout) {
    (void)layout_from_name(*args.kv_cache_layout);  // vLLM's "Unknown KV cache layout" check
    out.kv_cache_layout = *args.kv_cache_layout;
  }
  return out;
}

}  // namespace attnsel
