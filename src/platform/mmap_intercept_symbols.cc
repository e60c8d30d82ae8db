// The program's mmap, mmap64, munmap, mremap and sbrk, interposed by libtcmalloc (see
// mmap_intercept.h). Each runs the system call directly, so it works before anything else
// of ours is initialised and never recurses into itself.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdarg>
#include <cerrno>

#include "platform/mmap_intercept.h"
#include "platform/os.h"

#define TCM_INTERPOSE extern "C" __attribute__((visibility("default")))

using tcm::os::AddressSpaceHooks;
using tcm::os::GetAddressSpaceHooks;

TCM_INTERPOSE void* mmap(void* start, size_t length, int prot, int flags, int fd, off_t offset) noexcept {
  const AddressSpaceHooks* hooks = GetAddressSpaceHooks();
  if (hooks == nullptr) return tcm::os::RawMmap(start, length, prot, flags, fd, offset);
  hooks->pre_mmap(start, length, prot, flags, fd, offset);
  void* result;
  if (!hooks->mmap_replacement(start, length, prot, flags, fd, offset, &result))
    result = tcm::os::RawMmap(start, length, prot, flags, fd, offset);
  const int saved = errno;  // the hooks must not change what the caller sees
  hooks->mmap(result, start, length, prot, flags, fd, offset);
  errno = saved;
  return result;
}

// Same type as mmap on LP64 (off64_t is off_t).
TCM_INTERPOSE void* mmap64(void* start, size_t length, int prot, int flags, int fd, off64_t offset) noexcept
    __attribute__((alias("mmap")));

TCM_INTERPOSE int munmap(void* start, size_t length) noexcept {
  const AddressSpaceHooks* hooks = GetAddressSpaceHooks();
  if (hooks == nullptr) return tcm::os::RawMunmap(start, length);
  hooks->munmap(start, length);
  int result;
  if (!hooks->munmap_replacement(start, length, &result)) result = tcm::os::RawMunmap(start, length);
  return result;
}

TCM_INTERPOSE void* mremap(void* old_addr, size_t old_size, size_t new_size, int flags, ...) noexcept {
  void* new_addr = nullptr;
  if (flags & MREMAP_FIXED) {  // the fifth argument exists only then
    va_list ap;
    va_start(ap, flags);
    new_addr = va_arg(ap, void*);
    va_end(ap);
  }
  void* result = tcm::os::RawMremap(old_addr, old_size, new_size, flags, new_addr);
  if (const AddressSpaceHooks* hooks = GetAddressSpaceHooks()) {
    const int saved = errno;
    hooks->mremap(result, old_addr, old_size, new_size, flags, new_addr);
    errno = saved;
  }
  return result;
}

TCM_INTERPOSE void* sbrk(intptr_t increment) noexcept {
  const AddressSpaceHooks* hooks = GetAddressSpaceHooks();
  // sbrk(0) asks where the break is; it changes nothing, so nothing is reported.
  if (hooks == nullptr || increment == 0) return tcm::os::RawSbrk(increment);
  hooks->pre_sbrk(increment);
  void* result = tcm::os::RawSbrk(increment);
  const int saved = errno;
  hooks->sbrk(result, increment);
  errno = saved;
  return result;
}
