// A library the scenarios dlopen: thread-local storage of a dlopen'ed object (dynamic TLS,
// reached through each thread's DTV) and leaks made by a library (HEAP_CHECK_IGNORE_LIBS).
#include <alloca.h>

#include <cstdlib>
#include <cstring>

namespace {
void* volatile g_plugin_sink;

__attribute__((noinline)) void LeakTwo111() {
  for (int i = 0; i < 2; ++i) {
    g_plugin_sink = malloc(111);
    memset(g_plugin_sink, 5, 111);
  }
  g_plugin_sink = nullptr;
}
}  // namespace

extern "C" {

__thread void* t_plugin_object;

__attribute__((visibility("default"))) void hc_plugin_set_tls(void* p) { t_plugin_object = p; }

// Leaks two objects, deep enough in the stack that no stale copy stays live.
__attribute__((visibility("default"))) void hc_plugin_leak() {
  volatile char* pad = static_cast<volatile char*>(alloca(64 * 1024));
  pad[0] = 1;
  LeakTwo111();
  pad[1] = 2;
}
}
