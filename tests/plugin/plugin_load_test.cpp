// Loading plugins: what a good plugin provides, and every way a bad one is refused.
#include <dlfcn.h>

#include <thread>

#include "attnsel/backend.hpp"
#include "attnsel/plugin_loader.hpp"
#include "plugin/plugin_backend.hpp"
#include "plugin_test_support.hpp"

namespace attnsel::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const std::string kBasicQualname = file_name(kPluginC) + ":attnsel_plugin_init";

RuntimeEnv cuda_env(int major, int minor) {
  RuntimeEnv env;
  env.device.kind = PlatformKind::cuda;
  env.device.device_name = "cuda";
  env.device.capability = DeviceCapability{major, minor};
  return env;
}

RuntimeEnv cpu_env() {
  RuntimeEnv env;
  env.device.kind = PlatformKind::cpu;
  env.device.device_name = "cpu";
  return env;
}

AttentionSelectorConfig config(int head_size, DType dtype) {
  AttentionSelectorConfig c;
  c.head_size = head_size;
  c.dtype = dtype;
  return c;
}

// How often the C plugin's attnsel_plugin_init ran, read from the already-loaded library.
int init_calls() {
  void* handle = ::dlopen(kPluginC.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return -1;
  auto fn = reinterpret_cast<int (*)()>(::dlsym(handle, "test_plugin_init_calls"));
  const int n = fn != nullptr ? fn() : -2;
  ::dlclose(handle);
  return n;
}

using PluginLoad = PluginTest;

TEST_F(PluginLoad, LoadsEveryDeclaredBackendUnderItsQualifiedName) {
  const PluginInfo info = load_plugin(kPluginC);
  EXPECT_EQ(info.name, "c-basic");
  EXPECT_EQ(info.version, "1.2.3");
  EXPECT_EQ(info.symbol, "attnsel_plugin_init");
  EXPECT_EQ(info.abi_major, ATTNSEL_PLUGIN_ABI_MAJOR);
  EXPECT_EQ(info.abi_minor, ATTNSEL_PLUGIN_ABI_MINOR);
  ASSERT_EQ(info.backends.size(), 2u);
  EXPECT_EQ(info.backends[0].name, "C_BASIC");
  EXPECT_EQ(info.backends[0].qualname, kBasicQualname);
  EXPECT_EQ(info.backends[1].name, "C_BASIC_MLA");
  EXPECT_EQ(info.backends[1].qualname, kBasicQualname + "#C_BASIC_MLA");
  EXPECT_TRUE(info.backends[0].available);
  EXPECT_FALSE(info.backends[0].has_kernel);
  // Both are in the class table now, under those names.
  EXPECT_EQ(resolve_class(kBasicQualname)->get_name(), "C_BASIC");
  EXPECT_EQ(resolve_class(kBasicQualname + "#C_BASIC_MLA")->get_name(), "C_BASIC_MLA");
}

TEST_F(PluginLoad, CustomRegisteredWithALibraryPathResolvesThroughGetClass) {
  const BackendMember custom = AttentionBackendEnum["CUSTOM"];
  register_backend(custom, qualified(kPluginC, "attnsel_plugin_init"));
  EXPECT_TRUE(custom.is_overridden());
  EXPECT_EQ(custom.get_path(), qualified(kPluginC, "attnsel_plugin_init"));
  auto cls = custom.get_attention_class();
  EXPECT_EQ(cls->get_name(), "C_BASIC");
  EXPECT_EQ(cls->qualname(), kBasicQualname);
}

TEST_F(PluginLoad, HashNameSelectsAnotherBackendCaseInsensitively) {
  auto mla = resolve_class(qualified(kPluginC, "attnsel_plugin_init#c_basic_mla"));
  EXPECT_EQ(mla->get_name(), "C_BASIC_MLA");
  const std::string message =
      import_error_of([] { (void)resolve_class(qualified(kPluginC, "attnsel_plugin_init#NOPE")); });
  EXPECT_THAT(message, HasSubstr("declares no backend named 'NOPE'"));
  EXPECT_THAT(message, HasSubstr("it declares: C_BASIC, C_BASIC_MLA"));
}

TEST_F(PluginLoad, NewEnumMemberNamedByAPath) {
  const BackendMember member = register_backend("MY_PLUGIN_ATTN", qualified(kPluginC, "attnsel_plugin_init"));
  EXPECT_EQ(AttentionBackendEnum["MY_PLUGIN_ATTN"], member);
  EXPECT_EQ(member.get_attention_class()->get_name(), "C_BASIC");
}

TEST_F(PluginLoad, DeclaredCapabilitiesBecomeTheBackendsAnswers) {
  auto basic = std::dynamic_pointer_cast<const AttentionBackend>(resolve_class(qualified(kPluginC, "attnsel_plugin_init")));
  ASSERT_TRUE(basic);
  const RuntimeEnv h100 = cuda_env(9, 0);

  AttentionSelectorConfig good = config(128, DType::bfloat16);
  good.kv_cache_dtype = CacheDType::auto_;
  good.block_size = 32;
  good.has_sliding_window = true;
  EXPECT_THAT(basic->validate_configuration(good, h100), IsEmpty());

  AttentionSelectorConfig bad = config(96, DType::float32);
  bad.kv_cache_dtype = CacheDType::fp8;
  bad.block_size = 8;
  bad.use_mla = true;
  bad.use_non_causal = true;
  EXPECT_THAT(basic->validate_configuration(bad, cuda_env(7, 5)),
              ElementsAre("head_size not supported", "dtype not supported", "kv_cache_dtype not supported",
                          "block_size not supported", "MLA not supported", "compute capability not supported",
                          "non-causal attention not supported"));
  // A capability range excludes devices that have no compute capability at all.
  EXPECT_THAT(basic->validate_configuration(config(128, DType::float16), cpu_env()),
              ElementsAre("compute capability not supported"));
  // The plugin's own combination rule, with its reason.
  AttentionSelectorConfig combo = config(64, DType::float16);
  combo.block_size = 32;
  EXPECT_THAT(basic->validate_configuration(combo, h100), ElementsAre("head size 64 needs block size 16, got 32"));
  EXPECT_EQ(basic->supported_kv_cache_layouts(h100),
            (std::vector<KVCacheLayout>{KVCacheLayout::LBHNC, KVCacheLayout::LBNHC}));
  EXPECT_TRUE(basic->capabilities(h100).kv_connector);
  EXPECT_FALSE(basic->capabilities(h100).pcp);

  auto mla = std::dynamic_pointer_cast<const AttentionBackend>(
      resolve_class(qualified(kPluginC, "attnsel_plugin_init#C_BASIC_MLA")));
  EXPECT_TRUE(mla->capabilities(h100).mla);
  EXPECT_TRUE(mla->capabilities(h100).pcp);
  EXPECT_FALSE(mla->capabilities(h100).kv_connector);
  EXPECT_TRUE(mla->capabilities(h100).supports_attn_type(AttentionType::encoder_only));
  EXPECT_FALSE(mla->capabilities(h100).supports_attn_type(AttentionType::encoder));
  EXPECT_EQ(mla->supported_kv_cache_layouts(h100), std::nullopt);
  AttentionSelectorConfig mla_config = config(576, DType::bfloat16);
  mla_config.use_mla = true;
  EXPECT_THAT(mla->validate_configuration(mla_config, cpu_env()), IsEmpty());
}

TEST_F(PluginLoad, HelperBackendsMapTheirClassOntoTheInterface) {
  auto helper = std::dynamic_pointer_cast<const AttentionBackend>(resolve_class(qualified(kPluginCpp, "attnsel_plugin_init")));
  ASSERT_TRUE(helper);
  EXPECT_EQ(helper->get_name(), "HELPER_ATTN");
  const RuntimeEnv env = cpu_env();
  EXPECT_THAT(helper->capabilities(env).dtypes, ElementsAre(DType::bfloat16, DType::float32));
  EXPECT_THAT(helper->get_supported_kernel_block_sizes(env), ElementsAre(KernelBlockSize{MultipleOf{16}}, KernelBlockSize{24}));
  EXPECT_TRUE(helper->capabilities(env).sink);
  EXPECT_TRUE(helper->capabilities(env).batch_invariance);
  EXPECT_TRUE(helper->capabilities(env).supports_attn_type(AttentionType::encoder));

  AttentionSelectorConfig c = config(128, DType::float32);
  c.kv_cache_dtype = CacheDType::fp8;
  c.has_sink = true;
  EXPECT_THAT(helper->validate_configuration(c, env),
              ElementsAre("fp8 KV cache with attention sinks is not implemented by HELPER_ATTN"));
  // An exception inside the plugin's check becomes the reason; it does not escape.
  EXPECT_THAT(helper->validate_configuration(config(80, DType::bfloat16), env),
              ElementsAre("check_combination exploded on head size 80"));
}

TEST_F(PluginLoad, LoadingTwiceIsIdempotent) {
  const PluginInfo first = load_plugin(kPluginC);
  const int calls = init_calls();
  const std::uint64_t generation = registry_generation();
  // The same file again, by the same path and by another spelling of it.
  const std::filesystem::path p(kPluginC);
  const std::string other_spelling = (p.parent_path() / "." / p.filename()).string();
  const PluginInfo second = load_plugin(kPluginC);
  const PluginInfo third = load_plugin(other_spelling, "attnsel_plugin_init");
  EXPECT_EQ(init_calls(), calls);
  EXPECT_EQ(registry_generation(), generation);
  EXPECT_EQ(second.backends[0].qualname, first.backends[0].qualname);
  EXPECT_EQ(third.library, first.library);
  EXPECT_EQ(loaded_plugins().size(), 1u);
  // Another init symbol of the same library is another plugin.
  (void)load_plugin(kPluginC, "init_register_as");
  EXPECT_EQ(loaded_plugins().size(), 2u);
}

TEST_F(PluginLoad, ABackendObjectKeepsItsLibraryLoaded) {
  auto cls = std::dynamic_pointer_cast<const AttentionBackend>(resolve_class(qualified(kPluginC, "attnsel_plugin_init")));
  plugin::reset_plugins_for_testing();
  reset_registry_for_testing();
  // Nothing but `cls` references the plugin now; its code must still be there to run.
  AttentionSelectorConfig combo = config(64, DType::float16);
  combo.block_size = 32;
  EXPECT_THAT(cls->validate_configuration(combo, cuda_env(8, 0)), ElementsAre("head size 64 needs block size 16, got 32"));
  void* still = ::dlopen(kPluginC.c_str(), RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(still, nullptr);
  if (still != nullptr) ::dlclose(still);
  cls.reset();
  // The last reference is gone: the library is closed.
  void* gone = ::dlopen(kPluginC.c_str(), RTLD_NOW | RTLD_NOLOAD);
  EXPECT_EQ(gone, nullptr);
  if (gone != nullptr) ::dlclose(gone);
}

TEST_F(PluginLoad, RegisterAsOverridesABuiltinAndCreatesNewMembers) {
  const PluginInfo info = load_plugin(kPluginC, "init_register_as");
  EXPECT_THAT(info.backends[0].registered_as, ElementsAre("C_REG_NEW", "CPU_ATTN"));
  const BackendMember cpu = AttentionBackendEnum["CPU_ATTN"];
  EXPECT_TRUE(cpu.is_overridden());
  EXPECT_EQ(cpu.get_path(), file_name(kPluginC) + ":init_register_as");
  EXPECT_EQ(cpu.get_attention_class()->get_name(), "C_REG");
  EXPECT_EQ(AttentionBackendEnum["C_REG_NEW"].get_attention_class()->get_name(), "C_REG");
}

TEST_F(PluginLoad, EnvironmentPluginsLoadAndFailuresAreReportedNotThrown) {
  const std::string list = kPluginC + ", /nonexistent/dir/libmissing.so ," + kPluginCpp + ":attnsel_plugin_init";
  ::setenv("ATTNSEL_PLUGINS", list.c_str(), 1);
  const std::vector<std::string> failures = load_environment_plugins();
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_THAT(failures[0], HasSubstr("'/nonexistent/dir/libmissing.so'"));
  EXPECT_THAT(failures[0], HasSubstr("does not exist"));
  ASSERT_EQ(loaded_plugins().size(), 2u);
  EXPECT_EQ(loaded_plugins()[0].name, "c-basic");
  EXPECT_EQ(loaded_plugins()[1].name, "cpp-helper");
}

// Run under ThreadSanitizer by scripts/test.sh (the tsan preset selects "Concurrency").
using PluginConcurrency = PluginTest;

TEST_F(PluginConcurrency, FirstResolutionsFromManyThreadsLoadOnceAndAgree) {
  const std::string name = qualified(kPluginC, "attnsel_plugin_init#C_BASIC_MLA");
  constexpr int kThreads = 8;
  std::vector<std::shared_ptr<const BackendClass>> got(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) threads.emplace_back([&, i] { got[static_cast<std::size_t>(i)] = resolve_class(name); });
  for (std::thread& t : threads) t.join();
  for (const auto& cls : got) EXPECT_EQ(cls, got[0]);
  EXPECT_EQ(got[0]->get_name(), "C_BASIC_MLA");
  EXPECT_EQ(loaded_plugins().size(), 1u);
}

}  // namespace
}  // namespace attnsel::testing
