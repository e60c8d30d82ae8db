// The HeapLeakChecker interface, linked against the full library: named checks around
// regions, Disabler, IgnoreObject/UnIgnoreObject, HiddenPointer, NoGlobalLeaks,
// CancelGlobalCheck, GlobalChecker, IsActive and REGISTER_HEAPCHECK_CLEANUP.
//
// `hc_api <case>` prints "RESULT <what> <values>" lines; the driver checks them together
// with the checker's own messages on stderr.
#include <gperftools/heap-checker.h>

#include <alloca.h>
#include <pthread.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

void* volatile g_sink;

void* Keep(void* p) {
  g_sink = p;
  return p;
}

__attribute__((noinline)) void Deep(void (*f)()) {
  volatile char* pad = static_cast<volatile char*>(alloca(64 * 1024));
  pad[0] = 1;
  f();
  pad[1] = 2;
}

void Result(const char* what, bool ok, const HeapLeakChecker& c) {
  printf("RESULT %s ok=%d bytes=%ld objects=%ld\n", what, ok ? 1 : 0, static_cast<long>(c.BytesLeaked()),
         static_cast<long>(c.ObjectsLeaked()));
  fflush(stdout);
}

void LeakTwo100() {
  for (int i = 0; i < 2; ++i) memset(Keep(malloc(100)), 1, 100);
  g_sink = nullptr;
}
void LeakOne50() {
  memset(Keep(malloc(50)), 1, 50);
  g_sink = nullptr;
}
void LeakOne77() {
  memset(Keep(malloc(77)), 1, 77);
  g_sink = nullptr;
}
void AllocAndFree() {
  void* p = Keep(malloc(1000));
  free(p);
  delete[] static_cast<char*>(Keep(new char[3000]));
  g_sink = nullptr;
}
void LeakUnderDisabler() {
  HeapLeakChecker::Disabler off;
  memset(Keep(malloc(88)), 0, 88);
  g_sink = nullptr;
}
// The child is allocated after the Disabler is gone, but only a disabled object points to
// it: reachable, so not a leak either.
void LeakDisabledWithChild() {
  void** a;
  {
    HeapLeakChecker::Disabler off;
    a = static_cast<void**>(malloc(88));
  }
  a[0] = Keep(malloc(99));  // only a disabled object points here
  Keep(a);
  g_sink = nullptr;
}

void** g_ignored_parent;  // stored hidden: not a root
void LeakIgnored() {
  void** p = static_cast<void**>(malloc(66));
  p[0] = malloc(44);
  HeapLeakChecker::IgnoreObject(p);
  g_ignored_parent = reinterpret_cast<void**>(reinterpret_cast<uintptr_t>(p) ^ 0xffff000000000000ull);  // hidden
  p = nullptr;
}
void LeakIgnoredInterior() {
  char* r = static_cast<char*>(malloc(500));
  HeapLeakChecker::IgnoreObject(r + 10);
  r = nullptr;
  g_sink = nullptr;
}

HiddenPointer<int>* volatile g_hidden;
// The holder is reachable from g_hidden; the int[5] only through the hidden pointer.
void MakeHidden() { g_hidden = new HiddenPointer<int>(new int[5]); }

// Threads that allocate and free all the time, keeping every object reachable (in their
// own arrays, on their stacks, in registers while moving them): checks made meanwhile must
// stop them safely and find nothing.
std::atomic<bool> g_stop{false};
std::atomic<int> g_churning{0};

void* Churn(void*) {
  void* slots[64] = {};
  g_churning.fetch_add(1);
  for (unsigned i = 0; !g_stop.load(std::memory_order_relaxed); ++i) {
    void*& s = slots[(i * 7) % 64];
    free(s);
    s = malloc(16 + (i % 200) * 8);
    if (i % 1000 == 0) {
      pthread_t t;  // threads that come and go during checks, too
      if (pthread_create(&t, nullptr, [](void*) -> void* { return malloc(24); }, nullptr) == 0) {
        void* r = nullptr;
        pthread_join(t, &r);
        free(r);
      }
    }
  }
  for (void* s : slots) free(s);
  return nullptr;
}

void* g_cleanup_target;
REGISTER_HEAPCHECK_CLEANUP(free_target, free(g_cleanup_target); g_cleanup_target = nullptr)

}  // namespace

int main(int argc, char** argv) {
  const std::string c = argc > 1 ? argv[1] : "";
  printf("RESULT active=%d global=%d\n", HeapLeakChecker::IsActive() ? 1 : 0,
         HeapLeakChecker::GlobalChecker() != nullptr ? 1 : 0);
  fflush(stdout);
  if (c == "named") {
    {
      HeapLeakChecker check("leaky");
      Deep(&LeakTwo100);
      Result("leaky", check.NoLeaks(), check);
    }
    Deep(&LeakOne50);  // before the next checker: not its business
    {
      HeapLeakChecker check("clean");
      Deep(&AllocAndFree);
      Result("clean", check.NoLeaks(), check);
    }
    {
      HeapLeakChecker check("disabled");
      Deep(&LeakUnderDisabler);
      Deep(&LeakDisabledWithChild);
      Result("disabled", check.NoLeaks(), check);
    }
    {
      HeapLeakChecker check("ignored");
      Deep(&LeakIgnored);
      Deep(&LeakIgnoredInterior);
      Result("ignored", check.NoLeaks(), check);
      HeapLeakChecker::UnIgnoreObject(
          reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(g_ignored_parent) ^ 0xffff000000000000ull));
      Result("unignored", check.NoLeaks(), check);
    }
    {
      HeapLeakChecker check("hidden");
      Deep(&MakeHidden);
      Result("hidden", check.NoLeaks(), check);
    }
    HeapLeakChecker::CancelGlobalCheck();  // the leaks above are deliberate
  } else if (c == "brief") {
    HeapLeakChecker check("brief");
    Deep(&LeakOne77);
    Result("brief", check.BriefNoLeaks(), check);
    HeapLeakChecker::CancelGlobalCheck();
  } else if (c == "global") {
    Deep(&LeakTwo100);
    printf("RESULT global ok=%d\n", HeapLeakChecker::NoGlobalLeaks() ? 1 : 0);
    fflush(stdout);
    HeapLeakChecker::CancelGlobalCheck();  // exit status stays 0
  } else if (c == "cleanup") {
    g_cleanup_target = malloc(100);  // reachable until the cleanup frees it
  } else if (c == "concurrent") {
    pthread_t t[4];
    for (pthread_t& x : t) pthread_create(&x, nullptr, &Churn, nullptr);
    while (g_churning.load() < 4) {
    }
    int clean = 0;
    for (int i = 0; i < 20; ++i) {
      HeapLeakChecker check("concurrent");
      clean += check.NoLeaks() ? 1 : 0;
    }
    clean += HeapLeakChecker::NoGlobalLeaks() ? 1 : 0;
    g_stop = true;
    for (pthread_t& x : t) pthread_join(x, nullptr);
    printf("RESULT concurrent clean=%d\n", clean);
  } else if (c == "inactive") {
    HeapLeakChecker check("nothing");
    Deep(&LeakTwo100);
    Result("nothing", check.NoLeaks(), check);
  } else {
    fprintf(stderr, "unknown case %s\n", c.c_str());
    return 2;
  }
  return 0;
}
