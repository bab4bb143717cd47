#include "runtime/huge_buffer.hpp"

#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace attnsel::runtime {

namespace {
constexpr std::size_t kHugePage = std::size_t{2} << 20;
}

HugeBuffer::HugeBuffer(std::size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  // Huge-page alignment only pays for buffers of several huge pages.
  const std::size_t align = bytes >= 4 * kHugePage ? kHugePage : 64;
  const std::size_t rounded = (bytes + align - 1) / align * align;
  data_ = static_cast<std::uint8_t*>(std::aligned_alloc(align, rounded));
  if (data_ == nullptr) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (align == kHugePage) (void)madvise(data_, rounded, MADV_HUGEPAGE);  // a hint: failure is harmless
#endif
  std::memset(data_, 0, bytes);
}

HugeBuffer::~HugeBuffer() { std::free(data_); }

HugeBuffer::HugeBuffer(HugeBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

HugeBuffer& HugeBuffer::operator=(HugeBuffer&& other) noexcept {
  if (this != &other) {
    std::free(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

}  // namespace attnsel::runtime
