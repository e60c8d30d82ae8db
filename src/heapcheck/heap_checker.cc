// The heap leak checker: flags, start-up and exit sequencing, the malloc hooks that record
// every allocation, and the HeapLeakChecker interface (include/gperftools/heap-checker.h).
// Component map and lock order: heap_checker.h. Behaviour: docs/heap-checker.md.
//
// Life of a process with HEAPCHECK=<level>:
//   1. Our constructor (priority 101, before the program's own constructors) reads the
//      flags and installs a new and a delete hook. From then on every allocation is
//      recorded with its stack; earlier ones (the C/C++ runtimes' start-up) are not.
//   2. Just before main() (heap_check_start_main.cc) the "minimal" level notes where main
//      starts, and levels that check before global destructors register the check with
//      atexit — last registered, so it runs first, before the destructors the program's
//      constructors registered.
//   3. "strict", "draconian" (and HEAP_CHECK_AFTER_DESTRUCTORS=1) check from our library's
//      destructor instead, after the program's global destructors.
//   4. A check: record the loaded modules; take the checker lock and the allocator's
//      locks; stop all other threads; flood from the roots; resume; report. Leaks at exit
//      end the process with _exit(1) after flushing stdio.
//
// Nothing here allocates while the checker lock is held, and no global has a constructor
// or destructor: the tables are placed in static storage and never destroyed, because
// free() keeps calling our hook until the very end of the process.
#include "heapcheck/heap_checker.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "base/log.h"
#include "base/spinlock.h"
#include "api/introspection.h"
#include "gperftools/heap-checker.h"
#include "gperftools/malloc_hook_c.h"
#include "heapcheck/heap_check_report.h"
#include "heapcheck/heap_check_modules.h"
#include "heapcheck/heap_check_scan.h"
#include "heapcheck/heap_check_stack.h"
#include "heapcheck/heap_check_memory.h"
#include "heapcheck/heap_check_table.h"
#include "platform/modules.h"
#include "platform/os.h"
#include "platform/threads.h"
#include "platform/stack_trace.h"
#include "heapcheck/thread_list.h"

// The heap profiler, when built into the same library (weak: the checker also builds
// without it).
extern "C" int IsHeapProfilerRunning(void) __attribute__((weak));

// Builds the whole-program checker with the constructor reserved for it.
struct HeapLeakCheckerAccess {
  static HeapLeakChecker* MakeMain(void* storage) { return new (storage) HeapLeakChecker(); }
};

// Programs built against gperftools 2.10's heap-checker.h allocate this many bytes for a
// checker (tests/compat checks that header's size too).
static_assert(sizeof(HeapLeakChecker) == 56, "HeapLeakChecker must keep gperftools' size");

namespace tcm::heapcheck {
namespace {

enum class Mode { kOff, kMinimal, kNormal, kStrict, kDraconian, kAsIs, kLocal };

// The level and what it presets; every other flag is read from the options table
// (HeapCheckerOptions: g_opts, set once by Init).
struct Flags {
  Mode mode = Mode::kOff;
  bool after_destructors = false;  // HEAP_CHECK_AFTER_DESTRUCTORS, or the level's preset
  bool thread_live = true;         // HEAP_CHECK_IGNORE_THREAD_LIVE, or the level's preset
  bool global_live = true;         // HEAP_CHECK_IGNORE_GLOBAL_LIVE, or the level's preset
  int64_t source_alignment = 8;    // HEAP_CHECK_POINTER_SOURCE_ALIGNMENT, a power of two
};

constinit Flags g_flags;
constinit const HeapCheckerOptions kDefaultOptions;
constinit const HeapCheckerOptions* g_opts = &kDefaultOptions;  // the table's, once Init ran
constinit SpinLock g_lock;  // the checker lock (heap_checker.h, SYNCHRONIZATION)
constinit std::atomic<bool> g_active{false};
constinit bool g_initialized = false;

// Guarded by g_lock. The tables live in static storage, constructed once, never destroyed.
alignas(AllocTable) constinit unsigned char g_table_storage[sizeof(AllocTable)] = {};
alignas(StackTable) constinit unsigned char g_stacks_storage[sizeof(StackTable)] = {};
constinit AllocTable* g_table = nullptr;
constinit StackTable* g_stacks = nullptr;
constinit uint64_t g_serial = 0;        // serial of the latest recorded allocation
constinit uint64_t g_live_bytes = 0;    // requested bytes of recorded live objects
constinit uint64_t g_untracked = 0;     // allocations the table had no room for
constinit uint64_t g_main_serial = 0;   // first serial of main() (0: main not seen)

constinit int g_pid = 0;  // the process that checks at exit (not its forked children)
constinit size_t g_tcb_size = 2368;    // sizeof(struct pthread), from glibc when it says
constinit std::atomic<bool> g_main_check_pending{false};
constinit std::atomic<bool> g_warned_inactive{false};

alignas(HeapLeakChecker) constinit unsigned char g_main_storage[sizeof(HeapLeakChecker)] = {};
constinit HeapLeakChecker* g_main_checker = nullptr;

__thread int tls_disabled TCM_INITIAL_EXEC = 0;  // live Disablers in this thread

// Writes formatted text to stderr as-is (the gperftools message formats have no prefix).
__attribute__((format(printf, 1, 2))) void Say(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (n > 0) os::WriteStderr(buf, static_cast<size_t>(n) < sizeof(buf) ? static_cast<size_t>(n) : sizeof(buf) - 1);
}

// ---- flags ----

bool ParseMode(const char* s, Mode* mode) {
  static const struct {
    const char* name;
    Mode mode;
  } kModes[] = {{"minimal", Mode::kMinimal}, {"normal", Mode::kNormal}, {"strict", Mode::kStrict},
                {"draconian", Mode::kDraconian}, {"as-is", Mode::kAsIs}, {"local", Mode::kLocal}};
  for (const auto& m : kModes) {
    if (strcmp(s, m.name) == 0) {
      *mode = m.mode;
      return true;
    }
  }
  return false;
}

// The levels are presets of the three liveness knobs, as in gperftools; "as-is" and
// "local" take the knobs from the environment.
void LoadFlags(const HeapCheckerOptions& o, Flags* f) {
  f->after_destructors = o.after_destructors;
  f->thread_live = o.ignore_thread_live;
  f->global_live = o.ignore_global_live;
  switch (f->mode) {
    case Mode::kMinimal:
    case Mode::kNormal:
      f->after_destructors = false;
      f->thread_live = f->global_live = true;
      break;
    case Mode::kStrict:
      f->after_destructors = true;
      f->thread_live = f->global_live = true;
      break;
    case Mode::kDraconian:
      f->after_destructors = true;
      f->thread_live = f->global_live = false;
      break;
    default:
      break;
  }
  f->source_alignment = o.pointer_source_alignment;
  if ((f->source_alignment & (f->source_alignment - 1)) != 0) {
    Log("heap checker: HEAP_CHECK_POINTER_SOURCE_ALIGNMENT must be 1, 2, 4 or 8; using 8");
    f->source_alignment = 8;
  }
}

// ---- recording allocations ----

void NewHook(const void* ptr, size_t size) {
  if (ptr == nullptr || !g_active.load(std::memory_order_relaxed)) return;
  // Unwinding may take the dynamic loader's lock: do it before taking ours.
  void* pcs[os::kMaxStackDepth];
  const int depth = CaptureAllocStack(pcs, static_cast<int>(g_opts->stack_depth));
  if (TCM_UNLIKELY(Probing())) return;
  const uint32_t flags = tls_disabled > 0 ? uint32_t{kDisabled} : uint32_t{0};
  const uintptr_t addr = reinterpret_cast<uintptr_t>(ptr);
  SpinLockHolder h(&g_lock);
  if (AllocRecord* stale = g_table->Find(addr)) {  // a free we never saw
    g_live_bytes -= stale->size;
    g_table->Remove(addr);
  }
  const uint32_t stack = g_stacks->Intern(pcs, depth);
  if (g_table->Insert(addr, size, stack, flags, ++g_serial)) g_live_bytes += size;
  else ++g_untracked;
}

void DeleteHook(const void* ptr) {
  if (ptr == nullptr || !g_active.load(std::memory_order_relaxed)) return;
  const uintptr_t addr = reinterpret_cast<uintptr_t>(ptr);
  SpinLockHolder h(&g_lock);
  if (AllocRecord* r = g_table->Find(addr)) {
    g_live_bytes -= r->size;
    g_table->Remove(addr);
  }
}

// Start of the heap block containing p (p itself for a block start), or 0 if p is not in
// a block the allocator handed out. REQUIRES g_lock (so the block cannot be freed under a
// recorded pointer).
uintptr_t BlockStart(uintptr_t p) { return introspection::FindHeapBlock(p).start; }

AllocRecord* FindObjectLocked(const void* ptr) {
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  if (AllocRecord* r = g_table->Find(p)) return r;
  const uintptr_t start = BlockStart(p);
  if (start == 0) return nullptr;
  AllocRecord* r = g_table->Find(start);
  return r != nullptr && p - start < r->size ? r : nullptr;
}

void ForkPrepare() { g_lock.Lock(); }
void ForkParent() { g_lock.Unlock(); }
void ForkChild() { g_lock.ResetAfterFork(); }

// Objects that are roots by policy: ignored, made under a Disabler, made before main in
// "minimal", or allocated by the dynamic loader (TLS blocks, DTVs, link maps: it keeps
// its own pointers to them, partly in forms no scan can follow) or by an ignored library.
void ClassifyRoots(LivenessScan* scan, const MappedArray<ModuleInfo>& mods) {
  MappedArray<uint8_t> memo;  // per stack: 0 unknown, 1 not a root, 2 root
  memo.Resize(g_stacks->count());
  const bool minimal = g_flags.mode == Mode::kMinimal;
  for (size_t i = 0; i < scan->size(); ++i) {
    ScanObject& o = scan->object(i);
    const AllocRecord& r = *o.record;
    bool root = (r.flags & (kIgnored | kDisabled)) != 0 || (minimal && r.serial < g_main_serial);
    if (!root && r.stack < memo.size()) {
      uint8_t& m = memo[r.stack];
      if (m == 0) {
        const uintptr_t* pcs;
        const int depth = g_stacks->Get(r.stack, &pcs);
        bool yes = false;
        for (int f = 0; f < depth && !yes; ++f) {
          const ModuleInfo* mod = ModuleOf(mods, pcs[f]);
          if (mod == nullptr) continue;
          yes = (f == 0 && mod->loader) || mod->ignored;
        }
        m = yes ? 2 : 1;
      }
      root = m == 2;
    }
    o.root = root;
  }
}

// ---- checking ----

struct CheckResult {
  bool ok = true;
  uint64_t leaked_bytes = 0;
  uint64_t leaked_objects = 0;
};

TCM_NOINLINE CheckResult RunCheck(const char* name, uint64_t start_serial, bool brief, bool is_main,
                                  uintptr_t self_sp) {
  CheckResult result;
  MappedArray<ModuleInfo> modules;
  CollectModules(g_opts->ignore_libs, &modules);  // before the lock: takes the dynamic loader's lock

  ScanConfig config;
  config.global_live = g_flags.global_live;
  config.thread_live = g_flags.thread_live;
  config.source_alignment = static_cast<size_t>(g_flags.source_alignment);
  config.max_pointer_offset = g_opts->max_pointer_offset;
  config.self_sp = self_sp;
  config.self_tp = reinterpret_cast<uintptr_t>(__builtin_thread_pointer());
  config.tcb_size = g_tcb_size;
  config.self_altstack = os::AltSignalStack();

  LivenessScan scan;
  ThreadList threads;
  LeakSet leaks;
  ScanStats stats;
  bool stopped = false, mapped = false, built = false;
  int alignment_verdict = 0;  // 1: leaks vanish with alignment 1; 2: they stay
  uint64_t live_objects, live_bytes, recorded;
  int other_threads = 0, not_stopped = 0;
  {
    g_lock.Lock();
    introspection::LockAllocator();
    built = scan.Build(g_table);
    scan.ExcludeFromRoots(g_table->Extent());
    if (built) {
      ClassifyRoots(&scan, modules);
      stopped = threads.StopAll();
      mapped = scan.GatherMemoryMap();
    }
    if (built && mapped) {
      scan.Flood(config, modules.data(), modules.size(), threads, &stats);
      for (size_t i = 0; i < scan.size(); ++i) {
        const ScanObject& o = scan.object(i);
        if (o.live || o.root || o.record->serial < start_serial) continue;
        leaks.Add(Reveal(o.start), o.record->size, o.record->stack);
      }
      if (!leaks.empty() && g_opts->test_pointer_alignment && config.source_alignment > 1) {
        ScanConfig any = config;
        any.source_alignment = 1;
        ScanStats ignored;
        scan.Flood(any, modules.data(), modules.size(), threads, &ignored);
        bool still = false;
        for (size_t i = 0; i < scan.size() && !still; ++i) {
          const ScanObject& o = scan.object(i);
          still = !o.live && !o.root && o.record->serial >= start_serial;
        }
        alignment_verdict = still ? 2 : 1;
      }
      leaks.Finish(*g_stacks);
    }
    live_objects = g_table->count();
    live_bytes = g_live_bytes;
    recorded = g_serial;
    other_threads = threads.count();
    not_stopped = threads.not_stopped();
    threads.ResumeAll();
    introspection::UnlockAllocator();
    g_lock.Unlock();
  }

  if (&IsHeapProfilerRunning != nullptr && IsHeapProfilerRunning())
    Say("Heap checker: the heap profiler is running; its records of every object may hide leaks from this "
        "check\n");
  if (!built || !mapped) {
    Log("heap checker: check \"%s\" skipped: %s", name,
        !built ? "out of memory" : "cannot read /proc/self/maps");
    return result;
  }
  if (g_opts->verbose > 0) {
    Say("Heap check \"%s\": %lu allocations recorded, %lu objects live, %zu root ranges (%zu bytes), %d other threads "
        "(%d not stopped), %zu exited threads' stacks skipped, %s\n",
        name, static_cast<unsigned long>(recorded), static_cast<unsigned long>(live_objects), stats.root_ranges, stats.root_bytes, other_threads,
        not_stopped, stats.dead_stacks,
        stats.copied_safely ? "roots copied with process_vm_readv" : "roots read directly");
  }
  if (leaks.empty()) {
    if (!is_main || g_opts->verbose > 0)
      Say("No leaks found for check \"%s\" (but no 100%% guarantee that there aren't any): "
          "found %lu reachable heap objects of %lu bytes\n",
          name, static_cast<unsigned long>(live_objects), static_cast<unsigned long>(live_bytes));
    return result;
  }
  result.ok = false;
  result.leaked_bytes = leaks.total_bytes();
  result.leaked_objects = leaks.total_objects();

  char path[512];
  snprintf(path, sizeof(path), "%s/%s.%d.%s-end.heap", g_opts->dump_directory, program_invocation_short_name,
           g_pid, name);
  ReportOptions options;
  options.check_name = name;
  options.profile_path = path;
  options.program_path = program_invocation_name;
  options.pprof_path = g_opts->pprof_path;
  options.max_leaks = static_cast<int>(g_opts->max_leaks);
  options.brief = brief;
  options.identify = g_opts->identify_leaks;
  ReportLeaks(leaks, options);
  if (!stopped)
    Say("Heap checker: could not stop the other threads for the scan; objects only they reference may be "
        "among the leaks reported\n");
  else if (not_stopped > 0)
    Say("Heap checker: %d thread(s) could not be stopped for the scan (they block signals); objects only "
        "their registers referenced may be among the leaks reported\n",
        not_stopped);
  if (g_untracked > 0)
    Say("Heap checker: %lu allocations could not be recorded (out of memory for the checker's table)\n",
        static_cast<unsigned long>(g_untracked));
  if (alignment_verdict == 1)
    Say("Found no leaks without pointer alignment: something might be placing pointers at unaligned "
        "addresses! This needs to be fixed.\n");
  else if (alignment_verdict == 2)
    Say("Found leaks without pointer alignment as well: unaligned pointers must not be the cause of leaks.\n");
  return result;
}

// The entry to every check: spills the caller's callee-saved registers into this frame
// and scans the stack from here up, so the caller's variables are roots while the
// checker's own frames (below) are not.
TCM_NOINLINE CheckResult CheckHere(const char* name, uint64_t start_serial, bool brief, bool is_main) {
  __builtin_unwind_init();
  uintptr_t sp;
  asm volatile("mov %%rsp, %0" : "=r"(sp));
  CheckResult r = RunCheck(name, start_serial, brief, is_main, sp);
  asm volatile("" ::: "memory");  // keep the call from becoming a tail call (the frame must stay)
  return r;
}

// Zeroes the dead stack below the caller's frame. The frames the whole-program check
// then calls down to CheckHere, where the scan of this stack starts, are laid over it,
// and the words they never write (padding, unused slots) are scanned as roots like the
// rest of a live frame: without this they could hold whatever the program left there,
// such as the last copies of a leaked block's address (the stale_stack scenario, reported
// or not depending on which of the allocator's paths had happened to clear that memory at
// exit). Those frames take under 256 bytes (-fstack-usage: DoNoLeaks 48, CheckHere 64, the
// cleanups return before); 4 KiB covers them with room, and the check's own frames below
// CheckHere are not scanned.
TCM_NOINLINE void ClearDeadStackBelow() {
  char area[4 * 1024];
  __builtin_memset(area, 0, sizeof area);
  asm volatile("" : : "r"(area) : "memory");  // the stores must happen
}

void MainCheckAtExit() {
  bool expected = true;
  if (!g_main_check_pending.compare_exchange_strong(expected, false)) return;
  if (os::GetPid() != g_pid) return;  // a forked child: the parent does the checking
  ClearDeadStackBelow();
  HeapCleaner::RunHeapCleanups();
  if (g_main_checker->NoLeaks()) return;
  Say("Exiting with error code (instead of crashing) because of whole-program memory leaks\n");
  fflush(nullptr);  // the program's buffered output must not be lost with _exit
  _exit(1);
}

void Init() {
  if (g_initialized) return;
  g_initialized = true;
  // The flags come from the options table (api/options.h), parsed by the allocator's
  // initialisation; the allocator registers its fork handlers there too, and ours must come
  // later so that they run first in the prepare phase (checker lock before allocator locks).
  const Options& options = introspection::AllocatorOptions();
  const char* mode = options.heap_checker.level;
  if (mode[0] == '\0') return;
  if (os::IsSetuid()) {
    Log("heap checker: ignoring HEAPCHECK in a setuid program (it writes files)");
    return;
  }
  if (options.heap_profiler.prefix[0] != '\0') {
    // The profiler records every live object's address in its own memory, which the scan
    // would find and take for pointers: every object would look reachable.
    Log("heap checker: HEAPCHECK is ignored while HEAPPROFILE is set (run them separately)");
    return;
  }
  if (!ParseMode(mode, &g_flags.mode)) {
    Log("heap checker: HEAPCHECK=%s is not one of minimal, normal, strict, draconian, as-is, local; "
        "heap checking is off", mode);
    return;
  }
  LoadFlags(options.heap_checker, &g_flags);
  g_opts = &options.heap_checker;
  g_pid = os::GetPid();
  if (const auto* size = static_cast<const uint32_t*>(os::GlobalSymbol("_thread_db_sizeof_pthread")))
    g_tcb_size = *size;
  g_table = new (g_table_storage) AllocTable();
  g_stacks = new (g_stacks_storage) StackTable();
  g_main_checker = HeapLeakCheckerAccess::MakeMain(g_main_storage);
  pthread_atfork(&ForkPrepare, &ForkParent, &ForkChild);
  // A pointer one past a block's end must not keep the next block alive (a vector whose
  // capacity fills its block, an arena's limit): every block gets a byte more.
  introspection::SetHookedTailPad(1);
  g_active.store(true, std::memory_order_release);
  if (MallocHook_AddNewHook(&NewHook) == 0 || MallocHook_AddDeleteHook(&DeleteHook) == 0) {
    g_active.store(false, std::memory_order_release);
    Log("heap checker: no free malloc hook slot; heap checking is off");
    return;
  }
  InitStackCapture();
  g_main_check_pending.store(g_flags.mode != Mode::kLocal, std::memory_order_release);
  Say("WARNING: Perftools heap leak checker is active -- Performance may suffer\n");
}

// Runs before the program's constructors (they may allocate, and leak).
__attribute__((constructor(101))) void InitAtLoad() { Init(); }

// The after-destructors check, and the fallback when main() was never seen.
__attribute__((destructor)) void CheckAtUnload() {
  if (g_active.load(std::memory_order_acquire)) MainCheckAtExit();
}

MainFunction g_real_main = nullptr;

int MainWrapper(int argc, char** argv, char** envp) {
  OnMainStart();
  return g_real_main(argc, argv, envp);
}

}  // namespace

MainFunction WrapMain(MainFunction main) {
  g_real_main = main;
  return &MainWrapper;
}

void OnMainStart() {
  if (!g_active.load(std::memory_order_acquire)) return;
  {
    SpinLockHolder h(&g_lock);
    g_main_serial = g_serial + 1;
  }
  if (g_main_check_pending.load(std::memory_order_acquire) && !g_flags.after_destructors) atexit(&MainCheckAtExit);
}

}  // namespace tcm::heapcheck

// ---- the public interface ----

using namespace tcm;
using namespace tcm::heapcheck;

HeapLeakChecker::HeapLeakChecker()
    : name_("_main_"), name_page_(nullptr), start_serial_(0), bytes_leaked_(0), objects_leaked_(0),
      active_(true), has_checked_(false), reserved_(nullptr) {}

namespace {
// Names are copied to a page of their own: the checker may not use malloc, and the object
// (56 bytes, gperftools' size) has no room for them. Checkers are few and long-lived.
constexpr size_t kNamePage = 4096;
constexpr size_t kMaxNameLength = 1023;  // longer names are truncated (they name files)
}  // namespace

HeapLeakChecker::HeapLeakChecker(const char* name)
    : name_(""), name_page_(nullptr), start_serial_(0), bytes_leaked_(0), objects_leaked_(0),
      active_(false), has_checked_(false), reserved_(nullptr) {
  if (name == nullptr) name = "";
  if (void* page = os::MapAnonymous(kNamePage)) {
    size_t n = strnlen(name, kMaxNameLength);
    memcpy(page, name, n);  // the page is zero-filled: already NUL-terminated
    name_page_ = page;
    name_ = static_cast<const char*>(page);
  } else {
    Log("heap checker: no memory for the name of checker \"%.64s\"; it is unnamed", name);
  }
  if (!g_active.load(std::memory_order_acquire)) {
    if (!g_warned_inactive.exchange(true))
      Say("Heap checker is not active, hence checker \"%s\" will do nothing! "
          "(To activate set the HEAPCHECK environment variable.)\n",
          name_);
    return;
  }
  SpinLockHolder h(&g_lock);
  start_serial_ = g_serial + 1;
  active_ = true;
}

HeapLeakChecker::~HeapLeakChecker() {
  if (name_page_ != nullptr) os::Unmap(name_page_, kNamePage);
}

bool HeapLeakChecker::DoNoLeaks(ShouldSymbolize should_symbolize) {
  has_checked_ = true;
  if (!active_ || !g_active.load(std::memory_order_acquire)) return true;
  const bool brief = should_symbolize == BRIEF_REPORT;
  const CheckResult r = CheckHere(name_, start_serial_, brief, this == g_main_checker);
  bytes_leaked_ = static_cast<ssize_t>(r.leaked_bytes);
  objects_leaked_ = static_cast<ssize_t>(r.leaked_objects);
  return r.ok;
}

ssize_t HeapLeakChecker::BytesLeaked() const {
  if (!has_checked_) Log("heap checker: BytesLeaked() of \"%s\" before any NoLeaks()", name_);
  return bytes_leaked_;
}

ssize_t HeapLeakChecker::ObjectsLeaked() const {
  if (!has_checked_) Log("heap checker: ObjectsLeaked() of \"%s\" before any NoLeaks()", name_);
  return objects_leaked_;
}

bool HeapLeakChecker::IsActive() { return g_active.load(std::memory_order_acquire); }

HeapLeakChecker* HeapLeakChecker::GlobalChecker() {
  return g_active.load(std::memory_order_acquire) && g_flags.mode != Mode::kLocal ? g_main_checker : nullptr;
}

bool HeapLeakChecker::NoGlobalLeaks() {
  HeapLeakChecker* main = GlobalChecker();
  return main == nullptr || main->NoLeaks();
}

void HeapLeakChecker::CancelGlobalCheck() {
  if (g_main_check_pending.exchange(false) && g_opts->verbose > 0)
    Say("Canceling the automatic at-exit whole-program memory leak check\n");
}

HeapLeakChecker::Disabler::Disabler() { ++tls_disabled; }
HeapLeakChecker::Disabler::~Disabler() {
  if (tls_disabled > 0) --tls_disabled;
}

void HeapLeakChecker::DoIgnoreObject(const void* ptr) {
  if (!g_active.load(std::memory_order_acquire) || ptr == nullptr) return;
  SpinLockHolder h(&g_lock);
  AllocRecord* r = FindObjectLocked(ptr);
  if (r == nullptr) {
    Log("heap checker: IgnoreObject(%p): no live heap object there", ptr);
    return;
  }
  if (r->flags & kIgnored) Log("heap checker: IgnoreObject(%p): already ignored", ptr);
  r->flags |= kIgnored;
}

void HeapLeakChecker::UnIgnoreObject(const void* ptr) {
  if (!g_active.load(std::memory_order_acquire) || ptr == nullptr) return;
  SpinLockHolder h(&g_lock);
  AllocRecord* r = FindObjectLocked(ptr);
  if (r == nullptr || (r->flags & kIgnored) == 0) {
    Log("heap checker: UnIgnoreObject(%p): not an ignored heap object", ptr);
    return;
  }
  r->flags &= ~uint32_t{kIgnored};
}

void HeapLeakChecker::DisableChecksIn(const char* pattern) {
  Log("heap checker: DisableChecksIn(%s) is ignored (use HEAP_CHECK_IGNORE_LIBS)", pattern);
}

// A static link only takes archive members something refers to: the library's CMake target
// makes every program refer to this symbol, so HEAPCHECK works without the API being used.
extern "C" TCM_EXPORT const int TCMallocHeapCheckerLinked = 1;

// ---- REGISTER_HEAPCHECK_CLEANUP ----

namespace {
constexpr int kMaxCleanups = 256;
constinit SpinLock g_cleanup_lock;
constinit HeapCleaner::void_function g_cleanups[kMaxCleanups] = {};
constinit int g_num_cleanups = 0;
}  // namespace

HeapCleaner::HeapCleaner(void_function f) {
  SpinLockHolder h(&g_cleanup_lock);
  if (g_num_cleanups < kMaxCleanups) g_cleanups[g_num_cleanups++] = f;
  else Log("heap checker: more than %d REGISTER_HEAPCHECK_CLEANUPs; the rest are not run", kMaxCleanups);
}

void HeapCleaner::RunHeapCleanups() {
  // Each runs once, in registration order, without the lock (a cleanup may free memory,
  // and so call our hooks).
  for (;;) {
    void_function f = nullptr;
    {
      SpinLockHolder h(&g_cleanup_lock);
      for (int i = 0; i < g_num_cleanups && f == nullptr; ++i) {
        f = g_cleanups[i];
        g_cleanups[i] = nullptr;
      }
    }
    if (f == nullptr) return;
    f();
  }
}
