// The ROCm attention backends: ROCM_ATTN (rocm_attn.py), its opt-in segmented subclass
// ROCM_SEGMENTED_ATTN (rocm_segmented_attn.py), ROCM_AITER_FA (rocm_aiter_fa.py) and
// ROCM_AITER_UNIFIED_ATTN (rocm_aiter_unified_attn.py).
#include "backends/common.hpp"
#include "backends/families.hpp"
#include "backends/runtime_facts.hpp"

namespace attnsel::backends {

namespace {
const StringList kRocmKvDTypes = {"auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2"};

class RocmAttentionBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "ROCM_ATTN"; }
  std::string qualname() const override { return "attnsel::backends::RocmAttentionBackend"; }
  std::vector<DType> supported_dtypes(const RuntimeEnv&) const override { return kHalfAndFloatDTypes; }
  std::vector<std::string> supported_kv_cache_dtypes(const RuntimeEnv&) const override { return kRocmKvDTypes; }
  bool forward_includes_kv_cache_update() const override { return false; }
  // The native HIP kernel handles 16 and 32; other multiples of 16 take the Triton path.
  std::vector<KernelBlockSize> get_supported_kernel_block_sizes(const RuntimeEnv&) const override {
    return {MultipleOf{16}};
  }
  std::vector<int> get_supported_head_sizes(const RuntimeEnv&) const override {
    return {32, 64, 80, 96, 128, 160, 192, 224, 256};
  }
  bool supports_non_causal(const RuntimeEnv&) const override { return true; }
  bool supports_sliding_window(const RuntimeEnv&) const override { return true; }
  /// Its (2, num_blocks, ...) cache is incompatible with connectors that need blocks first.
  bool supports_kv_connector(const RuntimeEnv&) const override { return false; }
  /// ENCODER_DECODER is excluded: its prefill kernel assumes self-attention.
  bool supports_attn_type(AttentionType t) const override { return t != AttentionType::encoder_decoder; }
  /// The native HIP kernels need the K and V groups to span all blocks (H outermost in a layer).
  std::optional<std::vector<KVCacheLayout>> supported_kv_cache_layouts(const RuntimeEnv&) const override {
    return std::vector<KVCacheLayout>{KVCacheLayout::LHBNC, KVCacheLayout::LBHNC};
  }
};

/// An opt-in Triton split-KV backend for RDNA3/RDNA4 (gfx11/gfx12) that also serves sinks.
class RocmSegmentedAttentionBackend : public RocmAttentionBackend {
 public:
  std::string get_name() const override { return "ROCM_SEGMENTED_ATTN"; }
  std::string qualname() const override { return "attnsel::backends::RocmSegmentedAttentionBackend"; }
  bool supports_sink(const RuntimeEnv&) const override { return true; }
  bool supports_compute_capability(const std::optional<DeviceCapability>&, const RuntimeEnv& env) const override {
    return env.device.kind == PlatformKind::rocm &&
           (env.device.arch.starts_with("gfx11") || env.device.arch.starts_with("gfx12"));
  }
  std::optional<std::string> supports_combination(const CombinationArgs& a, const RuntimeEnv& env) const override {
    if (a.kv_cache_dtype && a.kv_cache_dtype->starts_with("fp8") && !env.device.arch.starts_with("gfx12"))
      return "FP8 KV cache requires gfx12";
    return std::nullopt;
  }
};

class AiterFlashAttentionBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "ROCM_AITER_FA"; }
  std::string qualname() const override { return "attnsel::backends::AiterFlashAttentionBackend"; }
  std::vector<std::string> supported_kv_cache_dtypes(const RuntimeEnv&) const override { return kRocmKvDTypes; }
  bool forward_includes_kv_cache_update() const override { return false; }
  std::vector<KernelBlockSize> get_supported_kernel_block_sizes(const RuntimeEnv&) const override { return {16, 32}; }
  std::vector<int> get_supported_head_sizes(const RuntimeEnv&) const override { return {64, 128, 256}; }
  bool supports_sink(const RuntimeEnv&) const override { return true; }
  bool supports_non_causal(const RuntimeEnv&) const override { return true; }
  bool supports_sliding_window(const RuntimeEnv&) const override { return true; }
  /// AITER's FA kernels are built for MI300-class (CDNA3) and newer only.
  bool supports_compute_capability(const std::optional<DeviceCapability>&, const RuntimeEnv& env) const override {
    return cdna_version(env) >= 3;
  }
};

class RocmAiterUnifiedAttentionBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "ROCM_AITER_UNIFIED_ATTN"; }
  std::string qualname() const override { return "attnsel::backends::RocmAiterUnifiedAttentionBackend"; }
  std::vector<std::string> supported_kv_cache_dtypes(const RuntimeEnv&) const override { return kRocmKvDTypes; }
  bool forward_includes_kv_cache_update() const override { return false; }
  std::vector<KernelBlockSize> get_supported_kernel_block_sizes(const RuntimeEnv&) const override {
    return {MultipleOf{16}};
  }
  bool supports_sink(const RuntimeEnv&) const override { return true; }
  bool supports_mm_prefix(const RuntimeEnv&) const override { return true; }
  bool supports_sliding_window(const RuntimeEnv&) const override { return true; }
  bool supports_attn_type(AttentionType) const override { return true; }
  /// Block-contiguous first; LHBNC (not block-compact) only without a KV connector, which moves whole blocks.
  std::optional<std::vector<KVCacheLayout>> supported_kv_cache_layouts(const RuntimeEnv& env) const override {
    std::vector<KVCacheLayout> layouts{KVCacheLayout::LBHNC, KVCacheLayout::BLHNC};
    if (!env.facts.get_bool("kv_connector.configured")) layouts.push_back(KVCacheLayout::LHBNC);
    return layouts;
  }
};
}  // namespace

void append_rocm_attn_classes(ClassList& out) {
  out.push_back(std::make_shared<const RocmAttentionBackend>());
  out.push_back(std::make_shared<const RocmSegmentedAttentionBackend>());
  out.push_back(std::make_shared<const AiterFlashAttentionBackend>());
  out.push_back(std::make_shared<const RocmAiterUnifiedAttentionBackend>());
}

}  // namespace attnsel::backends
