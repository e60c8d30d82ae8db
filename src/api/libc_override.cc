// Every exported allocation symbol: the libc names, glibc's __libc_* aliases, the C++
// operators and gperftools' tc_* entry points. The only translation unit built with
// exceptions (operator new throws std::bad_alloc).
//
// With TCMALLOC_NO_OVERRIDE defined this unit is not built at all (unit tests link the core
// without replacing the process's malloc).
#include <malloc.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>

#include "api/allocation.h"
#include "base/log.h"
#include "gperftools/nallocx.h"
#include "gperftools/tcmalloc.h"
#include "api/malloc_stats_text.h"
#include "platform/os.h"

using namespace tcm;

namespace {

std::atomic<int> g_new_mode{0};

constexpr bool IsPowerOfTwo(size_t x) { return x != 0 && (x & (x - 1)) == 0; }

// The C++ runtime is referenced weakly (see src/CMakeLists.txt): a C program does not load
// libstdc++ just because we are its malloc. Without it there is no new-handler to call.
std::new_handler WeakGetNewHandler() noexcept __attribute__((weakref("_ZSt15get_new_handlerv")));

std::new_handler CurrentNewHandler() {
  // The compiler assumes a function's address is never null; launder it through a register.
  std::new_handler (*get)() noexcept = WeakGetNewHandler;
  __asm__("" : "+r"(get));
  return get != nullptr ? get() : nullptr;
}

// Calls the new-handler until allocation succeeds. Returns nullptr when there is no
// handler; lets a throwing handler's exception escape when `may_throw`.
template <typename F>
void* RetryWithNewHandler(F alloc, bool may_throw) {
  for (;;) {
    std::new_handler handler = CurrentNewHandler();
    if (handler == nullptr) {
      if (may_throw) throw std::bad_alloc();
      return nullptr;
    }
    if (may_throw) {
      handler();
    } else {
      try {
        handler();
      } catch (...) {
        return nullptr;
      }
    }
    if (void* p = alloc()) return p;
  }
}

// malloc's miss handler: the allocator's slow path plus tc_set_new_mode's protocol.
TCM_NOINLINE void* MallocSlow(size_t size) noexcept {
  if (void* p = AllocateSlow(size)) return p;
  if (g_new_mode.load(std::memory_order_relaxed) == 0) return nullptr;
  return RetryWithNewHandler([size] { return AllocateSlow(size); }, false);
}

// calloc's big blocks with tc_set_new_mode's protocol (MallocSlow is the small ones'). A
// request whose n * size overflows is refused without calling the new-handler.
TCM_NOINLINE void* CallocLargeSlow(size_t total) noexcept {
  if (void* p = AllocateZeroedLarge(total)) return p;
  if (g_new_mode.load(std::memory_order_relaxed) == 0) return nullptr;
  return RetryWithNewHandler([total] { return AllocateZeroedLarge(total); }, false);
}

TCM_NOINLINE void* NewSlow(size_t size) {
  if (void* p = AllocateSlow(size)) return p;
  return RetryWithNewHandler([size] { return AllocateSlow(size); }, true);
}

TCM_NOINLINE void* NewNothrowSlow(size_t size) noexcept {
  if (void* p = AllocateSlow(size)) return p;
  return RetryWithNewHandler([size] { return AllocateSlow(size); }, false);
}

TCM_ALWAYS_INLINE void* CppNew(size_t size) { return Allocate<NewSlow>(size); }
TCM_ALWAYS_INLINE void* CppNewNothrow(size_t size) { return Allocate<NewNothrowSlow>(size); }

void* CppNewAligned(size_t size, std::align_val_t al, bool may_throw) {
  size_t align = static_cast<size_t>(al);
  if (!IsPowerOfTwo(align)) {
    if (may_throw) throw std::bad_alloc();
    return nullptr;
  }
  if (void* p = AllocateAligned(align, size)) return p;
  return RetryWithNewHandler([=] { return AllocateAligned(align, size); }, may_throw);
}

void* MemalignOrNull(size_t align, size_t size) {
  if (void* p = AllocateAligned(align, size)) return p;
  if (g_new_mode.load(std::memory_order_relaxed) == 0) return nullptr;
  return RetryWithNewHandler([=] { return AllocateAligned(align, size); }, false);
}

}  // namespace

extern "C" {

// ---- C API ----

TCM_EXPORT void* tc_malloc(size_t size) noexcept { return Allocate<MallocSlow>(size); }

TCM_EXPORT void* tc_malloc_skip_new_handler(size_t size) noexcept { return Allocate(size); }

TCM_EXPORT void tc_free(void* p) noexcept { Deallocate(p); }

// The size is not trusted: a wrong size from the caller must not corrupt the heap, and
// the pagemap lookup it would save is the cheap part of free.
TCM_EXPORT void tc_free_sized(void* p, size_t) noexcept { Deallocate(p); }
TCM_EXPORT void tc_free_aligned_sized(void* p, size_t, size_t) noexcept { Deallocate(p); }

TCM_EXPORT void tc_cfree(void* p) noexcept { Deallocate(p); }

TCM_EXPORT void* tc_calloc(size_t n, size_t size) noexcept { return AllocateZeroed<MallocSlow, CallocLargeSlow>(n, size); }

TCM_EXPORT void* tc_realloc(void* p, size_t size) noexcept { return Reallocate(p, size); }

void* reallocarray(void* p, size_t n, size_t size) noexcept;
TCM_EXPORT void* reallocarray(void* p, size_t n, size_t size) noexcept {
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return nullptr;
  }
  return Reallocate(p, total);
}

TCM_EXPORT void* tc_memalign(size_t align, size_t size) noexcept {
  if (align == 0) align = 1;  // glibc treats 0 as "no alignment requirement"
  if (!IsPowerOfTwo(align)) {
    errno = EINVAL;
    return nullptr;
  }
  return MemalignOrNull(align, size);
}

void* aligned_alloc(size_t align, size_t size) noexcept;
TCM_EXPORT void* aligned_alloc(size_t align, size_t size) noexcept {
  if (!IsPowerOfTwo(align)) {
    errno = EINVAL;
    return nullptr;
  }
  return MemalignOrNull(align, size);
}

TCM_EXPORT int tc_posix_memalign(void** out, size_t align, size_t size) noexcept {
  if (!IsPowerOfTwo(align) || align % sizeof(void*) != 0) return EINVAL;
  int saved = errno;  // POSIX: report through the return value, leave errno alone
  void* p = MemalignOrNull(align, size);
  errno = saved;
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}

static constexpr size_t kSystemPage = 4096;

TCM_EXPORT void* tc_valloc(size_t size) noexcept { return MemalignOrNull(kSystemPage, size); }

TCM_EXPORT void* tc_pvalloc(size_t size) noexcept {
  if (size > SIZE_MAX - kSystemPage) {
    errno = ENOMEM;
    return nullptr;
  }
  size = size == 0 ? kSystemPage : (size + kSystemPage - 1) & ~(kSystemPage - 1);
  return MemalignOrNull(kSystemPage, size);
}

TCM_EXPORT size_t tc_malloc_size(void* p) noexcept {
  return p == nullptr ? 0 : UsableSize(p, "malloc_usable_size()");
}

TCM_EXPORT size_t tc_nallocx(size_t size, int flags) noexcept {
  int lg = flags & 0x3f;
  return GoodSize(size, lg == 0 ? 0 : size_t{1} << lg);
}

TCM_EXPORT int tc_mallopt(int, int) noexcept { return 1; }

TCM_EXPORT void tc_malloc_stats(void) noexcept {
  char buf[2048];
  Printer out(buf, sizeof(buf));
  PrintStats(&out, 1);
  os::WriteStderr(buf, out.written());
}

TCM_EXPORT struct mallinfo2 tc_mallinfo2(void) noexcept {
  HeapTotals t = ComputeTotals();
  struct mallinfo2 m;
  memset(&m, 0, sizeof(m));
  m.arena = t.system_bytes;
  m.hblkhd = t.metadata_bytes;
  m.uordblks = t.in_use_bytes;
  m.fordblks = t.pageheap_free_bytes + t.central_free_bytes + t.thread_cache_bytes + t.cpu_cache_bytes;
  m.fsmblks = t.central_free_bytes + t.thread_cache_bytes + t.cpu_cache_bytes;
  m.keepcost = t.pageheap_free_bytes;
  m.ordblks = static_cast<size_t>(t.in_use_spans);
  return m;
}

TCM_EXPORT struct mallinfo tc_mallinfo(void) noexcept {
  // The int fields saturate instead of wrapping.
  auto clamp = [](size_t v) { return v > static_cast<size_t>(INT32_MAX) ? INT32_MAX : static_cast<int>(v); };
  struct mallinfo2 m2 = tc_mallinfo2();
  struct mallinfo m;
  memset(&m, 0, sizeof(m));
  m.arena = clamp(m2.arena);
  m.hblkhd = clamp(m2.hblkhd);
  m.uordblks = clamp(m2.uordblks);
  m.fordblks = clamp(m2.fordblks);
  m.fsmblks = clamp(m2.fsmblks);
  m.keepcost = clamp(m2.keepcost);
  m.ordblks = clamp(m2.ordblks);
  return m;
}

TCM_EXPORT int tc_set_new_mode(int flag) noexcept { return g_new_mode.exchange(flag); }
TCM_EXPORT int tc_query_new_mode(void) noexcept { return g_new_mode.load(); }

TCM_EXPORT const char* tc_version(int* major, int* minor, const char** patch) noexcept {
  if (major != nullptr) *major = TC_VERSION_MAJOR;
  if (minor != nullptr) *minor = TC_VERSION_MINOR;
  if (patch != nullptr) *patch = TC_VERSION_PATCH;
  return TC_VERSION_STRING;
}

int malloc_trim(size_t) noexcept;
TCM_EXPORT int malloc_trim(size_t) noexcept { return ReleaseFreeMemory() > 0 ? 1 : 0; }

// ---- libc names: aliases of the tc_* functions, so both resolve to the same code ----

#define TCM_ALIAS(name) TCM_EXPORT __attribute__((alias(#name)))

void* malloc(size_t) noexcept TCM_ALIAS(tc_malloc);
void free(void*) noexcept TCM_ALIAS(tc_free);
void* calloc(size_t, size_t) noexcept TCM_ALIAS(tc_calloc);
void* realloc(void*, size_t) noexcept TCM_ALIAS(tc_realloc);
void cfree(void*) noexcept TCM_ALIAS(tc_cfree);
void* memalign(size_t, size_t) noexcept TCM_ALIAS(tc_memalign);
int posix_memalign(void**, size_t, size_t) noexcept TCM_ALIAS(tc_posix_memalign);
void* valloc(size_t) noexcept TCM_ALIAS(tc_valloc);
void* pvalloc(size_t) noexcept TCM_ALIAS(tc_pvalloc);
size_t malloc_usable_size(void*) noexcept TCM_ALIAS(tc_malloc_size);
size_t malloc_size(void*) noexcept TCM_ALIAS(tc_malloc_size);
void free_sized(void*, size_t) noexcept TCM_ALIAS(tc_free_sized);
void free_aligned_sized(void*, size_t, size_t) noexcept TCM_ALIAS(tc_free_aligned_sized);
int mallopt(int, int) noexcept TCM_ALIAS(tc_mallopt);
struct mallinfo mallinfo(void) noexcept TCM_ALIAS(tc_mallinfo);
struct mallinfo2 mallinfo2(void) noexcept TCM_ALIAS(tc_mallinfo2);
void malloc_stats(void) noexcept TCM_ALIAS(tc_malloc_stats);
size_t nallocx(size_t, int) noexcept TCM_ALIAS(tc_nallocx);

// glibc-internal names some libraries and tools call directly.
void* __libc_malloc(size_t) noexcept TCM_ALIAS(tc_malloc);
void __libc_free(void*) noexcept TCM_ALIAS(tc_free);
void* __libc_calloc(size_t, size_t) noexcept TCM_ALIAS(tc_calloc);
void* __libc_realloc(void*, size_t) noexcept TCM_ALIAS(tc_realloc);
void __libc_cfree(void*) noexcept TCM_ALIAS(tc_cfree);
void* __libc_memalign(size_t, size_t) noexcept TCM_ALIAS(tc_memalign);
void* __libc_valloc(size_t) noexcept TCM_ALIAS(tc_valloc);
void* __libc_pvalloc(size_t) noexcept TCM_ALIAS(tc_pvalloc);
int __posix_memalign(void**, size_t, size_t) noexcept TCM_ALIAS(tc_posix_memalign);

// ---- C++ entry points of gperftools ----

TCM_EXPORT void* tc_new(size_t size) { return CppNew(size); }
TCM_EXPORT void* tc_new_nothrow(size_t size, const std::nothrow_t&) noexcept { return CppNewNothrow(size); }
TCM_EXPORT void tc_delete(void* p) noexcept { Deallocate(p); }
TCM_EXPORT void tc_delete_sized(void* p, size_t) noexcept { Deallocate(p); }
TCM_EXPORT void tc_delete_nothrow(void* p, const std::nothrow_t&) noexcept { Deallocate(p); }
TCM_EXPORT void* tc_newarray(size_t size) { return CppNew(size); }
TCM_EXPORT void* tc_newarray_nothrow(size_t size, const std::nothrow_t&) noexcept { return CppNewNothrow(size); }
TCM_EXPORT void tc_deletearray(void* p) noexcept { Deallocate(p); }
TCM_EXPORT void tc_deletearray_sized(void* p, size_t) noexcept { Deallocate(p); }
TCM_EXPORT void tc_deletearray_nothrow(void* p, const std::nothrow_t&) noexcept { Deallocate(p); }
TCM_EXPORT void* tc_new_aligned(size_t size, std::align_val_t al) { return CppNewAligned(size, al, true); }
TCM_EXPORT void* tc_new_aligned_nothrow(size_t size, std::align_val_t al, const std::nothrow_t&) noexcept {
  return CppNewAligned(size, al, false);
}
TCM_EXPORT void tc_delete_aligned(void* p, std::align_val_t) noexcept { Deallocate(p); }
TCM_EXPORT void tc_delete_sized_aligned(void* p, size_t, std::align_val_t) noexcept { Deallocate(p); }
TCM_EXPORT void tc_delete_aligned_nothrow(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  Deallocate(p);
}
TCM_EXPORT void* tc_newarray_aligned(size_t size, std::align_val_t al) { return CppNewAligned(size, al, true); }
TCM_EXPORT void* tc_newarray_aligned_nothrow(size_t size, std::align_val_t al, const std::nothrow_t&) noexcept {
  return CppNewAligned(size, al, false);
}
TCM_EXPORT void tc_deletearray_aligned(void* p, std::align_val_t) noexcept { Deallocate(p); }
TCM_EXPORT void tc_deletearray_sized_aligned(void* p, size_t, std::align_val_t) noexcept { Deallocate(p); }
TCM_EXPORT void tc_deletearray_aligned_nothrow(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  Deallocate(p);
}

}  // extern "C"

// ---- the C++ operators themselves ----

TCM_EXPORT void* operator new(size_t size) { return CppNew(size); }
TCM_EXPORT void* operator new[](size_t size) { return CppNew(size); }
TCM_EXPORT void* operator new(size_t size, const std::nothrow_t&) noexcept { return CppNewNothrow(size); }
TCM_EXPORT void* operator new[](size_t size, const std::nothrow_t&) noexcept { return CppNewNothrow(size); }
TCM_EXPORT void operator delete(void* p) noexcept { Deallocate(p); }
TCM_EXPORT void operator delete[](void* p) noexcept { Deallocate(p); }
TCM_EXPORT void operator delete(void* p, const std::nothrow_t&) noexcept { Deallocate(p); }
TCM_EXPORT void operator delete[](void* p, const std::nothrow_t&) noexcept { Deallocate(p); }
TCM_EXPORT void operator delete(void* p, size_t) noexcept { Deallocate(p); }
TCM_EXPORT void operator delete[](void* p, size_t) noexcept { Deallocate(p); }
TCM_EXPORT void* operator new(size_t size, std::align_val_t al) { return CppNewAligned(size, al, true); }
TCM_EXPORT void* operator new[](size_t size, std::align_val_t al) { return CppNewAligned(size, al, true); }
TCM_EXPORT void* operator new(size_t size, std::align_val_t al, const std::nothrow_t&) noexcept {
  return CppNewAligned(size, al, false);
}
TCM_EXPORT void* operator new[](size_t size, std::align_val_t al, const std::nothrow_t&) noexcept {
  return CppNewAligned(size, al, false);
}
TCM_EXPORT void operator delete(void* p, std::align_val_t) noexcept { Deallocate(p); }
TCM_EXPORT void operator delete[](void* p, std::align_val_t) noexcept { Deallocate(p); }
TCM_EXPORT void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { Deallocate(p); }
TCM_EXPORT void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { Deallocate(p); }
TCM_EXPORT void operator delete(void* p, size_t, std::align_val_t) noexcept { Deallocate(p); }
TCM_EXPORT void operator delete[](void* p, size_t, std::align_val_t) noexcept { Deallocate(p); }
