#include "json_output.hpp"

#include <cstdio>

namespace attnsel::cli {

void print_json(const nlohmann::ordered_json& j) {
  // Replace rather than throw on invalid UTF-8: a plugin's name must never crash the CLI.
  const std::string text = report::dump(j);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
}

}  // namespace attnsel::cli
