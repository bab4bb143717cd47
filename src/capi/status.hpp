// The C API's error convention: every entry point runs its body through `guarded`, which
// turns a C++ exception into a status code and this thread's last-error message, so that
// no exception crosses the C boundary.
#pragma once

#include <cstddef>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>

#include "attnsel/attnsel.h"
#include "attnsel/errors.hpp"

namespace attnsel::capi {

/// Records `message` as this thread's last error and returns `status`.
attnsel_status fail(attnsel_status status, std::string_view message);
attnsel_status status_of(ErrorKind kind);

/// Runs `body` (returning void); maps attnsel::Error to its category, anything else to
/// INTERNAL_ERROR.
template <class F>
attnsel_status guarded(F&& body) noexcept {
  try {
    body();
    return ATTNSEL_STATUS_OK;
  } catch (const Error& e) {
    return fail(status_of(e.kind()), e.what());
  } catch (const std::bad_alloc&) {
    return fail(ATTNSEL_STATUS_INTERNAL_ERROR, "out of memory");
  } catch (const std::exception& e) {
    return fail(ATTNSEL_STATUS_INTERNAL_ERROR, e.what());
  } catch (...) {
    return fail(ATTNSEL_STATUS_INTERNAL_ERROR, "unknown error");
  }
}

/// An entry point that makes an object for the caller: `make` (returning a std::unique_ptr
/// to it) runs through `guarded`, and *out receives the object, or NULL when it failed;
/// `out` itself must not be NULL.
template <class T, class F>
attnsel_status guarded_out(T** out, F&& make) noexcept {
  if (out == nullptr) return fail(ATTNSEL_STATUS_VALUE_ERROR, "out must not be NULL");
  *out = nullptr;
  return guarded([&] { *out = make().release(); });
}

/// The body of every attnsel_*_init: zeroes the caller's struct and sets its struct_size;
/// false, and nothing done, for NULL.
template <class T>
bool reset_struct(T* s) noexcept {
  if (s == nullptr) return false;
  *s = T{};
  s->struct_size = sizeof(T);
  return true;
}

/// ValueError naming the argument when a required pointer is NULL.
void require(const void* pointer, std::string_view what);

/// A malloc'ed copy (released by attnsel_free_string).
char* copy_string(std::string_view text);

/// True when a caller's struct of `struct_size` bytes holds the field at [offset, offset + size):
/// a caller built against an older minor version passes a smaller struct.
constexpr bool has_field(std::uint32_t struct_size, std::size_t offset, std::size_t size) {
  return offset + size <= struct_size;
}
#define ATTNSEL_CAPI_HAS(ptr, field) \
  ::attnsel::capi::has_field((ptr)->struct_size, offsetof(std::remove_cvref_t<decltype(*(ptr))>, field), sizeof((ptr)->field))

/// Rejects a struct whose struct_size is smaller than its first version's.
void require_struct(std::uint32_t struct_size, std::size_t minimum, std::string_view name);

}  // namespace attnsel::capi
