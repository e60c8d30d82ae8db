/* C interface of the allocation and address-space hooks (see malloc_hook.h).
 *
 * Add/Remove/Set*Replacement return 1 on success and 0 on failure (the list is full, the
 * hook was not installed, or a replacement is already set). Set*Hook (deprecated) replace
 * the one "singular" hook of a kind and return the previous one.
 *
 * New/delete hooks fire in both libraries. The mmap, munmap, mremap and sbrk hooks fire for
 * the program's calls of those functions, which libtcmalloc intercepts (libtcmalloc_minimal
 * does not; see README "Compatibility"); the allocator's own mappings are not reported. */
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

/* Stack of the caller, innermost first, skipping skip_count frames. Returns the depth. */
PERFTOOLS_DLL_DECL int MallocHook_GetCallerStackTrace(void** result, int max_depth, int skip_count);

/* After each allocation: the block and the requested size (ptr is NULL when it failed).
 * Hooks run on the allocating thread and may allocate (their own calls are not hooked). */
typedef void (*MallocHook_NewHook)(const void* ptr, size_t size);
PERFTOOLS_DLL_DECL int MallocHook_AddNewHook(MallocHook_NewHook hook);
PERFTOOLS_DLL_DECL int MallocHook_RemoveNewHook(MallocHook_NewHook hook);

/* Before each deallocation, with the block (may be NULL). */
typedef void (*MallocHook_DeleteHook)(const void* ptr);
PERFTOOLS_DLL_DECL int MallocHook_AddDeleteHook(MallocHook_DeleteHook hook);
PERFTOOLS_DLL_DECL int MallocHook_RemoveDeleteHook(MallocHook_DeleteHook hook);

/* Before mmap, with its arguments. */
typedef void (*MallocHook_PreMmapHook)(const void* start, size_t size, int protection, int flags,
                                       int fd, off_t offset);
PERFTOOLS_DLL_DECL int MallocHook_AddPreMmapHook(MallocHook_PreMmapHook hook);
PERFTOOLS_DLL_DECL int MallocHook_RemovePreMmapHook(MallocHook_PreMmapHook hook);

/* After mmap: its result (MAP_FAILED on failure) and its arguments. */
typedef void (*MallocHook_MmapHook)(const void* result, const void* start, size_t size,
                                    int protection, int flags, int fd, off_t offset);
PERFTOOLS_DLL_DECL int MallocHook_AddMmapHook(MallocHook_MmapHook hook);
PERFTOOLS_DLL_DECL int MallocHook_RemoveMmapHook(MallocHook_MmapHook hook);

/* Instead of the system call: returns nonzero after storing mmap's result in *result, or 0
 * to let the real mmap run. One replacement at a time. */
typedef int (*MallocHook_MmapReplacement)(const void* start, size_t size, int protection,
                                          int flags, int fd, off_t offset, void** result);
PERFTOOLS_DLL_DECL int MallocHook_SetMmapReplacement(MallocHook_MmapReplacement hook);
PERFTOOLS_DLL_DECL int MallocHook_RemoveMmapReplacement(MallocHook_MmapReplacement hook);

/* Before munmap, with its arguments. */
typedef void (*MallocHook_MunmapHook)(const void* ptr, size_t size);
PERFTOOLS_DLL_DECL int MallocHook_AddMunmapHook(MallocHook_MunmapHook hook);
PERFTOOLS_DLL_DECL int MallocHook_RemoveMunmapHook(MallocHook_MunmapHook hook);

/* Instead of the system call: returns nonzero after storing munmap's result in *result. */
typedef int (*MallocHook_MunmapReplacement)(const void* ptr, size_t size, int* result);
PERFTOOLS_DLL_DECL int MallocHook_SetMunmapReplacement(MallocHook_MunmapReplacement hook);
PERFTOOLS_DLL_DECL int MallocHook_RemoveMunmapReplacement(MallocHook_MunmapReplacement hook);

/* After mremap: its result and its arguments (new_addr is meaningful with MREMAP_FIXED). */
typedef void (*MallocHook_MremapHook)(const void* result, const void* old_addr, size_t old_size,
                                      size_t new_size, int flags, const void* new_addr);
PERFTOOLS_DLL_DECL int MallocHook_AddMremapHook(MallocHook_MremapHook hook);
PERFTOOLS_DLL_DECL int MallocHook_RemoveMremapHook(MallocHook_MremapHook hook);

/* Before sbrk, with its increment. */
typedef void (*MallocHook_PreSbrkHook)(ptrdiff_t increment);
PERFTOOLS_DLL_DECL int MallocHook_AddPreSbrkHook(MallocHook_PreSbrkHook hook);
PERFTOOLS_DLL_DECL int MallocHook_RemovePreSbrkHook(MallocHook_PreSbrkHook hook);

/* After sbrk: its result (the old break, or (void*)-1) and its increment. */
typedef void (*MallocHook_SbrkHook)(const void* result, ptrdiff_t increment);
PERFTOOLS_DLL_DECL int MallocHook_AddSbrkHook(MallocHook_SbrkHook hook);
PERFTOOLS_DLL_DECL int MallocHook_RemoveSbrkHook(MallocHook_SbrkHook hook);

/* Deprecated single-hook interface: replaces the one "set" hook, returns the previous. */
PERFTOOLS_DLL_DECL MallocHook_NewHook MallocHook_SetNewHook(MallocHook_NewHook hook);
PERFTOOLS_DLL_DECL MallocHook_DeleteHook MallocHook_SetDeleteHook(MallocHook_DeleteHook hook);
PERFTOOLS_DLL_DECL MallocHook_PreMmapHook MallocHook_SetPreMmapHook(MallocHook_PreMmapHook hook);
PERFTOOLS_DLL_DECL MallocHook_MmapHook MallocHook_SetMmapHook(MallocHook_MmapHook hook);
PERFTOOLS_DLL_DECL MallocHook_MunmapHook MallocHook_SetMunmapHook(MallocHook_MunmapHook hook);
PERFTOOLS_DLL_DECL MallocHook_MremapHook MallocHook_SetMremapHook(MallocHook_MremapHook hook);
PERFTOOLS_DLL_DECL MallocHook_PreSbrkHook MallocHook_SetPreSbrkHook(MallocHook_PreSbrkHook hook);
PERFTOOLS_DLL_DECL MallocHook_SbrkHook MallocHook_SetSbrkHook(MallocHook_SbrkHook hook);

#ifdef __cplusplus
}
#endif

#endif /* TCMALLOC_MALLOC_HOOK_C_H_ */
