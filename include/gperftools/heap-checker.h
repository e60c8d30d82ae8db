/* The heap leak checker of the full library (libtcmalloc, not libtcmalloc_minimal).
 *
 * Whole-program checking needs no code: run the program with HEAPCHECK=minimal, normal,
 * strict or draconian, linked with -ltcmalloc or with LD_PRELOAD=libtcmalloc.so.4. At exit
 * it reports heap objects no longer reachable from the program's globals, thread stacks
 * and registers, writes a leak profile for pprof, and exits with status 1 if it found any.
 * See docs/heap-checker.md for the levels and the HEAP_CHECK_* variables.
 *
 * This header adds checks of a region of code, and ways to tell the checker about leaks
 * that are intended:
 *
 *   HeapLeakChecker check("load_config");
 *   LoadConfig();
 *   if (!check.NoLeaks()) abort();   // objects allocated since `check` and now unreachable
 *
 *   { HeapLeakChecker::Disabler off; LegacyInitThatLeaks(); }   // never reported
 *   cache = HeapLeakChecker::IgnoreObject(new Cache);           // a root from now on
 *
 * Without HEAPCHECK in the environment (or with HEAPCHECK=local: named checks only, no
 * whole-program check) every call here is cheap and checks return "no leaks".
 * Everything is thread-safe.
 */
#ifndef GPERFTOOLS_HEAP_CHECKER_H_
#define GPERFTOOLS_HEAP_CHECKER_H_

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifndef PERFTOOLS_DLL_DECL
#define PERFTOOLS_DLL_DECL __attribute__((visibility("default")))
#endif

class PERFTOOLS_DLL_DECL HeapLeakChecker {
 public:
  /* True when HEAPCHECK turned the checker on for this process. */
  static bool IsActive();

  /* The whole-program check ("_main_"), or NULL when the checker is off or in "local". */
  static HeapLeakChecker* GlobalChecker();

  /* Runs the whole-program check now (reporting as at exit). True if there are no leaks.
     It does not exit, and the at-exit check still runs unless cancelled. */
  static bool NoGlobalLeaks();

  /* Skips the at-exit whole-program check (e.g. after calling NoGlobalLeaks near the end
     of main, before objects that are known not to clean up are destroyed). */
  static void CancelGlobalCheck();

  /* Starts a named check: objects allocated from now on are the ones NoLeaks examines.
     The name is used in messages and in the profile's file name (keep it a simple word). */
  explicit HeapLeakChecker(const char* name);
  ~HeapLeakChecker();

  /* True if no object allocated since the constructor is unreachable now. Otherwise
     reports the leaks (summary, stacks, pprof command) on stderr and returns false. */
  bool NoLeaks() { return DoNoLeaks(DO_NOT_SYMBOLIZE); }
  /* The same check; the report is only the summary line. (A program built with
     gperftools' header gets NoLeaks' full report here, as gperftools gives.) */
  bool BriefNoLeaks() { return DoNoLeaks(BRIEF_REPORT); }
  /* Names kept from earlier versions of this interface; all are NoLeaks/BriefNoLeaks. */
  bool QuickNoLeaks() { return NoLeaks(); }
  bool SameHeap() { return NoLeaks(); }
  bool QuickSameHeap() { return NoLeaks(); }
  bool BriefSameHeap() { return BriefNoLeaks(); }

  /* What the last NoLeaks found: leaked bytes and objects (0 when the checker is off). */
  ssize_t BytesLeaked() const;
  ssize_t ObjectsLeaked() const;

  /* While one exists in a thread, that thread's allocations are never reported, and
     whatever they point to counts as reachable. */
  class PERFTOOLS_DLL_DECL Disabler {
   public:
    Disabler();
    ~Disabler();

   private:
    Disabler(const Disabler&);
    void operator=(const Disabler&);
  };

  /* Makes the heap object at ptr (or containing ptr) a root: neither it nor anything
     reachable from it is reported. Returns ptr. */
  template <typename T>
  static T* IgnoreObject(T* ptr) {
    DoIgnoreObject(static_cast<const void*>(const_cast<const T*>(ptr)));
    return ptr;
  }
  /* Undoes IgnoreObject. */
  static void UnIgnoreObject(const void* ptr);

  /* Accepted for source compatibility; does nothing (as in gperftools). Use
     HEAP_CHECK_IGNORE_LIBS to ignore allocations by library. */
  static void DisableChecksIn(const char* pattern);

 private:
  /* Binary compatibility with gperftools 2.10: programs built against its header call
     DoNoLeaks(ShouldSymbolize) and DoIgnoreObject from the inline functions above and
     allocate sizeof(HeapLeakChecker) == 56 bytes for a checker, so these names, types and
     the size are the same as there. BRIEF_REPORT is ours (gperftools has the first two). */
  friend struct HeapLeakCheckerAccess;
  enum ShouldSymbolize { SYMBOLIZE, DO_NOT_SYMBOLIZE, BRIEF_REPORT };
  HeapLeakChecker();  /* the whole-program checker */
  bool DoNoLeaks(ShouldSymbolize should_symbolize);
  static void DoIgnoreObject(const void* ptr);

  const char* name_;    /* a copy in name_page_, or a literal when name_page_ is NULL */
  void* name_page_;
  uint64_t start_serial_;
  ssize_t bytes_leaked_;
  ssize_t objects_leaked_;
  bool active_;
  bool has_checked_;
  void* reserved_;      /* keeps the size at gperftools' 56 bytes */

  HeapLeakChecker(const HeapLeakChecker&);
  void operator=(const HeapLeakChecker&);
};

/* Holds a pointer the checker does not follow (unlike IgnoreObject, which keeps the object
   and everything it reaches alive). */
template <class T>
class HiddenPointer {
 public:
  explicit HiddenPointer(T* t) : masked_(reinterpret_cast<uintptr_t>(t) ^ kMask) {}
  T* get() const { return reinterpret_cast<T*>(masked_ ^ kMask); }

 private:
  /* Sets the top bits, so the stored value is never a valid user-space address. */
  static const uintptr_t kMask = (static_cast<uintptr_t>(0xF03A5F7BUL) << 32) | 0xF03A5F7BUL;
  uintptr_t masked_;
};

/* Cleanup code that only runs when heap checking is on, just before the at-exit check
   (useful with "strict" and "draconian", which want globals freed):
     REGISTER_HEAPCHECK_CLEANUP(my_cache, delete g_cache; g_cache = NULL)                  */
class PERFTOOLS_DLL_DECL HeapCleaner {
 public:
  typedef void (*void_function)(void);
  explicit HeapCleaner(void_function f);
  static void RunHeapCleanups();
};

#define REGISTER_HEAPCHECK_CLEANUP(name, body)                                  \
  namespace {                                                                    \
  void heapcheck_cleanup_##name() { body; }                                      \
  static HeapCleaner heapcheck_cleaner_##name(&heapcheck_cleanup_##name);        \
  }

#endif /* GPERFTOOLS_HEAP_CHECKER_H_ */
