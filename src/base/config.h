// Compile-time constants and attribute macros shared by every layer.
// Nothing here knows about the OS or about allocator data structures.
#ifndef TCMALLOC_BASE_CONFIG_H_
#define TCMALLOC_BASE_CONFIG_H_

#include <compare>
#include <cstddef>
#include <cstdint>

#define TCM_ALWAYS_INLINE inline __attribute__((always_inline))
#define TCM_NOINLINE __attribute__((noinline))
// Hides a function's body from the caller's optimizer (GCC's noipa): e.g. that it never
// returns, which would turn a tail jump to it into a call that needs a stack frame. Clang
// (the fuzz and sanitizer builds) has no such attribute; noinline is what it gets.
#if defined(__clang__)
#define TCM_NO_IPA __attribute__((noinline))
#else
#define TCM_NO_IPA __attribute__((noipa))
#endif
#define TCM_EXPORT __attribute__((visibility("default")))
// For extern declarations of internal globals: -fvisibility=hidden covers definitions only,
// and a declaration the compiler must assume interposable costs an extra instruction.
#define TCM_HIDDEN __attribute__((visibility("hidden")))
#define TCM_LIKELY(x) __builtin_expect(!!(x), 1)
#define TCM_UNLIKELY(x) __builtin_expect(!!(x), 0)
// Initial-exec TLS: one %fs-relative load, no __tls_get_addr call. The price is that the
// library must be loaded at start-up (linked or LD_PRELOADed), see README "dlopen".
#define TCM_INITIAL_EXEC __attribute__((tls_model("initial-exec")))

namespace tcm {

// A page is the unit of the page heap (the design's 8 KiB pages).
inline constexpr int kPageShift = 13;
inline constexpr size_t kPageSize = size_t{1} << kPageShift;

// Objects up to kMaxSize come from size classes; larger ones are whole page runs.
inline constexpr size_t kMaxSize = 256 * 1024;

// Page heap: exact free lists for runs of 1..kMaxPages-1 pages, a best-fit tree above.
inline constexpr size_t kMaxPages = 128;

// User-space virtual addresses on x86-64 Linux are below 2^48 (4-level paging; we never ask
// for 5-level addresses with mmap hints), so the pagemap covers 48 bits.
inline constexpr int kAddressBits = 48;

// The system allocator is asked for at least this much at a time, so a program that makes
// many small requests does not make one mmap per request (and spans can coalesce).
inline constexpr size_t kMinSystemAlloc = size_t{1} << 20;

// Largest request we try to satisfy at all; larger ones fail with ENOMEM without touching
// the page heap (and page-count arithmetic cannot overflow).
inline constexpr size_t kMaxAllocation = size_t{1} << 46;

// Strong page types: a page number and a count of pages are different things.
struct PageId {
  uintptr_t index = 0;
  constexpr uintptr_t addr() const { return index << kPageShift; }
  void* ptr() const { return reinterpret_cast<void*>(addr()); }
  static constexpr PageId FromAddr(uintptr_t a) { return PageId{a >> kPageShift}; }
  static PageId FromPtr(const void* p) { return FromAddr(reinterpret_cast<uintptr_t>(p)); }
  friend constexpr bool operator==(PageId, PageId) = default;
  friend constexpr auto operator<=>(PageId, PageId) = default;
};

struct Length {
  uintptr_t n = 0;
  constexpr size_t bytes() const { return n << kPageShift; }
  static constexpr Length FromBytesRoundUp(size_t b) { return Length{(b + kPageSize - 1) >> kPageShift}; }
  friend constexpr bool operator==(Length, Length) = default;
  friend constexpr auto operator<=>(Length, Length) = default;
};

constexpr PageId operator+(PageId p, Length l) { return PageId{p.index + l.n}; }
constexpr PageId operator-(PageId p, Length l) { return PageId{p.index - l.n}; }
constexpr Length operator-(PageId a, PageId b) { return Length{a.index - b.index}; }
constexpr Length operator+(Length a, Length b) { return Length{a.n + b.n}; }
constexpr Length operator-(Length a, Length b) { return Length{a.n - b.n}; }

}  // namespace tcm

#endif  // TCMALLOC_BASE_CONFIG_H_
