#include "heapcheck/heap_check_stack.h"

#include <malloc.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <utility>

#include "base/config.h"
#include "gperftools/tcmalloc.h"
#include "platform/stack_trace.h"

namespace tcm::heapcheck {

namespace {

// Our own text segment when we are a shared library ([0, 0) when linked statically).
constinit uintptr_t g_own_text_lo = 0, g_own_text_hi = 0;

// libgcc's struct dwarf_eh_bases (unwind-dw2-fde.h, not an installed header).
struct DwarfEhBases {
  void* tbase;  // cppcheck-suppress unusedStructMember
  void* dbase;  // cppcheck-suppress unusedStructMember
  void* func;
};
extern "C" const void* _Unwind_Find_FDE(void* pc, DwarfEhBases* bases);

constexpr int kMaxAllocatorFunctions = 64;
constinit uintptr_t g_allocator_functions[kMaxAllocatorFunctions] = {};
constinit int g_num_allocator_functions = 0;
constinit std::atomic<bool> g_probing{false};  // the next NewHook only records its raw stack
constinit int g_probe_depth = 0;
constinit void* g_probe_stack[os::kMaxStackDepth] = {};

uintptr_t FunctionOf(void* return_address) {
  DwarfEhBases bases{};
  if (_Unwind_Find_FDE(static_cast<char*>(return_address) - 1, &bases) == nullptr) return 0;
  return reinterpret_cast<uintptr_t>(bases.func);
}

bool IsAllocatorFunction(uintptr_t f) {
  for (int i = 0; i < g_num_allocator_functions; ++i)
    if (g_allocator_functions[i] == f) return true;
  return false;
}

void* volatile g_probe_sink;

// Each probe allocates once through one path (and frees), from its own frame.
template <int kPath>
__attribute__((noinline)) void Probe() {
  void* p = nullptr;
  switch (kPath) {
    case 0: p = malloc(8); break;
    case 1: p = malloc(300 * 1024); break;
    case 2: p = calloc(1, 8); break;
    case 3: p = calloc(1, 300 * 1024); break;
    case 4: p = realloc(nullptr, 8); break;
    case 5: p = memalign(64, 64); break;
    case 6: p = memalign(16384, 16384); break;
    case 7: if (posix_memalign(&p, 64, 64) != 0) p = nullptr; break;
    case 8: p = aligned_alloc(64, 64); break;
    case 9: p = valloc(8); break;
    case 10: p = pvalloc(8); break;
    case 11: p = ::operator new(8); break;
    case 12: p = ::operator new[](8); break;
    case 13: p = ::operator new(8, std::nothrow); break;
    case 14: p = ::operator new(64, std::align_val_t(64)); break;
    case 15: p = ::operator new[](64, std::align_val_t(64), std::nothrow); break;
    case 16: p = realloc(g_probe_sink, 100); break;  // grows the block LearnPath allocated
    case 17: p = ::operator new[](64, std::align_val_t(64)); break;
    case 18: p = ::operator new[](8, std::nothrow); break;
    case 19: p = ::operator new(64, std::align_val_t(64), std::nothrow); break;
  }
  g_probe_sink = p;
  asm volatile("" ::: "memory");  // keep this frame on the stack during the call above
}

template <int kPath>
void LearnPath() {
  if (kPath == 16) g_probe_sink = malloc(8);
  g_probe_depth = 0;
  g_probing.store(true, std::memory_order_relaxed);
  Probe<kPath>();
  g_probing.store(false, std::memory_order_relaxed);
  free(g_probe_sink);  // aligned and array news are freeable by free() here
  const uintptr_t probe = reinterpret_cast<uintptr_t>(&Probe<kPath>);
  int probe_frame = -1;
  for (int i = 0; i < g_probe_depth && probe_frame < 0; ++i)
    if (FunctionOf(g_probe_stack[i]) == probe) probe_frame = i;
  for (int i = 0; i < probe_frame; ++i) {
    const uintptr_t f = FunctionOf(g_probe_stack[i]);
    if (f != 0 && !IsAllocatorFunction(f) && g_num_allocator_functions < kMaxAllocatorFunctions)
      g_allocator_functions[g_num_allocator_functions++] = f;
  }
}

template <int... kPaths>
void LearnPaths(std::integer_sequence<int, kPaths...>) {
  (LearnPath<kPaths>(), ...);
}

// Number of leading frames that belong to the allocator when linked statically.
int AllocatorFramesStatic(void* const* raw, int n) {
  int first = 0;
  while (first < n && first < 16 && IsAllocatorFunction(FunctionOf(raw[first]))) ++first;
  return first;
}

}  // namespace

int CaptureAllocStack(void** out, int max_depth) {
  constexpr int kRaw = os::kMaxStackDepth + 8;  // our own frames are fewer than 8
  void* raw[kRaw];
  const int n = os::GetStackTrace(raw, max_depth + 8 < kRaw ? max_depth + 8 : kRaw, 0);
  if (TCM_UNLIKELY(g_probing.load(std::memory_order_relaxed))) {  // InitStackCapture wants the raw stack of its probe
    if (g_probe_depth == 0) {
      for (int i = 0; i < n && i < os::kMaxStackDepth; ++i) g_probe_stack[i] = raw[i];
      g_probe_depth = n < os::kMaxStackDepth ? n : os::kMaxStackDepth;
    }
    return 0;
  }
  int first = 0;
  if (g_own_text_hi != 0) {
    while (first < n && reinterpret_cast<uintptr_t>(raw[first]) >= g_own_text_lo &&
           reinterpret_cast<uintptr_t>(raw[first]) < g_own_text_hi)
      ++first;
  } else {
    first = AllocatorFramesStatic(raw, n);
  }
  int depth = n - first;
  if (depth > max_depth) depth = max_depth;
  for (int i = 0; i < depth; ++i) out[i] = raw[first + i];
  return depth;
}

bool Probing() { return g_probing.load(std::memory_order_relaxed); }

void InitStackCapture() {
  uintptr_t lo, hi;
  bool main_program = true;
  if (os::ModuleTextRange(reinterpret_cast<const void*>(&CaptureAllocStack), &lo, &hi, &main_program) &&
      !main_program) {
    g_own_text_lo = lo;
    g_own_text_hi = hi;
    return;
  }
  LearnPaths(std::make_integer_sequence<int, 20>());
}

}  // namespace tcm::heapcheck
