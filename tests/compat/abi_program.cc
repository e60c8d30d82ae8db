// Built against gperftools 2.10's own installed headers (Debian's libgoogle-perftools-dev,
// /usr/include/gperftools), never ours: it references every function, class and variable
// those headers declare that a program can reach, and checks each one does what gperftools
// documents. The same source is linked against our libraries, and against Debian's and then
// run with ours in its place (LD_PRELOAD / LD_LIBRARY_PATH); see CMakeLists.txt.
//
// ABI_FULL: the libtcmalloc parts too (heap profiler, heap checker, stack traces).
// Not referenced: MallocHook's Invoke*/Get* members, which gperftools' header declares
// inline without defining (a program using them does not link against gperftools either),
// and private members, which a program cannot name.
//
// ABI_EXPECT_LIB=<substring> in the environment: fail unless malloc and tc_version come
// from a library whose path contains it (proves which library answered the checks).
//
// Usage: abi_program            all checks; prints "ABI OK" and exits 0
//        abi_program leak       (ABI_FULL, HEAPCHECK=local) the leak checker through
//                               gperftools' header: finds a planted leak, and none after it
#include <gperftools/malloc_extension.h>
#include <gperftools/malloc_extension_c.h>
#include <gperftools/malloc_hook.h>
#include <gperftools/malloc_hook_c.h>
#include <gperftools/nallocx.h>
#include <gperftools/tcmalloc.h>
#ifdef ABI_FULL
#include <gperftools/heap-checker.h>
#include <gperftools/heap-profiler.h>
#include <gperftools/stacktrace.h>
#endif
#include <dlfcn.h>
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

// Proof that these are gperftools' headers and not ours: their include guards.
#ifndef BASE_MALLOC_EXTENSION_H_
#error "not gperftools' malloc_extension.h"
#endif
#ifndef _MALLOC_HOOK_H_
#error "not gperftools' malloc_hook.h"
#endif
#ifdef ABI_FULL
#ifndef BASE_HEAP_CHECKER_H_
#error "not gperftools' heap-checker.h"
#endif
static_assert(sizeof(HeapLeakChecker) == 56, "gperftools 2.10's HeapLeakChecker is 56 bytes");
#endif

namespace {

int g_failures = 0;
#define CHECK_ABI(cond)                                                            \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      std::fprintf(stderr, "abi_program: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                                \
    }                                                                              \
  } while (0)

// Keeps the compiler from eliding allocation pairs.
void* volatile g_sink;

int g_new_hook_calls = 0, g_delete_hook_calls = 0;
void NewHook(const void*, size_t) { ++g_new_hook_calls; }
void DeleteHook(const void*) { ++g_delete_hook_calls; }
void PreMmapHook(const void*, size_t, int, int, int, off_t) {}
void MmapHook(const void*, const void*, size_t, int, int, int, off_t) {}
int MmapReplacement(const void*, size_t, int, int, int, off_t, void**) { return 0; }
void MunmapHook(const void*, size_t) {}
int MunmapReplacement(const void*, size_t, int*) { return 0; }
void MremapHook(const void*, const void*, size_t, size_t, int, const void*) {}
void PreSbrkHook(ptrdiff_t) {}
void SbrkHook(const void*, ptrdiff_t) {}

void CheckTcmallocH() {
  int major = 0, minor = 0;
  const char* patch = nullptr;
  const char* version = tc_version(&major, &minor, &patch);
  CHECK_ABI(version != nullptr && major == TC_VERSION_MAJOR && minor == TC_VERSION_MINOR);
  CHECK_ABI(std::strcmp(version, TC_VERSION_STRING) == 0);

  void* p = tc_malloc(100);
  CHECK_ABI(p != nullptr && tc_malloc_size(p) >= 100);
  p = tc_realloc(p, 5000);
  CHECK_ABI(p != nullptr && tc_malloc_size(p) >= 5000);
  tc_free(p);
  p = tc_malloc_skip_new_handler(64);
  tc_free_sized(p, 64);
  auto* z = static_cast<unsigned char*>(tc_calloc(10, 10));
  CHECK_ABI(z != nullptr && z[0] == 0 && z[99] == 0);
  tc_cfree(z);
  p = tc_memalign(256, 100);
  CHECK_ABI(p != nullptr && reinterpret_cast<uintptr_t>(p) % 256 == 0);
  tc_free(p);
  CHECK_ABI(tc_posix_memalign(&p, 64, 100) == 0 && reinterpret_cast<uintptr_t>(p) % 64 == 0);
  tc_free(p);
  p = tc_valloc(10);
  CHECK_ABI(reinterpret_cast<uintptr_t>(p) % getpagesize() == 0);
  tc_free(p);
  p = tc_pvalloc(10);
  CHECK_ABI(reinterpret_cast<uintptr_t>(p) % getpagesize() == 0);
  tc_free(p);
  CHECK_ABI(tc_mallopt(0, 0) == 1);
  struct mallinfo mi = tc_mallinfo();
  CHECK_ABI(mi.arena >= 0);
  const int old_mode = tc_set_new_mode(1);
  CHECK_ABI(tc_set_new_mode(old_mode) == 1);

  p = tc_new(32);
  tc_delete(p);
  p = tc_new_nothrow(32, std::nothrow);
  tc_delete_sized(p, 32);
  p = tc_new(32);
  tc_delete_nothrow(p, std::nothrow);
  p = tc_newarray(48);
  tc_deletearray(p);
  p = tc_newarray_nothrow(48, std::nothrow);
  tc_deletearray_sized(p, 48);
  p = tc_newarray(48);
  tc_deletearray_nothrow(p, std::nothrow);
  const std::align_val_t al{128};
  p = tc_new_aligned(200, al);
  CHECK_ABI(reinterpret_cast<uintptr_t>(p) % 128 == 0);
  tc_delete_aligned(p, al);
  p = tc_new_aligned_nothrow(200, al, std::nothrow);
  tc_delete_sized_aligned(p, 200, al);
  p = tc_new_aligned(200, al);
  tc_delete_aligned_nothrow(p, al, std::nothrow);
  p = tc_newarray_aligned(300, al);
  tc_deletearray_aligned(p, al);
  p = tc_newarray_aligned_nothrow(300, al, std::nothrow);
  tc_deletearray_sized_aligned(p, 300, al);
  p = tc_newarray_aligned(300, al);
  tc_deletearray_aligned_nothrow(p, al, std::nothrow);
  tc_malloc_stats();  // prints the statistics on stderr
}

void CheckNallocx() {
  for (size_t size : {size_t{1}, size_t{100}, size_t{9000}, size_t{300000}}) {
    void* p = malloc(size);
    CHECK_ABI(nallocx(size, 0) == tc_nallocx(size, 0));
    CHECK_ABI(nallocx(size, 0) == MallocExtension::instance()->GetAllocatedSize(p));
    free(p);
  }
  CHECK_ABI(nallocx(1, MALLOCX_LG_ALIGN(12)) >= 4096);
}

struct Writer {
  static void Ranges(void* arg, const base::MallocRange* r) {
    auto* count = static_cast<int*>(arg);
    if (r->length > 0 && r->type <= base::MallocRange::UNKNOWN) ++*count;
  }
};

// A system allocator that counts and defers to the one it replaced: its Alloc is called
// through our vtable, so the class layouts must agree.
class CountingSysAllocator : public SysAllocator {
 public:
  explicit CountingSysAllocator(SysAllocator* next) : next_(next) {}
  void* Alloc(size_t size, size_t* actual_size, size_t alignment) override {
    ++calls;
    return next_->Alloc(size, actual_size, alignment);
  }
  int calls = 0;

 private:
  SysAllocator* next_;
};

void CheckMallocExtension() {
  MallocExtension::Initialize();
  MallocExtension* ext = MallocExtension::instance();
  CHECK_ABI(ext != nullptr);
  void* p = malloc(1000);
  CHECK_ABI(ext->VerifyAllMemory());
  CHECK_ABI(ext->VerifyMallocMemory(p));
  char* n = new char[10];
  CHECK_ABI(ext->VerifyArrayNewMemory(n));
  delete[] n;
  int* one = new int(1);
  CHECK_ABI(ext->VerifyNewMemory(one));
  delete one;
  int blocks = 0;
  size_t total = 0;
  int histogram[kMallocHistogramSize] = {};
  ext->MallocMemoryStats(&blocks, &total, histogram);  // gperftools: not implemented, false
  char stats[4096];
  ext->GetStats(stats, sizeof(stats));
  CHECK_ABI(std::strstr(stats, "MALLOC:") != nullptr);
  std::string sample, growth;
  ext->GetHeapSample(&sample);
  ext->GetHeapGrowthStacks(&growth);
  CHECK_ABI(sample.find("heap") != std::string::npos);
  int ranges = 0;
  ext->Ranges(&ranges, &Writer::Ranges);
  size_t value = 0;
  CHECK_ABI(ext->GetNumericProperty("generic.current_allocated_bytes", &value) && value >= 1000);
  CHECK_ABI(ext->GetNumericProperty("tcmalloc.max_total_thread_cache_bytes", &value));
  CHECK_ABI(ext->SetNumericProperty("tcmalloc.max_total_thread_cache_bytes", value));
  CHECK_ABI(!ext->GetNumericProperty("no.such.property", &value));
  ext->MarkThreadIdle();
  ext->MarkThreadBusy();
  ext->MarkThreadTemporarilyIdle();
  ext->MarkThreadBusy();
  SysAllocator* original = ext->GetSystemAllocator();
  CHECK_ABI(original != nullptr);
  static CountingSysAllocator counting(original);
  ext->SetSystemAllocator(&counting);
  CHECK_ABI(ext->GetSystemAllocator() == &counting);
  g_sink = malloc(64 << 20);  // more than the heap has: the system allocator is asked
  CHECK_ABI(g_sink != nullptr && counting.calls > 0);
  free(g_sink);
  ext->ReleaseToSystem(1 << 20);
  ext->ReleaseFreeMemory();
  ext->SetMemoryReleaseRate(2.5);
  CHECK_ABI(ext->GetMemoryReleaseRate() == 2.5);
  CHECK_ABI(ext->GetEstimatedAllocatedSize(1000) >= 1000);
  CHECK_ABI(ext->GetAllocatedSize(p) >= 1000);
  CHECK_ABI(ext->GetOwnership(p) == MallocExtension::kOwned);
  int on_stack = 0;
  CHECK_ABI(ext->GetOwnership(&on_stack) == MallocExtension::kNotOwned);
  std::vector<MallocExtension::FreeListInfo> lists;
  ext->GetFreeListSizes(&lists);
  CHECK_ABI(!lists.empty() && lists[0].type != nullptr);
  int period = -1;
  void** traces = ext->ReadStackTraces(&period);
  CHECK_ABI(traces != nullptr);
  delete[] traces;
  void** growth_traces = ext->ReadHeapGrowthStackTraces();
  delete[] growth_traces;
  (void)ext->GetThreadCacheSize();
  free(p);
  // Register is the way to install another implementation; re-registering the current
  // one must keep everything working.
  MallocExtension::Register(ext);
  CHECK_ABI(MallocExtension::instance() == ext);
}

void CheckMallocExtensionC() {
  void* p = malloc(300);
  CHECK_ABI(MallocExtension_VerifyAllMemory());
  CHECK_ABI(MallocExtension_VerifyMallocMemory(p));
  char* n = new char[3];
  CHECK_ABI(MallocExtension_VerifyArrayNewMemory(n));
  delete[] n;
  int* one = new int(1);
  CHECK_ABI(MallocExtension_VerifyNewMemory(one));
  delete one;
  int blocks = 0;
  size_t total = 0;
  int histogram[kMallocExtensionHistogramSize] = {};
  MallocExtension_MallocMemoryStats(&blocks, &total, histogram);
  char stats[2048];
  MallocExtension_GetStats(stats, sizeof(stats));
  size_t value = 0;
  CHECK_ABI(MallocExtension_GetNumericProperty("generic.heap_size", &value) && value > 0);
  CHECK_ABI(MallocExtension_SetNumericProperty("tcmalloc.max_total_thread_cache_bytes", 32 << 20));
  MallocExtension_MarkThreadIdle();
  MallocExtension_MarkThreadBusy();
  MallocExtension_MarkThreadTemporarilyIdle();
  MallocExtension_ReleaseToSystem(4096);
  MallocExtension_ReleaseFreeMemory();
  CHECK_ABI(MallocExtension_GetEstimatedAllocatedSize(300) >= 300);
  CHECK_ABI(MallocExtension_GetAllocatedSize(p) >= 300);
  (void)MallocExtension_GetThreadCacheSize();
  CHECK_ABI(MallocExtension_GetOwnership(p) == MallocExtension_kOwned);
  CHECK_ABI(MallocExtension_GetOwnership(nullptr) == MallocExtension_kNotOwned);
  free(p);
}

void CheckMallocHook() {
  CHECK_ABI(MallocHook::AddNewHook(NewHook) && MallocHook::AddDeleteHook(DeleteHook));
  g_sink = malloc(10);
  free(g_sink);
  CHECK_ABI(g_new_hook_calls >= 1 && g_delete_hook_calls >= 1);
  CHECK_ABI(MallocHook::RemoveNewHook(NewHook) && MallocHook::RemoveDeleteHook(DeleteHook));
  CHECK_ABI(!MallocHook::RemoveNewHook(NewHook));
  CHECK_ABI(MallocHook::AddPreMmapHook(PreMmapHook) && MallocHook::RemovePreMmapHook(PreMmapHook));
  CHECK_ABI(MallocHook::AddMmapHook(MmapHook) && MallocHook::RemoveMmapHook(MmapHook));
  CHECK_ABI(MallocHook::AddMunmapHook(MunmapHook) && MallocHook::RemoveMunmapHook(MunmapHook));
  CHECK_ABI(MallocHook::AddMremapHook(MremapHook) && MallocHook::RemoveMremapHook(MremapHook));
  CHECK_ABI(MallocHook::AddPreSbrkHook(PreSbrkHook) && MallocHook::RemovePreSbrkHook(PreSbrkHook));
  CHECK_ABI(MallocHook::AddSbrkHook(SbrkHook) && MallocHook::RemoveSbrkHook(SbrkHook));
  CHECK_ABI(MallocHook::SetMmapReplacement(MmapReplacement) &&
            MallocHook::RemoveMmapReplacement(MmapReplacement));
  CHECK_ABI(MallocHook::SetMunmapReplacement(MunmapReplacement) &&
            MallocHook::RemoveMunmapReplacement(MunmapReplacement));
  CHECK_ABI(MallocHook::SetNewHook(NewHook) == nullptr && MallocHook::SetNewHook(nullptr) == NewHook);
  CHECK_ABI(MallocHook::SetDeleteHook(DeleteHook) == nullptr && MallocHook::SetDeleteHook(nullptr) == DeleteHook);
  CHECK_ABI(MallocHook::SetPreMmapHook(PreMmapHook) == nullptr && MallocHook::SetPreMmapHook(nullptr) == PreMmapHook);
  CHECK_ABI(MallocHook::SetMmapHook(MmapHook) == nullptr && MallocHook::SetMmapHook(nullptr) == MmapHook);
  CHECK_ABI(MallocHook::SetMunmapHook(MunmapHook) == nullptr && MallocHook::SetMunmapHook(nullptr) == MunmapHook);
  CHECK_ABI(MallocHook::SetMremapHook(MremapHook) == nullptr && MallocHook::SetMremapHook(nullptr) == MremapHook);
  CHECK_ABI(MallocHook::SetPreSbrkHook(PreSbrkHook) == nullptr && MallocHook::SetPreSbrkHook(nullptr) == PreSbrkHook);
  CHECK_ABI(MallocHook::SetSbrkHook(SbrkHook) == nullptr && MallocHook::SetSbrkHook(nullptr) == SbrkHook);
  void* stack[8];
  CHECK_ABI(MallocHook::GetCallerStackTrace(stack, 8, 0) >= 0);
  void* m = MallocHook::UnhookedMMap(nullptr, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK_ABI(m != MAP_FAILED);
  CHECK_ABI(MallocHook::UnhookedMUnmap(m, 4096) == 0);
  // The C forms, each through its own symbol.
  CHECK_ABI(MallocHook_AddNewHook(NewHook) && MallocHook_RemoveNewHook(NewHook));
  CHECK_ABI(MallocHook_AddDeleteHook(DeleteHook) && MallocHook_RemoveDeleteHook(DeleteHook));
  CHECK_ABI(MallocHook_AddPreMmapHook(PreMmapHook) && MallocHook_RemovePreMmapHook(PreMmapHook));
  CHECK_ABI(MallocHook_AddMmapHook(MmapHook) && MallocHook_RemoveMmapHook(MmapHook));
  CHECK_ABI(MallocHook_AddMunmapHook(MunmapHook) && MallocHook_RemoveMunmapHook(MunmapHook));
  CHECK_ABI(MallocHook_AddMremapHook(MremapHook) && MallocHook_RemoveMremapHook(MremapHook));
  CHECK_ABI(MallocHook_AddPreSbrkHook(PreSbrkHook) && MallocHook_RemovePreSbrkHook(PreSbrkHook));
  CHECK_ABI(MallocHook_AddSbrkHook(SbrkHook) && MallocHook_RemoveSbrkHook(SbrkHook));
  CHECK_ABI(MallocHook_SetMmapReplacement(MmapReplacement) && MallocHook_RemoveMmapReplacement(MmapReplacement));
  CHECK_ABI(MallocHook_SetMunmapReplacement(MunmapReplacement) &&
            MallocHook_RemoveMunmapReplacement(MunmapReplacement));
  CHECK_ABI(MallocHook_SetNewHook(nullptr) == nullptr && MallocHook_SetDeleteHook(nullptr) == nullptr);
  CHECK_ABI(MallocHook_SetPreMmapHook(nullptr) == nullptr && MallocHook_SetMmapHook(nullptr) == nullptr);
  CHECK_ABI(MallocHook_SetMunmapHook(nullptr) == nullptr && MallocHook_SetMremapHook(nullptr) == nullptr);
  CHECK_ABI(MallocHook_SetPreSbrkHook(nullptr) == nullptr && MallocHook_SetSbrkHook(nullptr) == nullptr);
  CHECK_ABI(MallocHook_GetCallerStackTrace(stack, 8, 0) >= 0);
}

#ifdef ABI_FULL
int g_cleanups_run = 0;
REGISTER_HEAPCHECK_CLEANUP(abi_program, ++g_cleanups_run)

__attribute__((noinline)) int TraceHere(void** pcs, int* sizes) {
  int a = GetStackTrace(pcs, 8, 0);
  int b = GetStackTraceWithContext(pcs, 8, 0, nullptr);
  int c = GetStackFrames(pcs, sizes, 8, 0);
  int d = GetStackFramesWithContext(pcs, sizes, 8, 0, nullptr);
  return a > 0 && b > 0 && c > 0 && d > 0 ? a : 0;
}

void CheckStacktraceH() {
  void* pcs[8];
  int sizes[8];
  CHECK_ABI(TraceHere(pcs, sizes) > 1);
}

void CheckHeapProfilerH() {
  CHECK_ABI(!IsHeapProfilerRunning());
  char prefix[64];
  std::snprintf(prefix, sizeof(prefix), "/tmp/abi_program.%d", static_cast<int>(getpid()));
  HeapProfilerStart(prefix);
  CHECK_ABI(IsHeapProfilerRunning());
  g_sink = malloc(1 << 20);
  HeapProfilerDump("abi");
  char* profile = GetHeapProfile();
  CHECK_ABI(profile != nullptr && std::strncmp(profile, "heap profile:", 13) == 0);
  free(profile);
  free(g_sink);
  HeapProfilerStop();
  CHECK_ABI(!IsHeapProfilerRunning());
  char name[96];
  std::snprintf(name, sizeof(name), "%s.0001.heap", prefix);
  CHECK_ABI(access(name, R_OK) == 0);
  unlink(name);
}

// Without HEAPCHECK: everything is callable and reports "no leaks".
void CheckHeapCheckerHInactive() {
  CHECK_ABI(!HeapLeakChecker::IsActive());
  CHECK_ABI(HeapLeakChecker::GlobalChecker() == nullptr);
  CHECK_ABI(HeapLeakChecker::NoGlobalLeaks());
  HeapLeakChecker::CancelGlobalCheck();
  HeapLeakChecker check("abi_inactive");
  {
    HeapLeakChecker::Disabler off;
    g_sink = HeapLeakChecker::IgnoreObject(new int[4]);
  }
  HeapLeakChecker::UnIgnoreObject(g_sink);
  delete[] static_cast<int*>(g_sink);
  CHECK_ABI(check.NoLeaks() && check.QuickNoLeaks() && check.BriefNoLeaks());
  CHECK_ABI(check.SameHeap() && check.QuickSameHeap() && check.BriefSameHeap());
  // (BytesLeaked/ObjectsLeaked of an inactive checker abort in gperftools: not called.)
  HiddenPointer<int> hidden(new int(5));
  CHECK_ABI(*hidden.get() == 5);
  delete hidden.get();
  HeapCleaner::RunHeapCleanups();  // runs only when checking is on (gperftools: same)
}

// HEAPCHECK=local: the checker itself, driven through gperftools' header (a checker
// object laid out by that header, DoNoLeaks(ShouldSymbolize) from its inline NoLeaks).
int LeakMode() {
  CHECK_ABI(HeapLeakChecker::IsActive());
  {
    HeapLeakChecker clean("abi_clean");
    int* kept = new int[10];
    delete[] kept;
    CHECK_ABI(clean.NoLeaks());
    CHECK_ABI(clean.BytesLeaked() == 0);
  }
  HiddenPointer<char>* leak_holder = nullptr;
  {
    HeapLeakChecker leaky("abi_leaky");
    leak_holder = new HiddenPointer<char>(new char[1000]);  // only a hidden pointer: a leak
    HeapLeakChecker::IgnoreObject(leak_holder);             // the holder itself is fine
    CHECK_ABI(!leaky.NoLeaks());
    CHECK_ABI(leaky.BytesLeaked() >= 1000);
    CHECK_ABI(leaky.ObjectsLeaked() >= 1);
  }
  delete[] leak_holder->get();
  if (g_failures == 0) std::printf("ABI LEAK OK\n");
  return g_failures == 0 ? 0 : 1;
}
#endif

void CheckWhoAnswers() {
  const char* expect = std::getenv("ABI_EXPECT_LIB");
  if (expect == nullptr) return;
  for (void* fn : {reinterpret_cast<void*>(&malloc), reinterpret_cast<void*>(&tc_version)}) {
    Dl_info info{};
    const bool found = dladdr(fn, &info) != 0 && info.dli_fname != nullptr;
    if (!found || std::strstr(info.dli_fname, expect) == nullptr) {
      std::fprintf(stderr, "abi_program: the library in use is %s, not one matching %s\n",
                   found ? info.dli_fname : "(unknown)", expect);
      ++g_failures;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CheckWhoAnswers();
#ifdef ABI_FULL
  if (argc > 1 && std::strcmp(argv[1], "leak") == 0) return LeakMode();
#else
  (void)argc;
  (void)argv;
#endif
  CheckTcmallocH();
  CheckNallocx();
  CheckMallocExtension();
  CheckMallocExtensionC();
  CheckMallocHook();
#ifdef ABI_FULL
  CheckStacktraceH();
  CheckHeapProfilerH();
  CheckHeapCheckerHInactive();
#endif
  if (g_failures != 0) {
    std::fprintf(stderr, "abi_program: %d check(s) failed\n", g_failures);
    return 1;
  }
  std::printf("ABI OK\n");
  return 0;
}
