// The loaded objects of the process (the program, shared libraries, the dynamic loader)
// and their symbols, for the heap checker: which code and data belong to which file,
// where each one's static TLS is, and the next definition of a symbol. Part of the OS
// contract of platform/os.h.
//
// Both primitives take the dynamic loader's lock: never call them while other threads are
// stopped (one may hold it). Neither allocates.
#ifndef TCMALLOC_PLATFORM_MODULES_H_
#define TCMALLOC_PLATFORM_MODULES_H_

#include <cstddef>
#include <cstdint>

namespace tcm::os {

struct LoadedModule {
  static constexpr int kMaxSegments = 16;
  struct Segment {
    uintptr_t start;  // run-time address (bias applied)
    size_t size;      // bytes in memory
    bool writable;
  };
  const char* path;       // as the loader knows it; "" for the program itself
  uintptr_t bias;         // load address minus link address
  int num_segments;       // loadable segments (PT_LOAD), at most kMaxSegments
  Segment segments[kMaxSegments];
  size_t tls_size;        // size of its TLS block (PT_TLS), 0 if none
  uintptr_t tls_block;    // the calling thread's copy of it, 0 if not allocated yet
};

// Calls fn(module, ctx) for each loaded object, in the loader's order. The module (and its
// path) are valid only during the call.
void ForEachLoadedModule(void (*fn)(const LoadedModule& module, void* ctx), void* ctx);

// The next definition of name after the calling library's, in symbol lookup order
// (dlsym(RTLD_NEXT)); nullptr if there is none.
void* NextSymbol(const char* name);

// The first definition of name in the global scope (dlsym(RTLD_DEFAULT)); nullptr if none.
void* GlobalSymbol(const char* name);

}  // namespace tcm::os

#endif  // TCMALLOC_PLATFORM_MODULES_H_
