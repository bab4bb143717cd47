// Python's repr() of str and list[str], which vLLM's messages print ({invalid_reasons}).
#include <gtest/gtest.h>

#include "core/python_repr.hpp"

namespace attnsel {
namespace {

TEST(PythonRepr, SingleQuotesUnlessTheTextHoldsOnlyApostrophes) {
  EXPECT_EQ(python_str_repr("head_size not supported"), "'head_size not supported'");
  EXPECT_EQ(python_str_repr("doesn't fit"), "\"doesn't fit\"");
  EXPECT_EQ(python_str_repr("say \"hi\""), "'say \"hi\"'");
  EXPECT_EQ(python_str_repr("it's \"both\""), "'it\\'s \"both\"'");
  EXPECT_EQ(python_str_repr(""), "''");
}

TEST(PythonRepr, EscapesBackslashesAndControlCharacters) {
  EXPECT_EQ(python_str_repr("a\\b"), "'a\\\\b'");
  EXPECT_EQ(python_str_repr("line\nnext\ttab\rcr"), "'line\\nnext\\ttab\\rcr'");
  EXPECT_EQ(python_str_repr(std::string("\x01\x7f", 2)), "'\\x01\\x7f'");
  EXPECT_EQ(python_str_repr("é"), "'é'");  // printable non-ASCII text stays as it is
}

TEST(PythonRepr, ListsQuoteEachItemOnItsOwn) {
  EXPECT_EQ(python_list_repr({}), "[]");
  EXPECT_EQ(python_list_repr({"head_size not supported", "FlashMLA isn't available"}),
            "['head_size not supported', \"FlashMLA isn't available\"]");
}

}  // namespace
}  // namespace attnsel
