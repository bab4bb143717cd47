// The two dtype enums: a model dtype's element type, and back.
#include <gtest/gtest.h>

#include "attnsel/scalar_type.hpp"

namespace attnsel::kernel {
namespace {

TEST(ScalarTypes, EveryModelDtypeMapsToItsElementTypeAndBack) {
  EXPECT_EQ(scalar_type(DType::float16), ScalarType::f16);
  EXPECT_EQ(scalar_type(DType::bfloat16), ScalarType::bf16);
  EXPECT_EQ(scalar_type(DType::float32), ScalarType::f32);
  for (DType d : {DType::float16, DType::bfloat16, DType::float32}) {
    ASSERT_EQ(model_dtype(scalar_type(d)), d) << dtype_name(d);
    EXPECT_EQ(element_size(scalar_type(d)), d == DType::float32 ? 4U : 2U) << dtype_name(d);
  }
}

TEST(ScalarTypes, StorageOnlyTypesHaveNoModelDtype) {
  for (ScalarType t : {ScalarType::fp8_e4m3, ScalarType::fp8_e5m2, ScalarType::u8, ScalarType::i32, ScalarType::i64})
    EXPECT_FALSE(model_dtype(t).has_value()) << to_string(t);
}

TEST(ScalarTypes, OnlyTheTwoEightBitFloatsAreFp8) {
  for (ScalarType t : {ScalarType::f32, ScalarType::f16, ScalarType::bf16, ScalarType::fp8_e4m3, ScalarType::fp8_e5m2,
                       ScalarType::u8, ScalarType::i32, ScalarType::i64})
    EXPECT_EQ(is_fp8(t), t == ScalarType::fp8_e4m3 || t == ScalarType::fp8_e5m2) << to_string(t);
  EXPECT_EQ(element_size(ScalarType::fp8_e5m2), 1U);
}

}  // namespace
}  // namespace attnsel::kernel
