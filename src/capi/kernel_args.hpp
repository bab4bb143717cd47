// The C API's kernel arguments as the kernel interface takes them, shared by the standard
// (kernels.cpp) and the MLA (mla_kernels.cpp) functions: DLPack tensors as TensorViews, the
// host batch as AttentionMetadata, streams, kernel infos, and the step plan handle.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "attnsel/attnsel.h"
#include "attnsel/backend.hpp"
#include "attnsel/kernel.hpp"

/// A step plan made by a standard or an MLA kernel (each refuses the other's).
struct attnsel_step_plan {
  std::unique_ptr<attnsel::kernel::StepPlan> plan;
};

namespace attnsel::capi {

/// The backend a caller names (as AttentionBackendEnum reads user text); ValueError for NULL
/// or a name it does not know.
std::shared_ptr<const AttentionBackend> named_backend(const char* backend);
/// The same, NotImplementedError when the backend has no kernel to create here.
std::shared_ptr<const AttentionBackend> backend_with_kernel(const char* backend);

/// The view of a DLPack tensor; ValueError naming `what` (NULL, unsupported dtype, ...).
kernel::TensorView view(const DLTensor* t, std::string_view what);
/// An optional output such as the LSE: nullopt for NULL, else view(t, what).
std::optional<kernel::TensorView> optional_view(const DLTensor* t, std::string_view what);

/// A host-memory batch as the kernel interface's view of it. Spans point into the caller's
/// arrays; plan() and update() copy what they keep. Only the sizes that locate the arrays
/// are checked here: the kernel interface checks the contents.
kernel::AttentionMetadata metadata(const attnsel_batch* batch);

kernel::Stream stream_of(attnsel_stream stream);

/// Fills the fields of `out` that lie inside its struct_size. `isa` and `layout` must
/// outlive the caller's use of the struct.
void fill_info(const kernel::KernelInfo& k, const char* isa, const char* layout, attnsel_kernel_info* out);

/// A string kept for the life of the process (ISA and layout names handed out by the
/// backend-level info functions, so that callers need not release them).
const char* interned(const std::string& text);

/// The plan behind a handle; ValueError for NULL.
const kernel::StepPlan& step_plan(const attnsel_step_plan* plan);

}  // namespace attnsel::capi
