// Fork storm: a multithreaded parent forks thousands of times while its worker threads keep
// allocating, freeing and reallocating. Up to four children run at once; each one
//   - verifies blocks it inherited from the parent and frees some of them,
//   - allocates, fills, verifies and frees blocks of every size range (up to 1 MiB),
//   - every tenth one starts a thread that allocates too,
// and _exits 0; an alarm kills a child stuck on a lock inherited from the parent, which
// counts as a failure like a non-zero exit does. The parent's own memory must stay bounded:
// its heap (bytes obtained from the system) and its RSS may grow only by a fixed allowance
// between the end of the warm-up and the end of the storm. No timing assertions.
//
// Usage: fork_storm [--forks N] [--workers N] [--in-flight N]
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include <gperftools/malloc_extension.h>

namespace {

constexpr size_t kHeapGrowthLimit = size_t{64} << 20;
constexpr size_t kRssGrowthLimit = size_t{96} << 20;
constexpr unsigned kChildAlarmSeconds = 30;

enum ChildExit { kOk = 0, kInheritedCorrupt = 10, kAllocFailed = 11, kOwnCorrupt = 12, kThreadFailed = 13 };

struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9e3779b97f4a7c15ULL + 7) {}
  uint64_t Next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545f4914f6cdd1dULL;
  }
  uint64_t Below(uint64_t n) { return Next() % n; }
};

size_t Skewed(Rng& r, size_t max) {
  const uint64_t k = r.Below(100);
  size_t n = k < 80 ? 1 + r.Below(256) : k < 97 ? 257 + r.Below(32 << 10) : 1 + r.Below(max);
  return n < max ? n : max;
}

void Fill(void* p, size_t n, uint8_t seed) {
  auto* c = static_cast<uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) c[i] = static_cast<uint8_t>(seed + i * 7);
}
bool Intact(const void* p, size_t n, uint8_t seed) {
  const auto* c = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i)
    if (c[i] != static_cast<uint8_t>(seed + i * 7)) return false;
  return true;
}

struct Block {
  void* p;
  size_t n;
  uint8_t seed;
};

size_t Property(const char* name) {
  size_t v = 0;
  MallocExtension::instance()->GetNumericProperty(name, &v);
  return v;
}

size_t RssBytes() {
  FILE* f = fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long total = 0, rss = 0;
  const int got = fscanf(f, "%lu %lu", &total, &rss);
  fclose(f);
  return got == 2 ? rss * static_cast<size_t>(sysconf(_SC_PAGESIZE)) : 0;
}

void Worker(std::atomic<bool>* stop, uint64_t id) {
  Rng r(id);
  std::vector<void*> held(256, nullptr);
  while (!stop->load(std::memory_order_relaxed)) {
    void*& slot = held[r.Below(held.size())];
    const uint64_t op = r.Below(10);
    if (op < 6) {
      free(slot);
      slot = malloc(Skewed(r, 256 << 10));
    } else if (op < 8) {
      void* q = realloc(slot, Skewed(r, 256 << 10));
      if (q != nullptr) slot = q;
    } else {
      char* a = new char[1 + r.Below(4000)];
      a[0] = 1;
      delete[] a;
    }
  }
  for (void* p : held) free(p);
}

// The child's whole life; leaves only through _exit.
[[noreturn]] void Child(std::vector<Block>& inherited, uint64_t n) {
  alarm(kChildAlarmSeconds);
  Rng r(n + 12345);
  for (const Block& b : inherited)
    if (!Intact(b.p, b.n, b.seed)) _exit(kInheritedCorrupt);
  // Free a few of the parent's blocks here: their memory came from the parent's caches.
  for (size_t i = 0; i < inherited.size(); i += 3) free(inherited[i].p);
  std::vector<Block> mine;
  for (int i = 0; i < 32; ++i) {
    Block b{nullptr, Skewed(r, 1 << 20), static_cast<uint8_t>(r.Next())};
    b.p = malloc(b.n);
    if (b.p == nullptr) _exit(kAllocFailed);
    Fill(b.p, b.n, b.seed);
    mine.push_back(b);
  }
  for (const Block& b : mine) {
    if (!Intact(b.p, b.n, b.seed)) _exit(kOwnCorrupt);
    free(b.p);
  }
  if (n % 10 == 0) {
    std::atomic<bool> ok{false};
    std::thread t([&ok] {
      std::vector<std::string> v;
      for (int i = 0; i < 100; ++i) v.emplace_back(static_cast<size_t>(100 + i), 'x');
      ok = v.back().size() == 199;
    });
    t.join();
    if (!ok) _exit(kThreadFailed);
  }
  _exit(kOk);
}

}  // namespace

int main(int argc, char** argv) {
  int forks = 2000, workers = 2, in_flight = 4;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const int v = atoi(argv[i + 1]);
    if (a == "--forks") {
      forks = v;
    } else if (a == "--workers") {
      workers = v;
    } else if (a == "--in-flight") {
      in_flight = v;
    }
  }
  if (forks < 1 || in_flight < 1) {
    fprintf(stderr, "usage: %s [--forks N] [--workers N] [--in-flight N]\n", argv[0]);
    return 2;
  }
  {
    void* probe = malloc(64);
    if (MallocExtension::instance()->GetOwnership(probe) != MallocExtension::kOwned) {
      fprintf(stderr, "fork_storm: malloc is not tcmalloc's\n");
      return 2;
    }
    free(probe);
  }

  Rng r(1);
  std::vector<Block> inherited;
  for (int i = 0; i < 48; ++i) {
    Block b{nullptr, Skewed(r, 1 << 20), static_cast<uint8_t>(r.Next())};
    b.p = malloc(b.n);
    Fill(b.p, b.n, b.seed);
    inherited.push_back(b);
  }

  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < workers; ++t) threads.emplace_back(Worker, &stop, static_cast<uint64_t>(t + 1));

  const int warmup = forks / 10 > 0 ? forks / 10 : 1;
  size_t heap0 = 0, rss0 = 0;
  int failures = 0;
  std::deque<pid_t> running;
  auto reap = [&](pid_t pid) {
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) {
      ++failures;
      perror("waitpid");
      return;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      if (++failures <= 5) {
        if (WIFSIGNALED(status)) {
          fprintf(stderr, "fork_storm: child %d killed by signal %d%s\n", pid, WTERMSIG(status),
                  WTERMSIG(status) == SIGALRM ? " (stuck: deadlock after fork?)" : "");
        } else {
          fprintf(stderr, "fork_storm: child %d exited with %d\n", pid, WEXITSTATUS(status));
        }
      }
    }
  };
  for (int n = 0; n < forks; ++n) {
    if (n == warmup) {
      while (!running.empty()) {
        reap(running.front());
        running.pop_front();
      }
      heap0 = Property("generic.heap_size");
      rss0 = RssBytes();
    }
    const pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      ++failures;
      break;
    }
    if (pid == 0) Child(inherited, static_cast<uint64_t>(n));
    running.push_back(pid);
    if (static_cast<int>(running.size()) >= in_flight) {
      reap(running.front());
      running.pop_front();
    }
  }
  while (!running.empty()) {
    reap(running.front());
    running.pop_front();
  }
  stop = true;
  for (std::thread& t : threads) t.join();

  int corrupt = 0;
  for (const Block& b : inherited) {
    if (!Intact(b.p, b.n, b.seed)) ++corrupt;
    free(b.p);
  }
  const size_t heap1 = Property("generic.heap_size");
  const size_t rss1 = RssBytes();
  const double mib = 1 << 20;
  printf("fork_storm: %d forks (%d workers, %d in flight), %d failed children, %d corrupt parent blocks\n", forks,
         workers, in_flight, failures, corrupt);
  printf("fork_storm: parent heap %.1f -> %.1f MiB, rss %.1f -> %.1f MiB (after warm-up -> end)\n", heap0 / mib,
         heap1 / mib, rss0 / mib, rss1 / mib);
  bool ok = failures == 0 && corrupt == 0;
  if (heap1 > heap0 + kHeapGrowthLimit) {
    fprintf(stderr, "fork_storm: parent heap grew by more than %zu MiB\n", kHeapGrowthLimit >> 20);
    ok = false;
  }
  if (rss1 > rss0 + kRssGrowthLimit) {
    fprintf(stderr, "fork_storm: parent rss grew by more than %zu MiB\n", kRssGrowthLimit >> 20);
    ok = false;
  }
  printf("fork_storm: %s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
