// libFuzzer target for everything that reads JSON from the user: config.json (the model
// reader, then sharding and a plan on the CPU), --attention-config and --kv-transfer-config.
// Bad input may only ever raise attnsel's ValueError (or a PlanError from planning); any
// other exception, crash, leak or undefined behaviour is a bug.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "attnsel/engine_args.hpp"
#include "attnsel/errors.hpp"
#include "attnsel/model.hpp"
#include "attnsel/plan.hpp"

namespace {

void plan_model(const attnsel::ModelSpec& model, int tensor_parallel_size) {
  attnsel::EngineArgs args;
  args.tensor_parallel_size = tensor_parallel_size;
  const attnsel::EngineOptions options = attnsel::parse_engine_args(args);
  // A fresh selector each time: a shared cache would grow with every input.
  attnsel::Selector selector(attnsel::make_plan_platform(model, options, "cpu", {}, attnsel::SelectionMode::reference));
  try {
    (void)attnsel::make_plan(model, options, selector);
  } catch (const attnsel::PlanError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const attnsel::ModelSpec model = attnsel::parse_model_config(text, "fuzz.json");
    // The first byte picks a tensor-parallel size, so the split's checks are fuzzed too.
    const int tp = size > 0 ? 1 << (data[0] % 4) : 1;
    try {
      plan_model(model, tp);
    } catch (const attnsel::ValueError&) {
    }
  } catch (const attnsel::ValueError&) {
  }
  try {
    (void)attnsel::parse_attention_config(text);
  } catch (const attnsel::ValueError&) {
  }
  try {
    (void)attnsel::parse_kv_transfer_config(text);
  } catch (const attnsel::ValueError&) {
  }
  return 0;
}
