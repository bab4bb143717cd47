// MambaAttentionBackendEnum's classes (vllm/v1/attention/backends/{mamba1,mamba2,short_conv,
// linear,gdn}_attn.py). vLLM's get_name() for these is the class's own tag ("MAMBA2_ATTN"), not
// the enum member's name; the Mamba selector's batch-invariance error prints it.
#include "backends/common.hpp"
#include "backends/class_factories.hpp"

namespace attnsel::backends {

namespace {
class NamedMambaBackend : public MambaBackend {
 public:
  NamedMambaBackend(std::string name, std::string qualname) : name_(std::move(name)), qualname_(std::move(qualname)) {}
  std::string get_name() const override { return name_; }
  std::string qualname() const override { return qualname_; }

 private:
  std::string name_;
  std::string qualname_;
};
}  // namespace

void append_mamba(ClassList& out) {
  // None of them declares batch invariance (the base default is False).
  out.push_back(std::make_shared<const NamedMambaBackend>("MAMBA1_ATTN", "attnsel::backends::Mamba1AttentionBackend"));
  out.push_back(std::make_shared<const NamedMambaBackend>("MAMBA2_ATTN", "attnsel::backends::Mamba2AttentionBackend"));
  out.push_back(
      std::make_shared<const NamedMambaBackend>("SHORT_CONV_ATTN", "attnsel::backends::ShortConvAttentionBackend"));
  out.push_back(std::make_shared<const NamedMambaBackend>("LINEAR_ATTN", "attnsel::backends::LinearAttentionBackend"));
  out.push_back(std::make_shared<const NamedMambaBackend>("GDN_ATTN", "attnsel::backends::GDNAttentionBackend"));
}

}  // namespace attnsel::backends
