#include "plugin/library.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include "attnsel/errors.hpp"
#include "plugin/names.hpp"

namespace attnsel::plugin {

std::optional<FileId> file_id(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileId{st.st_dev, st.st_ino};
}

std::shared_ptr<SharedLibrary> SharedLibrary::open(const std::filesystem::path& path) {
  auto id = file_id(path);
  if (!id) throw ImportError(fmt::format("plugin library {} does not exist", quote(path.string())));
  (void)::dlerror();  // clear any stale message
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    throw ImportError(fmt::format("cannot load {} as a shared library: {}", quote(path.string()),
                                  why != nullptr ? why : "unknown dlopen error"));
  }
  return std::shared_ptr<SharedLibrary>(new SharedLibrary(handle, path, *id));
}

SharedLibrary::~SharedLibrary() { ::dlclose(handle_); }

void* SharedLibrary::symbol(const std::string& name) const {
  (void)::dlerror();
  return ::dlsym(handle_, name.c_str());
}

}  // namespace attnsel::plugin
