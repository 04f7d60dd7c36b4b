//===- FileIO.cpp ---------------------------------------------------------===//

#include "FileIO.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace mla::rt;

static Status ioError(const std::string &path, const char *what, int err) {
  return Status::error(ErrorCode::IOError,
                       path + ": " + what + ": " + std::strerror(err));
}

Expected<std::vector<uint8_t>> mla::rt::readFile(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return ioError(path, "cannot open", errno);
  struct stat info;
  if (::fstat(fd, &info) != 0) {
    int err = errno;
    ::close(fd);
    return ioError(path, "cannot read", err);
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    return Status::error(ErrorCode::IOError, path + ": not a regular file");
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(info.st_size));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t got = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0) {
      int err = got < 0 ? errno : EIO;
      ::close(fd);
      return ioError(path, "cannot read", err);
    }
    done += static_cast<size_t>(got);
  }
  ::close(fd);
  return bytes;
}

namespace {

/// Writes all of `data` to `fd`; errno on failure.
bool writeAll(int fd, const uint8_t *data, size_t size) {
  size_t done = 0;
  while (done < size) {
    ssize_t wrote = ::write(fd, data + done, size - done);
    if (wrote < 0 && errno == EINTR)
      continue;
    if (wrote < 0)
      return false;
    done += static_cast<size_t>(wrote);
  }
  return true;
}

/// `data` written through `path` in place (a device such as /dev/null or
/// /dev/stdout, a FIFO, or a symbolic link whose target does not exist):
/// what is there is opened, never replaced.
Status writeInPlace(const std::string &path, const uint8_t *data, size_t size) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0)
    return ioError(path, "cannot open", errno);
  if (!writeAll(fd, data, size)) {
    int err = errno;
    ::close(fd);
    return ioError(path, "cannot write", err);
  }
  if (::close(fd) != 0)
    return ioError(path, "cannot write", errno);
  return Status::success();
}

} // namespace

Status mla::rt::writeFileAtomic(const std::string &path, const uint8_t *data,
                                size_t size) {
  if (path.empty())
    return Status::error(ErrorCode::IOError, "an empty output path");
  if (path.back() == '/')
    return Status::error(ErrorCode::IOError,
                         path + ": names a directory, not a file");
  // What the path names now decides how it is written: a regular file (or
  // nothing) is replaced atomically; a symbolic link's target is, so that
  // the link stays; anything else (a device, a FIFO) is written in place.
  std::string target = path;
  struct stat info;
  if (::lstat(path.c_str(), &info) == 0 && S_ISLNK(info.st_mode)) {
    char *resolved = ::realpath(path.c_str(), nullptr);
    if (!resolved) // a dangling link: create its target through it
      return writeInPlace(path, data, size);
    target = resolved;
    std::free(resolved);
  }
  if (::stat(target.c_str(), &info) == 0) {
    if (S_ISDIR(info.st_mode))
      return ioError(path, "cannot write", EISDIR);
    if (!S_ISREG(info.st_mode))
      return writeInPlace(target, data, size);
  }
  // A unique name in the target's directory, so the rename stays atomic.
  static std::atomic<uint64_t> counter{0};
  std::string tmpPath = target + ".tmp." + std::to_string(::getpid()) + "." +
                        std::to_string(counter++);
  int fd =
      ::open(tmpPath.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0)
    return ioError(path, "cannot create", errno);
  if (!writeAll(fd, data, size)) {
    int err = errno;
    ::close(fd);
    ::unlink(tmpPath.c_str());
    return ioError(path, "cannot write", err);
  }
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmpPath.c_str());
    return ioError(path, "cannot write", err);
  }
  if (::rename(tmpPath.c_str(), target.c_str()) != 0) {
    int err = errno;
    ::unlink(tmpPath.c_str());
    return ioError(path, "cannot write", err);
  }
  return Status::success();
}
