// Helper library for init_order_test. It allocates in its constructors, which the dynamic
// loader may run before the allocator's own initialisers, frees in its destructors after main,
// and its last finaliser (after the program's) checks that every step ran.
#include "init_order_lib.h"

#include <string.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

unsigned g_steps = 0;

void WriteStr(int fd, const char* s) {
  const size_t n = strlen(s);
  if (write(fd, s, n) != static_cast<ssize_t>(n)) return;
}

// A block allocated by the library's first constructor, freed by the program in main().
void* g_handover = nullptr;
constexpr size_t kHandoverSize = 300000;  // large: page-heap path
constexpr uint32_t kHandoverSeed = 99;

// Allocated by the library's static constructor, freed by its static destructor.
constexpr size_t kKeptSize = 5000;
constexpr uint32_t kKeptSeed = 123;

__attribute__((constructor(101))) void LibPriorityConstructor() {
  InitOrderChurn("library constructor(101)");
  g_handover = malloc(tcm_test::Opaque(kHandoverSize));
  if (g_handover == nullptr) InitOrderFail("library constructor(101): malloc failed");
  tcm_test::FillPattern(g_handover, kHandoverSize, kHandoverSeed);
  InitOrderMarkStep(kStepLibPriorityCtor);
}

// The library is finalised after the program. Its destructor function and its static objects'
// destructors both run then, in an order that depends on the glibc version; whichever of the
// two last finalisers below runs second performs the final check.
int g_final_candidates_run = 0;

void FinalCandidate(unsigned step, const char* where) {
  InitOrderChurn(where);
  InitOrderMarkStep(step);
  if (++g_final_candidates_run < 2) return;
  if (g_steps != kAllSteps) {
    char msg[160];
    snprintf(msg, sizeof(msg), "%s: steps 0x%x ran, expected 0x%x", where, g_steps,
             static_cast<unsigned>(kAllSteps));
    InitOrderFail(msg);
  }
  WriteStr(1, "INIT_ORDER_TEST_PASSED\n");
}

// Declared before g_lib_static_object, so destroyed after it.
struct LibFinalObject {
  ~LibFinalObject() { FinalCandidate(kStepLibFinalObject, "library final static destructor"); }
};
LibFinalObject g_lib_final_object;

struct LibStaticObject {
  LibStaticObject() {
    InitOrderChurn("library static constructor");
    kept = malloc(tcm_test::Opaque(kKeptSize));
    if (kept == nullptr) InitOrderFail("library static constructor: malloc failed");
    tcm_test::FillPattern(kept, kKeptSize, kKeptSeed);
    names = new std::vector<std::string>();
    for (int i = 0; i < 100; ++i) names->push_back(std::string(static_cast<size_t>(i) * 7, 'n'));
    InitOrderMarkStep(kStepLibStaticCtor);
  }
  ~LibStaticObject() {
    if (!tcm_test::CheckPattern(kept, kKeptSize, kKeptSeed)) {
      InitOrderFail("library static destructor: block from the constructor was corrupted");
    }
    free(kept);
    for (int i = 0; i < 100; ++i) {
      if ((*names)[static_cast<size_t>(i)].size() != static_cast<size_t>(i) * 7) {
        InitOrderFail("library static destructor: vector<string> corrupted");
      }
    }
    delete names;
    InitOrderChurn("library static destructor");
    InitOrderMarkStep(kStepLibStaticDtor);
  }
  void* kept = nullptr;
  std::vector<std::string>* names = nullptr;
};

LibStaticObject g_lib_static_object;

__attribute__((destructor)) void LibDestructor() {
  FinalCandidate(kStepLibDestructor, "library destructor function");
}

}  // namespace

extern "C" void InitOrderMarkStep(unsigned step) {
  if ((g_steps & step) != 0) InitOrderFail("a step ran twice");
  g_steps |= step;
}

extern "C" void InitOrderFail(const char* what) {
  WriteStr(2, "INIT_ORDER_TEST_FAILED: ");
  WriteStr(2, what);
  WriteStr(2, "\n");
  _exit(1);
}

extern "C" void* InitOrderTakeLibBlock(size_t* size, uint32_t* seed) {
  void* p = g_handover;
  g_handover = nullptr;
  *size = kHandoverSize;
  *seed = kHandoverSeed;
  return p;
}

extern "C" void InitOrderChurn(const char* where) {
  char msg[256];
  auto fail = [&](const char* what) {
    snprintf(msg, sizeof(msg), "%s: %s", where, what);
    InitOrderFail(msg);
  };
  void* blocks[32];
  size_t sizes[32];
  for (int i = 0; i < 32; ++i) {
    const size_t k = static_cast<size_t>(i);
    sizes[i] = (i % 8 == 7) ? 262144 + 4096 * k : 1 + 37 * k * k;  // small classes and large
    blocks[i] = malloc(tcm_test::Opaque(sizes[i]));
    if (blocks[i] == nullptr) fail("malloc failed");
    tcm_test::FillPattern(blocks[i], sizes[i], static_cast<uint32_t>(i));
  }
  for (int i = 0; i < 32; i += 2) {
    void* q = realloc(blocks[i], sizes[i] * 2 + 10);
    if (q == nullptr) fail("realloc failed");
    if (!tcm_test::CheckPattern(q, sizes[i], static_cast<uint32_t>(i))) fail("realloc lost data");
    blocks[i] = q;
  }
  for (int i = 0; i < 32; ++i) {
    if (!tcm_test::CheckPattern(blocks[i], sizes[i], static_cast<uint32_t>(i))) {
      fail("blocks overlap");
    }
    free(blocks[i]);
  }
  void* z = calloc(tcm_test::Opaque(size_t{1000}), 10);
  if (z == nullptr || !tcm_test::AllBytesAre(z, 10000, 0)) fail("calloc failed or not zeroed");
  free(z);
  void* a = memalign(tcm_test::Opaque(size_t{4096}), 100);
  if (a == nullptr || !tcm_test::IsAligned(a, 4096)) fail("memalign failed");
  free(a);
  char* s = strdup(where);
  if (s == nullptr || strcmp(s, where) != 0) fail("strdup failed");
  free(s);
  int* obj = new int[1000];
  obj[999] = 1;
  delete[] obj;
  std::string str(10000, 's');
  std::vector<int> v(5000, 3);
  if (str.size() != 10000 || v[4999] != 3) fail("std::string/std::vector broken");
}
