// MiniMax M3's block-sparse GQA backends (vLLM's minimax_m3 model code): model-driven;
// AttentionConfig maps the MSA decode names to minimax_m3_msa_decode_backend.
#include "backends/class_factories.hpp"
#include "backends/common.hpp"

// vLLM defines these classes in its model code (vllm.models.minimax_m3.common.sparse_attention); their C++
// classes live in the namespace their class paths name.
namespace attnsel::models::minimax_m3 {

namespace {
BackendCapabilities minimax_m3_sparse_capabilities() {
  BackendCapabilities c;
  c.kv_cache_dtypes = {CacheDType::bfloat16, CacheDType::fp8, CacheDType::fp8_e4m3, CacheDType::fp8_e5m2};
  c.forward_includes_kv_cache_update = false;
  c.kernel_block_sizes = {128};
  c.head_sizes = {128};
  return c;
}

class MiniMaxM3SparseBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "MINIMAX_M3_SPARSE"; }
  std::string qualname() const override { return "attnsel::models::minimax_m3::MiniMaxM3SparseBackend"; }
  BackendCapabilities capabilities(const RuntimeEnv&) const override { return minimax_m3_sparse_capabilities(); }
};

class MiniMaxM3SparseCutlassBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "CUTLASS_MSA"; }
  std::string qualname() const override { return "attnsel::models::minimax_m3::MiniMaxM3SparseCutlassBackend"; }
  BackendCapabilities capabilities(const RuntimeEnv&) const override {
    BackendCapabilities c = minimax_m3_sparse_capabilities();
    c.compute_capability_rule = backends::majors({10});
    return c;
  }
};

class MiniMaxM3SparseTritonBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "TRITON_MSA"; }
  std::string qualname() const override { return "attnsel::models::minimax_m3::MiniMaxM3SparseTritonBackend"; }
  BackendCapabilities capabilities(const RuntimeEnv&) const override { return minimax_m3_sparse_capabilities(); }
};
}  // namespace

}  // namespace attnsel::models::minimax_m3

namespace attnsel::backends {

void append_minimax_m3_sparse(ClassList& out) {
  out.push_back(std::make_shared<const models::minimax_m3::MiniMaxM3SparseBackend>());
  out.push_back(std::make_shared<const models::minimax_m3::MiniMaxM3SparseCutlassBackend>());
  out.push_back(std::make_shared<const models::minimax_m3::MiniMaxM3SparseTritonBackend>());
}

}  // namespace attnsel::backends
