// Whole-model plans through the C API: the engine options as vLLM spells them → the plan as
// `attnsel plan --json` prints it.
#include <memory>
#include <optional>
#include <string>

#include "attnsel/attnsel.h"
#include "attnsel/engine_args.hpp"
#include "attnsel/model.hpp"
#include "attnsel/plan.hpp"
#include "capi/request.hpp"
#include "capi/status.hpp"
#include "report/plan_json.hpp"
#include "report/selection_json.hpp"

using namespace attnsel;
using namespace attnsel::capi;

namespace {

EngineArgs engine_args(const attnsel_plan_request& r) {
  EngineArgs a;
  if (r.attention_backend) a.attention_backend = r.attention_backend;
  if (r.attention_config) a.attention_config = r.attention_config;
  if (r.kv_cache_dtype) a.kv_cache_dtype = r.kv_cache_dtype;
  if (r.block_size != 0) a.block_size = r.block_size;
  if (r.dtype) a.dtype = r.dtype;
  a.tensor_parallel_size = r.tensor_parallel_size;
  a.decode_context_parallel_size = r.decode_context_parallel_size;
  a.prefill_context_parallel_size = r.prefill_context_parallel_size;
  if (r.kv_transfer_config) a.kv_transfer_config = r.kv_transfer_config;
  if (r.kv_cache_layout) a.kv_cache_layout = r.kv_cache_layout;
  a.batch_invariant = r.batch_invariant;
  return a;
}

ModelSpec read_model(const attnsel_plan_request& r) {
  if (r.model_path) return load_model_config(r.model_path);
  if (r.model_json) return parse_model_config(r.model_json, "model_json");
  return default_model();
}

}  // namespace

extern "C" {

void attnsel_plan_request_init(attnsel_plan_request* request) {
  if (!reset_struct(request)) return;
  request->tensor_parallel_size = 1;
  request->decode_context_parallel_size = 1;
  request->prefill_context_parallel_size = 1;
}

attnsel_status attnsel_plan_json(const attnsel_plan_request* request, char** out_json) {
  if (out_json == nullptr) return fail(ATTNSEL_STATUS_VALUE_ERROR, "out_json must not be NULL");
  *out_json = nullptr;
  std::string text;
  const attnsel_status status = guarded([&] {
    require(request, "request");
    require_struct(request->struct_size, sizeof(attnsel_plan_request), "attnsel_plan_request");
    const ModelSpec model = read_model(*request);
    const EngineOptions options = parse_engine_args(engine_args(*request));
    (void)shard_model(model, options.tensor_parallel_size);  // inconsistent heads are bad input
    (void)resolve_model_dtype(model, options.dtype);
    std::optional<SelectionMode> mode;
    if (request->mode != nullptr) {
      mode = parse_mode(request->mode);
      if (!mode) throw ValueError(std::string("unknown mode '") + request->mode + "'; valid values are: reference, runnable");
    }
    const std::shared_ptr<const Platform> platform =
        make_plan_platform(model, options,
                           request->platform ? std::optional<std::string_view>(request->platform) : std::nullopt,
                           assignments(request->facts, request->num_facts, "facts"), mode);
    Selector selector(platform);
    try {
      text = report::dump(report::plan_json(model, make_plan(model, options, selector)));
    } catch (const PlanError& e) {
      // The failure with the partial plan, as `attnsel plan --json` prints it.
      nlohmann::json j = report::failure_json(e.what(), std::string(error_kind_name(e.kind())), {});
      j["plan"] = report::plan_json(model, e.partial_plan());
      text = report::dump(j);
      throw;
    }
  });
  if (!text.empty()) {
    const attnsel_status copied = guarded([&] { *out_json = copy_string(text); });
    if (copied != ATTNSEL_STATUS_OK) return copied;
  }
  return status;
}

}  // extern "C"
