// MiniMax M3's block-sparse GQA backends (vllm/v1/attention/backends/minimax_m3_sparse.py):
// model-driven; AttentionConfig maps the MSA decode names to minimax_m3_msa_decode_backend.
#include "backends/class_factories.hpp"
#include "backends/common.hpp"

namespace attnsel::backends {

namespace {
BackendCapabilities minimax_m3_sparse_capabilities() {
  BackendCapabilities c;
  c.kv_cache_dtypes = {"bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2"};
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
    c.compute_capability_rule = majors({10});
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

void append_minimax_m3_sparse(ClassList& out) {
  out.push_back(std::make_shared<const MiniMaxM3SparseBackend>());
  out.push_back(std::make_shared<const MiniMaxM3SparseCutlassBackend>());
  out.push_back(std::make_shared<const MiniMaxM3SparseTritonBackend>());
}

}  // namespace attnsel::backends
