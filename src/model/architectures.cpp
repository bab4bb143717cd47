// Which family reads a config.json. vLLM resolves the model class from `architectures`
// (vllm/model_executor/models/registry.py, _ModelRegistry.resolve_model_cls: the first entry
// it registers wins), so a checkpoint with a model_type of its own (Kimi-K2's "kimi_k2" with
// DeepseekV3ForCausalLM) runs vLLM's DeepSeek code. The model_type decides only where no
// entry of `architectures` is one attnsel reads.
#include <algorithm>
#include <array>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "attnsel/errors.hpp"
#include "model/hf_config.hpp"

namespace attnsel {

namespace model {

namespace {

// The architectures vLLM registers for the families attnsel reads, sorted by name. Bart and
// mBART (registered until vLLM 0.10.2) and T5 are read through their model_type.
constexpr auto kArchitectures = std::to_array<Architecture>({
    {"BertForSequenceClassification", read_bert},
    {"BertForTokenClassification", read_bert},
    {"BertModel", read_bert},
    {"DeepseekV2ForCausalLM", read_deepseek},
    {"DeepseekV32ForCausalLM", read_deepseek},
    {"DeepseekV3ForCausalLM", read_deepseek},
    {"FalconMambaForCausalLM", read_mamba},
    {"Gemma2ForCausalLM", read_gemma2},
    {"Gemma3ForCausalLM", read_gemma3_text},
    {"Gemma3ForConditionalGeneration", read_gemma3},
    {"GptOssForCausalLM", read_gpt_oss},
    {"GraniteMoeHybridForCausalLM", read_granite_hybrid},
    {"JambaForCausalLM", read_jamba},
    {"LLaMAForCausalLM", read_llama},
    {"Lfm2ForCausalLM", read_lfm2},
    {"LlamaForCausalLM", read_llama},
    {"Mamba2ForCausalLM", read_mamba2},
    {"MambaForCausalLM", read_mamba},
    {"MiniMaxForCausalLM", read_minimax},
    {"MiniMaxM1ForCausalLM", read_minimax},
    {"MiniMaxText01ForCausalLM", read_minimax},
    {"MistralForCausalLM", read_llama},
    {"MixtralForCausalLM", read_llama},
    {"NemotronHForCausalLM", read_nemotron_h},
    {"Qwen2ForCausalLM", read_qwen},
    {"Qwen2MoeForCausalLM", read_qwen},
    {"Qwen3ForCausalLM", read_qwen},
    {"Qwen3MoeForCausalLM", read_qwen},
    {"Qwen3NextForCausalLM", read_qwen3_next},
    {"RobertaForMaskedLM", read_bert},
    {"RobertaForSequenceClassification", read_bert},
    {"RobertaModel", read_bert},
    {"WhisperForConditionalGeneration", read_bart},
    {"XLMRobertaForSequenceClassification", read_bert},
    {"XLMRobertaModel", read_bert},
});

// `architectures` as strings; absent, null and [] are no architectures (vLLM then maps the
// model_type to one).
std::vector<std::string> read_architectures(const ConfigReader& root, const nlohmann::json& root_json) {
  if (!root.has("architectures")) return {};
  const nlohmann::json& list = root_json.at("architectures");
  if (!list.is_array()) root.fail_type("architectures", "an array of strings");
  std::vector<std::string> names;
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_string())
      root.fail("architectures", fmt::format("element {}: expected a string, got {}", i, describe_json(list[i])));
    names.push_back(list[i].get<std::string>());
  }
  return names;
}

const Architecture* find_architecture(std::string_view name) {
  const auto it = std::find_if(kArchitectures.begin(), kArchitectures.end(),
                               [&](const Architecture& a) { return a.name == name; });
  return it == kArchitectures.end() ? nullptr : &*it;
}

const Family* find_family(std::string_view model_type) {
  const auto fams = families();
  const auto it = std::find_if(fams.begin(), fams.end(), [&](const Family& f) { return f.model_type == model_type; });
  return it == fams.end() ? nullptr : &*it;
}

// The file's architectures for a message: quoted, printable, the first few only.
std::string quoted_names(const std::vector<std::string>& names) {
  constexpr std::size_t kShown = 4;
  std::vector<std::string> q;
  for (std::size_t i = 0; i < names.size() && i < kShown; ++i) q.push_back(fmt::format("\"{}\"", printable(names[i])));
  if (names.size() > kShown) q.push_back(fmt::format("... ({} in all)", names.size()));
  return fmt::format("[{}]", fmt::join(q, ", "));
}

}  // namespace

std::span<const Architecture> architectures() { return kArchitectures; }

FamilyChoice choose_family(const ConfigReader& root, const nlohmann::json& root_json, std::string_view model_type) {
  const std::vector<std::string> names = read_architectures(root, root_json);
  for (const std::string& name : names)
    if (const Architecture* a = find_architecture(name)) return {a->read, name};
  if (const Family* f = find_family(model_type)) return {f->read, names.empty() ? "" : names.front()};

  const std::string archs = fmt::format("{}", fmt::join(supported_architectures(), ", "));
  const std::string types = fmt::format("{}", fmt::join(supported_model_types(), ", "));
  const std::string which = names.empty() ? std::string("there is no field 'architectures'")
                                          : fmt::format("field 'architectures' ({}) names no supported architecture",
                                                        quoted_names(names));
  throw ValueError(fmt::format("{}: unsupported model: {}, and field 'model_type' (\"{}\") is not a supported model "
                               "type. Supported architectures: {}. Supported model types: {}.",
                               root.source(), which, printable(model_type), archs, types));
}

}  // namespace model

std::span<const std::string_view> supported_architectures() {
  static const std::vector<std::string_view> kNames = [] {
    std::vector<std::string_view> v;
    for (const model::Architecture& a : model::architectures()) v.push_back(a.name);
    return v;
  }();
  return kNames;
}

}  // namespace attnsel
