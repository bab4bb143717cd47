// Layer: core (src/layers.txt)
// Typed errors mirroring vLLM's Python exception categories. The message is vLLM's text
// where vLLM has one. Thread-safe: immutable values.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include "attnsel/export.hpp"

namespace attnsel {

enum class ErrorKind { value, import, not_implemented, runtime, os };

/// "ValueError", "ImportError", "NotImplementedError", "RuntimeError", "OSError".
ATTNSEL_API std::string_view error_kind_name(ErrorKind k);

class ATTNSEL_API Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

/// A value is invalid (vLLM's ValueError).
class ATTNSEL_API ValueError : public Error {
 public:
  explicit ValueError(const std::string& m) : Error(ErrorKind::value, m) {}
};

/// A class or library could not be loaded (vLLM's ImportError / ModuleNotFoundError).
class ATTNSEL_API ImportError : public Error {
 public:
  explicit ImportError(const std::string& m) : Error(ErrorKind::import, m) {}
};

/// A shared library could not be loaded or read (vLLM's OSError, e.g. from ctypes).
class ATTNSEL_API OSError : public Error {
 public:
  explicit OSError(const std::string& m) : Error(ErrorKind::os, m) {}
};

/// A feature is not available on this platform or build (vLLM's NotImplementedError).
class ATTNSEL_API NotImplementedError : public Error {
 public:
  explicit NotImplementedError(const std::string& m) : Error(ErrorKind::not_implemented, m) {}
};

/// A run-time condition failed (vLLM's RuntimeError).
class ATTNSEL_API RuntimeError : public Error {
 public:
  explicit RuntimeError(const std::string& m) : Error(ErrorKind::runtime, m) {}
};

}  // namespace attnsel
