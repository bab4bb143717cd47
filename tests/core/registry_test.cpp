// The registry: vLLM's tests/v1/attention/test_attention_backend_registry.py and the
// seed's behaviour of get_path / get_class / register / register_backend.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "attnsel/errors.hpp"
#include "attnsel/registry.hpp"

namespace attnsel {
namespace {

using ::testing::HasSubstr;

class CustomAttentionBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "CUSTOM"; }
  std::string qualname() const override { return "tests::CustomAttentionBackend"; }
};

class CustomMambaBackend : public MambaBackend {
 public:
  std::string get_name() const override { return "CUSTOM_MAMBA"; }
  std::string qualname() const override { return "tests::CustomMambaBackend"; }
};

class RegistryTest : public ::testing::Test {
 protected:
  void SetUp() override { reset_registry_for_testing(); }
  void TearDown() override { reset_registry_for_testing(); }
};

TEST_F(RegistryTest, HasEveryMemberOfTheSeedInOrder) {
  std::vector<std::string> names;
  for (const BackendMember& m : AttentionBackendEnum.members()) names.push_back(m.name());
  // vLLM's 46, then attnsel's own (CPU_MLA_SPARSE: sparse MLA on the CPU, which vLLM lacks).
  ASSERT_EQ(names.size(), 47U);
  EXPECT_EQ(names.front(), "FLASH_ATTN");
  EXPECT_EQ(names[45], "CUSTOM");
  EXPECT_EQ(names.back(), "CPU_MLA_SPARSE");
  EXPECT_EQ(AttentionBackendEnum["CPU_MLA_SPARSE"].get_path(), "attnsel::backends::CPUMLASparseBackend");
  EXPECT_EQ(AttentionBackendEnum.from_value("attnsel::backends::CPUMLASparseBackend").name(), "CPU_MLA_SPARSE");
  for (const char* required : {"ULTRAQUANT", "TRITON_FLASHINFER", "TRITON_FLASH_ATTN", "FLASHMLA_SPARSE_DSV41",
                               "FLASHINFER_MLA_SPARSE_DSV41", "FLASHMLA_MEGA_ATTN_DSV41", "ROCM_SEGMENTED_ATTN",
                               "TORCH_SDPA", "NO_ATTENTION", "CPU_ATTN", "AMX_MLA", "TURBOQUANT"})
    EXPECT_THAT(names, ::testing::Contains(required));
  std::vector<std::string> mamba;
  for (const BackendMember& m : MambaAttentionBackendEnum.members()) mamba.push_back(m.name());
  EXPECT_EQ(mamba, (std::vector<std::string>{"MAMBA1", "MAMBA2", "SHORT_CONV", "LINEAR", "GDN_ATTN", "CUSTOM"}));
}

TEST_F(RegistryTest, GetPathReturnsDefaultQualifiedName) {
  EXPECT_EQ(AttentionBackendEnum["FLASH_ATTN"].get_path(), "attnsel::backends::FlashAttentionBackend");
  EXPECT_EQ(AttentionBackendEnum["FLASH_ATTN"].get_path(false), "attnsel::backends");
  EXPECT_EQ(AttentionBackendEnum["FLASHMLA_SPARSE_DSV41"].get_path(false), "attnsel::models::deepseek_v41");
  EXPECT_EQ(MambaAttentionBackendEnum["MAMBA2"].get_path(), "attnsel::backends::Mamba2AttentionBackend");
}

TEST_F(RegistryTest, UnregisteredCustomRaisesMustBeRegistered) {
  try {
    (void)AttentionBackendEnum["CUSTOM"].get_path();
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_STREQ(e.what(),
                 "Backend CUSTOM must be registered before use. "
                 "Use register_backend(Backend.CUSTOM, 'your.module.YourClass')");
  }
  EXPECT_THROW((void)MambaAttentionBackendEnum["CUSTOM"].get_class(), ValueError);
}

TEST_F(RegistryTest, TorchSdpaHasAnEmptyPathAndRaisesLikeCustom) {
  EXPECT_THAT([] { (void)AttentionBackendEnum["TORCH_SDPA"].get_path(); },
              ::testing::ThrowsMessage<ValueError>(HasSubstr("Backend TORCH_SDPA must be registered before use.")));
}

TEST_F(RegistryTest, UnknownNameListsEveryValidOption) {
  try {
    (void)AttentionBackendEnum["FLASH_ATTENTION"];
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    const std::string msg = e.what();
    EXPECT_THAT(msg, ::testing::StartsWith("Unknown attention backend: 'FLASH_ATTENTION'. Valid options are: "
                                           "FLASH_ATTN, FLASH_ATTN_DIFFKV, TRITON_ATTN, "));
    EXPECT_THAT(msg, ::testing::EndsWith("TURBOQUANT, ULTRAQUANT, CUSTOM, CPU_MLA_SPARSE"));
  }
}

TEST_F(RegistryTest, LookupIsCaseSensitiveButUserTextIsNot) {
  EXPECT_THROW((void)AttentionBackendEnum["flash_attn"], ValueError);
  EXPECT_EQ(AttentionBackendEnum.from_user_text("flash_attn").name(), "FLASH_ATTN");
}

// vLLM: test_register_custom_backend_with_class_path (the seed's test).
TEST_F(RegistryTest, RegisterCustomBackendWithClassPath) {
  register_class(std::make_shared<CustomAttentionBackend>());
  register_backend(AttentionBackendEnum["CUSTOM"], "tests::CustomAttentionBackend");
  const BackendMember custom = AttentionBackendEnum["CUSTOM"];
  EXPECT_TRUE(custom.is_overridden());
  EXPECT_EQ(custom.get_path(), "tests::CustomAttentionBackend");
  EXPECT_EQ(custom.get_class()->get_name(), "CUSTOM");
  custom.clear_override();
  EXPECT_FALSE(custom.is_overridden());
  EXPECT_THROW((void)custom.get_path(), ValueError);
}

TEST_F(RegistryTest, DecoratorFormRegistersClassAndOverride) {
  auto cls = register_backend_class<CustomAttentionBackend>(AttentionBackendEnum["FLASH_ATTN"]);
  EXPECT_TRUE(AttentionBackendEnum["FLASH_ATTN"].is_overridden());
  EXPECT_EQ(AttentionBackendEnum["FLASH_ATTN"].get_class(), cls);
  AttentionBackendEnum["FLASH_ATTN"].clear_override();
  EXPECT_EQ(AttentionBackendEnum["FLASH_ATTN"].get_path(), "attnsel::backends::FlashAttentionBackend");
}

TEST_F(RegistryTest, LastWriterWins) {
  register_backend(AttentionBackendEnum["CUSTOM"], "first::Backend");
  register_backend(AttentionBackendEnum["CUSTOM"], "second::Backend");
  EXPECT_EQ(AttentionBackendEnum["CUSTOM"].get_path(), "second::Backend");
}

TEST_F(RegistryTest, RegistrationDoesNotValidateThePath) {
  register_backend(AttentionBackendEnum["CUSTOM"], "does::not::Exist");
  EXPECT_EQ(AttentionBackendEnum["CUSTOM"].get_path(), "does::not::Exist");
  EXPECT_THAT([] { (void)AttentionBackendEnum["CUSTOM"].get_class(); },
              ::testing::ThrowsMessage<ImportError>(HasSubstr("does::not::Exist")));
}

TEST_F(RegistryTest, NewNamedMembersAreIndependentOfCustom) {
  register_class(std::make_shared<CustomAttentionBackend>());
  const BackendMember a = register_backend("CUSTOM_MLA", "tests::CustomAttentionBackend");
  const BackendMember b = register_backend("ANOTHER_ONE", "tests::CustomAttentionBackend");
  EXPECT_EQ(a.name(), "CUSTOM_MLA");
  EXPECT_EQ(AttentionBackendEnum["ANOTHER_ONE"], b);
  EXPECT_FALSE(AttentionBackendEnum["CUSTOM"].is_overridden());
  EXPECT_EQ(a.get_class()->qualname(), "tests::CustomAttentionBackend");
  EXPECT_EQ(AttentionBackendEnum.members().back().name(), "ANOTHER_ONE");
}

TEST_F(RegistryTest, DuplicateMemberNameIsRejectedWithOverrideHint) {
  EXPECT_THAT([] { register_backend("FLASH_ATTN", "x::Y"); },
              ::testing::ThrowsMessage<ValueError>(::testing::StrEq(
                  "Backend FLASH_ATTN already exists in AttentionBackendEnum. "
                  "Use register_backend(AttentionBackendEnum.FLASH_ATTN, 'x::Y') to override.")));
  EXPECT_THAT([] { register_backend("MAMBA1", "x::Y", true); },
              ::testing::ThrowsMessage<ValueError>(HasSubstr("already exists in MambaAttentionBackendEnum")));
}

TEST_F(RegistryTest, InvalidMemberNamesAreRejected) {
  // vLLM: `not name.isidentifier() or hasattr(cls, name)`: not identifiers, and the enum
  // class's own attributes.
  for (const char* bad : {"", "HAS SPACE", "1STARTS_WITH_DIGIT", "DASH-NAME", "register", "get_path", "clear_override",
                          "mro", "_missing_", "_value2member_map_", "__name__", "__class__"})
    EXPECT_THAT([&] { register_backend(bad, "x::Y"); },
                ::testing::ThrowsMessage<ValueError>(::testing::StrEq(std::string("Invalid or reserved backend name: ") + bad)))
        << bad;
}

// vLLM accepts any Python identifier that is not an attribute of the enum class.
TEST_F(RegistryTest, AnyIdentifierThatIsNoAttributeIsAValidMemberName) {
  register_class(std::make_shared<CustomAttentionBackend>());
  for (const char* name : {"custom_mla", "MyBackend", "_private", "x1", "name", "value", "__custom__"}) {
    const BackendMember m = register_backend(name, "tests::CustomAttentionBackend");
    EXPECT_EQ(AttentionBackendEnum[name], m) << name;
    EXPECT_EQ(m.get_class()->get_name(), "CUSTOM") << name;
  }
  EXPECT_EQ(register_backend("lower_mamba", "tests::CustomMambaBackend", true).name(), "lower_mamba");
}

// vLLM's @register_backend("NAME") creates the member with value "" and puts the class only
// in the override: clearing the override leaves a member that must be registered again.
TEST_F(RegistryTest, DecoratorWithANewNameKeepsTheClassOnlyInTheOverride) {
  auto cls = register_backend_class<CustomAttentionBackend>("CUSTOM_DECORATED");
  const BackendMember m = AttentionBackendEnum["CUSTOM_DECORATED"];
  EXPECT_EQ(m.value(), std::optional<std::string>(""));
  EXPECT_TRUE(m.is_overridden());
  EXPECT_EQ(m.get_class(), cls);
  m.clear_override();
  EXPECT_THAT([&] { (void)m.get_path(); },
              ::testing::ThrowsMessage<ValueError>(::testing::StrEq(
                  "Backend CUSTOM_DECORATED must be registered before use. "
                  "Use register_backend(Backend.CUSTOM_DECORATED, 'your.module.YourClass')")));
  auto mamba = register_backend_class<CustomMambaBackend>("MAMBA_DECORATED", true);
  EXPECT_EQ(MambaAttentionBackendEnum["MAMBA_DECORATED"].value(), std::optional<std::string>(""));
  EXPECT_EQ(MambaAttentionBackendEnum["MAMBA_DECORATED"].get_class(), mamba);
}

// register_backend("X", "") passes a class_path that is not None: vLLM stores "" as the
// override, so the member is overridden and unusable.
TEST_F(RegistryTest, AnEmptyClassPathIsStoredAsTheOverride) {
  const BackendMember m = register_backend("EMPTY_PATH", "");
  EXPECT_TRUE(m.is_overridden());
  EXPECT_THROW((void)m.get_path(), ValueError);
  register_backend(m, "tests::CustomAttentionBackend");
  EXPECT_EQ(m.get_path(), "tests::CustomAttentionBackend");
}

// Python's AttentionBackendEnum(value).
TEST_F(RegistryTest, LookupByValue) {
  EXPECT_EQ(AttentionBackendEnum.from_value("attnsel::backends::FlashAttentionBackend").name(), "FLASH_ATTN");
  EXPECT_EQ(AttentionBackendEnum.from_value(std::nullopt).name(), "CUSTOM");
  EXPECT_EQ(AttentionBackendEnum.from_value("").name(), "TORCH_SDPA");
  EXPECT_EQ(MambaAttentionBackendEnum.from_value("attnsel::backends::Mamba2AttentionBackend").name(), "MAMBA2");
  // An override does not change the value.
  register_backend(AttentionBackendEnum["FLASH_ATTN"], "tests::CustomAttentionBackend");
  EXPECT_THROW((void)AttentionBackendEnum.from_value("tests::CustomAttentionBackend"), ValueError);
  // A dynamic member takes its value over (Python's _value2member_map_[value] = member).
  const BackendMember m = register_backend("MINE", "tests::Mine");
  EXPECT_EQ(AttentionBackendEnum.from_value("tests::Mine"), m);
  EXPECT_THAT([] { (void)AttentionBackendEnum.from_value("it's"); },
              ::testing::ThrowsMessage<ValueError>(::testing::StrEq("\"it's\" is not a valid AttentionBackendEnum")));
  EXPECT_THAT([] { (void)MambaAttentionBackendEnum.from_value("no::Such"); },
              ::testing::ThrowsMessage<ValueError>(::testing::StrEq("'no::Such' is not a valid MambaAttentionBackendEnum")));
  EXPECT_EQ(MambaAttentionBackendEnum.from_value(std::nullopt).name(), "CUSTOM");
}

TEST_F(RegistryTest, MambaRegistryIsSeparate) {
  register_class(std::make_shared<CustomMambaBackend>());
  register_backend(MambaAttentionBackendEnum["CUSTOM"], "tests::CustomMambaBackend");
  EXPECT_TRUE(MambaAttentionBackendEnum["CUSTOM"].is_overridden());
  EXPECT_FALSE(AttentionBackendEnum["CUSTOM"].is_overridden());
  EXPECT_TRUE(MambaAttentionBackendEnum["CUSTOM"].get_class()->is_ssm());
}

TEST_F(RegistryTest, MutationsBumpTheGeneration) {
  const auto g0 = registry_generation();
  register_backend(AttentionBackendEnum["CUSTOM"], "a::B");
  const auto g1 = registry_generation();
  EXPECT_GT(g1, g0);
  AttentionBackendEnum["CUSTOM"].clear_override();
  EXPECT_GT(registry_generation(), g1);
}

TEST_F(RegistryTest, ResolversAreConsultedAfterTheClassTable) {
  // Resolvers outlive a registry reset, so this one owns its state.
  static int calls = 0;
  calls = 0;
  add_class_resolver([](std::string_view name) -> std::shared_ptr<const BackendClass> {
    if (name != "resolver::Made") return nullptr;
    ++calls;
    return std::make_shared<CustomAttentionBackend>();
  });
  EXPECT_EQ(resolve_class("resolver::Made")->get_name(), "CUSTOM");
  EXPECT_EQ(calls, 1);
  EXPECT_THROW((void)resolve_class("resolver::Other"), ImportError);
}

}  // namespace
}  // namespace attnsel
