#include "workload_options.hpp"

#include <fmt/format.h>

#include "attnsel/kv_cache_layout.hpp"
#include "attnsel/scalar_type.hpp"
#include "attnsel/model.hpp"
#include "attnsel/selector.hpp"
#include "kernels/device/cuda/device_memory.hpp"
#include "model/config_reader.hpp"
#include "runtime/workload_device.hpp"

namespace attnsel::cli {

namespace {

// The physical order of one layer's cache blocks for a layout name or enum.
runtime::CacheLayout cache_layout_of(KVCacheLayout l) {
  // Within one layer only the order of H and N matters to the kernels' strides.
  switch (l) {
    case KVCacheLayout::LBHNC:
    case KVCacheLayout::BLHNC:
    case KVCacheLayout::LHBNC:
    case KVCacheLayout::BHLNC: return runtime::CacheLayout::hnd;
    default: return runtime::CacheLayout::nhd;
  }
}

}  // namespace

const char* layout_label(runtime::CacheLayout l) { return l == runtime::CacheLayout::nhd ? "NHD" : "HND"; }

void ModelOptions::add_to(CLI::App& app, bool with_layers) {
  app.add_option("--model", model,
                 "a Hugging Face config.json (or a folder holding one): the shape of its decoder attention layers");
  shape_opts_.push_back(app.add_option("--num-heads", shape.num_heads, "query heads of the model")
                            ->capture_default_str()
                            ->transform(PositiveInteger));
  shape_opts_.push_back(app.add_option("--num-kv-heads", shape.num_kv_heads, "KV heads of the model")
                            ->capture_default_str()
                            ->transform(PositiveInteger));
  shape_opts_.push_back(
      app.add_option("--head-size", shape.head_size, "head size")->capture_default_str()->transform(PositiveInteger));
  if (with_layers)
    shape_opts_.push_back(app.add_option("--num-layers", num_layers, "attention layers (each runs every step)")
                              ->capture_default_str()
                              ->transform(PositiveInteger));
  dtype_opt_ = app.add_option("--dtype", dtype, "model dtype: bfloat16, float16 or float32")
                   ->capture_default_str()
                   ->check(CLI::IsMember({"bfloat16", "bf16", "float16", "fp16", "half", "float32", "fp32", "float"}));
  add_cache_dtype_option(app, "--kv-cache-dtype", [this](CacheDType d) { shape.kv_cache_dtype = d; },
                         "kv-cache dtype (auto, fp8, fp8_e4m3, fp8_e5m2, ...)")
      ->default_str("auto");
  app.add_option("--block-size", block_size, "tokens per cache block (default: the platform's)")
      ->transform(PositiveInteger);
  app.add_option("--layout", layout, "KV-cache layout: NHD, HND or a KVCacheLayout name (default: the backend's)");
}

std::string ModelOptions::apply_model() {
  if (!model) return {};
  for (const CLI::Option* o : shape_opts_)
    if (o->count() > 0)
      throw UsageError(fmt::format("{} and --model are exclusive: the model gives the shape", o->get_name()));
  const ModelSpec spec = as_usage([&] { return load_model_config(*model); });
  const AttentionLayerSpec* first = nullptr;
  int layers = 0;
  for (const LayerSpec& l : spec.layers) {
    if (l.mixer != MixerKind::attention || !l.attention || l.role != "self_attn" || l.stack == "encoder") continue;
    if (l.attention->use_mla)
      throw UsageError(fmt::format("{} has MLA attention layers; attnsel run covers standard (non-MLA) attention",
                                   spec.source));
    if (!first) first = &*l.attention;
    ++layers;
  }
  if (!first) throw UsageError(fmt::format("{} has no decoder self-attention layer to run", spec.source));
  shape.num_heads = first->num_heads;
  shape.num_kv_heads = first->num_kv_heads;
  shape.head_size = first->head_size;
  num_layers = layers;
  if (dtype_opt_ == nullptr || dtype_opt_->count() == 0)
    dtype = std::string(dtype_name(as_usage([&] { return resolve_model_dtype(spec, "auto"); })));
  return fmt::format("{} ({}{}), {} decoder self-attention layers", spec.source, spec.model_type,
                     spec.architecture.empty() ? "" : ", " + spec.architecture, layers);
}

ChosenBackend choose_backend(const PlatformOptions& platform_opts, const BackendChoiceOptions& backend_opts,
                             const ModelOptions& m) {
  ChosenBackend out;
  out.platform = platform_opts.make_platform();
  EngineConfig engine;
  backend_opts.apply(engine.attention);
  engine.cache.cache_dtype = m.shape.kv_cache_dtype;
  out.shape = m.shape;
  out.shape.block_size = m.block_size > 0 ? m.block_size : out.platform->default_block_size().value_or(16);
  if (m.block_size > 0) {
    engine.cache.block_size = m.block_size;
    engine.cache.user_specified_block_size = true;
  }
  LayerRequest layer;
  layer.head_size = m.shape.head_size;
  layer.dtype = *parse_dtype(m.dtype);  // checked by the option
  layer.kv_cache_dtype = m.shape.kv_cache_dtype;
  layer.num_heads = m.shape.num_heads;
  layer.attn_type = AttentionType::decoder;
  out.shape.dtype = kernel::scalar_type(layer.dtype);

  Selector selector(out.platform);
  out.selection = *selector.select(engine, layer);
  out.platform = selector.platform_for(engine);
  const std::shared_ptr<const AttentionBackend> cls = out.selection.backend_class;
  out.make_impl = [cls](const kernel::LayerParams& p) { return cls->make_impl(p); };
  // The backend's kernel says where it runs and what it prefers (a plugin overriding a
  // built-in backend declares its own, by default host memory and nothing more).
  out.kernel = cls->kernel_info(out.shape.dtype, m.shape.kv_cache_dtype);
  out.isa = out.kernel.isa;
  out.device = runtime::workload_device(out.kernel);
  if (out.device == kernel::DeviceKind::cuda && out.kernel.available) {
    const kernel::cuda::DeviceInfo d = kernel::cuda::device_info(0);
    out.isa = fmt::format("{} on {}", out.kernel.isa, d.name);
  }

  if (m.layout) {
    const auto l = parse_layout(*m.layout);
    if (!l)
      throw UsageError(fmt::format("unknown --layout '{}'; valid values are: NHD, HND, LBNHC, LBHNC, ...",
                                   model::printable(*m.layout)));
    out.shape.layout = cache_layout_of(*l);
  } else {
    // The backend's declared layouts first, then its kernel's preference, then vLLM's default.
    const auto declared = cls->supported_kv_cache_layouts(out.platform->env());
    out.shape.layout = cache_layout_of(declared && !declared->empty() ? declared->front()
                                       : out.kernel.preferred_layout ? *out.kernel.preferred_layout
                                                                     : default_layout_preference().front());
  }
  return out;
}

}  // namespace attnsel::cli
