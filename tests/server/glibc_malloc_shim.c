/* LD_PRELOAD shim that gives a program glibc's malloc back.
 *
 * Debian's redis-server is linked against libjemalloc, so "without our library" would
 * otherwise mean jemalloc. Preloaded, these definitions come first in symbol resolution and
 * forward to glibc's own entry points (__libc_malloc & co.), so redis-server_test.sh can put
 * glibc's figures beside ours. jemalloc-only calls (mallctl, nallocx) still reach jemalloc,
 * which then simply reports on an arena nobody allocates from. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

extern void* __libc_malloc(size_t size);
extern void __libc_free(void* p);
extern void* __libc_calloc(size_t n, size_t size);
extern void* __libc_realloc(void* p, size_t size);
extern void* __libc_memalign(size_t align, size_t size);

void* malloc(size_t size) { return __libc_malloc(size); }
void free(void* p) { __libc_free(p); }
void* calloc(size_t n, size_t size) { return __libc_calloc(n, size); }
void* realloc(void* p, size_t size) { return __libc_realloc(p, size); }
void* memalign(size_t align, size_t size) { return __libc_memalign(align, size); }
void* aligned_alloc(size_t align, size_t size) { return __libc_memalign(align, size); }
int posix_memalign(void** out, size_t align, size_t size) {
  if (align == 0 || (align & (align - 1)) != 0 || align % sizeof(void*) != 0) return 22; /* EINVAL */
  void* p = __libc_memalign(align, size);
  if (p == NULL) return 12; /* ENOMEM */
  *out = p;
  return 0;
}

/* glibc exports no __libc_ name for this one: find libc's own definition through its handle
 * (a handle search starts at libc, not at the first object that defines the name). */
size_t malloc_usable_size(void* p) {
  static size_t (*libc_usable)(void*);
  if (libc_usable == NULL) {
    void* libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    if (libc != NULL) *(void**)&libc_usable = dlsym(libc, "malloc_usable_size");
    if (libc_usable == NULL) return 0;
  }
  return libc_usable(p);
}
