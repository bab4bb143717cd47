// The version window and the text forms, on their own.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>

#include "plugin/abi.hpp"
#include "plugin/names.hpp"

namespace attnsel::plugin {
namespace {

using ::testing::HasSubstr;

attnsel_plugin header(std::uint32_t major, std::uint32_t minor, std::uint32_t size) {
  attnsel_plugin p{};
  p.abi_major = major;
  p.abi_minor = minor;
  p.struct_size = size;
  return p;
}

// A host at ABI 1.2 whose structs grew at each minor version.
constexpr std::array<AbiLayout, 3> kHostAt1_2 = {{{48, 100, 40}, {56, 120, 40}, {64, 128, 48}}};

TEST(PluginAbi, OlderMinorVersionsAreAcceptedAtTheirOwnSize) {
  EXPECT_EQ(check_abi(header(1, 0, 48), 1, kHostAt1_2), std::nullopt);
  EXPECT_EQ(check_abi(header(1, 1, 56), 1, kHostAt1_2), std::nullopt);
  EXPECT_EQ(check_abi(header(1, 2, 64), 1, kHostAt1_2), std::nullopt);
  // Bigger than required is fine (a plugin may pad).
  EXPECT_EQ(check_abi(header(1, 0, 64), 1, kHostAt1_2), std::nullopt);
}

TEST(PluginAbi, StructSmallerThanItsMinorVersionRequires) {
  EXPECT_THAT(check_abi(header(1, 1, 48), 1, kHostAt1_2).value_or(""),
              HasSubstr("its attnsel_plugin struct is 48 bytes, smaller than the 56 bytes plugin ABI 1.1 requires"));
}

TEST(PluginAbi, NewerMinorVersionIsRefused) {
  EXPECT_THAT(check_abi(header(1, 3, 80), 1, kHostAt1_2).value_or(""),
              HasSubstr("built for plugin ABI 1.3, newer than the plugin ABI 1.2 this attnsel provides"));
}

TEST(PluginAbi, AnotherMajorVersionNamesBoth) {
  EXPECT_THAT(check_abi(header(2, 0, 64), 1, kHostAt1_2).value_or(""),
              HasSubstr("built for plugin ABI 2.0, but this attnsel provides plugin ABI 1.2"));
  EXPECT_THAT(check_abi(header(0, 7, 64), 1, kHostAt1_2).value_or(""),
              HasSubstr("built for plugin ABI 0.7, but this attnsel provides plugin ABI 1.2"));
}

TEST(PluginAbi, TheCurrentHeaderMatchesTheHostsNewestLayout) {
  const auto layouts = abi_layouts();
  ASSERT_EQ(layouts.size(), ATTNSEL_PLUGIN_ABI_MINOR + 1);
  EXPECT_EQ(layouts.back().plugin_size, sizeof(attnsel_plugin));
  EXPECT_EQ(layouts.back().backend_size, sizeof(attnsel_backend));
  EXPECT_EQ(layouts.back().kernel_ops_size, sizeof(attnsel_kernel_ops));
  EXPECT_EQ(check_abi(header(ATTNSEL_PLUGIN_ABI_MAJOR, ATTNSEL_PLUGIN_ABI_MINOR, sizeof(attnsel_plugin)),
                      ATTNSEL_PLUGIN_ABI_MAJOR, layouts),
            std::nullopt);
}

TEST(PluginNames, QualifiedNames) {
  auto q = parse_qualified_name("/opt/x/libfoo.so:init#MY_ATTN");
  ASSERT_TRUE(q);
  EXPECT_EQ(q->library, "/opt/x/libfoo.so");
  EXPECT_EQ(q->symbol, "init");
  EXPECT_EQ(q->backend, "MY_ATTN");
  q = parse_qualified_name("libfoo.so.1.2:attnsel_plugin_init");
  ASSERT_TRUE(q);
  EXPECT_EQ(q->library, "libfoo.so.1.2");
  EXPECT_EQ(q->backend, std::nullopt);
  // A ':' inside the directory is not the separator; the last one is.
  q = parse_qualified_name("/a:b/plugin:sym");
  ASSERT_TRUE(q);
  EXPECT_EQ(q->library, "/a:b/plugin");
  // Not plugin names: left to other resolvers.
  EXPECT_FALSE(parse_qualified_name("attnsel::backends::FlashAttentionBackend"));
  EXPECT_FALSE(parse_qualified_name("vllm.v1.attention.backends.flash_attn.FlashAttentionBackend"));
  EXPECT_FALSE(parse_qualified_name("libfoo.so:not-an-identifier"));
  EXPECT_FALSE(parse_qualified_name("libfoo.sox:init"));
  EXPECT_FALSE(parse_qualified_name(":init"));
}

TEST(PluginNames, PluginSpecs) {
  PluginSpec s = parse_plugin_spec("/opt/libfoo.so", "attnsel_plugin_init");
  EXPECT_EQ(s.library, "/opt/libfoo.so");
  EXPECT_EQ(s.symbol, "attnsel_plugin_init");
  s = parse_plugin_spec("libfoo.so:my_init", "attnsel_plugin_init");
  EXPECT_EQ(s.library, "libfoo.so");
  EXPECT_EQ(s.symbol, "my_init");
  s = parse_plugin_spec("/opt/a:b/libfoo.so", "attnsel_plugin_init");
  EXPECT_EQ(s.library, "/opt/a:b/libfoo.so");
  EXPECT_EQ(s.symbol, "attnsel_plugin_init");
}

TEST(PluginNames, QuoteEscapesWhatWouldBreakALine) {
  EXPECT_EQ(quote("plain/lib.so"), "'plain/lib.so'");
  EXPECT_EQ(quote("a b\n\tc\x01'\\"), "'a b\\n\\tc\\x01\\'\\\\'");
  EXPECT_EQ(quote("caf\xc3\xa9"), "'caf\xc3\xa9'");  // UTF-8 stays readable
}

}  // namespace
}  // namespace attnsel::plugin
