// FLASHINFER_MLA_SPARSE_SM120's capabilities (vllm/v1/attention/backends/mla/flashinfer_mla_sparse_sm120.py).
#include "backends/class_factories.hpp"
#include "backends/common.hpp"
#include <fmt/format.h>

namespace attnsel::backends {

namespace {
class FlashInferMLASparseSM120Backend : public AttentionBackend {
 public:
  std::string get_name() const override { return "FLASHINFER_MLA_SPARSE_SM120"; }
  std::string qualname() const override { return "attnsel::backends::FlashInferMLASparseSM120Backend"; }
  BackendCapabilities capabilities(const RuntimeEnv& env) const override {
    BackendCapabilities c = sparse_mla_capabilities();
    c.dtypes = {DType::bfloat16};
    c.kv_cache_dtypes = {CacheDType::auto_, CacheDType::fp8, CacheDType::fp8_e4m3, CacheDType::fp8_ds_mla};
    c.kernel_block_sizes = {64, 256};
    c.head_sizes = {512, 576};
    c.compute_capability_rule = majors({12});
    const auto topk = env.facts.get_int("model.index_topk");
    c.combination_rule = [topk](const CombinationArgs&) -> std::optional<std::string> {
      if (topk != 2048) return fmt::format("FlashInfer sparse MLA on SM120 requires index_topk == 2048, but got {}", topk);
      return std::nullopt;
    };
    c.kv_cache_layouts = kBlockOuterLayouts;
    return c;
  }
};
}  // namespace

void append_flashinfer_mla_sparse_sm120(ClassList& out) { out.push_back(std::make_shared<const FlashInferMLASparseSM120Backend>()); }

}  // namespace attnsel::backends
