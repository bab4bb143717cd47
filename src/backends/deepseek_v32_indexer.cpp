// DeepSeek-V3.2's indexer-cache backend (vLLM's vllm/v1/attention/backends/mla/indexer.py).
#include "backends/deepseek_v32_indexer.hpp"

namespace attnsel::backends {

BackendCapabilities DeepseekV32IndexerBackend::capabilities(const RuntimeEnv& env) const {
  BackendCapabilities c;
  // vLLM: [1, 64] on ROCm, [64] elsewhere.
  if (env.device.kind == PlatformKind::rocm) c.kernel_block_sizes = {1, 64};
  else c.kernel_block_sizes = {64};
  c.head_sizes = {32, 64, 128};
  // The indexer's paged MQA-logits kernels read whole blocks (vLLM's DeepseekV32IndexerBackend).
  c.kv_cache_layouts = std::vector<KVCacheLayout>{KVCacheLayout::BLNHC, KVCacheLayout::BLHNC};
  return c;
}

std::shared_ptr<const AttentionBackend> deepseek_v32_indexer_backend() {
  static const auto kInstance = std::make_shared<const DeepseekV32IndexerBackend>();
  return kInstance;
}

}  // namespace attnsel::backends
