// The CPU MLA backends: CPU_MLA (mla/cpu_mla.py) and AMX_MLA (mla/amx_mla.py).
#include "backends/common.hpp"
#include "backends/families.hpp"

namespace attnsel::backends {

namespace {
class CPUMLABackend : public MLACommonBackend {
 public:
  std::string get_name() const override { return "CPU_MLA"; }
  std::string qualname() const override { return "attnsel::backends::CPUMLABackend"; }
  std::vector<DType> supported_dtypes(const RuntimeEnv&) const override { return kHalfAndFloatDTypes; }
  std::vector<std::string> supported_kv_cache_dtypes(const RuntimeEnv&) const override { return {"auto"}; }
  std::vector<KernelBlockSize> get_supported_kernel_block_sizes(const RuntimeEnv&) const override { return {16}; }
  /// Exactly 16: the kernel page is the cache block (no "multiple of" rule).
  bool supports_block_size(std::optional<int> block_size, const RuntimeEnv&) const override {
    return !block_size || *block_size == 16;
  }
  std::vector<int> get_supported_head_sizes(const RuntimeEnv&) const override { return {576}; }
};

class AMXMLABackend : public MLACommonBackend {
 public:
  std::string get_name() const override { return "AMX_MLA"; }
  std::string qualname() const override { return "attnsel::backends::AMXMLABackend"; }
  std::vector<DType> supported_dtypes(const RuntimeEnv&) const override { return {DType::bfloat16}; }
  std::vector<KernelBlockSize> get_supported_kernel_block_sizes(const RuntimeEnv&) const override {
    return {MultipleOf{32}};
  }
  bool supports_block_size(std::optional<int> block_size, const RuntimeEnv&) const override {
    return !block_size || *block_size % 32 == 0;
  }
  std::vector<int> get_supported_head_sizes(const RuntimeEnv&) const override { return {576}; }
  // No AMX check here: the CPU platform only routes to AMX_MLA when the host has AMX.
};
}  // namespace

void append_mla_cpu_classes(ClassList& out) {
  out.push_back(std::make_shared<const CPUMLABackend>());
  out.push_back(std::make_shared<const AMXMLABackend>());
}

}  // namespace attnsel::backends
