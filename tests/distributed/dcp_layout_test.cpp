// Sharding a sequence's KV cache across DCP ranks: vLLM's interleave rule and the
// configurations it refuses.
#include <gtest/gtest.h>

#include "attnsel/errors.hpp"
#include "distributed/dcp_layout.hpp"

namespace attnsel::distributed {
namespace {

// Counts, by brute force, the tokens of [0, seq_len) whose owner is `rank`.
std::int64_t owned(std::int64_t seq_len, int world, int interleave, int rank) {
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < seq_len; ++i) n += (i / interleave) % world == rank;
  return n;
}

TEST(DcpLayout, LocalSeqLensMatchTokenOwnershipForPrimeAndOddSizes) {
  for (int world : {1, 2, 3, 4, 7})
    for (int interleave : {1, 2, 4, 16}) {
      const DcpLayout l = make_dcp_layout(world, interleave, 16);
      for (std::int64_t seq_len : {0, 1, 2, 5, 16, 17, 31, 64, 97, 1000}) {
        std::int64_t total = 0;
        for (int r = 0; r < world; ++r) {
          EXPECT_EQ(l.local_seq_len(seq_len, r), owned(seq_len, world, interleave, r))
              << "seq_len " << seq_len << " world " << world << " interleave " << interleave << " rank " << r;
          total += l.local_seq_len(seq_len, r);
        }
        EXPECT_EQ(total, seq_len);
      }
    }
}

TEST(DcpLayout, VllmDocstringExample) {
  // vLLM's docstring: token i goes to rank i % world with interleave 1.
  const DcpLayout l = make_dcp_layout(4, 1, 16);
  EXPECT_EQ(l.owner_rank(0), 0);
  EXPECT_EQ(l.owner_rank(5), 1);
  EXPECT_EQ(l.owner_rank(11), 3);
  // 10 tokens on 4 ranks: 3, 3, 2, 2.
  EXPECT_EQ(l.local_seq_len(10, 0), 3);
  EXPECT_EQ(l.local_seq_len(10, 1), 3);
  EXPECT_EQ(l.local_seq_len(10, 2), 2);
  EXPECT_EQ(l.local_seq_len(10, 3), 2);
}

TEST(DcpLayout, GlobalAndLocalPositionsAreInverse) {
  for (int world : {2, 3, 4})
    for (int interleave : {1, 4, 8}) {
      const DcpLayout l = make_dcp_layout(world, interleave, 16);
      for (std::int64_t pos = 0; pos < 500; ++pos) {
        const int r = l.owner_rank(pos);
        EXPECT_EQ(l.global_position(l.local_index(pos), r), pos);
      }
    }
}

TEST(DcpLayout, InterleaveMustDivideTheBlockSize) {
  try {
    (void)make_dcp_layout(2, 3, 16);
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("divisible by cp_kv_cache_interleave_size (3)"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)make_dcp_layout(2, 32, 16), ValueError);  // larger than the block
  EXPECT_THROW((void)make_dcp_layout(0, 1, 16), ValueError);
  EXPECT_THROW((void)make_dcp_layout(2, 0, 16), ValueError);
  EXPECT_NO_THROW((void)make_dcp_layout(2, 16, 16));
}

TEST(DcpLayout, HeadsMustSplitAsVllmRequires) {
  EXPECT_NO_THROW(validate_dcp_heads(32, 8, 2));
  EXPECT_NO_THROW(validate_dcp_heads(32, 8, 4));
  try {
    validate_dcp_heads(32, 8, 8);  // 4 query heads per KV head do not split 8 ways
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("q per kv attn heads (4) must be divisible by dcp world size"), std::string::npos) << what;
    EXPECT_NE(what.find("valid decode context parallel sizes for 32 query / 8 KV heads: 1, 2, 4"), std::string::npos)
        << what;
  }
  EXPECT_THROW(validate_dcp_heads(12, 4, 2), ValueError);  // 3 per KV head
  EXPECT_THROW(validate_dcp_heads(10, 4, 1), ValueError);  // not GQA-shaped
}

TEST(DcpLayout, ModelRulesFollowVllm) {
  EXPECT_FALSE(model_dcp_violation(32, 8, false, 16, 2));  // 16 // 8 = 2
  EXPECT_FALSE(model_dcp_violation(32, 8, false, 2, 1));   // no DCP
  EXPECT_NE(model_dcp_violation(32, 8, false, 3, 2)->find("tp_size=3 must be divisible by dcp_size=2"),
            std::string::npos);
  EXPECT_NE(model_dcp_violation(32, 8, false, 8, 2)->find("must be greater than total num kv heads 8"),
            std::string::npos);
  EXPECT_NE(model_dcp_violation(32, 8, false, 16, 4)->find("= 2, but got 4"), std::string::npos);
  EXPECT_NE(model_dcp_violation(24, 8, false, 32, 2)->find("q per kv attn heads (3)"), std::string::npos);
  EXPECT_FALSE(model_dcp_violation(128, 1, true, 8, 8));  // MLA: only the TP rule
}

}  // namespace
}  // namespace attnsel::distributed
