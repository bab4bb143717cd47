#include "attnsel/errors.hpp"

namespace attnsel {

std::string_view error_kind_name(ErrorKind k) {
  switch (k) {
    case ErrorKind::value: return "ValueError";
    case ErrorKind::import: return "ImportError";
    case ErrorKind::not_implemented: return "NotImplementedError";
    case ErrorKind::runtime: return "RuntimeError";
    case ErrorKind::os: return "OSError";
  }
  return "Error";
}

}  // namespace attnsel
