// Shared helpers for the API, edge-case and stress tests in tests/api.
//
// Every test program here is built to run in up to three modes: linked against the shared
// library, linked against the static archive, and not linked at all but run under LD_PRELOAD.
// The last mode cannot resolve tc_* symbols at link time, so every entry point that libc does not
// also define is declared weak below: it binds to the allocator at run time, and a test that
// needs it first checks that it is non-null (a missing entry point is a test failure, never a
// crash). Nothing in this header is specific to one allocator except OurAllocatorIsActive(),
// which proves that malloc and friends really come from the object that exports tc_malloc.
#ifndef TCMALLOC_TESTS_API_TEST_UTIL_H_
#define TCMALLOC_TESTS_API_TEST_UTIL_H_

#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gperftools/nallocx.h>
#include <gperftools/tcmalloc.h>

#include <cstddef>
#include <new>
#include <string>

// glibc's internal allocator names. glibc exports them; an allocator that replaces malloc must
// replace these too, because some programs (and some old libraries) call them directly.
extern "C" {
void* __libc_malloc(size_t size) noexcept;
void __libc_free(void* ptr) noexcept;
void* __libc_calloc(size_t nmemb, size_t size) noexcept;
void* __libc_realloc(void* ptr, size_t size) noexcept;
void* __libc_memalign(size_t alignment, size_t size) noexcept;
void* __libc_valloc(size_t size) noexcept;
void* __libc_pvalloc(size_t size) noexcept;

// Not declared by glibc 2.36's headers (cfree was removed, the C23 functions are newer).
size_t malloc_size(void* ptr) noexcept;
void cfree(void* ptr) noexcept;
void free_sized(void* ptr, size_t size) noexcept;
void free_aligned_sized(void* ptr, size_t alignment, size_t size) noexcept;
}

// Weak: resolved at run time in the LD_PRELOAD mode; null if the allocator lacks them.
#pragma weak malloc_size
#pragma weak cfree
#pragma weak free_sized
#pragma weak free_aligned_sized
#pragma weak nallocx
#pragma weak tc_version
#pragma weak tc_malloc
#pragma weak tc_malloc_skip_new_handler
#pragma weak tc_free
#pragma weak tc_free_sized
#pragma weak tc_free_aligned_sized
#pragma weak tc_realloc
#pragma weak tc_calloc
#pragma weak tc_cfree
#pragma weak tc_memalign
#pragma weak tc_posix_memalign
#pragma weak tc_valloc
#pragma weak tc_pvalloc
#pragma weak tc_malloc_stats
#pragma weak tc_mallopt
#pragma weak tc_mallinfo
#pragma weak tc_mallinfo2
#pragma weak tc_malloc_size
#pragma weak tc_set_new_mode
#pragma weak tc_query_new_mode
#pragma weak tc_nallocx
#pragma weak tc_new
#pragma weak tc_new_nothrow
#pragma weak tc_delete
#pragma weak tc_delete_sized
#pragma weak tc_delete_nothrow
#pragma weak tc_newarray
#pragma weak tc_newarray_nothrow
#pragma weak tc_deletearray
#pragma weak tc_deletearray_sized
#pragma weak tc_deletearray_nothrow
#pragma weak tc_new_aligned
#pragma weak tc_new_aligned_nothrow
#pragma weak tc_delete_aligned
#pragma weak tc_delete_sized_aligned
#pragma weak tc_delete_aligned_nothrow
#pragma weak tc_newarray_aligned
#pragma weak tc_newarray_aligned_nothrow
#pragma weak tc_deletearray_aligned
#pragma weak tc_deletearray_sized_aligned
#pragma weak tc_deletearray_aligned_nothrow

namespace tcm_test {

// Hides a value from the optimiser so that it can neither fold a size into a compile-time
// warning (-Walloc-size-larger-than) nor see where a pointer came from (-Wfree-nonheap-object),
// nor delete a malloc/free pair whose result is unused.
template <typename T>
inline T Opaque(T value) {
  asm volatile("" : "+r"(value) : : "memory");
  return value;
}

inline bool IsAligned(const void* p, size_t alignment) {
  return (reinterpret_cast<uintptr_t>(p) & (alignment - 1)) == 0;
}

// The alignment glibc guarantees for malloc(n): 16 for n >= 16, 8 below (a smaller object cannot
// hold a type that needs 16).
inline size_t MinAlignmentFor(size_t n) { return n >= 16 ? 16 : 8; }

inline size_t PageSize() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

inline uint8_t PatternByte(uint32_t seed, size_t i) {
  return static_cast<uint8_t>((seed * 2654435761u) >> 24 ^ (i * 131) ^ (i >> 9));
}

inline void FillPattern(void* p, size_t n, uint32_t seed) {
  uint8_t* b = static_cast<uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) b[i] = PatternByte(seed, i);
}

// Returns the index of the first byte that does not match, or n if all match.
inline size_t FindPatternMismatch(const void* p, size_t n, uint32_t seed) {
  const uint8_t* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) {
    if (b[i] != PatternByte(seed, i)) return i;
  }
  return n;
}

inline bool CheckPattern(const void* p, size_t n, uint32_t seed) {
  return FindPatternMismatch(p, n, seed) == n;
}

inline bool AllBytesAre(const void* p, size_t n, uint8_t value) {
  const uint8_t* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) {
    if (b[i] != value) return false;
  }
  return true;
}

// Base address of the loaded object (executable or shared library) that defines `fn`, or null.
inline const void* ObjectOf(const void* fn) {
  Dl_info info{};
  if (fn == nullptr || dladdr(fn, &info) == 0) return nullptr;
  return info.dli_fbase;
}

inline std::string ObjectNameOf(const void* fn) {
  Dl_info info{};
  if (fn == nullptr || dladdr(fn, &info) == 0) return "<unknown>";
  return (info.dli_fname != nullptr && info.dli_fname[0] != '\0') ? info.dli_fname
                                                                     : "<main executable>";
}

template <typename F>
inline const void* FnAddr(F* fn) {
  return reinterpret_cast<const void*>(fn);
}

// True if `fn` is defined in the same loaded object as tc_malloc, i.e. by our allocator.
inline bool DefinedByAllocator(const void* fn) {
  const void* ours = ObjectOf(FnAddr(&tc_malloc));
  return ours != nullptr && ObjectOf(fn) == ours;
}

// Checks that the allocator under test, not glibc, serves this process: tc_version and
// tc_malloc resolve, the libc allocation names and the global operator new/delete live in the
// object that defines tc_malloc, and a malloc'd block is one tc_malloc_size recognises.
// On failure returns false and explains in *why.
inline bool OurAllocatorIsActive(std::string* why) {
  if (&tc_version == nullptr || &tc_malloc == nullptr || &tc_malloc_size == nullptr) {
    *why = "tc_version/tc_malloc/tc_malloc_size do not resolve: the allocator is not loaded";
    return false;
  }
  const char* version = tc_version(nullptr, nullptr, nullptr);
  if (version == nullptr || strstr(version, "gperftools") == nullptr) {
    *why = std::string("unexpected tc_version(): ") + (version ? version : "(null)");
    return false;
  }
  struct Named {
    const char* name;
    const void* fn;
  };
  const Named names[] = {
      {"malloc", FnAddr(&malloc)},
      {"free", FnAddr(&free)},
      {"calloc", FnAddr(&calloc)},
      {"realloc", FnAddr(&realloc)},
      {"memalign", FnAddr(&memalign)},
      {"posix_memalign", FnAddr(&posix_memalign)},
      {"aligned_alloc", FnAddr(&aligned_alloc)},
      {"valloc", FnAddr(&valloc)},
      {"pvalloc", FnAddr(&pvalloc)},
      {"malloc_usable_size", FnAddr(&malloc_usable_size)},
      {"operator new(size_t)", FnAddr(static_cast<void* (*)(size_t)>(&::operator new))},
      {"operator delete(void*)", FnAddr(static_cast<void (*)(void*) noexcept>(&::operator delete))},
  };
  for (const Named& n : names) {
    if (!DefinedByAllocator(n.fn)) {
      *why = std::string(n.name) + " comes from " + ObjectNameOf(n.fn) +
             ", not from the allocator (" + ObjectNameOf(FnAddr(&tc_malloc)) + ")";
      return false;
    }
  }
  void* p = malloc(Opaque(size_t{100}));
  const size_t usable = p != nullptr ? tc_malloc_size(p) : 0;
  free(p);
  if (usable < 100) {
    *why = "tc_malloc_size(malloc(100)) < 100";
    return false;
  }
  return true;
}

// Resident set size of this process in bytes (from /proc/self/statm), or 0 if unreadable.
inline size_t ResidentBytes() {
  FILE* f = fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long total = 0, resident = 0;
  const int got = fscanf(f, "%lu %lu", &total, &resident);
  fclose(f);
  return got == 2 ? resident * PageSize() : 0;
}

// Small deterministic PRNG (xorshift64*), cheap enough for the stress loops.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t Next() {
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return state_ * 0x2545F4914F6CDD1Dull;
  }
  // Uniform in [0, n).
  uint64_t Below(uint64_t n) { return Next() % n; }

 private:
  uint64_t state_;
};

// Sizes the way real programs ask for them: mostly tiny, occasionally large.
// Range 1 B .. max_size (max_size >= 1 MiB gives the full spread).
inline size_t SkewedSize(Rng& rng, size_t max_size = size_t{1} << 20) {
  const uint64_t r = rng.Below(1000);
  size_t n;
  if (r < 600) {
    n = 1 + rng.Below(64);
  } else if (r < 850) {
    n = 65 + rng.Below(1024 - 64);
  } else if (r < 950) {
    n = 1025 + rng.Below(16 * 1024 - 1024);
  } else if (r < 990) {
    n = 16 * 1024 + rng.Below(128 * 1024 - 16 * 1024);
  } else if (r < 998) {
    n = 128 * 1024 + rng.Below(128 * 1024);
  } else {
    n = 256 * 1024 + rng.Below(768 * 1024);
  }
  return n < max_size ? n : max_size;
}

}  // namespace tcm_test

#endif  // TCMALLOC_TESTS_API_TEST_UTIL_H_
