// Allocation outside main(): in a constructor(101) function and a C++ static constructor of both
// the program and a shared library it links (whose constructors may run before the allocator's
// own), and after main in a thread_local destructor, an atexit handler, a static destructor and
// a destructor function, each freeing memory allocated earlier. The library's last destructor
// prints INIT_ORDER_TEST_PASSED once every step has run; any failure prints
// INIT_ORDER_TEST_FAILED and exits with status 1.
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "init_order_lib.h"
#include "test_util.h"

namespace {

// Allocated in the priority constructor, freed in the atexit handler.
void* g_early = nullptr;
constexpr size_t kEarlySize = 777;
constexpr uint32_t kEarlySeed = 5;

// Allocated in main, freed by the destructor function after every static destructor.
void* g_late = nullptr;
constexpr size_t kLateSize = 400000;
constexpr uint32_t kLateSeed = 6;

__attribute__((constructor(101))) void ExePriorityConstructor() {
  InitOrderChurn("program constructor(101)");
  g_early = malloc(tcm_test::Opaque(kEarlySize));
  if (g_early == nullptr) InitOrderFail("program constructor(101): malloc failed");
  tcm_test::FillPattern(g_early, kEarlySize, kEarlySeed);
  InitOrderMarkStep(kStepExePriorityCtor);
}

struct ExeStaticObject {
  ExeStaticObject() {
    InitOrderChurn("program static constructor");
    for (int i = 0; i < 500; ++i) table[i] = std::string(static_cast<size_t>(i % 50) + 20, 'v');
    InitOrderMarkStep(kStepExeStaticCtor);
  }
  ~ExeStaticObject() {
    for (int i = 0; i < 500; ++i) {
      if (table[i].size() != static_cast<size_t>(i % 50) + 20) {
        InitOrderFail("program static destructor: map<int, string> corrupted");
      }
    }
    table.clear();
    InitOrderChurn("program static destructor");
    InitOrderMarkStep(kStepExeStaticDtor);
  }
  std::map<int, std::string> table;
};

ExeStaticObject g_exe_static_object;
std::string g_global_string(100000, 'g');  // dynamic initialisation allocates too

struct ThreadLocalHolder {
  ~ThreadLocalHolder() {
    if (owner_is_main) {
      free(block);
      InitOrderChurn("main thread's thread_local destructor");
      InitOrderMarkStep(kStepThreadLocalDtor);
    } else {
      free(block);  // worker thread exit: just free
    }
  }
  void* block = nullptr;
  bool owner_is_main = false;
};

thread_local ThreadLocalHolder t_holder;

void AtExitHandler() {
  if (!tcm_test::CheckPattern(g_early, kEarlySize, kEarlySeed)) {
    InitOrderFail("atexit: block from constructor(101) corrupted");
  }
  free(g_early);
  InitOrderChurn("atexit handler");
  InitOrderMarkStep(kStepAtexit);
}

__attribute__((destructor)) void ExeDestructor() {
  if (!tcm_test::CheckPattern(g_late, kLateSize, kLateSeed)) {
    InitOrderFail("destructor function: block from main corrupted");
  }
  free(g_late);
  InitOrderChurn("program destructor function");
  InitOrderMarkStep(kStepExeDestructor);
}

}  // namespace

int main() {
  std::string why;
  if (!tcm_test::OurAllocatorIsActive(&why)) InitOrderFail(why.c_str());
  if (g_global_string.size() != 100000) InitOrderFail("global string corrupted");

  size_t size = 0;
  uint32_t seed = 0;
  void* lib_block = InitOrderTakeLibBlock(&size, &seed);
  if (lib_block == nullptr || !tcm_test::CheckPattern(lib_block, size, seed)) {
    InitOrderFail("main: block from the library's constructor(101) missing or corrupted");
  }
  free(lib_block);

  g_late = malloc(tcm_test::Opaque(kLateSize));
  if (g_late == nullptr) InitOrderFail("main: malloc failed");
  tcm_test::FillPattern(g_late, kLateSize, kLateSeed);

  t_holder.block = malloc(tcm_test::Opaque(size_t{3000}));
  t_holder.owner_is_main = true;

  std::thread worker([] {
    t_holder.block = malloc(tcm_test::Opaque(size_t{123}));
    InitOrderChurn("worker thread");
  });
  worker.join();

  if (atexit(AtExitHandler) != 0) InitOrderFail("atexit registration failed");
  InitOrderChurn("main");
  InitOrderMarkStep(kStepMain);
  return 0;
}
