// FLASH_ATTN_MLA_SPARSE's capabilities (vllm/v1/attention/backends/mla/flashattn_mla_sparse.py).
// Its kernel: attnsel's sparse MLA CUDA kernel (cuda_sparse_mla_backend.hpp).
#include "backends/class_factories.hpp"
#include "backends/common.hpp"
#include "backends/cuda_sparse_mla_backend.hpp"

namespace attnsel::backends {

namespace {
class FlashAttnMLASparseBackend : public CudaSparseMlaBackend {
 public:
  std::string get_name() const override { return "FLASH_ATTN_MLA_SPARSE"; }
  std::string qualname() const override { return "attnsel::backends::FlashAttnMLASparseBackend"; }
  BackendCapabilities capabilities(const RuntimeEnv&) const override {
    BackendCapabilities c = sparse_mla_capabilities();
    c.kernel_block_sizes = {64};
    c.head_sizes = {};
    c.compute_capability_rule = majors({9});
    return c;
  }
};
}  // namespace

void append_flashattn_mla_sparse(ClassList& out) { out.push_back(std::make_shared<const FlashAttnMLASparseBackend>()); }

}  // namespace attnsel::backends
