// Module for dlopen_test: allocates in its constructor, hands memory to its caller and frees the
// caller's memory, and frees what it kept in its destructor at dlclose.
#include <string.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

struct ModuleState {
  ModuleState() {
    for (int i = 0; i < 200; ++i) words[i] = std::string(static_cast<size_t>(i) + 1, 'w');
    big = malloc(tcm_test::Opaque(size_t{600000}));
    if (big != nullptr) tcm_test::FillPattern(big, 600000, 17);
    ok = big != nullptr;
  }
  ~ModuleState() {
    free(big);
    words.clear();
  }
  std::map<int, std::string> words;
  void* big = nullptr;
  bool ok = false;
};

ModuleState g_state;

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int DlLibConstructorOk() {
  if (!g_state.ok || g_state.words.size() != 200) return 0;
  if (g_state.words[199].size() != 200) return 0;
  return tcm_test::CheckPattern(g_state.big, 600000, 17) ? 1 : 0;
}

// Returns malloc'd memory the caller frees (possibly after dlclose).
__attribute__((visibility("default"))) char* DlLibMakeString(const char* s, size_t repeat) {
  std::string out;
  for (size_t i = 0; i < repeat; ++i) out += s;
  return strdup(out.c_str());
}

// Frees memory the caller allocated.
__attribute__((visibility("default"))) void DlLibFree(void* p) { free(p); }

// A C++ object from the module's operator new, for the caller's delete.
__attribute__((visibility("default"))) std::vector<int>* DlLibNewVector(size_t n) {
  return new std::vector<int>(n, 7);
}

}  // extern "C"
