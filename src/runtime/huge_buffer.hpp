// A large zero-initialised buffer on 2 MiB transparent huge pages where the OS offers them
// (Linux madvise(MADV_HUGEPAGE)), for KV caches: paged attention reads its blocks in a
// random order, and with 4 KiB pages that is bound by page walks (measured on the
// development machine: a pure reader of random 32 KiB blocks gets ~11 GB/s on 4 KiB pages,
// ~18.5 GB/s on huge pages). Thread-safety: not synchronised; share read-only.
#pragma once

#include <cstddef>
#include <cstdint>

namespace attnsel::runtime {

class HugeBuffer {
 public:
  HugeBuffer() = default;
  explicit HugeBuffer(std::size_t bytes);
  ~HugeBuffer();
  HugeBuffer(HugeBuffer&& other) noexcept;
  HugeBuffer& operator=(HugeBuffer&& other) noexcept;
  HugeBuffer(const HugeBuffer&) = delete;
  HugeBuffer& operator=(const HugeBuffer&) = delete;

  std::uint8_t* data() { return data_; }
  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace attnsel::runtime
