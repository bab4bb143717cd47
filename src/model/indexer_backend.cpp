#include "model/indexer_backend.hpp"

namespace attnsel::model {

namespace {

class DeepseekV32IndexerBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "DEEPSEEK_V32_INDEXER"; }
  std::string qualname() const override { return "attnsel::models::deepseek_v32::DeepseekV32IndexerBackend"; }
  // vLLM: [1, 64] on ROCm, [64] elsewhere.
  std::vector<KernelBlockSize> get_supported_kernel_block_sizes(const RuntimeEnv& env) const override {
    if (env.device.kind == PlatformKind::rocm) return {1, 64};
    return {64};
  }
  std::vector<int> get_supported_head_sizes(const RuntimeEnv&) const override { return {32, 64, 128}; }
  // The indexer's paged MQA-logits kernels read whole blocks (vLLM's DeepseekV32IndexerBackend).
  std::optional<std::vector<KVCacheLayout>> supported_kv_cache_layouts(const RuntimeEnv&) const override {
    return std::vector<KVCacheLayout>{KVCacheLayout::BLNHC, KVCacheLayout::BLHNC};
  }
};

}  // namespace

std::shared_ptr<const AttentionBackend> deepseek_v32_indexer_backend() {
  static const auto kInstance = std::make_shared<const DeepseekV32IndexerBackend>();
  return kInstance;
}

int indexer_bytes_per_token(int index_head_dim) { return index_head_dim + index_head_dim / 128 * 4; }

}  // namespace attnsel::model
