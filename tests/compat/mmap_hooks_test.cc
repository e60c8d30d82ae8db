// libtcmalloc intercepts the program's mmap, munmap, mremap and sbrk and reports them to
// the MallocHook address-space hooks with their exact arguments and results; replacements
// answer instead of the kernel; UnhookedMMap/UnhookedMUnmap bypass everything.
#include <gperftools/malloc_hook.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace {

struct MmapCall {
  int pre = 0, post = 0;
  const void* result = nullptr;
  const void* start = nullptr;
  size_t size = 0;
  int prot = 0, flags = 0, fd = 0;
  off_t offset = 0;
};
MmapCall g_mmap;
int g_munmap_calls = 0;
const void* g_munmap_ptr = nullptr;
size_t g_munmap_size = 0;
int g_mremap_calls = 0;
const void* g_mremap_result = nullptr;
const void* g_mremap_old = nullptr;
size_t g_mremap_old_size = 0, g_mremap_new_size = 0;
int g_mremap_flags = 0;
int g_pre_sbrk_calls = 0, g_sbrk_calls = 0;
ptrdiff_t g_pre_sbrk_increment = 0, g_sbrk_increment = 0;
const void* g_sbrk_result = nullptr;

void OnPreMmap(const void* start, size_t size, int prot, int flags, int fd, off_t offset) {
  ++g_mmap.pre;
  g_mmap.start = start;
  g_mmap.size = size;
  g_mmap.prot = prot;
  g_mmap.flags = flags;
  g_mmap.fd = fd;
  g_mmap.offset = offset;
}
void OnMmap(const void* result, const void* start, size_t size, int prot, int flags, int fd, off_t offset) {
  ++g_mmap.post;
  g_mmap.result = result;
  EXPECT_EQ(start, g_mmap.start);
  EXPECT_EQ(size, g_mmap.size);
  EXPECT_EQ(prot, g_mmap.prot);
  EXPECT_EQ(flags, g_mmap.flags);
  EXPECT_EQ(fd, g_mmap.fd);
  EXPECT_EQ(offset, g_mmap.offset);
}
void OnMunmap(const void* p, size_t size) {
  ++g_munmap_calls;
  g_munmap_ptr = p;
  g_munmap_size = size;
}
void OnMremap(const void* result, const void* old_addr, size_t old_size, size_t new_size, int flags,
              const void*) {
  ++g_mremap_calls;
  g_mremap_result = result;
  g_mremap_old = old_addr;
  g_mremap_old_size = old_size;
  g_mremap_new_size = new_size;
  g_mremap_flags = flags;
}
void OnPreSbrk(ptrdiff_t increment) {
  ++g_pre_sbrk_calls;
  g_pre_sbrk_increment = increment;
}
void OnSbrk(const void* result, ptrdiff_t increment) {
  ++g_sbrk_calls;
  g_sbrk_result = result;
  g_sbrk_increment = increment;
}

TEST(MmapHooks, MmapMunmapMremapReportArgumentsAndResults) {
  ASSERT_TRUE(MallocHook::AddPreMmapHook(OnPreMmap));
  ASSERT_TRUE(MallocHook::AddMmapHook(OnMmap));
  ASSERT_TRUE(MallocHook::AddMunmapHook(OnMunmap));
  ASSERT_TRUE(MallocHook::AddMremapHook(OnMremap));

  g_mmap = {};
  void* p = mmap(nullptr, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  EXPECT_EQ(g_mmap.pre, 1);
  EXPECT_EQ(g_mmap.post, 1);
  EXPECT_EQ(g_mmap.result, p);
  EXPECT_EQ(g_mmap.size, 3u * 4096);
  EXPECT_EQ(g_mmap.prot, PROT_READ | PROT_WRITE);
  EXPECT_EQ(g_mmap.flags, MAP_PRIVATE | MAP_ANONYMOUS);
  EXPECT_EQ(g_mmap.fd, -1);
  static_cast<char*>(p)[0] = 1;  // it is real memory

  void* q = mremap(p, 3 * 4096, 64 * 4096, MREMAP_MAYMOVE);
  ASSERT_NE(q, MAP_FAILED);
  EXPECT_EQ(g_mremap_calls, 1);
  EXPECT_EQ(g_mremap_result, q);
  EXPECT_EQ(g_mremap_old, p);
  EXPECT_EQ(g_mremap_old_size, 3u * 4096);
  EXPECT_EQ(g_mremap_new_size, 64u * 4096);
  EXPECT_EQ(g_mremap_flags, MREMAP_MAYMOVE);
  EXPECT_EQ(static_cast<char*>(q)[0], 1);

  EXPECT_EQ(munmap(q, 64 * 4096), 0);
  EXPECT_EQ(g_munmap_calls, 1);
  EXPECT_EQ(g_munmap_ptr, q);
  EXPECT_EQ(g_munmap_size, 64u * 4096);

  // A failing call is reported with its failure, and errno is what the kernel said.
  g_mmap = {};
  errno = 0;
  void* bad = mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE, /*fd=*/-1, 0);  // no MAP_ANONYMOUS
  EXPECT_EQ(bad, MAP_FAILED);
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(g_mmap.post, 1);
  EXPECT_EQ(g_mmap.result, MAP_FAILED);

  ASSERT_TRUE(MallocHook::RemovePreMmapHook(OnPreMmap));
  ASSERT_TRUE(MallocHook::RemoveMmapHook(OnMmap));
  ASSERT_TRUE(MallocHook::RemoveMunmapHook(OnMunmap));
  ASSERT_TRUE(MallocHook::RemoveMremapHook(OnMremap));
  g_mmap = {};
  g_munmap_calls = 0;
  void* r = mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(r, MAP_FAILED);
  munmap(r, 4096);
  EXPECT_EQ(g_mmap.pre + g_mmap.post + g_munmap_calls, 0) << "removed hooks still fire";
}

TEST(MmapHooks, UnhookedCallsBypassHooks) {
  ASSERT_TRUE(MallocHook::AddMmapHook(OnMmap));
  ASSERT_TRUE(MallocHook::AddMunmapHook(OnMunmap));
  g_mmap = {};
  g_munmap_calls = 0;
  void* p = MallocHook::UnhookedMMap(nullptr, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  EXPECT_EQ(MallocHook::UnhookedMUnmap(p, 4096), 0);
  EXPECT_EQ(g_mmap.post, 0);
  EXPECT_EQ(g_munmap_calls, 0);
  ASSERT_TRUE(MallocHook::RemoveMmapHook(OnMmap));
  ASSERT_TRUE(MallocHook::RemoveMunmapHook(OnMunmap));
}

alignas(4096) char g_fake_region[4096];
int ReplaceMmap(const void*, size_t size, int, int, int fd, off_t, void** result) {
  if (fd != 42) return 0;  // only our marker call
  *result = g_fake_region;
  g_fake_region[0] = static_cast<char>(size);
  return 1;
}
int ReplaceMunmap(const void* p, size_t, int* result) {
  if (p != g_fake_region) return 0;
  *result = 7;
  return 1;
}

TEST(MmapHooks, ReplacementsAnswerInsteadOfTheKernel) {
  ASSERT_TRUE(MallocHook::SetMmapReplacement(ReplaceMmap));
  EXPECT_FALSE(MallocHook::SetMmapReplacement(ReplaceMmap)) << "only one replacement at a time";
  ASSERT_TRUE(MallocHook::SetMunmapReplacement(ReplaceMunmap));
  EXPECT_EQ(mmap(nullptr, 100, PROT_READ, MAP_SHARED, 42, 0), g_fake_region);
  EXPECT_EQ(g_fake_region[0], 100);
  EXPECT_EQ(munmap(g_fake_region, 4096), 7);
  // Calls the replacement declines go to the kernel.
  void* p = mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  EXPECT_NE(p, g_fake_region);
  EXPECT_EQ(munmap(p, 4096), 0);
  ASSERT_TRUE(MallocHook::RemoveMmapReplacement(ReplaceMmap));
  ASSERT_TRUE(MallocHook::RemoveMunmapReplacement(ReplaceMunmap));
  EXPECT_FALSE(MallocHook::RemoveMunmapReplacement(ReplaceMunmap));
}

TEST(MmapHooks, SbrkReportsIncrementAndOldBreak) {
  ASSERT_TRUE(MallocHook::AddPreSbrkHook(OnPreSbrk));
  ASSERT_TRUE(MallocHook::AddSbrkHook(OnSbrk));
  void* before = sbrk(0);
  EXPECT_EQ(g_pre_sbrk_calls + g_sbrk_calls, 0) << "sbrk(0) changes nothing and is not reported";
  void* old = sbrk(8192);
  ASSERT_NE(old, reinterpret_cast<void*>(-1));
  EXPECT_EQ(old, before);
  EXPECT_EQ(g_pre_sbrk_calls, 1);
  EXPECT_EQ(g_pre_sbrk_increment, 8192);
  EXPECT_EQ(g_sbrk_calls, 1);
  EXPECT_EQ(g_sbrk_result, old);
  EXPECT_EQ(g_sbrk_increment, 8192);
  EXPECT_EQ(sbrk(0), static_cast<char*>(old) + 8192);
  sbrk(-8192);
  EXPECT_EQ(g_sbrk_increment, -8192);
  EXPECT_EQ(sbrk(0), before);
  ASSERT_TRUE(MallocHook::RemovePreSbrkHook(OnPreSbrk));
  ASSERT_TRUE(MallocHook::RemoveSbrkHook(OnSbrk));
}

TEST(MmapHooks, DeprecatedSetHooksReplaceTheSingularHook) {
  EXPECT_EQ(MallocHook::SetMmapHook(OnMmap), nullptr);
  g_mmap = {};
  g_mmap.size = 4096;
  g_mmap.prot = PROT_READ;
  g_mmap.flags = MAP_PRIVATE | MAP_ANONYMOUS;
  g_mmap.fd = -1;
  void* p = mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  EXPECT_EQ(g_mmap.post, 1);
  EXPECT_EQ(g_mmap.result, p);
  munmap(p, 4096);
  EXPECT_EQ(MallocHook::SetMmapHook(nullptr), OnMmap);
}

}  // namespace
