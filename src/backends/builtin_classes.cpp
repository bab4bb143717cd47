// The built-in backend classes: one object per class named in builtin_members.cpp.
// TORCH_SDPA (empty path), CUSTOM (unset) and NO_ATTENTION (vLLM's dead reference, whose
// get_class() raises ImportError) deliberately have none.
#include "backends/builtin.hpp"
#include "backends/families.hpp"

namespace attnsel::backends {

std::vector<std::shared_ptr<const BackendClass>> make_builtin_classes() {
  ClassList out;
  append_flash_attn_classes(out);
  append_flashinfer_classes(out);
  append_triton_attn_classes(out);
  append_flex_attention_classes(out);
  append_diffkv_classes(out);
  append_turboquant_classes(out);
  append_rocm_attn_classes(out);
  append_cpu_attn_classes(out);
  append_mla_cuda_classes(out);
  append_mla_sparse_classes(out);
  append_mla_cpu_classes(out);
  append_model_driven_classes(out);
  append_composite_classes(out);
  append_mamba_classes(out);
  return out;
}

}  // namespace attnsel::backends
