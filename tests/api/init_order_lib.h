// Interface between init_order_test.cc and its helper library init_order_lib.cc. The steps are
// the places where the program allocates outside main(); whichever of the library's two last
// finalisers runs second checks that every step ran and then prints the pass marker.
#ifndef TCMALLOC_TESTS_API_INIT_ORDER_LIB_H_
#define TCMALLOC_TESTS_API_INIT_ORDER_LIB_H_

#include <stddef.h>
#include <stdint.h>

enum InitOrderStep : unsigned {
  kStepLibPriorityCtor = 1u << 0,  // library __attribute__((constructor(101)))
  kStepLibStaticCtor = 1u << 1,    // library C++ static object constructor
  kStepExePriorityCtor = 1u << 2,  // program __attribute__((constructor(101)))
  kStepExeStaticCtor = 1u << 3,    // program C++ static object constructor
  kStepMain = 1u << 4,
  kStepThreadLocalDtor = 1u << 5,  // main thread's thread_local destructor at exit
  kStepAtexit = 1u << 6,           // atexit() handler
  kStepExeStaticDtor = 1u << 7,    // program C++ static object destructor
  kStepExeDestructor = 1u << 8,    // program __attribute__((destructor))
  kStepLibStaticDtor = 1u << 9,    // library C++ static object destructor
  kStepLibDestructor = 1u << 10,   // library __attribute__((destructor))
  kStepLibFinalObject = 1u << 11,  // library static object destroyed after kStepLibStaticDtor
  kAllSteps = (1u << 12) - 1,
};

extern "C" {
// Records that `step` ran (and allocated and freed memory successfully).
__attribute__((visibility("default"))) void InitOrderMarkStep(unsigned step);
// Reports a failure (prints INIT_ORDER_TEST_FAILED and the reason) and exits with status 1.
[[noreturn]] __attribute__((visibility("default"))) void InitOrderFail(const char* what);
// Allocates, verifies and frees a mix of blocks (malloc, calloc, realloc, memalign, new, strdup,
// std::string, std::vector); calls InitOrderFail naming `where` if anything is wrong.
__attribute__((visibility("default"))) void InitOrderChurn(const char* where);
// Hands over a block the library allocated in its constructor, for the program to free.
__attribute__((visibility("default"))) void* InitOrderTakeLibBlock(size_t* size, uint32_t* seed);
}

#endif  // TCMALLOC_TESTS_API_INIT_ORDER_LIB_H_
