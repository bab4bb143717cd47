#include <gtest/gtest.h>

#include "attnsel/types.hpp"

namespace attnsel {
TEST(SpecKind, FollowsVllmOrder) {
  EXPECT_EQ(get_attn_spec_kind(true, true, AttentionType::encoder_only), KVCacheSpecKind::encoder_only_attention);
  EXPECT_EQ(get_attn_spec_kind(true, false, AttentionType::encoder_decoder), KVCacheSpecKind::cross_attention);
  EXPECT_EQ(get_attn_spec_kind(true, true, AttentionType::encoder), KVCacheSpecKind::sliding_window_mla);
  EXPECT_EQ(get_attn_spec_kind(true, false, AttentionType::decoder), KVCacheSpecKind::mla_attention);
  EXPECT_EQ(get_attn_spec_kind(false, true, AttentionType::decoder), KVCacheSpecKind::sliding_window);
  EXPECT_EQ(get_attn_spec_kind(false, false, AttentionType::encoder), KVCacheSpecKind::full_attention);
}
}  // namespace attnsel
