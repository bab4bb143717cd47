#include "report/facts_json.hpp"

namespace attnsel::report {

nlohmann::ordered_json facts_json(const Platform& platform) {
  const RuntimeFacts& facts = platform.env().facts;
  nlohmann::ordered_json out = {{"platform", platform.spec()}, {"facts", nlohmann::ordered_json::array()}};
  for (const FactDefinition& d : fact_definitions())
    out["facts"].push_back({{"name", d.name},
                            {"type", d.type},
                            {"value", fact_value_to_string(facts.values().at(std::string(d.name)))},
                            {"default", fact_value_to_string(d.default_for(platform.env().device))},
                            {"overridden", facts.is_overridden(d.name)},
                            {"from_engine", facts.is_from_engine(d.name)},
                            {"valid", d.range.valid},
                            {"doc", d.doc}});
  return out;
}

}  // namespace attnsel::report
