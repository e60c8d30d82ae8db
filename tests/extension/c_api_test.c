/* The C interface, compiled as C the way a C program uses it. Exit status 0 on success. */
#include <gperftools/malloc_extension_c.h>
#include <gperftools/malloc_hook_c.h>
#include <gperftools/tcmalloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                              \
  do {                                                           \
    if (!(cond)) {                                               \
      fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond); \
      return 1;                                                  \
    }                                                            \
  } while (0)

static int hook_calls;
static void on_new(const void* p, size_t size) {
  (void)p;
  (void)size;
  hook_calls++;
}

int main(void) {
  size_t v = 0;
  char buf[4096];
  int blocks, hist[kMallocExtensionHistogramSize];
  size_t total;
  void* p = malloc(1000);
  CHECK(MallocExtension_GetNumericProperty("generic.current_allocated_bytes", &v) && v >= 1000);
  CHECK(!MallocExtension_GetNumericProperty("nonsense", &v));
  CHECK(MallocExtension_SetNumericProperty("tcmalloc.max_total_thread_cache_bytes", 32 << 20));
  CHECK(MallocExtension_GetNumericProperty("tcmalloc.max_total_thread_cache_bytes", &v) && v == (32 << 20));
  MallocExtension_GetStats(buf, sizeof(buf));
  CHECK(strstr(buf, "Bytes in use by application") != NULL);
  CHECK(MallocExtension_GetOwnership(p) == MallocExtension_kOwned);
  CHECK(MallocExtension_GetOwnership(&v) == MallocExtension_kNotOwned);
  CHECK(MallocExtension_GetAllocatedSize(p) >= 1000);
  CHECK(MallocExtension_GetEstimatedAllocatedSize(1000) == tc_nallocx(1000, 0));
  CHECK(MallocExtension_VerifyAllMemory());
  CHECK(MallocExtension_VerifyMallocMemory(p));
  CHECK(MallocExtension_VerifyNewMemory(p) && MallocExtension_VerifyArrayNewMemory(p));
  CHECK(MallocExtension_MallocMemoryStats(&blocks, &total, hist) && blocks > 0 && total >= 1000);
  MallocExtension_SetMemoryReleaseRate(2.0);
  CHECK(MallocExtension_GetMemoryReleaseRate() == 2.0);
  free(malloc(8 << 20));
  MallocExtension_ReleaseToSystem(1 << 20);
  MallocExtension_ReleaseFreeMemory();
  CHECK(MallocExtension_GetNumericProperty("tcmalloc.pageheap_unmapped_bytes", &v) && v >= (8 << 20));
  MallocExtension_MarkThreadTemporarilyIdle();
  CHECK(MallocExtension_GetThreadCacheSize() == 0);
  MallocExtension_MarkThreadIdle();
  MallocExtension_MarkThreadBusy();
  CHECK(MallocHook_AddNewHook(on_new));
  free(malloc(10));
  CHECK(MallocHook_RemoveNewHook(on_new));
  free(malloc(10));
  CHECK(hook_calls == 1);
  free(p);
  puts("c api: ok");
  return 0;
}
