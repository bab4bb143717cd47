// Status codes, the thread-local last error, versions and returned strings.
#include "capi/status.hpp"

#include <fmt/format.h>

#include <cstdlib>

#include "attnsel/version.h"

namespace attnsel::capi {

namespace {
thread_local std::string last_error;
}  // namespace

attnsel_status fail(attnsel_status status, std::string_view message) {
  try {
    last_error.assign(message);
  } catch (...) {
    last_error.clear();  // out of memory: the status alone must do
  }
  return status;
}

attnsel_status status_of(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::value: return ATTNSEL_STATUS_VALUE_ERROR;
    case ErrorKind::import: return ATTNSEL_STATUS_IMPORT_ERROR;
    case ErrorKind::not_implemented: return ATTNSEL_STATUS_NOT_IMPLEMENTED_ERROR;
    case ErrorKind::runtime: return ATTNSEL_STATUS_RUNTIME_ERROR;
    case ErrorKind::os: return ATTNSEL_STATUS_OS_ERROR;
  }
  return ATTNSEL_STATUS_INTERNAL_ERROR;
}

void require(const void* pointer, std::string_view what) {
  if (pointer == nullptr) throw ValueError(fmt::format("{} must not be NULL", what));
}

char* copy_string(std::string_view text) {
  char* out = static_cast<char*>(std::malloc(text.size() + 1));
  if (out == nullptr) throw std::bad_alloc();
  std::memcpy(out, text.data(), text.size());
  out[text.size()] = '\0';
  return out;
}

void require_struct(std::uint32_t struct_size, std::size_t minimum, std::string_view name) {
  if (struct_size < minimum)
    throw ValueError(fmt::format("{}.struct_size is {}, smaller than the {} bytes of its first version; initialise it with "
                                 "{}_init()",
                                 name, struct_size, minimum, name));
}

}  // namespace attnsel::capi

extern "C" {

const char* attnsel_last_error(void) { return attnsel::capi::last_error.c_str(); }

const char* attnsel_status_name(attnsel_status status) {
  switch (status) {
    case ATTNSEL_STATUS_OK: return "OK";
    case ATTNSEL_STATUS_VALUE_ERROR: return "ValueError";
    case ATTNSEL_STATUS_IMPORT_ERROR: return "ImportError";
    case ATTNSEL_STATUS_NOT_IMPLEMENTED_ERROR: return "NotImplementedError";
    case ATTNSEL_STATUS_RUNTIME_ERROR: return "RuntimeError";
    case ATTNSEL_STATUS_INTERNAL_ERROR: return "InternalError";
    case ATTNSEL_STATUS_OS_ERROR: return "OSError";
    default: return "Unknown";
  }
}

uint32_t attnsel_c_api_version(void) { return (ATTNSEL_C_API_MAJOR << 16) | ATTNSEL_C_API_MINOR; }

const char* attnsel_version(void) { return ATTNSEL_VERSION_STRING; }

void attnsel_free_string(char* text) { std::free(text); }

}  // extern "C"
