// Selection through the C API: attnsel_select and the accessors of its result.
#include <fmt/format.h>

#include <memory>
#include <vector>

#include "attnsel/attnsel.h"
#include "attnsel/selector.hpp"
#include "capi/request.hpp"
#include "capi/status.hpp"
#include "report/facts_json.hpp"
#include "report/selection_json.hpp"

// The opaque result: everything copied out of the Selection, with the C views of it.
struct attnsel_selection {
  std::string backend;
  std::string class_path;
  std::int32_t priority = -1;
  std::vector<attnsel::Candidate> candidates;
  std::vector<std::vector<const char*>> reasons;  // C views of candidates[i].reasons
  std::vector<std::string> warnings;
  std::string json;

  void index_reasons() {
    reasons.clear();
    for (const attnsel::Candidate& c : candidates) {
      std::vector<const char*>& r = reasons.emplace_back();
      for (const std::string& s : c.reasons) r.push_back(s.c_str());
    }
  }
};

namespace attnsel::capi {
namespace {

// The context every failure object carries once the request could be read.
void add_context(nlohmann::ordered_json& j, const SelectInputs& in) {
  j["platform"] = in.platform->spec();
  j["mode"] = std::string(mode_name(in.platform->mode()));
  j["config"] = report::to_json(in.config);
}

// Runs one selection. On a SelectionError *out holds the failure (candidates and the
// failure JSON) and the error is rethrown for `guarded` to map.
void run_select(const attnsel_select_request* request, std::unique_ptr<attnsel_selection>& out) {
  require(request, "request");
  const SelectInputs in = read_select_request(*request);
  Selector selector(in.platform);
  try {
    const std::shared_ptr<const Selection> s = selector.select(in.engine, in.layer);
    auto r = std::make_unique<attnsel_selection>();
    r->backend = s->backend;
    r->class_path = s->class_path;
    r->priority = s->priority ? *s->priority : -1;
    r->candidates = s->candidates;
    r->warnings = s->warnings();
    r->json = report::dump(report::selection_json(*s, *in.platform, in.config, in.layer.num_heads, in.requested));
    r->index_reasons();
    out = std::move(r);
  } catch (const SelectionError& e) {
    auto r = std::make_unique<attnsel_selection>();
    r->candidates = e.candidates();
    nlohmann::ordered_json j = report::failure_json(e.what(), std::string(error_kind_name(e.kind())), e.candidates());
    add_context(j, in);
    r->json = report::dump(j);
    r->index_reasons();
    out = std::move(r);
    throw;
  } catch (const Error& e) {
    auto r = std::make_unique<attnsel_selection>();
    nlohmann::ordered_json j = report::failure_json(e.what(), std::string(error_kind_name(e.kind())), {});
    add_context(j, in);
    r->json = report::dump(j);
    out = std::move(r);
    throw;
  }
}

}  // namespace
}  // namespace attnsel::capi

using namespace attnsel;
using namespace attnsel::capi;

extern "C" {

void attnsel_select_request_init(attnsel_select_request* request) {
  if (reset_struct(request)) request->head_size = 128;
}

attnsel_status attnsel_select(const attnsel_select_request* request, attnsel_selection** out) {
  if (out == nullptr) return fail(ATTNSEL_STATUS_VALUE_ERROR, "out must not be NULL");
  *out = nullptr;
  std::unique_ptr<attnsel_selection> result;
  const attnsel_status status = guarded([&] { run_select(request, result); });
  // A failed selection keeps its candidates; a failure of any other kind returns nothing.
  if (status == ATTNSEL_STATUS_OK || (result && !result->candidates.empty())) *out = result.release();
  return status;
}

void attnsel_selection_destroy(attnsel_selection* selection) { delete selection; }

const char* attnsel_selection_backend(const attnsel_selection* s) { return s ? s->backend.c_str() : ""; }

const char* attnsel_selection_class(const attnsel_selection* s) { return s ? s->class_path.c_str() : ""; }

int32_t attnsel_selection_priority(const attnsel_selection* s) { return s ? s->priority : -1; }

uint32_t attnsel_selection_num_candidates(const attnsel_selection* s) {
  return s ? static_cast<uint32_t>(s->candidates.size()) : 0;
}

attnsel_status attnsel_selection_candidate(const attnsel_selection* s, uint32_t index, attnsel_candidate* out) {
  return guarded([&] {
    require(s, "selection");
    require(out, "out");
    if (index >= s->candidates.size())
      throw ValueError(fmt::format("candidate index {} is out of range: the selection has {} candidates", index,
                                   s->candidates.size()));
    const Candidate& c = s->candidates[index];
    out->backend = c.backend.c_str();
    out->priority = c.priority;
    out->valid = c.valid ? 1 : 0;
    out->num_reasons = static_cast<uint32_t>(c.reasons.size());
    out->reasons = s->reasons[index].data();
  });
}

uint32_t attnsel_selection_num_warnings(const attnsel_selection* s) {
  return s ? static_cast<uint32_t>(s->warnings.size()) : 0;
}

const char* attnsel_selection_warning(const attnsel_selection* s, uint32_t index) {
  return s && index < s->warnings.size() ? s->warnings[index].c_str() : nullptr;
}

const char* attnsel_selection_json(const attnsel_selection* s) { return s ? s->json.c_str() : "null"; }

attnsel_status attnsel_select_json(const attnsel_select_request* request, char** out_json) {
  if (out_json == nullptr) return fail(ATTNSEL_STATUS_VALUE_ERROR, "out_json must not be NULL");
  *out_json = nullptr;
  std::unique_ptr<attnsel_selection> result;
  const attnsel_status status = guarded([&] { run_select(request, result); });
  if (result) {
    // Copying can only fail for lack of memory; the status then says so.
    const attnsel_status copied = guarded([&] { *out_json = copy_string(result->json); });
    if (copied != ATTNSEL_STATUS_OK) return copied;
  }
  return status;
}

attnsel_status attnsel_check_backend(const attnsel_select_request* request, const char* backend, char** out_json) {
  return guarded([&] {
    require(request, "request");
    require(backend, "backend");
    require(out_json, "out_json");
    *out_json = nullptr;
    const SelectInputs in = read_select_request(*request);
    const BackendMember member = AttentionBackendEnum.from_user_text(backend);
    const Platform::Checked checked = in.platform->check_backend(member, in.config);
    *out_json = copy_string(report::dump(nlohmann::ordered_json(checked.reasons), -1));
  });
}

attnsel_status attnsel_list_facts(const attnsel_select_request* request, char** out_json) {
  return guarded([&] {
    require(request, "request");
    require(out_json, "out_json");
    *out_json = nullptr;
    require_struct(request->struct_size, kSelectRequestMinimumSize, "attnsel_select_request");
    const std::shared_ptr<const Platform> platform = with_engine(
        make_request_platform(request->platform, request->mode, assignments(request->facts, request->num_facts, "facts")),
        read_engine_config(*request));
    *out_json = copy_string(report::dump(report::facts_json(*platform)));
  });
}

}  // extern "C"
