// The MLA side of `attnsel run --model` and `attnsel bench --model` (DeepSeek-V2/V3, Kimi-K2):
// the model is planned as `attnsel plan` plans it (its MLA layers' backend, block size,
// dimensions per tensor-parallel rank and softmax scale), and the chosen backend's MLA
// kernel is what the jobs run.
#pragma once

#include <memory>
#include <string>

#include "attnsel/model.hpp"
#include "attnsel/plan.hpp"
#include "common_options.hpp"
#include "runtime/mla_run_job.hpp"
#include "workload_options.hpp"

namespace attnsel::cli {

/// What an MLA run needs once the model is planned.
struct ChosenMlaBackend {
  std::shared_ptr<const Platform> platform;
  ModelPlan plan;
  std::shared_ptr<const Selection> selection;  ///< the MLA group's
  std::string layers_text;                     ///< "0-60"
  int num_layers = 0;                          ///< MLA decoder layers
  runtime::MlaLayerShape layer;                ///< per rank: heads / TP, the latent whole
  runtime::MlaImplFactory make_impl;
  kernel::KernelInfo kernel;
  std::string isa;
  /// The layers run an fp8 latent cache that the backend's capabilities (vLLM's) do not
  /// declare: the backend was selected for the model-dtype cache, and its kernel computes fp8.
  bool kv_cache_dtype_beyond_selection = false;
};

/// Plans `model.mla_model` with the command's engine options (--attention-backend,
/// --attention-config, --backend-per-kind, --kv-cache-dtype, --block-size, --dtype,
/// --tensor-parallel-size) on the platform, and takes its MLA group. A plan that finds no
/// backend for an fp8 cache is made again for the model-dtype cache (vLLM's CPU MLA backends
/// declare none, attnsel's CPU kernel computes it): the kernel then runs fp8, and
/// kv_cache_dtype_beyond_selection says so. UsageError for bad
/// input (a head count that does not divide by the TP size names the field); the plan's
/// selection errors as `attnsel plan` gives them; NotImplementedError when the chosen
/// backend has no kernel here or its kernel does not run on the host.
ChosenMlaBackend choose_mla_backend(const PlatformOptions& platform, const BackendChoiceOptions& backend,
                                   const ModelOptions& model);

/// "DeepSeek MLA: kv_lora_rank 512, qk_rope 64, qk_nope 128, v_head 128; softmax scale
/// 0.1352337789 (192^-0.5 · m², yarn m = 1.368888)".
std::string describe_mla(const MlaShape& shape);

}  // namespace attnsel::cli
