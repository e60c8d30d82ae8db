// The heap profiler: hooks, dump triggers, files, fork and exit handling, and the
// gperftools C API of heap-profiler.h. Design and locking: heap_profiler.h.
#include "profiler/heap_profiler.h"

#include <pthread.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/log.h"
#include "base/spinlock.h"
#include "api/introspection.h"
#include "gperftools/heap-profiler.h"
#include "gperftools/malloc_hook_c.h"
#include "profiler/heap_profile_io.h"
#include "profiler/heap_profile_table.h"
#include "platform/os.h"
#include "platform/stack_trace.h"

namespace tcm {

namespace {

constexpr size_t kMaxPrefix = 1024;

struct ProfilerState {
  bool running = false;
  char prefix[kMaxPrefix] = {};
  int child_pid = 0;       // set in a forked child: its files carry _<pid>
  int dump_count = 0;      // files written so far (by this process)
  int64_t last_dump_alloc_bytes = 0;
  int64_t inuse_high_water = 0;
  uint64_t last_dump_ns = 0;
  bool warned_out_of_memory = false;
};

constinit SpinLock g_control_lock;  // Start, Stop and the exit dump; outer
constinit SpinLock g_lock;          // g_state and g_table; inner, taken by the hooks
constinit ProfilerState g_state;    // guarded by g_lock
constinit HeapProfileTable g_table;  // guarded by g_lock
// The dump triggers (HEAP_PROFILE_*_INTERVAL of the options table), copied when the
// profiler starts; written under g_control_lock and g_lock, read under g_lock.
constinit HeapProfilerOptions g_intervals;
// g_state.running for the hooks' unlocked first look (after Stop they return at once).
std::atomic<bool> g_running{false};
// Set in the thread that forks while our prepare handler holds the locks: a malloc from a
// prepare handler that runs after ours must not wait for our lock in that same thread.
__thread bool tls_forking TCM_INITIAL_EXEC = false;

// Hooks run inside malloc and free; neither a lock's futex nor a dump's syscalls may leave
// a changed errno behind.
class ErrnoSaver {
 public:
  ErrnoSaver() : saved_(errno) {}
  ~ErrnoSaver() { errno = saved_; }

 private:
  int saved_;
};

// Whole MB (or kB, or bytes) for the log's reasons, the way gperftools words them.
void FormatInUse(char* buf, size_t len, const char* what, int64_t bytes) {
  if ((bytes >> 20) > 0) snprintf(buf, len, "%s, %lld MB in use", what, static_cast<long long>(bytes >> 20));
  else if ((bytes >> 10) > 0) snprintf(buf, len, "%s, %lld kB in use", what, static_cast<long long>(bytes >> 10));
  else snprintf(buf, len, "%s, %lld bytes in use", what, static_cast<long long>(bytes));
}

// Writes the next profile file. REQUIRES g_lock, g_state.running.
void DumpLocked(const char* reason) {
  ErrnoSaver errno_saver;
  char path[kMaxPrefix + 48];
  ++g_state.dump_count;
  if (g_state.child_pid != 0)
    snprintf(path, sizeof(path), "%s_%d.%04d.heap", g_state.prefix, g_state.child_pid, g_state.dump_count);
  else
    snprintf(path, sizeof(path), "%s.%04d.heap", g_state.prefix, g_state.dump_count);
  ProfileLog("Dumping heap profile to %s (%s)", path, reason);
  // The triggers restart now even if the file cannot be written: otherwise every later
  // allocation would retry (and log) at once.
  const HeapCounts& t = g_table.totals();
  g_state.last_dump_alloc_bytes = t.alloc_bytes;
  if (t.inuse_bytes() > g_state.inuse_high_water) g_state.inuse_high_water = t.inuse_bytes();
  if (g_intervals.time_interval > 0) g_state.last_dump_ns = os::MonotonicCoarseNs();
  const int fd = OpenProfileFile(path);
  if (fd < 0) {
    Log("heap profiler: cannot create %s (errno %d)", path, errno);
    return;
  }
  ProfileWriter out(fd);
  g_table.Write(&out, "heapprofile");
  static constexpr char kMaps[] = "\nMAPPED_LIBRARIES:\n";
  out.Append(kMaps, sizeof(kMaps) - 1);
  out.AppendFile("/proc/self/maps");
  if (!out.Finish()) Log("heap profiler: could not write all of %s", path);
  CloseProfileFile(fd);
}

// Dumps if a trigger fired. REQUIRES g_lock, g_state.running.
void MaybeDumpLocked() {
  const HeapCounts& t = g_table.totals();
  const int64_t inuse = t.inuse_bytes();
  char reason[128];
  if (g_intervals.allocation_interval > 0 && t.alloc_bytes >= g_state.last_dump_alloc_bytes + g_intervals.allocation_interval) {
    snprintf(reason, sizeof(reason), "%lld MB allocated cumulatively, %lld MB currently in use",
             static_cast<long long>(t.alloc_bytes >> 20), static_cast<long long>(inuse >> 20));
  } else if (g_intervals.inuse_interval > 0 && inuse > g_state.inuse_high_water + g_intervals.inuse_interval) {
    snprintf(reason, sizeof(reason), "%lld MB currently in use", static_cast<long long>(inuse >> 20));
  } else if (g_intervals.time_interval > 0) {
    // The coarse clock is a vDSO read (no syscall): cheap enough for every allocation.
    const uint64_t elapsed_s = (os::MonotonicCoarseNs() - g_state.last_dump_ns) / 1000000000u;
    if (elapsed_s < static_cast<uint64_t>(g_intervals.time_interval)) return;
    snprintf(reason, sizeof(reason), "%llu sec since the last dump", static_cast<unsigned long long>(elapsed_s));
  } else {
    return;
  }
  DumpLocked(reason);
}

void NewHook(const void* p, size_t size) {
  if (p == nullptr || tls_forking || !g_running.load(std::memory_order_acquire)) return;
  ErrnoSaver errno_saver;
  void* pcs[os::kMaxStackDepth];
  const int depth = introspection::CaptureUserStack(pcs, os::kMaxStackDepth);  // before the lock: slow-ish
  SpinLockHolder h(&g_lock);
  if (!g_state.running) return;
  if (!g_table.RecordAlloc(p, size, pcs, depth) && !g_state.warned_out_of_memory) {
    g_state.warned_out_of_memory = true;
    Log("heap profiler: no memory for its tables; the profile misses allocations");
  }
  MaybeDumpLocked();
}

void DeleteHook(const void* p) {
  if (p == nullptr || tls_forking || !g_running.load(std::memory_order_acquire)) return;
  ErrnoSaver errno_saver;
  SpinLockHolder h(&g_lock);
  if (!g_state.running) return;
  g_table.RecordFree(p);
}

void ForkPrepare() {
  g_control_lock.Lock();
  g_lock.Lock();
  tls_forking = true;
}

void ForkParent() {
  tls_forking = false;
  g_lock.Unlock();
  g_control_lock.Unlock();
}

void ForkChild() {
  tls_forking = false;
  g_lock.ResetAfterFork();
  g_control_lock.ResetAfterFork();
  if (g_state.running) {
    g_state.child_pid = os::GetPid();
    g_state.dump_count = 0;
  }
}

pthread_once_t g_fork_once = PTHREAD_ONCE_INIT;
void RegisterForkHandlers() { pthread_atfork(ForkPrepare, ForkParent, ForkChild); }

void StopLocked() {
  MallocHook_RemoveNewHook(NewHook);
  MallocHook_RemoveDeleteHook(DeleteHook);
  // A hook that read g_running before this point waits for g_lock and then sees
  // running == false; none can touch the table after it is reset.
  SpinLockHolder h(&g_lock);
  g_state.running = false;
  g_running.store(false, std::memory_order_release);
  g_table.Reset();
}

// HEAPPROFILE=<prefix>: profile from the moment the library is initialised. Allocations made
// before (by the loader, libc and libstdc++ start-up) are not in the profile; their frees are
// ignored.
__attribute__((constructor)) void StartFromEnvironment() {
  const Options& options = introspection::AllocatorOptions();
  if (options.heap_profiler.prefix[0] == '\0') return;
  HeapProfilerStart(options.heap_profiler.prefix);
}

// The final dump. A library destructor rather than atexit(): registering could allocate.
__attribute__((destructor)) void DumpAtExit() {
  SpinLockHolder c(&g_control_lock);
  if (!g_running.load(std::memory_order_acquire)) return;
  {
    SpinLockHolder h(&g_lock);
    char reason[128];
    FormatInUse(reason, sizeof(reason), "Exiting", g_table.totals().inuse_bytes());
    DumpLocked(reason);
  }
  StopLocked();
}

}  // namespace
}  // namespace tcm

using namespace tcm;

extern "C" {

TCM_EXPORT void HeapProfilerStart(const char* prefix) {
  if (prefix == nullptr || prefix[0] == '\0') return;
  // Our fork handlers must come after the allocator's (registered by its initialisation),
  // and pthread_atfork may malloc: the process's first malloc must not start inside it.
  const Options& options = introspection::AllocatorOptions();
  pthread_once(&g_fork_once, RegisterForkHandlers);
  SpinLockHolder c(&g_control_lock);
  if (g_running.load(std::memory_order_relaxed)) return;
  {
    SpinLockHolder h(&g_lock);
    g_intervals = options.heap_profiler;
    g_table.Reset();
    g_state = ProfilerState{};
    size_t n = strlen(prefix);
    if (n >= kMaxPrefix) n = kMaxPrefix - 1;
    memcpy(g_state.prefix, prefix, n);
    g_state.prefix[n] = '\0';
    g_state.last_dump_ns = os::MonotonicCoarseNs();
    g_state.running = true;
    g_running.store(true, std::memory_order_release);
  }
  ProfileLog("Starting tracking the heap");
  if (!MallocHook_AddNewHook(NewHook) || !MallocHook_AddDeleteHook(DeleteHook)) {
    Log("heap profiler: every allocation hook slot is taken; not profiling");
    StopLocked();
  }
}

TCM_EXPORT int IsHeapProfilerRunning(void) { return g_running.load(std::memory_order_acquire) ? 1 : 0; }

TCM_EXPORT void HeapProfilerStop(void) {
  SpinLockHolder c(&g_control_lock);
  if (!g_running.load(std::memory_order_relaxed)) return;
  StopLocked();
}

TCM_EXPORT void HeapProfilerDump(const char* reason) {
  SpinLockHolder h(&g_lock);
  if (!g_state.running) return;
  DumpLocked(reason != nullptr ? reason : "");
}

TCM_EXPORT char* GetHeapProfile(void) {
  ProfileWriter text(-1);
  bool running;
  {
    SpinLockHolder h(&g_lock);
    running = g_state.running;
    if (running) g_table.Write(&text, "heapprofile");
  }
  if (running) {
    static constexpr char kMaps[] = "\nMAPPED_LIBRARIES:\n";
    text.Append(kMaps, sizeof(kMaps) - 1);
    text.AppendFile("/proc/self/maps");
  }
  // Only now, with no lock of ours held: this malloc runs our own new hook.
  const size_t n = text.size();
  char* result = static_cast<char*>(malloc(n + 1));
  if (result == nullptr) return nullptr;
  if (n > 0) memcpy(result, text.data(), n);
  result[n] = '\0';
  return result;
}

}  // extern "C"
