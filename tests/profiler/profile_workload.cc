// A program whose heap is known exactly, for the heap profiler's end-to-end tests. It only
// uses malloc/free/new/delete, so the same source is built linked with libtcmalloc and
// linked with nothing (run with LD_PRELOAD): the "unmodified program" case.
//
// Modes (argv[1]):
//   hold            alloc_big() holds 40 MiB in 1 MiB blocks, alloc_small() 10 MiB in 128 B
//                   objects, churn() allocates and frees 20 MiB; everything held is still
//                   held at exit, so the exit dump shows it.
//   churn <MiB>     allocates and frees <MiB> 1 MiB blocks (allocation-interval dumps)
//   grow <MiB>      holds <MiB> 1 MiB blocks, one more at a time (in-use-interval dumps)
//   timed <ms>      allocates and frees small blocks for <ms> milliseconds, 5 ms apart
//   fork            the parent holds 2 MiB, then forks; the child holds 3 MiB more in
//                   child_alloc() and exits normally; prints "child <pid>"
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace {

constexpr size_t kMiB = 1 << 20;
void* volatile g_sink;  // keeps the compiler from dropping allocations

// Every allocating function is noinline and extern so pprof sees it by name.
}  // namespace

extern "C" __attribute__((noinline)) void** alloc_big(size_t n_mib) {
  void** blocks = static_cast<void**>(calloc(n_mib, sizeof(void*)));  // 320 B: counted too
  for (size_t i = 0; i < n_mib; ++i) {
    blocks[i] = malloc(kMiB);
    memset(blocks[i], 1, 4096);
  }
  return blocks;
}

extern "C" __attribute__((noinline)) char** alloc_small(size_t count, size_t size) {
  char** objs = new char*[count];
  for (size_t i = 0; i < count; ++i) objs[i] = new char[size];
  return objs;
}

extern "C" __attribute__((noinline)) void churn(size_t n_mib) {
  for (size_t i = 0; i < n_mib; ++i) {
    void* p = malloc(kMiB);
    g_sink = p;
    free(p);
  }
}

extern "C" __attribute__((noinline)) void* child_alloc(size_t bytes) {
  void* p = malloc(bytes);
  memset(p, 2, bytes);
  return p;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s hold|churn N|grow N|timed MS|fork\n", argv[0]);
    return 2;
  }
  const char* mode = argv[1];
  const size_t arg = argc > 2 ? strtoul(argv[2], nullptr, 10) : 0;
  if (strcmp(mode, "hold") == 0) {
    g_sink = alloc_big(40);
    g_sink = alloc_small(81920, 128);  // 10 MiB (plus the 640 KiB pointer array in main)
    churn(20);
    printf("big %zu small %zu\n", 40 * kMiB, size_t{81920} * 128);
  } else if (strcmp(mode, "churn") == 0) {
    churn(arg);
  } else if (strcmp(mode, "grow") == 0) {
    g_sink = alloc_big(arg);
  } else if (strcmp(mode, "timed") == 0) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(arg);
    while (std::chrono::steady_clock::now() < end) {
      g_sink = child_alloc(1000);
      free(g_sink);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  } else if (strcmp(mode, "fork") == 0) {
    g_sink = alloc_big(2);
    fflush(stdout);
    const pid_t pid = fork();
    if (pid < 0) return 3;
    if (pid == 0) {
      g_sink = child_alloc(3 * kMiB);
      exit(0);  // a normal exit: library destructors run, so the child's exit dump is written
    }
    int status = 0;
    waitpid(pid, &status, 0);
    printf("child %d\n", static_cast<int>(pid));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 4;
  } else {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  return 0;
}
