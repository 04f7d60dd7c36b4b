//===- FileIO.cpp ---------------------------------------------------------===//

#include "FileIO.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
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

Status mla::rt::writeFileAtomic(const std::string &path, const uint8_t *data,
                                size_t size) {
  // A unique name in the target's directory, so the rename stays atomic.
  static std::atomic<uint64_t> counter{0};
  std::string tmpPath = path + ".tmp." + std::to_string(::getpid()) + "." +
                        std::to_string(counter++);
  int fd =
      ::open(tmpPath.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0)
    return ioError(path, "cannot create", errno);
  size_t done = 0;
  while (done < size) {
    ssize_t wrote = ::write(fd, data + done, size - done);
    if (wrote < 0 && errno == EINTR)
      continue;
    if (wrote < 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmpPath.c_str());
      return ioError(path, "cannot write", err);
    }
    done += static_cast<size_t>(wrote);
  }
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmpPath.c_str());
    return ioError(path, "cannot write", err);
  }
  if (::rename(tmpPath.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmpPath.c_str());
    return ioError(path, "cannot write", err);
  }
  return Status::success();
}
