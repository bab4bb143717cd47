// Internal: a dlopen()ed shared library with RAII ownership (llama.cpp's dl_handle).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

namespace attnsel::plugin {

/// A file's identity (device and inode), so that one library reached through two paths
/// (a symlink, a relative and an absolute path) is recognised as the same.
struct FileId {
  dev_t device = 0;
  ino_t inode = 0;
  bool operator==(const FileId&) const = default;
};
std::optional<FileId> file_id(const std::filesystem::path& path);

/// Owns one reference to a loaded library; dlclose()s it when the last owner lets go, so
/// a library stays loaded while any object that may run its code holds this.
/// Thread-safety: immutable after open(); symbol() may be called from any thread.
class SharedLibrary {
 public:
  /// dlopen()s `path` (absolute) with every symbol bound now, so that a library with an
  /// unresolved dependency fails here instead of crashing later. Throws ImportError with
  /// the loader's message.
  static std::shared_ptr<SharedLibrary> open(const std::filesystem::path& path);
  ~SharedLibrary();
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;

  /// The address of an exported symbol, or nullptr.
  void* symbol(const std::string& name) const;
  const std::filesystem::path& path() const { return path_; }
  const FileId& id() const { return id_; }

 private:
  SharedLibrary(void* handle, std::filesystem::path path, FileId id)
      : handle_(handle), path_(std::move(path)), id_(id) {}
  void* handle_;
  std::filesystem::path path_;
  FileId id_;
};

}  // namespace attnsel::plugin
