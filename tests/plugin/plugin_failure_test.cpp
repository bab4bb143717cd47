// Every way a plugin can fail to load is an ImportError with a clear message, nothing of
// the plugin stays registered, and the process keeps working.
#include <unistd.h>

#include <fstream>

#include "attnsel/plugin_loader.hpp"
#include "plugin/plugin_backend.hpp"
#include "plugin_test_support.hpp"

namespace attnsel::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

namespace fs = std::filesystem;

// Resolves `qualname` as get_class() would for an explicitly chosen backend.
std::string explicit_failure(const std::string& qualname) {
  return import_error_of([&] {
    register_backend(AttentionBackendEnum["CUSTOM"], qualname);
    (void)AttentionBackendEnum["CUSTOM"].get_class();
  });
}

// Nothing of a failed plugin may remain: no plugin recorded, no class, no member, and
// the good plugin still loads afterwards.
void expect_nothing_left_and_still_working() {
  EXPECT_THAT(loaded_plugins(), IsEmpty());
  for (const auto& cls : registered_classes())
    EXPECT_EQ(dynamic_cast<const plugin::PluginBackend*>(cls.get()), nullptr) << cls->qualname();
  EXPECT_EQ(load_plugin(kPluginC).backends.size(), 2u);
}

// A directory of its own for one test, removed afterwards.
class TempDir {
 public:
  explicit TempDir(const std::string& name)
      : path_(fs::temp_directory_path() / ("attnsel-plugin-test-" + std::to_string(::getpid()) + "-" + name)) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  // A copy of `file` in this directory, named `name`.
  std::string copy(const std::string& file, const std::string& name) const {
    const fs::path dest = path_ / name;
    fs::copy_file(file, dest, fs::copy_options::overwrite_existing);
    return dest.string();
  }

 private:
  fs::path path_;
};

using PluginFailure = PluginTest;

TEST_F(PluginFailure, MissingFile) {
  const std::string message = explicit_failure("/nonexistent/dir/libnope.so:attnsel_plugin_init");
  EXPECT_THAT(message, HasSubstr("plugin library '/nonexistent/dir/libnope.so' does not exist"));
  expect_nothing_left_and_still_working();
}

TEST_F(PluginFailure, FileThatIsNotASharedLibrary) {
  const std::string message = explicit_failure(qualified(kNotALibrary, "attnsel_plugin_init"));
  EXPECT_THAT(message, HasSubstr("cannot load '" + kNotALibrary + "' as a shared library"));
  EXPECT_THAT(message, HasSubstr("libnot_a_library.so"));  // the loader's own message follows
  expect_nothing_left_and_still_working();
}

TEST_F(PluginFailure, DirectoryInsteadOfAFile) {
  TempDir dir("directory");
  fs::create_directories(dir.path() / "libdir.so");
  EXPECT_THAT(explicit_failure((dir.path() / "libdir.so").string() + ":attnsel_plugin_init"), HasSubstr("is not a file"));
}

TEST_F(PluginFailure, MissingSymbol) {
  const std::string message = explicit_failure(qualified(kPluginC, "no_such_init"));
  // The symbol is what is wrong, not the library: the message says so and names the default.
  EXPECT_THAT(message, HasSubstr("has no init symbol 'no_such_init': the library loaded, but exports no symbol "
                                 "'no_such_init' (it exports the default init symbol attnsel_plugin_init: leave out "
                                 "':no_such_init')"));
  EXPECT_THAT(message, HasSubstr(kPluginC));
  expect_nothing_left_and_still_working();
}

TEST_F(PluginFailure, UnresolvedDependencyFailsAtLoadInsteadOfCrashingLater) {
  const std::string message = explicit_failure(qualified(kPluginUndefined, "attnsel_plugin_init"));
  EXPECT_THAT(message, HasSubstr("as a shared library"));
  EXPECT_THAT(message, HasSubstr("attnsel_test_function_that_does_not_exist"));
  expect_nothing_left_and_still_working();
}

TEST_F(PluginFailure, AbiMajorMismatchNamesBothVersions) {
  const std::string message = explicit_failure(qualified(kPluginC, "init_major_mismatch"));
  EXPECT_THAT(message, AllOf(HasSubstr("built for plugin ABI 2.0"), HasSubstr("this attnsel provides plugin ABI 1.0")));
  expect_nothing_left_and_still_working();
}

TEST_F(PluginFailure, NewerMinorVersionIsRefused) {
  EXPECT_THAT(explicit_failure(qualified(kPluginC, "init_minor_newer")),
              AllOf(HasSubstr("built for plugin ABI 1.1, newer than the plugin ABI 1.0")));
  expect_nothing_left_and_still_working();
}

TEST_F(PluginFailure, PluginStructTooSmall) {
  EXPECT_THAT(explicit_failure(qualified(kPluginC, "init_struct_too_small")),
              HasSubstr("its attnsel_plugin struct is 12 bytes, smaller than the " +
                        std::to_string(sizeof(attnsel_plugin)) + " bytes plugin ABI 1.0 requires"));
  expect_nothing_left_and_still_working();
}

TEST_F(PluginFailure, BackendStructTooSmall) {
  EXPECT_THAT(explicit_failure(qualified(kPluginC, "init_backend_too_small")),
              HasSubstr("backend #0: its attnsel_backend struct is 8 bytes"));
  expect_nothing_left_and_still_working();
}

TEST_F(PluginFailure, InitReportsAnError) {
  EXPECT_THAT(explicit_failure(qualified(kPluginC, "init_reports_error")),
              HasSubstr("its init function reported an error: no accelerator driver found (libfancy.so.3 is missing)"));
  expect_nothing_left_and_still_working();
}

TEST_F(PluginFailure, InitReturnsNull) {
  EXPECT_THAT(explicit_failure(qualified(kPluginC, "init_returns_null")), HasSubstr("its init function returned NULL"));
  expect_nothing_left_and_still_working();
}

TEST_F(PluginFailure, InitThatThrowsDespiteTheAbi) {
  EXPECT_THAT(explicit_failure(qualified(kPluginCpp, "init_throws")), HasSubstr("its init function threw an exception"));
  expect_nothing_left_and_still_working();
}

TEST_F(PluginFailure, HelperReportsAnExceptionWhileDescribingAsTheInitError) {
  EXPECT_THAT(explicit_failure(qualified(kPluginCpp, "init_broken")),
              HasSubstr("its init function reported an error: cannot read the device tables"));
}

TEST_F(PluginFailure, NoBackends) {
  EXPECT_THAT(explicit_failure(qualified(kPluginC, "init_no_backends")), HasSubstr("it declares no backends"));
  expect_nothing_left_and_still_working();
}

TEST_F(PluginFailure, DuplicateBackendNameInOnePlugin) {
  EXPECT_THAT(explicit_failure(qualified(kPluginC, "init_duplicate_names")),
              HasSubstr("duplicate backend name 'C_DUP': backends #0 and #1 both use it"));
  expect_nothing_left_and_still_working();
}

TEST_F(PluginFailure, DuplicateQualifiedNameFromAnotherLibrary) {
  TempDir a("dup-a");
  TempDir b("dup-b");
  const std::string first = a.copy(kPluginC, "libsame.so");
  const std::string second = b.copy(kPluginC, "libsame.so");
  EXPECT_EQ(load_plugin(first).backends[0].qualname, "libsame.so:attnsel_plugin_init");
  const std::string message = import_error_of([&] { (void)load_plugin(second); });
  EXPECT_THAT(message, HasSubstr("duplicate backend name 'libsame.so:attnsel_plugin_init'"));
  EXPECT_THAT(message, HasSubstr(first));
  EXPECT_EQ(loaded_plugins().size(), 1u);
  EXPECT_EQ(resolve_class("libsame.so:attnsel_plugin_init")->get_name(), "C_BASIC");
}

TEST_F(PluginFailure, DuplicateRegisteredNameFromAnotherPlugin) {
  (void)load_plugin(kPluginC, "init_register_as");
  EXPECT_THAT(import_error_of([] { (void)load_plugin(kPluginC, "init_register_as_again"); }),
              HasSubstr("duplicate backend name 'C_REG_NEW': backend 'C_REG_AGAIN' registers as it, but plugin "
                        "'c-register'"));
  EXPECT_EQ(AttentionBackendEnum["C_REG_NEW"].get_attention_class()->get_name(), "C_REG");
}

TEST_F(PluginFailure, EmptyDtypeList) {
  EXPECT_THAT(explicit_failure(qualified(kPluginC, "init_empty_dtypes")),
              HasSubstr("backend #0 'C_NO_DTYPES': dtypes is empty: a backend must support at least one of 0 "
                        "(float16), 1 (bfloat16), 2 (float32)"));
  expect_nothing_left_and_still_working();
}

TEST_F(PluginFailure, ComputeCapabilityRangeMinAboveMax) {
  EXPECT_THAT(explicit_failure(qualified(kPluginC, "init_cc_inverted")),
              HasSubstr("the compute capability range is empty: min 9.0 is greater than max 8.0"));
  expect_nothing_left_and_still_working();
}

TEST_F(PluginFailure, EveryContradictionIsListedNotOnlyTheFirst) {
  const std::string message = explicit_failure(qualified(kPluginC, "init_contradictions"));
  EXPECT_THAT(message, HasSubstr("dtypes is empty"));
  EXPECT_THAT(message, HasSubstr("kv_cache_dtypes entry 'int3' is not a cache dtype; valid values are: auto, "));
  EXPECT_THAT(message, HasSubstr("min 9.0 is greater than max 8.0"));
  EXPECT_THAT(message, HasSubstr("attn_types is empty"));
}

TEST_F(PluginFailure, NameThatIsNotABackendName) {
  EXPECT_THAT(explicit_failure(qualified(kPluginC, "init_bad_name")),
              HasSubstr("name 'lower-case name' is not a backend name"));
}

TEST_F(PluginFailure, IncompleteKernelEntryPoints) {
  EXPECT_THAT(explicit_failure(qualified(kPluginC, "init_partial_kernel")),
              HasSubstr("kernel entry points are incomplete: destroy, write_kv_cache, forward not set"));
}

TEST_F(PluginFailure, NothingIsRegisteredHalfWay) {
  const std::uint64_t generation = registry_generation();
  EXPECT_THAT(import_error_of([] { (void)load_plugin(kPluginC, "init_half_way"); }),
              HasSubstr("backend #1 'C_NO_DTYPES': dtypes is empty"));
  EXPECT_EQ(registry_generation(), generation);  // not one class, member or override changed
  EXPECT_FALSE(AttentionBackendEnum.find("C_HALF_WAY").has_value());
  expect_nothing_left_and_still_working();
}

TEST_F(PluginFailure, ScoreZeroMakesThatBackendAnImportErrorButNotItsSiblings) {
  const PluginInfo info = load_plugin(kPluginC, "init_score_zero");
  ASSERT_EQ(info.backends.size(), 2u);
  EXPECT_FALSE(info.backends[0].available);
  EXPECT_EQ(info.backends[0].score, 0u);
  EXPECT_EQ(info.backends[0].unavailable_reason, "needs AVX-1024, which this CPU does not have");
  EXPECT_TRUE(info.backends[1].available);
  // Chosen by name: the member it registered as exists, and resolving it says why not.
  const std::string message = import_error_of([] { (void)AttentionBackendEnum["C_UNAVAILABLE"].get_class(); });
  EXPECT_THAT(message, HasSubstr("C_UNAVAILABLE (plugin backend " + file_name(kPluginC) +
                                 ":init_score_zero) cannot run on this machine: needs AVX-1024"));
  EXPECT_EQ(resolve_class(qualified(kPluginC, "init_score_zero#C_AVAILABLE"))->get_name(), "C_AVAILABLE");
}

TEST_F(PluginFailure, HelperScoreZeroCarriesItsReason) {
  EXPECT_THAT(explicit_failure(qualified(kPluginCpp, "attnsel_plugin_init#HELPER_NEEDS_DEVICE")),
              HasSubstr("cannot run on this machine: needs a FancyAccelerator device (none found)"));
}

TEST_F(PluginFailure, SymbolThatIsNotAnIdentifier) {
  EXPECT_THAT(import_error_of([] { (void)load_plugin(kPluginC, "not-an-identifier"); }),
              HasSubstr("init symbol 'not-an-identifier' is not a C identifier"));
}

TEST_F(PluginFailure, EmptyAndNulContainingNames) {
  EXPECT_THAT(import_error_of([] { (void)load_plugin("", "attnsel_plugin_init"); }),
              HasSubstr("the plugin library name is empty"));
  const std::string with_nul("/tmp/lib\0evil.so", 16);
  EXPECT_THAT(import_error_of([&] { (void)load_plugin(with_nul, "attnsel_plugin_init"); }),
              HasSubstr("'/tmp/lib\\x00evil.so' contains a NUL character"));
}

TEST_F(PluginFailure, PathsWithOddCharactersLoadAndPrintUnambiguously) {
  TempDir dir("odd dir \xc3\xbc #:x");
  const std::string odd = dir.copy(kPluginC, "lib odd\nname.so");
  const PluginInfo info = load_plugin(odd, "attnsel_plugin_init");
  EXPECT_EQ(info.library, odd);
  EXPECT_EQ(info.backends[0].qualname, "lib odd\nname.so:attnsel_plugin_init");
  // As a qualified name too: the ':' in the directory is not the symbol separator.
  register_backend(AttentionBackendEnum["CUSTOM"], odd + ":attnsel_plugin_init#C_BASIC_MLA");
  EXPECT_EQ(AttentionBackendEnum["CUSTOM"].get_class()->get_name(), "C_BASIC_MLA");
  // A missing one is named with its newline escaped, on one line.
  const std::string missing = (dir.path() / "lib gone\n.so").string();
  const std::string message = import_error_of([&] { (void)load_plugin(missing, "attnsel_plugin_init"); });
  EXPECT_THAT(message, HasSubstr("lib gone\\n.so' does not exist"));
  EXPECT_EQ(message.find('\n'), std::string::npos);
}

TEST_F(PluginFailure, BareNameIsSearchedOnThePluginPath) {
  TempDir dir("search");
  (void)dir.copy(kPluginC, "libsearched.so");
  const std::string path = "/nonexistent/first:" + dir.path().string();
  ::setenv("ATTNSEL_PLUGIN_PATH", path.c_str(), 1);
  EXPECT_EQ(resolve_class("libsearched.so:attnsel_plugin_init")->get_name(), "C_BASIC");
  const std::string message = import_error_of([] { (void)resolve_class("libnowhere.so:attnsel_plugin_init"); });
  EXPECT_THAT(message, HasSubstr("cannot find plugin library 'libnowhere.so': searched '/nonexistent/first', '" +
                                 dir.path().string() + "'"));
}

TEST_F(PluginFailure, BareNameIsFoundInTheExecutablesDirectory) {
  const fs::path exe_dir = fs::read_symlink("/proc/self/exe").parent_path();
  const std::string name = "libattnsel-exe-dir-" + std::to_string(::getpid()) + ".so";
  fs::copy_file(kPluginC, exe_dir / name, fs::copy_options::overwrite_existing);
  std::string got;
  try {
    got = resolve_class(name + ":attnsel_plugin_init")->get_name();
  } catch (const std::exception& e) {
    got = e.what();
  }
  fs::remove(exe_dir / name);
  EXPECT_EQ(got, "C_BASIC");
}

TEST_F(PluginFailure, NamesThatAreNotPluginNamesAreLeftToTheRegistry) {
  // "attnsel::backends::X" has ':' but no library part: the registry's own error.
  EXPECT_THAT(import_error_of([] { (void)resolve_class("attnsel::backends::NoSuchBackend"); }),
              HasSubstr("No backend class named 'attnsel::backends::NoSuchBackend'"));
}

}  // namespace
}  // namespace attnsel::testing
