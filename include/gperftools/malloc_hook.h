// Allocation and address-space hooks: functions called on every allocation and
// deallocation, and around the program's mmap/munmap/mremap/sbrk calls (libtcmalloc only).
// While no new/delete hook is installed they cost the malloc/free fast paths nothing;
// installing one routes every call through the slow path, which invokes the hooks.
//
// The class has the members of gperftools 2.10's MallocHook, with the same signatures, so
// programs built against either header link against either library.
#ifndef TCMALLOC_MALLOC_HOOK_H_
#define TCMALLOC_MALLOC_HOOK_H_

#include <stddef.h>
#include <sys/types.h>

extern "C" {
#include <gperftools/malloc_hook_c.h>
}

class PERFTOOLS_DLL_DECL MallocHook {
 public:
  typedef MallocHook_NewHook NewHook;
  typedef MallocHook_DeleteHook DeleteHook;
  typedef MallocHook_PreMmapHook PreMmapHook;
  typedef MallocHook_MmapReplacement MmapReplacement;
  typedef MallocHook_MmapHook MmapHook;
  typedef MallocHook_MunmapReplacement MunmapReplacement;
  typedef MallocHook_MunmapHook MunmapHook;
  typedef MallocHook_MremapHook MremapHook;
  typedef MallocHook_PreSbrkHook PreSbrkHook;
  typedef MallocHook_SbrkHook SbrkHook;

  // Add/Remove return false when the list is full or the hook was not installed.
  static bool AddNewHook(NewHook hook) { return MallocHook_AddNewHook(hook) != 0; }
  static bool RemoveNewHook(NewHook hook) { return MallocHook_RemoveNewHook(hook) != 0; }
  static bool AddDeleteHook(DeleteHook hook) { return MallocHook_AddDeleteHook(hook) != 0; }
  static bool RemoveDeleteHook(DeleteHook hook) { return MallocHook_RemoveDeleteHook(hook) != 0; }
  static bool AddPreMmapHook(PreMmapHook hook) { return MallocHook_AddPreMmapHook(hook) != 0; }
  static bool RemovePreMmapHook(PreMmapHook hook) { return MallocHook_RemovePreMmapHook(hook) != 0; }
  static bool AddMmapHook(MmapHook hook) { return MallocHook_AddMmapHook(hook) != 0; }
  static bool RemoveMmapHook(MmapHook hook) { return MallocHook_RemoveMmapHook(hook) != 0; }
  static bool AddMunmapHook(MunmapHook hook) { return MallocHook_AddMunmapHook(hook) != 0; }
  static bool RemoveMunmapHook(MunmapHook hook) { return MallocHook_RemoveMunmapHook(hook) != 0; }
  static bool AddMremapHook(MremapHook hook) { return MallocHook_AddMremapHook(hook) != 0; }
  static bool RemoveMremapHook(MremapHook hook) { return MallocHook_RemoveMremapHook(hook) != 0; }
  static bool AddPreSbrkHook(PreSbrkHook hook) { return MallocHook_AddPreSbrkHook(hook) != 0; }
  static bool RemovePreSbrkHook(PreSbrkHook hook) { return MallocHook_RemovePreSbrkHook(hook) != 0; }
  static bool AddSbrkHook(SbrkHook hook) { return MallocHook_AddSbrkHook(hook) != 0; }
  static bool RemoveSbrkHook(SbrkHook hook) { return MallocHook_RemoveSbrkHook(hook) != 0; }

  // One replacement of each kind at a time: Set fails while another is set.
  static bool SetMmapReplacement(MmapReplacement hook) { return MallocHook_SetMmapReplacement(hook) != 0; }
  static bool RemoveMmapReplacement(MmapReplacement hook) { return MallocHook_RemoveMmapReplacement(hook) != 0; }
  static bool SetMunmapReplacement(MunmapReplacement hook) { return MallocHook_SetMunmapReplacement(hook) != 0; }
  static bool RemoveMunmapReplacement(MunmapReplacement hook) { return MallocHook_RemoveMunmapReplacement(hook) != 0; }

  // Run the installed hooks, for code that maps memory behind the hooks' back (a custom
  // system allocator, say) and wants them told.
  static void InvokeNewHook(const void* p, size_t s) { InvokeNewHookSlow(p, s); }
  static void InvokeDeleteHook(const void* p) { InvokeDeleteHookSlow(p); }
  static void InvokePreMmapHook(const void* start, size_t size, int protection, int flags, int fd,
                                off_t offset) {
    InvokePreMmapHookSlow(start, size, protection, flags, fd, offset);
  }
  // True if a replacement handled the call (then *result holds its result).
  static bool InvokeMmapReplacement(const void* start, size_t size, int protection, int flags,
                                    int fd, off_t offset, void** result) {
    return InvokeMmapReplacementSlow(start, size, protection, flags, fd, offset, result);
  }
  static void InvokeMmapHook(const void* result, const void* start, size_t size, int protection,
                             int flags, int fd, off_t offset) {
    InvokeMmapHookSlow(result, start, size, protection, flags, fd, offset);
  }
  static bool InvokeMunmapReplacement(const void* p, size_t size, int* result) {
    return InvokeMunmapReplacementSlow(p, size, result);
  }
  static void InvokeMunmapHook(const void* p, size_t size) { InvokeMunmapHookSlow(p, size); }
  static void InvokeMremapHook(const void* result, const void* old_addr, size_t old_size,
                               size_t new_size, int flags, const void* new_addr) {
    InvokeMremapHookSlow(result, old_addr, old_size, new_size, flags, new_addr);
  }
  static void InvokePreSbrkHook(ptrdiff_t increment) { InvokePreSbrkHookSlow(increment); }
  static void InvokeSbrkHook(const void* result, ptrdiff_t increment) {
    InvokeSbrkHookSlow(result, increment);
  }

  static int GetCallerStackTrace(void** result, int max_depth, int skip_count) {
    return MallocHook_GetCallerStackTrace(result, max_depth, skip_count);
  }

  // The system calls themselves, with no hook or replacement run.
  static void* UnhookedMMap(void* start, size_t length, int prot, int flags, int fd, off_t offset);
  static int UnhookedMUnmap(void* start, size_t length);

  // Deprecated single-hook interface: Set replaces the one "set" hook of a kind and returns
  // the previous one. The Get functions are declared, as in gperftools, but not defined
  // (gperftools defines them only in an internal header): use the Set functions' result.
  static NewHook GetNewHook();
  static NewHook SetNewHook(NewHook hook) { return MallocHook_SetNewHook(hook); }
  static DeleteHook GetDeleteHook();
  static DeleteHook SetDeleteHook(DeleteHook hook) { return MallocHook_SetDeleteHook(hook); }
  static PreMmapHook GetPreMmapHook();
  static PreMmapHook SetPreMmapHook(PreMmapHook hook) { return MallocHook_SetPreMmapHook(hook); }
  static MmapHook GetMmapHook();
  static MmapHook SetMmapHook(MmapHook hook) { return MallocHook_SetMmapHook(hook); }
  static MunmapHook GetMunmapHook();
  static MunmapHook SetMunmapHook(MunmapHook hook) { return MallocHook_SetMunmapHook(hook); }
  static MremapHook GetMremapHook();
  static MremapHook SetMremapHook(MremapHook hook) { return MallocHook_SetMremapHook(hook); }
  static PreSbrkHook GetPreSbrkHook();
  static PreSbrkHook SetPreSbrkHook(PreSbrkHook hook) { return MallocHook_SetPreSbrkHook(hook); }
  static SbrkHook GetSbrkHook();
  static SbrkHook SetSbrkHook(SbrkHook hook) { return MallocHook_SetSbrkHook(hook); }

 private:
  // Exported out-of-line bodies of the Invoke functions (gperftools' names and signatures).
  static void InvokeNewHookSlow(const void* p, size_t s);
  static void InvokeDeleteHookSlow(const void* p);
  static void InvokePreMmapHookSlow(const void* start, size_t size, int protection, int flags,
                                    int fd, off_t offset);
  static void InvokeMmapHookSlow(const void* result, const void* start, size_t size,
                                 int protection, int flags, int fd, off_t offset);
  static bool InvokeMmapReplacementSlow(const void* start, size_t size, int protection, int flags,
                                        int fd, off_t offset, void** result);
  static void InvokeMunmapHookSlow(const void* p, size_t size);
  static bool InvokeMunmapReplacementSlow(const void* p, size_t size, int* result);
  static void InvokeMremapHookSlow(const void* result, const void* old_addr, size_t old_size,
                                   size_t new_size, int flags, const void* new_addr);
  static void InvokePreSbrkHookSlow(ptrdiff_t increment);
  static void InvokeSbrkHookSlow(const void* result, ptrdiff_t increment);
};

#endif  // TCMALLOC_MALLOC_HOOK_H_
