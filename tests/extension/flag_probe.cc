// A small program whose behaviour the flags test observes from outside, one child process
// per flag setting. Prints key=value lines; see flags_test.py.
#include <gperftools/malloc_extension.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

size_t Prop(const char* name) {
  size_t v = 0;
  MallocExtension::instance()->GetNumericProperty(name, &v);
  return v;
}

void PrintStatsLine(const char* prefix, const char* key) {
  static char buf[1 << 18];
  MallocExtension::instance()->GetStats(buf, sizeof(buf));
  const char* at = strstr(buf, prefix);
  if (at == nullptr) return;
  const char* end = strchr(at, '\n');
  printf("%s=%.*s\n", key, static_cast<int>(end - at), at);
}

void PrintSources() { PrintStatsLine("Memory sources", "sources"); }

// Allocates `mb` MiB in 1 MiB touched blocks; prints how much succeeded.
std::vector<void*> AllocateMb(int mb) {
  std::vector<void*> blocks;
  for (int i = 0; i < mb; ++i) {
    errno = 0;
    void* p = malloc(1 << 20);
    if (p == nullptr) {
      printf("alloc_failed_at=%d\nerrno=%s\n", i, errno == ENOMEM ? "ENOMEM" : strerror(errno));
      break;
    }
    memset(p, 1, 1 << 20);
    blocks.push_back(p);
  }
  printf("allocated_mb=%zu\n", blocks.size());
  return blocks;
}

}  // namespace

int main(int argc, char** argv) {
  std::string action = argc > 1 ? argv[1] : "props";
  int arg = argc > 2 ? atoi(argv[2]) : 0;
  if (action == "props") {
    for (const char* n : {"tcmalloc.max_total_thread_cache_bytes", "tcmalloc.sample_parameter",
                          "tcmalloc.heap_limit_mb", "tcmalloc.aggressive_memory_decommit",
                          "tcmalloc.guarded_sample_rate", "tcmalloc.hardened", "tcmalloc.per_cpu_caches_active"})
      printf("%s=%zu\n", n, Prop(n));
    printf("release_rate=%g\n", MallocExtension::instance()->GetMemoryReleaseRate());
    free(malloc(16));
    // The class table's row for 16-byte objects ends with its batch size.
    static char buf[1 << 18];
    MallocExtension::instance()->GetStats(buf, sizeof(buf));
    for (char* line = strtok(buf, "\n"); line != nullptr; line = strtok(nullptr, "\n")) {
      size_t cl, size;
      int n = 0;
      if (sscanf(line, "%zu %zu%n", &cl, &size, &n) == 2 && size == 16) {
        const char* last = strrchr(line, ' ');
        printf("batch16=%s\n", last + 1);
      }
    }
  } else if (action == "alloc") {
    for (void* p : AllocateMb(arg)) free(p);
    PrintSources();
  } else if (action == "large_report") {
    for (int i = 0; i < 20; ++i) free(malloc(2 << 20));
    printf("done\n");
  } else if (action == "aggressive") {
    free(malloc(10 << 20));
    printf("unmapped=%zu\n", Prop("tcmalloc.pageheap_unmapped_bytes"));
  } else if (action == "release") {
    for (void* p : AllocateMb(20)) free(p);
    MallocExtension::instance()->ReleaseFreeMemory();
    printf("unmapped=%zu\n", Prop("tcmalloc.pageheap_unmapped_bytes"));
  } else if (action == "quiet") {
    // Free 60 MiB while 100 MiB stay in use (too little surplus for the page heap to
    // release at once), then make no allocator calls at all for 1.5 s.
    std::vector<void*> blocks = AllocateMb(160);
    for (size_t i = 0; i < 60 && i < blocks.size(); ++i) free(blocks[i]);
    fflush(stdout);
    usleep(1500 * 1000);
    printf("unmapped=%zu\n", Prop("tcmalloc.pageheap_unmapped_bytes"));
  }
  fflush(stdout);
  return 0;
}
