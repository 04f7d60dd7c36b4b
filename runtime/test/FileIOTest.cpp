//===- FileIOTest.cpp - writeFileAtomic on what an output path names ------===//
//
// Packages and .npy outputs go through writeFileAtomic: a regular file is
// replaced atomically, a symbolic link keeps pointing where it did (its
// target is replaced), a device or FIFO is written in place and never
// replaced (mla-compile -o /dev/null used to turn /dev/null into a regular
// file when run as root), and a directory is an error that names it.
//
//===----------------------------------------------------------------------===//

#include "FileIO.h"
#include "TestUtils.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

using namespace mla::rt;
using namespace mla::rt::test;

namespace {

const std::vector<uint8_t> kData = {7, 1, 2, 3, 4, 5};

Status write(const std::string &path) {
  return writeFileAtomic(path, kData.data(), kData.size());
}

/// Everything a writer sends through the FIFO at `path`, until it closes.
std::vector<uint8_t> readFifo(const std::string &path) {
  std::vector<uint8_t> bytes;
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    return bytes;
  uint8_t buf[64];
  ssize_t got;
  while ((got = ::read(fd, buf, sizeof buf)) > 0 || (got < 0 && errno == EINTR))
    if (got > 0)
      bytes.insert(bytes.end(), buf, buf + got);
  ::close(fd);
  return bytes;
}

bool isSymlink(const std::string &path) {
  struct stat info;
  return ::lstat(path.c_str(), &info) == 0 && S_ISLNK(info.st_mode);
}

} // namespace

TEST(FileIOTest, ReplacesARegularFileAndLeavesNoTemporary) {
  TempDir dir;
  writeBytes(dir.file("k.mlapkg"), {9, 9});
  ASSERT_TRUE(write(dir.file("k.mlapkg")).ok());
  EXPECT_EQ(readBytes(dir.file("k.mlapkg")), kData);
  ASSERT_TRUE(write(dir.file("new.mlapkg")).ok());
  EXPECT_EQ(readBytes(dir.file("new.mlapkg")), kData);
  std::vector<std::string> names;
  for (const auto &entry : std::filesystem::directory_iterator(dir.path()))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"k.mlapkg", "new.mlapkg"}));
}

TEST(FileIOTest, WritesASymlinksTargetAndKeepsTheLink) {
  TempDir dir;
  writeBytes(dir.file("target.bin"), {9});
  ASSERT_EQ(::symlink("target.bin", dir.file("link.bin").c_str()), 0);
  ASSERT_TRUE(write(dir.file("link.bin")).ok());
  EXPECT_TRUE(isSymlink(dir.file("link.bin")));
  EXPECT_EQ(readBytes(dir.file("target.bin")), kData);
  // A dangling link: its target is created through it.
  ASSERT_EQ(::symlink("later.bin", dir.file("dangling.bin").c_str()), 0);
  ASSERT_TRUE(write(dir.file("dangling.bin")).ok());
  EXPECT_TRUE(isSymlink(dir.file("dangling.bin")));
  EXPECT_EQ(readBytes(dir.file("later.bin")), kData);
}

TEST(FileIOTest, WritesADeviceOrFifoInPlace) {
  ASSERT_TRUE(write("/dev/null").ok());
  struct stat info;
  ASSERT_EQ(::stat("/dev/null", &info), 0);
  EXPECT_TRUE(S_ISCHR(info.st_mode)) << "/dev/null was replaced";

  TempDir dir;
  std::string fifo = dir.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::vector<uint8_t> got;
  std::thread reader([&] { got = readFifo(fifo); });
  Status status = write(fifo);
  reader.join();
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(got, kData);
  ASSERT_EQ(::lstat(fifo.c_str(), &info), 0);
  EXPECT_TRUE(S_ISFIFO(info.st_mode)) << "the FIFO was replaced";
}

TEST(FileIOTest, RefusesADirectoryNamingIt) {
  TempDir dir;
  Status status = write(dir.path());
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.message(), dir.path() + ": cannot write: Is a directory");
  status = write(dir.path() + "/");
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.message(), dir.path() + "/: names a directory, not a file");
  // Nothing was created inside it.
  EXPECT_EQ(::rmdir(dir.path().c_str()), 0) << "the directory is not empty";
  ASSERT_EQ(::mkdir(dir.path().c_str(), 0700), 0);
}
