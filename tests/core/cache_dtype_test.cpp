// The KV-cache dtype enum: vLLM's spellings in vLLM's order, the one parse every door uses,
// and the one error text for a name that is not a cache dtype.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "attnsel/cache_dtype.hpp"
#include "attnsel/errors.hpp"

namespace attnsel {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

TEST(CacheDType, EveryValueParsesBackFromItsName) {
  for (CacheDType d : all_cache_dtypes()) EXPECT_EQ(parse_cache_dtype(cache_dtype_name(d)), d) << cache_dtype_name(d);
  EXPECT_EQ(all_cache_dtypes().size(), 18u);
  EXPECT_EQ(cache_dtype_name(all_cache_dtypes().front()), "auto");
  EXPECT_EQ(cache_dtype_name(CacheDType::fp8_ds_mla), "fp8_ds_mla");
}

TEST(CacheDType, ParsingIsExactAsVllmsLiteral) {
  for (const char* text : {"AUTO", "Fp8", " fp8", "fp8 ", "", "fp8_e4m3\t", "bf16", "fp16", "float32"})
    EXPECT_FALSE(parse_cache_dtype(text)) << "'" << text << "'";
}

TEST(CacheDType, UnknownNameGivesTheOneTextNamingTheArgumentAndEveryValidName) {
  std::string valid;
  for (CacheDType d : all_cache_dtypes()) valid += (valid.empty() ? "" : ", ") + std::string(cache_dtype_name(d));
  EXPECT_THAT([] { (void)cache_dtype_from("fp9"); },
              ThrowsMessage<ValueError>("kv_cache_dtype 'fp9' is not a cache dtype; valid values are: " + valid));
  EXPECT_THAT([] { (void)cache_dtype_from("", "--kv-cache-dtype"); },
              ThrowsMessage<ValueError>(HasSubstr("--kv-cache-dtype '' is not a cache dtype")));
}

TEST(CacheDType, EmbeddedNulAndControlBytesAreRefusedAndShownEscaped) {
  const std::string with_nul("fp8\0junk", 8);
  EXPECT_FALSE(parse_cache_dtype(with_nul));
  EXPECT_THAT([&] { (void)cache_dtype_from(with_nul); },
              ThrowsMessage<ValueError>(HasSubstr("kv_cache_dtype 'fp8\\x00junk' is not a cache dtype")));
  EXPECT_THAT([] { (void)cache_dtype_from("a\x1b[31m\xff'"); },
              ThrowsMessage<ValueError>(HasSubstr("'a\\x1b[31m\\xff\\'' is not a cache dtype")));
}

TEST(CacheDType, QuantizedAsVllmsIsQuantizedKvCache) {
  for (CacheDType d : {CacheDType::auto_, CacheDType::float16, CacheDType::bfloat16})
    EXPECT_FALSE(is_quantized_kv_cache(d)) << cache_dtype_name(d);
  for (CacheDType d : {CacheDType::fp8, CacheDType::fp8_e4m3, CacheDType::fp8_e5m2, CacheDType::fp8_inc,
                       CacheDType::fp8_ds_mla, CacheDType::turboquant_k8v4, CacheDType::int8_per_token_head,
                       CacheDType::fp8_per_token_head, CacheDType::nvfp4, CacheDType::ultraquant_4bit})
    EXPECT_TRUE(is_quantized_kv_cache(d)) << cache_dtype_name(d);
}

}  // namespace
}  // namespace attnsel
