// TRITON_FLASHINFER (vllm/v1/attention/backends/triton_flashinfer.py): the composite of
// TRITON_ATTN (image masks) and FLASHINFER (causal batches) on SM 10.x.
#include "backends/class_factories.hpp"
#include "backends/composite.hpp"
#include "backends/flashinfer.hpp"
#include "backends/triton_attn.hpp"

namespace attnsel::backends {

void append_triton_flashinfer(ClassList& out) {
  out.push_back(CompositeAttentionBackend::create(std::make_shared<const TritonAttentionBackend>(),
                                                  std::make_shared<const FlashInferBackend>(),
                                                  {.backend_name = "TRITON_FLASHINFER",
                                                   .qualname = "attnsel::backends::TritonFlashInferBackend",
                                                   .head_sizes = {256, 512},
                                                   .kernel_block_sizes = {64},
                                                   .device_major = 10}));
}

}  // namespace attnsel::backends
