// HeapProfileTable and ProfileWriter on their own, in a process that keeps glibc's malloc:
// counts, address reuse, growth of both hash tables, the text format and Reset.
#include "profiler/heap_profile_table.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "profiler/heap_profile_io.h"

namespace tcm {
namespace {

void* Pc(uintptr_t v) { return reinterpret_cast<void*>(v); }

std::string Render(const HeapProfileTable& t) {
  ProfileWriter w(-1);
  t.Write(&w, "heapprofile");
  EXPECT_TRUE(w.Finish());
  return std::string(w.data(), w.size());
}

TEST(HeapProfileTable, CountsAllocationsAndFreesPerStack) {
  static HeapProfileTable t;  // big enough to keep off the test's stack
  void* a[] = {Pc(0x1000), Pc(0x2000)};
  void* b[] = {Pc(0x3000)};
  EXPECT_TRUE(t.RecordAlloc(Pc(0x10000), 100, a, 2));
  EXPECT_TRUE(t.RecordAlloc(Pc(0x10100), 50, a, 2));
  EXPECT_TRUE(t.RecordAlloc(Pc(0x20000), 7, b, 1));
  EXPECT_EQ(t.num_buckets(), 2u);
  EXPECT_EQ(t.num_live(), 3u);
  EXPECT_TRUE(t.RecordFree(Pc(0x10000)));
  EXPECT_FALSE(t.RecordFree(Pc(0x10000)));  // already gone
  EXPECT_FALSE(t.RecordFree(Pc(0x99999)));  // never recorded
  EXPECT_EQ(t.totals().alloc_count, 3);
  EXPECT_EQ(t.totals().alloc_bytes, 157);
  EXPECT_EQ(t.totals().inuse_count(), 2);
  EXPECT_EQ(t.totals().inuse_bytes(), 57);
  size_t bytes = 0;
  const HeapProfileTable::Bucket* bucket = nullptr;
  ASSERT_TRUE(t.FindLive(Pc(0x10100), &bytes, &bucket));
  EXPECT_EQ(bytes, 50u);
  EXPECT_EQ(bucket->depth, 2);
  EXPECT_EQ(bucket->stack()[1], Pc(0x2000));
  EXPECT_EQ(bucket->counts.alloc_count, 2);
  EXPECT_EQ(bucket->counts.free_bytes, 100);
  EXPECT_FALSE(t.FindLive(Pc(0x10000), nullptr, nullptr));

  // gperftools' format; buckets by in-use bytes, most first.
  EXPECT_EQ(Render(t),
            "heap profile:      2:       57 [     3:      157] @ heapprofile\n"
            "     1:       50 [     2:      150] @ 0x1000 0x2000\n"
            "     1:        7 [     1:        7] @ 0x3000\n");
  t.Reset();
  EXPECT_EQ(t.num_live(), 0u);
  EXPECT_EQ(t.bytes_mapped(), 0u);
  EXPECT_EQ(Render(t), "heap profile:      0:        0 [     0:        0] @ heapprofile\n");
}

TEST(HeapProfileTable, AnAddressRecordedTwiceRetiresTheOldRecord) {
  static HeapProfileTable t;
  void* s[] = {Pc(0x1)};
  EXPECT_TRUE(t.RecordAlloc(Pc(0x5000), 10, s, 1));
  EXPECT_TRUE(t.RecordAlloc(Pc(0x5000), 20, s, 1));  // its free went unseen
  EXPECT_EQ(t.num_live(), 1u);
  EXPECT_EQ(t.totals().inuse_count(), 1);
  EXPECT_EQ(t.totals().inuse_bytes(), 20);
  EXPECT_EQ(t.totals().free_bytes, 10);
  t.Reset();
}

TEST(HeapProfileTable, ManyObjectsAndStacksGrowTheTables) {
  static HeapProfileTable t;
  constexpr uintptr_t kObjects = 300000, kStacks = 100000;
  for (uintptr_t i = 0; i < kObjects; ++i) {
    void* stack[3] = {Pc(0x400000 + (i % kStacks) * 16), Pc(0x500000), Pc(0x600000 + i % 7)};
    ASSERT_TRUE(t.RecordAlloc(Pc(0x7f0000000000 + i * 32), 32, stack, 3));
  }
  EXPECT_EQ(t.num_live(), kObjects);
  // (i % kStacks, i % 7) differs for every i below lcm(kStacks, 7) = 700000: every object
  // has a stack of its own, so the bucket table grew past its first size several times too.
  EXPECT_EQ(t.num_buckets(), static_cast<size_t>(kObjects));
  for (uintptr_t i = 0; i < kObjects; i += 2) ASSERT_TRUE(t.RecordFree(Pc(0x7f0000000000 + i * 32)));
  EXPECT_EQ(t.num_live(), kObjects / 2);
  EXPECT_EQ(t.totals().inuse_bytes(), static_cast<int64_t>(kObjects / 2 * 32));
  for (uintptr_t i = 1; i < kObjects; i += 2) {
    size_t bytes = 0;
    ASSERT_TRUE(t.FindLive(Pc(0x7f0000000000 + i * 32), &bytes, nullptr));
    ASSERT_EQ(bytes, 32u);
  }
  EXPECT_GT(t.bytes_mapped(), 0u);
  // Every bucket is written, and the header agrees with the lines.
  const std::string text = Render(t);
  size_t lines = 0;
  long long inuse = 0, alloc = 0;
  for (size_t pos = text.find('\n') + 1; pos < text.size(); pos = text.find('\n', pos) + 1) {
    // sscanf on the whole rest of the text would take strlen of it every time.
    const std::string line = text.substr(pos, text.find('\n', pos) - pos);
    long long io, ib, ao, ab;
    ASSERT_EQ(sscanf(line.c_str(), "%lld: %lld [%lld: %lld]", &io, &ib, &ao, &ab), 4);
    ++lines;
    inuse += ib;
    alloc += ab;
  }
  EXPECT_EQ(lines, t.num_buckets());
  EXPECT_EQ(inuse, t.totals().inuse_bytes());
  EXPECT_EQ(alloc, t.totals().alloc_bytes);
  t.Reset();
  EXPECT_EQ(t.bytes_mapped(), 0u);
}

TEST(HeapProfileTable, EmptyStacksAreABucketToo) {
  static HeapProfileTable t;
  EXPECT_TRUE(t.RecordAlloc(Pc(0x8000), 5, nullptr, 0));
  EXPECT_EQ(Render(t),
            "heap profile:      1:        5 [     1:        5] @ heapprofile\n"
            "     1:        5 [     1:        5] @\n");
  t.Reset();
}

TEST(ProfileWriter, FileModeStreamsThroughASmallBuffer) {
  char path[] = "/tmp/profile_writer_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  std::string expect;
  {
    ProfileWriter w(fd);
    // Several times the writer's buffer, in pieces of every size, one larger than it.
    std::string big(600 * 1024, 'x');
    for (int i = 0; i < 3000; ++i) {
      w.Printf("line %d %s\n", i, std::string(static_cast<size_t>(i % 300), 'a' + i % 26).c_str());
      expect += "line " + std::to_string(i) + " " + std::string(static_cast<size_t>(i % 300), static_cast<char>('a' + i % 26)) + "\n";
    }
    w.Append(big.data(), big.size());
    expect += big;
    EXPECT_TRUE(w.AppendFile("/proc/self/stat"));
    EXPECT_FALSE(w.AppendFile("/nonexistent/file"));
    EXPECT_TRUE(w.Finish());
  }
  close(fd);
  FILE* f = fopen(path, "r");
  ASSERT_NE(f, nullptr);
  std::string got;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) got.append(buf, n);
  fclose(f);
  unlink(path);
  ASSERT_GE(got.size(), expect.size());
  EXPECT_EQ(got.compare(0, expect.size(), expect), 0);
  EXPECT_NE(got.find(')', expect.size()), std::string::npos);  // /proc/self/stat: "pid (comm) ..."
}

TEST(ProfileWriter, MemoryModeGrows) {
  ProfileWriter w(-1);
  std::string expect;
  for (int i = 0; i < 100000; ++i) {
    w.Printf("%d,", i);
    expect += std::to_string(i) + ",";
  }
  EXPECT_TRUE(w.Finish());
  ASSERT_EQ(w.size(), expect.size());
  EXPECT_EQ(std::string(w.data(), w.size()), expect);
}

TEST(ProfileWriter, WriteErrorsAreReported) {
  ProfileWriter w(-5);  // memory mode never writes; a bad fd in file mode must fail:
  ProfileWriter bad(1000000);
  bad.Append("abc", 3);
  EXPECT_FALSE(bad.Finish());
  EXPECT_TRUE(w.Finish());
}

}  // namespace
}  // namespace tcm
