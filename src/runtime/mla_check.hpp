// Checking an MLA layer's outputs against the un-absorbed double-precision reference
// (kernels/mla/reference.hpp) on samples of (request, head), with FlashMLA's criteria: each
// element within an absolute or a relative bound, and the cosine distance of everything
// compared within a third (tests/kernelkit/compare.py's check_is_allclose). The bounds are
// those of the MLA kernel tests (docs/DECISIONS.md, "MLA kernels"). Shared by `attnsel run`
// and `attnsel bench`.
// Thread-safety: an MlaOutputCheck is not synchronised; the reference runs on the caller's
// OpenMP team.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attnsel/kernel.hpp"
#include "attnsel/mla.hpp"
#include "runtime/mla_workload.hpp"

namespace attnsel::runtime {

/// |got - want| < abs, or |got - want| / (|want| + 1e-6) < rel, per element; and
/// 1 - 2Σ got·want / Σ(got² + want²) <= cos over the elements compared.
struct MlaTolerance {
  double abs = 0.0, rel = 0.0, cos = 0.0;
};

/// The bound of a layer's outputs (after W_UV): 16-bit layers abs 4e-3 (decode) or 6e-3
/// (prefill: keys and values rounded after the up-projection), rel 2.01/128, cos 5e-6 for
/// fp16 and 2e-5 for bf16 (the whole layer's chain of bf16 roundings); f32 layers
/// 1e-5 / 1e-5 / 1e-10.
MlaTolerance mla_output_tolerance(kernel::ScalarType dtype, bool prefill);

struct MlaMismatch {
  int layer = 0, token = 0, head = 0, dim = 0;
  double got = 0.0, want = 0.0;
};

struct MlaComparison {
  MlaTolerance tolerance;
  int samples = 0;                 ///< (layer, request, head) samples compared
  std::int64_t elements = 0;
  std::int64_t failures = 0;       ///< elements outside both bounds (non-finite outputs included)
  double worst_ratio = 0.0;        ///< largest min(|d| / abs, |d| / (|want| + 1e-6) / rel); < 1 passes
  double max_abs_error = 0.0;
  double cos_diff = 0.0;           ///< of everything compared
  std::vector<MlaMismatch> first_failures;  ///< up to 5
  bool passed() const { return samples > 0 && failures == 0 && cos_diff <= tolerance.cos; }
};

/// Reference multiply-adds of one (request, head) sample: its keys and values up-projected
/// over `seq_len` positions, and its `query_len` rows attending over them.
double mla_reference_cost(const kernel::MlaDims& d, std::int64_t seq_len, std::int64_t query_len);

class MlaOutputCheck {
 public:
  explicit MlaOutputCheck(MlaTolerance tolerance) { result_.tolerance = tolerance; }

  /// Compares head `head` of request `seq` of one layer's output with the reference.
  /// `params`: the layer's, with its whole kv_b_proj (host memory); `q`, `kv_c`, `k_pe`,
  /// `cache` and `output`: the step's tensors as the layer's execute saw them (the cache
  /// already written), `batch` the step's batch (its decodes lead, so a request takes the
  /// path it would take alone).
  void add(const kernel::MlaLayerParams& params, const LatentBatch& batch, int decode_query_len,
           const kernel::TensorView& q, const kernel::TensorView& kv_c, const kernel::TensorView& k_pe,
           const kernel::TensorView& cache, const kernel::TensorView& output, int seq, int head, int layer);

  const MlaComparison& result() const { return result_; }

 private:
  MlaComparison result_;
  double got_want_ = 0.0, squares_ = 0.0;
};

}  // namespace attnsel::runtime
