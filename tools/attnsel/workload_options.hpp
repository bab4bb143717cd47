// Options shared by `attnsel run` and `attnsel bench`: the model shape and the workload,
// and the selection of the backend that runs it — made exactly as `attnsel select` makes
// it (the host in runnable mode unless --platform/--mode say otherwise; --attention-backend
// is an explicit choice with no fallback).
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attnsel/platform.hpp"
#include "common_options.hpp"
#include "runtime/paged_workload.hpp"
#include "runtime/run_job.hpp"
#include "runtime/workload_shape.hpp"

namespace attnsel::cli {

/// --num-heads --num-kv-heads --head-size --num-layers --dtype --kv-cache-dtype --block-size --layout.
struct ModelOptions {
  /// The heads, head size and kv-cache dtype as given; choose_backend resolves the rest of
  /// the shape (dtype, block size, layout) from the flags below and the backend.
  runtime::WorkloadShape shape;
  int num_layers = 32;
  std::string dtype = "bfloat16";
  int block_size = 0;      ///< 0: the platform's default block size (16 where it has none)
  std::optional<std::string> layout;  ///< nullopt: the backend's first declared layout, else vLLM's default (NHD)
  std::optional<std::string> model;   ///< a config.json (or its folder): the shape comes from there

  void add_to(CLI::App& app, bool with_layers);
  /// With --model: replaces the shape (and, unless --dtype was given, the dtype) by the
  /// model's decoder self-attention layers; returns a one-line description of the model
  /// (empty without --model). UsageError when the model has no such layer or the shape
  /// flags were given too.
  std::string apply_model();

 private:
  std::vector<CLI::Option*> shape_opts_;
  CLI::Option* dtype_opt_ = nullptr;
};

/// What a run needs once the backend is chosen.
struct ChosenBackend {
  std::shared_ptr<const Platform> platform;  ///< as the engine's settings leave it (Selector::platform_for)
  Selection selection;
  runtime::ImplFactory make_impl;
  kernel::KernelInfo kernel;         ///< what the backend's kernel declares (device, ISA, graph support, layout)
  std::string isa;                   ///< the kernel's instruction set ("AVX3+BF16", "CUDA sm_90a on ...", ...) or "-"
  kernel::DeviceKind device = kernel::DeviceKind::cpu;  ///< where the workload lives (runtime::workload_device)
  runtime::WorkloadShape shape;      ///< the model options' shape with its dtype, block size and layout resolved
};

/// Selects the backend for the model's layer on the platform (SelectionError when none).
ChosenBackend choose_backend(const PlatformOptions& platform, const BackendChoiceOptions& backend,
                             const ModelOptions& model);

/// "NHD"/"HND" for a cache layout.
const char* layout_label(runtime::CacheLayout l);

}  // namespace attnsel::cli
