// platform/files.h: each primitive against its contract, errno left alone included.
#include "platform/files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "platform/os.h"

namespace tcm::os {
namespace {

std::string TempPath(const char* leaf) {
  const char* dir = getenv("TMPDIR");
  return std::string(dir != nullptr && *dir ? dir : "/tmp") + "/tcm_files_test." + std::to_string(getpid()) + "." +
         leaf;
}

TEST(PlatformFiles, WriteThenReadBack) {
  const std::string path = TempPath("rw");
  errno = 1234;
  const int w = OpenForWriting(path.c_str());
  ASSERT_GE(w, 0);
  std::string text(100000, 'x');
  for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>('a' + i % 26);
  EXPECT_TRUE(WriteAllFd(w, text.data(), text.size()));
  CloseFd(w);
  EXPECT_EQ(errno, 1234);

  const int r = OpenForReading(path.c_str());
  ASSERT_GE(r, 0);
  std::string back;
  char buf[4096];
  long n;
  while ((n = ReadFd(r, buf, sizeof(buf))) > 0) back.append(buf, static_cast<size_t>(n));
  EXPECT_EQ(n, 0) << "end of file";
  CloseFd(r);
  EXPECT_EQ(back, text);

  // Truncated on reopen for writing.
  const int again = OpenForWriting(path.c_str());
  ASSERT_GE(again, 0);
  CloseFd(again);
  size_t size = 1;
  EXPECT_EQ(MapFileReadOnly(path.c_str(), &size), nullptr) << "an empty file is not mapped";
  unlink(path.c_str());
  EXPECT_EQ(errno, 1234);
}

TEST(PlatformFiles, FailuresReportTheirErrorAndKeepErrno) {
  errno = 77;
  int error = 0;
  EXPECT_EQ(OpenForReading("/nonexistent/dir/file", &error), -1);
  EXPECT_EQ(error, ENOENT);
  EXPECT_EQ(OpenForWriting("/nonexistent/dir/file", &error), -1);
  EXPECT_EQ(error, ENOENT);
  EXPECT_EQ(OpenForReading("/nonexistent/dir/file"), -1) << "the error pointer is optional";
  char c;
  EXPECT_EQ(ReadFd(-1, &c, 1), -1);
  EXPECT_FALSE(WriteAllFd(-1, "x", 1));
  size_t size = 0;
  EXPECT_EQ(MapFileReadOnly("/nonexistent/file", &size), nullptr);
  EXPECT_EQ(MapFileReadOnly("/proc/self/maps", &size), nullptr) << "/proc files report size 0";
  char link[64];
  EXPECT_EQ(ReadLink("/nonexistent/link", link, sizeof(link)), 0u);
  EXPECT_STREQ(link, "");
  EXPECT_EQ(errno, 77);
}

TEST(PlatformFiles, MapFileReadOnlyShowsTheContents) {
  const std::string path = TempPath("map");
  const int w = OpenForWriting(path.c_str());
  ASSERT_GE(w, 0);
  ASSERT_TRUE(WriteAllFd(w, "hello, map", 10));
  CloseFd(w);
  size_t size = 0;
  const void* p = MapFileReadOnly(path.c_str(), &size);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(size, 10u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  EXPECT_EQ(memcmp(p, "hello, map", 10), 0);
  Unmap(const_cast<void*>(p), size);
  unlink(path.c_str());
}

TEST(PlatformFiles, ReadLinkTruncatesAndTerminates) {
  char full[4096];
  const size_t n = ReadLink("/proc/self/exe", full, sizeof(full));
  ASSERT_GT(n, 0u);
  EXPECT_EQ(strlen(full), n);
  EXPECT_NE(strstr(full, "platform_files_test"), nullptr) << full;
  char small[5];
  EXPECT_EQ(ReadLink("/proc/self/exe", small, sizeof(small)), 4u);
  EXPECT_EQ(strncmp(small, full, 4), 0);
  EXPECT_EQ(small[4], '\0');
}

}  // namespace
}  // namespace tcm::os
