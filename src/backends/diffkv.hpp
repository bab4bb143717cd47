// Internal: the different-K/V-head-size backends (head_size_v != head_size, e.g. MiMo's
// 192/128) subclass their plain backend and pack K and V into one content slot.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "attnsel/backend.hpp"

namespace attnsel::backends {

/// A DiffKV backend shares its parent's capabilities but not its kernel (K and V are packed
/// into one slot): pin the kernel hooks to the base "no kernel" answers so that a kernel
/// added to the parent class is never inherited by mistake.
template <class Parent>
class DiffKVBackend : public Parent {
 public:
  bool has_kernel() const override { return AttentionBackend::has_kernel(); }
  std::string missing_kernel_reason() const override { return AttentionBackend::missing_kernel_reason(); }
  std::vector<std::string> kernel_gaps(const AttentionSelectorConfig& c, const RuntimeEnv& env) const override {
    return AttentionBackend::kernel_gaps(c, env);
  }
  std::unique_ptr<kernel::AttentionImpl> make_impl(const kernel::LayerParams& params) const override {
    return AttentionBackend::make_impl(params);
  }
};

}  // namespace attnsel::backends
