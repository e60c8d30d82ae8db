// The gperftools heap-profiler.h API in a program linked with libtcmalloc: start, stop,
// dump, IsHeapProfilerRunning, GetHeapProfile, and that every allocation entry point is
// recorded with its caller's stack (not sampled: exact counts and bytes).
#include "gperftools/heap-profiler.h"
#include "gperftools/malloc_extension.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

// The allocating functions: extern "C", outside any unnamed namespace, so that they are
// in the dynamic symbol table (dladdr) under plain names.
void* volatile g_sink;
// Publishes p: the allocation cannot be dropped, nor the call made a tail call (whose
// frame would vanish from the stack).
inline void* Keep(void* p) {
  g_sink = p;
  return p;
}


extern "C" __attribute__((noinline)) void* AllocMarked(size_t n) {
  void* p = malloc(n);
  g_sink = p;
  return p;
}

// One allocation function per entry point, so each has its own stack leaf.
extern "C" __attribute__((noinline)) void* ViaCalloc() { return Keep(calloc(3, 1001)); }
extern "C" __attribute__((noinline)) void* ViaRealloc(void* p) { return Keep(realloc(p, 5003)); }
extern "C" __attribute__((noinline)) void* ViaNew() { return Keep(new char[7005]); }
extern "C" __attribute__((noinline)) void* ViaNewAligned() {
  return Keep(operator new(9007, std::align_val_t{256}));
}
extern "C" __attribute__((noinline)) void* ViaMemalign() { return Keep(memalign(64, 11009)); }
extern "C" __attribute__((noinline)) void* ViaPosixMemalign() {
  void* p = nullptr;
  if (posix_memalign(&p, 128, 13011) != 0) return nullptr;
  return Keep(p);
}
extern "C" __attribute__((noinline)) void* ViaAlignedAlloc() { return Keep(aligned_alloc(4096, 16384)); }
extern "C" __attribute__((noinline)) void* ViaLarge() { return Keep(malloc(3 << 20)); }

extern "C" __attribute__((noinline)) void ThreadWork(std::vector<void*>* keep) {
  for (int i = 0; i < 20000; ++i) {
    void* p = malloc(static_cast<size_t>(16 + (i % 61) * 24));
    g_sink = p;
    if (i % 200 == 0) {
      keep->push_back(malloc(777));
    }
    free(p);
  }
}

namespace {

// One parsed profile line: counts and the stack.
struct Line {
  long long inuse_objs, inuse_bytes, alloc_objs, alloc_bytes;
  std::vector<uintptr_t> pcs;
};

struct Profile {
  Line total{};
  std::string label;
  std::vector<Line> buckets;
  bool has_maps = false;
};

bool ParseCounts(const std::string& s, Line* l) {
  return sscanf(s.c_str(), "%lld: %lld [%lld: %lld]", &l->inuse_objs, &l->inuse_bytes, &l->alloc_objs,
                &l->alloc_bytes) == 4;
}

Profile Parse(const std::string& text) {
  Profile p;
  std::istringstream in(text);
  std::string line;
  bool first = true;
  while (std::getline(in, line)) {
    if (first) {
      first = false;
      const std::string head = "heap profile: ";
      EXPECT_EQ(line.compare(0, head.size(), head), 0) << line;
      EXPECT_TRUE(ParseCounts(line.substr(head.size()), &p.total)) << line;
      p.label = line.substr(line.find(" @ ") + 3);
      continue;
    }
    if (line.empty()) continue;
    if (line == "MAPPED_LIBRARIES:") {
      p.has_maps = true;
      break;
    }
    Line l{};
    EXPECT_TRUE(ParseCounts(line, &l)) << line;
    std::istringstream pcs(line.substr(line.find('@') + 1));
    std::string word;
    while (pcs >> word) l.pcs.push_back(std::stoull(word, nullptr, 16));
    p.buckets.push_back(l);
  }
  return p;
}

Profile CurrentProfile() {
  char* text = GetHeapProfile();
  EXPECT_NE(text, nullptr);
  Profile p = Parse(text);
  free(text);
  return p;
}

// The lines whose innermost frame is in function fn. The program is linked with
// -rdynamic, so dladdr names the function of any return address (minus one: the call).
bool InFunction(uintptr_t return_address, const void* fn) {
  Dl_info info;
  return dladdr(reinterpret_cast<void*>(return_address - 1), &info) != 0 && info.dli_saddr == fn;
}

Line Sum(const Profile& p, const void* fn) {
  Line s{};
  for (const Line& l : p.buckets) {
    if (l.pcs.empty() || !InFunction(l.pcs[0], fn)) continue;
    s.inuse_objs += l.inuse_objs;
    s.inuse_bytes += l.inuse_bytes;
    s.alloc_objs += l.alloc_objs;
    s.alloc_bytes += l.alloc_bytes;
  }
  return s;
}

// A directory of this process's own for the dump files, removed when the tests end.
class TempDirEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    std::string templ = std::string(::testing::TempDir()) + "hp_api_XXXXXX";
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  static const std::string& dir() { return dir_; }

 private:
  static inline std::string dir_;
};
const auto* const g_temp_dir_env = ::testing::AddGlobalTestEnvironment(new TempDirEnvironment);

std::string TempPrefix(const char* name) {
  static std::atomic<int> seq{0};
  return TempDirEnvironment::dir() + "/" + std::to_string(seq++) + "_" + name;
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Stops the profiler however a test ends.
struct Session {
  explicit Session(const std::string& prefix) { HeapProfilerStart(prefix.c_str()); }
  ~Session() { HeapProfilerStop(); }
};

TEST(HeapProfilerApi, NotRunningUntilStarted) {
  ASSERT_EQ(getenv("HEAPPROFILE"), nullptr) << "run this test without HEAPPROFILE";
  EXPECT_EQ(IsHeapProfilerRunning(), 0);
  char* text = GetHeapProfile();
  ASSERT_NE(text, nullptr);  // gperftools returns an empty, freeable string
  EXPECT_STREQ(text, "");
  free(text);
  HeapProfilerStop();            // harmless
  HeapProfilerDump("nothing");   // harmless, writes nothing
  EXPECT_EQ(IsHeapProfilerRunning(), 0);
}

TEST(HeapProfilerApi, StartStopAndRestart) {
  const std::string a = TempPrefix("a"), b = TempPrefix("b");
  HeapProfilerStart(a.c_str());
  EXPECT_EQ(IsHeapProfilerRunning(), 1);
  HeapProfilerStart(b.c_str());  // already running: ignored, the first prefix stays
  HeapProfilerDump("first");
  EXPECT_TRUE(Exists(a + ".0001.heap"));
  EXPECT_FALSE(Exists(b + ".0001.heap"));
  HeapProfilerStop();
  EXPECT_EQ(IsHeapProfilerRunning(), 0);
  HeapProfilerDump("after stop");
  EXPECT_FALSE(Exists(a + ".0002.heap"));
  // A new session has a new prefix and numbers its files from 0001 again.
  HeapProfilerStart(b.c_str());
  EXPECT_EQ(IsHeapProfilerRunning(), 1);
  HeapProfilerDump("second session");
  EXPECT_TRUE(Exists(b + ".0001.heap"));
  HeapProfilerStop();
  HeapProfilerStart(nullptr);  // ignored
  HeapProfilerStart("");       // ignored
  EXPECT_EQ(IsHeapProfilerRunning(), 0);
}

TEST(HeapProfilerApi, DumpFilesAreNumberedAndComplete) {
  const std::string prefix = TempPrefix("dump");
  Session s(prefix);
  void* p = AllocMarked(123457);
  HeapProfilerDump("one");
  HeapProfilerDump("two");
  HeapProfilerDump(nullptr);
  for (const char* n : {".0001.heap", ".0002.heap", ".0003.heap"}) {
    const std::string text = ReadFile(prefix + n);
    const Profile prof = Parse(text);
    EXPECT_EQ(prof.label, "heapprofile");
    EXPECT_TRUE(prof.has_maps) << n;
    // The maps section is /proc/self/maps: it names this very program.
    EXPECT_NE(text.find("heap_profiler_api_test"), std::string::npos);
    const Line mine = Sum(prof, reinterpret_cast<const void*>(&AllocMarked));
    EXPECT_EQ(mine.inuse_objs, 1);
    EXPECT_EQ(mine.inuse_bytes, 123457);
  }
  EXPECT_FALSE(Exists(prefix + ".0004.heap"));
  free(p);
}

TEST(HeapProfilerApi, GetHeapProfileTracksAllocAndFree) {
  Session s(TempPrefix("track"));
  void* p = AllocMarked(123457);
  Profile before = CurrentProfile();
  EXPECT_EQ(before.label, "heapprofile");
  EXPECT_TRUE(before.has_maps);
  Line mine = Sum(before, reinterpret_cast<const void*>(&AllocMarked));
  EXPECT_EQ(mine.inuse_objs, 1);
  EXPECT_EQ(mine.inuse_bytes, 123457);
  EXPECT_EQ(mine.alloc_objs, 1);
  free(p);
  Profile after = CurrentProfile();
  mine = Sum(after, reinterpret_cast<const void*>(&AllocMarked));
  // Freed: nothing in use, but the allocation stays in the alloc columns.
  EXPECT_EQ(mine.inuse_objs, 0);
  EXPECT_EQ(mine.inuse_bytes, 0);
  EXPECT_EQ(mine.alloc_objs, 1);
  EXPECT_EQ(mine.alloc_bytes, 123457);
  // The header is the sum of the lines, and lines are sorted by in-use bytes.
  Line sum{};
  long long prev = INT64_MAX;
  for (const Line& l : after.buckets) {
    sum.inuse_objs += l.inuse_objs;
    sum.inuse_bytes += l.inuse_bytes;
    sum.alloc_objs += l.alloc_objs;
    sum.alloc_bytes += l.alloc_bytes;
    EXPECT_LE(l.inuse_bytes, prev);
    prev = l.inuse_bytes;
  }
  EXPECT_EQ(sum.inuse_objs, after.total.inuse_objs);
  EXPECT_EQ(sum.inuse_bytes, after.total.inuse_bytes);
  EXPECT_EQ(sum.alloc_objs, after.total.alloc_objs);
  EXPECT_EQ(sum.alloc_bytes, after.total.alloc_bytes);
}

TEST(HeapProfilerApi, EveryEntryPointIsRecordedWithItsCaller) {
  Session s(TempPrefix("entry"));
  struct Case {
    const char* name;
    const void* fn;
    void* p;
    long long bytes;
  };
  void* r = AllocMarked(100);
  std::vector<Case> cases = {
      {"calloc", reinterpret_cast<const void*>(&ViaCalloc), ViaCalloc(), 3 * 1001},
      {"realloc", reinterpret_cast<const void*>(&ViaRealloc), ViaRealloc(r), 5003},
      {"new[]", reinterpret_cast<const void*>(&ViaNew), ViaNew(), 7005},
      {"aligned new", reinterpret_cast<const void*>(&ViaNewAligned), ViaNewAligned(), 9007},
      {"memalign", reinterpret_cast<const void*>(&ViaMemalign), ViaMemalign(), 11009},
      {"posix_memalign", reinterpret_cast<const void*>(&ViaPosixMemalign), ViaPosixMemalign(), 13011},
      {"aligned_alloc", reinterpret_cast<const void*>(&ViaAlignedAlloc), ViaAlignedAlloc(), 16384},
      {"large malloc", reinterpret_cast<const void*>(&ViaLarge), ViaLarge(), 3 << 20},
  };
  const Profile prof = CurrentProfile();
  for (const Case& c : cases) {
    const Line l = Sum(prof, c.fn);
    EXPECT_EQ(l.inuse_objs, 1) << c.name;
    // Aligned small requests may be rounded up to a class whose size suits the alignment.
    EXPECT_GE(l.inuse_bytes, c.bytes) << c.name;
    EXPECT_LE(l.inuse_bytes, c.bytes + c.bytes / 8 + 256) << c.name;
  }
  // realloc moved the block: the old one (from AllocMarked) is freed.
  EXPECT_EQ(Sum(prof, reinterpret_cast<const void*>(&AllocMarked)).inuse_objs, 0);
  free(cases[0].p);
  free(cases[1].p);
  delete[] static_cast<char*>(cases[2].p);
  operator delete(cases[3].p, std::align_val_t{256});
  for (size_t i = 4; i < cases.size(); ++i) free(cases[i].p);
  const Profile after = CurrentProfile();
  for (const Case& c : cases) EXPECT_EQ(Sum(after, c.fn).inuse_objs, 0) << c.name;
}

TEST(HeapProfilerApi, ThreadsAreCountedExactly) {
  Session s(TempPrefix("threads"));
  constexpr int kThreads = 4;
  std::vector<std::vector<void*>> keep(kThreads);
  for (auto& k : keep) k.reserve(200);  // outside ThreadWork: only its own objects count there
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(ThreadWork, &keep[t]);
  for (auto& t : threads) t.join();
  const Line l = Sum(CurrentProfile(), reinterpret_cast<const void*>(&ThreadWork));
  EXPECT_EQ(l.inuse_objs, kThreads * 100);
  EXPECT_EQ(l.inuse_bytes, kThreads * 100 * 777);
  EXPECT_EQ(l.alloc_objs, kThreads * (20000 + 100));
  for (auto& k : keep)
    for (void* p : k) free(p);
  EXPECT_EQ(Sum(CurrentProfile(), reinterpret_cast<const void*>(&ThreadWork)).inuse_objs, 0);
}

// libtcmalloc records the stack of every heap growth, sampling on or off, profiler running
// or not, as gperftools' libtcmalloc does (libtcmalloc_minimal only while sampling:
// extension.api's MinimalGrowthsHaveStacksOnlyWhileSampling).
TEST(HeapProfilerApi, HeapGrowthsRecordTheirStacks) {
  MallocExtension* ext = MallocExtension::instance();
  size_t sampling = 1, heap = 0;
  ASSERT_TRUE(ext->GetNumericProperty("tcmalloc.sample_parameter", &sampling));
  ASSERT_EQ(sampling, 0u);
  ASSERT_TRUE(ext->GetNumericProperty("generic.heap_size", &heap));
  void* volatile block = malloc(heap + (256u << 20));  // more than anything free: the heap grows
  void** traces = ext->ReadHeapGrowthStackTraces();
  ASSERT_NE(traces, nullptr);
  ASSERT_NE(traces[0], nullptr);
  EXPECT_GE(reinterpret_cast<uintptr_t>(traces[1]), heap + (256u << 20));  // newest first
  EXPECT_GT(reinterpret_cast<uintptr_t>(traces[2]), 0u);
  delete[] traces;
  free(block);
}

TEST(HeapProfilerApi, StopForgetsAndFreesBeforeStartAreIgnored) {
  void* before = AllocMarked(4242);  // made while not profiling
  {
    Session s(TempPrefix("forget"));
    free(before);                    // not in the table: ignored, no negative counts
    void* during = AllocMarked(4343);
    const Profile p = CurrentProfile();
    const Line l = Sum(p, reinterpret_cast<const void*>(&AllocMarked));
    EXPECT_EQ(l.inuse_objs, 1);
    EXPECT_EQ(l.inuse_bytes, 4343);
    for (const Line& b : p.buckets) {
      EXPECT_GE(b.inuse_objs, 0);
      EXPECT_GE(b.inuse_bytes, 0);
    }
    free(during);
  }
  // A new session starts from nothing.
  Session s(TempPrefix("forget2"));
  EXPECT_EQ(Sum(CurrentProfile(), reinterpret_cast<const void*>(&AllocMarked)).alloc_objs, 0);
}

}  // namespace
