// The heap profiler's gperftools flags beyond the three intervals, end to end
// (profiler_flags_test.py runs it with HEAPPROFILE and the flag under test).
//
// Modes (argv[1]):
//   free <MiB>      holds <MiB> 1 MiB blocks, then frees them one by one
//                   (HEAP_PROFILE_DEALLOCATION_INTERVAL dumps)
//   exec            dumps ("before exec"), then execs itself in mode "after-exec", which
//                   holds 1 MiB and exits; prints "pid <pid>" (the same pid both times)
//   mmap            map_region() maps 3 MiB and 1 MiB with mmap and keeps them, unmaps a
//                   third region of 2 MiB, grows one with mremap, and holds 1 MiB of malloc
//                   in malloc_region() (HEAP_PROFILE_MMAP / ONLY_MMAP / MMAP_LOG)
//   signal <sig>    holds 1 MiB, sends itself signal <sig>, allocates once more, exits
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <gperftools/heap-profiler.h>

namespace {
constexpr size_t kMiB = 1 << 20;
void* volatile g_sink;
}  // namespace

extern "C" __attribute__((noinline)) void* map_region(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) abort();
  return p;
}

extern "C" __attribute__((noinline)) void* malloc_region(size_t bytes) {
  void* p = malloc(bytes);
  memset(p, 1, 4096);
  return p;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s free MiB|exec|mmap|signal SIG\n", argv[0]);
    return 2;
  }
  const char* mode = argv[1];
  const size_t arg = argc > 2 ? strtoul(argv[2], nullptr, 10) : 0;
  if (strcmp(mode, "free") == 0) {
    void** blocks = static_cast<void**>(calloc(arg, sizeof(void*)));
    for (size_t i = 0; i < arg; ++i) blocks[i] = malloc_region(kMiB);
    for (size_t i = 0; i < arg; ++i) free(blocks[i]);
    free(blocks);
  } else if (strcmp(mode, "exec") == 0) {
    printf("pid %d\n", static_cast<int>(getpid()));
    fflush(stdout);
    g_sink = malloc_region(kMiB);
    HeapProfilerDump("before exec");
    char self[] = "/proc/self/exe";
    char after[] = "after-exec";
    char* args[] = {argv[0], after, nullptr};
    execv(self, args);
    perror("execv");
    return 1;
  } else if (strcmp(mode, "after-exec") == 0) {
    g_sink = malloc_region(kMiB);
  } else if (strcmp(mode, "mmap") == 0) {
    g_sink = map_region(3 * kMiB);
    void* gone = map_region(2 * kMiB);
    munmap(gone, 2 * kMiB);
    void* grown = map_region(1 * kMiB);
    grown = mremap(grown, 1 * kMiB, 4 * kMiB, MREMAP_MAYMOVE);
    if (grown == MAP_FAILED) abort();
    g_sink = grown;
    g_sink = malloc_region(kMiB);
  } else if (strcmp(mode, "signal") == 0) {
    g_sink = malloc_region(kMiB);
    kill(getpid(), static_cast<int>(arg));
    g_sink = malloc_region(kMiB);
  } else {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  return 0;
}
