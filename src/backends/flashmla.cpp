// FLASHMLA's capabilities (vllm/v1/attention/backends/mla/flashmla.py).
#include "backends/class_factories.hpp"
#include "backends/common.hpp"
#include "backends/runtime_facts.hpp"

namespace attnsel::backends {

namespace {
class FlashMLABackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "FLASHMLA"; }
  std::string qualname() const override { return "attnsel::backends::FlashMLABackend"; }
  BackendCapabilities capabilities(const RuntimeEnv& env) const override {
    BackendCapabilities c = dense_mla_capabilities();
    c.kv_cache_dtypes = kMlaFp8KvDTypes;
    c.kernel_block_sizes = {64};
    c.compute_capability_rule = majors({9, 10});
    c.combination_rule = [sparse = flashmla_sparse_unsupported_reason(env),
                          dense = flashmla_dense_unsupported_reason(env)](const CombinationArgs& a) {
      return a.use_sparse ? sparse : dense;
    };
    return c;
  }
};
}  // namespace

void append_flashmla(ClassList& out) { out.push_back(std::make_shared<const FlashMLABackend>()); }

}  // namespace attnsel::backends
