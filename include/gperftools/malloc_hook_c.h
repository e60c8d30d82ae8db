/* C interface of the allocation hooks (see malloc_hook.h). Every function returns 1 on
 * success and 0 on failure (the hook list is full, or the hook was not installed). */
#ifndef TCMALLOC_MALLOC_HOOK_C_H_
#define TCMALLOC_MALLOC_HOOK_C_H_

#include <stddef.h>
#include <sys/types.h>

#ifndef PERFTOOLS_DLL_DECL
#define PERFTOOLS_DLL_DECL __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Called after each allocation with the block and the requested size (ptr may be NULL
 * when the allocation failed), and before each deallocation with the block (may be NULL).
 * Hooks run on the allocating thread and may allocate (their own calls are not hooked
 * again on that thread). */
typedef void (*MallocHook_NewHook)(const void* ptr, size_t size);
typedef void (*MallocHook_DeleteHook)(const void* ptr);

PERFTOOLS_DLL_DECL int MallocHook_AddNewHook(MallocHook_NewHook hook);
PERFTOOLS_DLL_DECL int MallocHook_RemoveNewHook(MallocHook_NewHook hook);
PERFTOOLS_DLL_DECL int MallocHook_AddDeleteHook(MallocHook_DeleteHook hook);
PERFTOOLS_DLL_DECL int MallocHook_RemoveDeleteHook(MallocHook_DeleteHook hook);

/* Deprecated single-hook interface: replaces the one "set" hook, returns the previous. */
PERFTOOLS_DLL_DECL MallocHook_NewHook MallocHook_SetNewHook(MallocHook_NewHook hook);
PERFTOOLS_DLL_DECL MallocHook_DeleteHook MallocHook_SetDeleteHook(MallocHook_DeleteHook hook);

/* Stack of the caller, innermost first, skipping skip_count frames. Returns the depth. */
PERFTOOLS_DLL_DECL int MallocHook_GetCallerStackTrace(void** result, int max_depth, int skip_count);

#ifdef __cplusplus
}
#endif

#endif /* TCMALLOC_MALLOC_HOOK_C_H_ */
