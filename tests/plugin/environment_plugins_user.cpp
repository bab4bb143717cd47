// A library user that never calls a registration function: it links libattnsel.so, asks
// the registry what CPU_ATTN resolves to through the C++ API (`cxx`) or the C API (`c`),
// and prints the class name. plugin_environment_test.cpp runs it with ATTNSEL_PLUGINS set.
#include <cstdio>
#include <cstring>
#include <exception>

#include "attnsel/attnsel.h"
#include "attnsel/registry.hpp"

namespace {

int through_cxx_api() {
  try {
    std::printf("%s\n", attnsel::AttentionBackendEnum["CPU_ATTN"].get_path().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

int through_c_api() {
  attnsel_select_request request;
  attnsel_select_request_init(&request);
  request.platform = "cpu";
  request.mode = "reference";
  attnsel_selection* selection = nullptr;
  if (attnsel_select(&request, &selection) != ATTNSEL_STATUS_OK) {
    std::fprintf(stderr, "error: %s\n", attnsel_last_error());
    return 1;
  }
  std::printf("%s\n", attnsel_selection_class(selection));
  attnsel_selection_destroy(selection);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "cxx") == 0) return through_cxx_api();
  if (argc == 2 && std::strcmp(argv[1], "c") == 0) return through_c_api();
  std::fprintf(stderr, "usage: %s cxx|c\n", argv[0]);
  return 2;
}
