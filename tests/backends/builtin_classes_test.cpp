// Every registry member resolves to a class named like vLLM's, except vLLM's deliberate gaps.
#include <gtest/gtest.h>

#include <cxxabi.h>

#include <cstdlib>
#include <memory>
#include <set>
#include <typeinfo>

#include "attnsel/errors.hpp"
#include "attnsel/registry.hpp"
#include "backends/builtin.hpp"

namespace attnsel {
namespace {

// vLLM's get_name() of the Mamba classes is the class's tag, not the member's name.
const std::map<std::string, std::string, std::less<>> kMambaClassNames = {
    {"MAMBA1", "MAMBA1_ATTN"}, {"MAMBA2", "MAMBA2_ATTN"}, {"SHORT_CONV", "SHORT_CONV_ATTN"},
    {"LINEAR", "LINEAR_ATTN"}, {"GDN_ATTN", "GDN_ATTN"}};

class BuiltinClasses : public ::testing::Test {
 protected:
  void SetUp() override { reset_registry_for_testing(); }
  void TearDown() override { reset_registry_for_testing(); }
};

TEST_F(BuiltinClasses, EveryAttentionMemberResolvesToItsNamedClass) {
  int resolved = 0;
  for (const BackendMember& m : AttentionBackendEnum.members()) {
    const std::string& name = m.name();
    if (name == "TORCH_SDPA" || name == "CUSTOM" || name == "NO_ATTENTION") continue;
    SCOPED_TRACE(name);
    std::shared_ptr<const AttentionBackend> cls = m.get_attention_class();
    ASSERT_NE(cls, nullptr);
    EXPECT_EQ(cls->get_name(), name);
    EXPECT_EQ(cls->qualname(), m.get_path());
    ++resolved;
  }
  EXPECT_EQ(resolved, static_cast<int>(backends::builtin_attention_members().size() +
                                       backends::own_attention_members().size()) -
                          3);
}

// The C++ name of an object's class, without the anonymous namespaces it is defined in.
std::string cpp_class_name(const AttentionBackend& b) {
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> d(abi::__cxa_demangle(typeid(b).name(), nullptr, nullptr, &status),
                                                &std::free);
  std::string name = status == 0 ? d.get() : typeid(b).name();
  for (std::size_t at; (at = name.find("(anonymous namespace)::")) != std::string::npos;)
    name.erase(at, std::string_view("(anonymous namespace)::").size());
  return name;
}

// A class path names a real C++ class: the one the member resolves to, unless that is one
// implementation shared by several members (composites; those name their vLLM class).
TEST_F(BuiltinClasses, ClassPathsNameTheCppClassesThatImplementThem) {
  int checked = 0;
  for (const BackendMember& m : AttentionBackendEnum.members()) {
    const std::string& name = m.name();
    if (name == "TORCH_SDPA" || name == "CUSTOM" || name == "NO_ATTENTION") continue;
    SCOPED_TRACE(name);
    const std::shared_ptr<const AttentionBackend> cls = m.get_attention_class();
    const std::string cpp = cpp_class_name(*cls);
    if (cpp == "attnsel::backends::CompositeAttentionBackend") continue;
    EXPECT_EQ(cls->qualname(), cpp);
    ++checked;
  }
  EXPECT_GE(checked, 30);
}

TEST_F(BuiltinClasses, EveryMambaMemberResolvesToItsNamedClass) {
  for (const BackendMember& m : MambaAttentionBackendEnum.members()) {
    if (m.name() == "CUSTOM") continue;
    SCOPED_TRACE(m.name());
    auto cls = m.get_class();
    ASSERT_NE(cls, nullptr);
    EXPECT_TRUE(cls->is_ssm());
    EXPECT_EQ(cls->qualname(), m.get_path());
    EXPECT_EQ(cls->get_name(), kMambaClassNames.at(m.name()));
  }
}

TEST_F(BuiltinClasses, NoAttentionIsVllmsDeadReferenceAndRaisesImportError) {
  const BackendMember no_attention = AttentionBackendEnum["NO_ATTENTION"];
  EXPECT_EQ(no_attention.get_path(), "attnsel::backends::NoAttentionBackend");
  EXPECT_THROW(no_attention.get_class(), ImportError);
}

TEST_F(BuiltinClasses, TorchSdpaAndCustomHaveNoClass) {
  EXPECT_THROW(AttentionBackendEnum["TORCH_SDPA"].get_class(), ValueError);
  EXPECT_THROW(AttentionBackendEnum["CUSTOM"].get_class(), ValueError);
  EXPECT_THROW(MambaAttentionBackendEnum["CUSTOM"].get_class(), ValueError);
}

TEST_F(BuiltinClasses, ClassNamesAreUnique) {
  std::set<std::string> names;
  for (const auto& cls : backends::make_builtin_classes()) EXPECT_TRUE(names.insert(cls->qualname()).second) << cls->qualname();
}

}  // namespace
}  // namespace attnsel
