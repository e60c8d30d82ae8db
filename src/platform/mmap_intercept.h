// Interception of the program's mmap, mmap64, munmap, mremap and sbrk (libtcmalloc only,
// as in gperftools: its heap profiler's HEAP_PROFILE_MMAP and the MallocHook mmap/sbrk
// hooks rely on it).
//
// mmap_intercept_symbols.cc defines those symbols; linked into libtcmalloc, they interpose
// glibc's. Each makes the system call itself (os::RawMmap & co.) and, once the layer above
// has installed its callbacks with SetAddressSpaceHooks, reports to them: before and after
// mmap (a replacement may answer instead of the kernel), before munmap (a replacement may
// answer instead), after mremap, before and after a nonzero sbrk.
//
// mmap_intercept.cc holds only the callback pointer and is linked into both libraries, so
// the layer above can install callbacks without knowing which library it is in.
#ifndef TCMALLOC_PLATFORM_MMAP_INTERCEPT_H_
#define TCMALLOC_PLATFORM_MMAP_INTERCEPT_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace tcm::os {

struct AddressSpaceHooks {
  void (*pre_mmap)(const void* start, size_t size, int prot, int flags, int fd, off_t offset);
  // True if a replacement produced *result (the kernel is then not asked).
  bool (*mmap_replacement)(const void* start, size_t size, int prot, int flags, int fd,
                           off_t offset, void** result);
  void (*mmap)(const void* result, const void* start, size_t size, int prot, int flags, int fd,
               off_t offset);
  bool (*munmap_replacement)(const void* p, size_t size, int* result);
  void (*munmap)(const void* p, size_t size);
  void (*mremap)(const void* result, const void* old_addr, size_t old_size, size_t new_size,
                 int flags, const void* new_addr);
  void (*pre_sbrk)(ptrdiff_t increment);
  void (*sbrk)(const void* result, ptrdiff_t increment);
};

// Installs the callbacks (a static table that outlives every call; nullptr uninstalls).
// Callers of the intercepted functions may run them concurrently with this.
void SetAddressSpaceHooks(const AddressSpaceHooks* hooks);
const AddressSpaceHooks* GetAddressSpaceHooks();

}  // namespace tcm::os

#endif  // TCMALLOC_PLATFORM_MMAP_INTERCEPT_H_
