// Allocation hooks: functions called on every allocation and deallocation. While no hook
// is installed they cost the malloc/free fast paths nothing; installing one routes every
// call through the slow path, which invokes the hooks.
#ifndef TCMALLOC_MALLOC_HOOK_H_
#define TCMALLOC_MALLOC_HOOK_H_

#include <stddef.h>
#include <sys/types.h>

extern "C" {
#include <gperftools/malloc_hook_c.h>
}

class MallocHook {
 public:
  typedef MallocHook_NewHook NewHook;
  typedef MallocHook_DeleteHook DeleteHook;

  static bool AddNewHook(NewHook hook) { return MallocHook_AddNewHook(hook) != 0; }
  static bool RemoveNewHook(NewHook hook) { return MallocHook_RemoveNewHook(hook) != 0; }
  static bool AddDeleteHook(DeleteHook hook) { return MallocHook_AddDeleteHook(hook) != 0; }
  static bool RemoveDeleteHook(DeleteHook hook) { return MallocHook_RemoveDeleteHook(hook) != 0; }

  // Deprecated: one replaceable hook each.
  static NewHook SetNewHook(NewHook hook) { return MallocHook_SetNewHook(hook); }
  static DeleteHook SetDeleteHook(DeleteHook hook) { return MallocHook_SetDeleteHook(hook); }

  static int GetCallerStackTrace(void** result, int max_depth, int skip_count) {
    return MallocHook_GetCallerStackTrace(result, max_depth, skip_count);
  }
};

#endif  // TCMALLOC_MALLOC_HOOK_H_
