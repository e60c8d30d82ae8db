// Fuzz target: random sequences of heap MISUSE, with our allocator as the process's malloc.
//
// Each input runs in a forked child (misuse is supposed to end in abort). The child mixes
// ordinary malloc/free with interior frees, double frees separated by other frees, frees
// of foreign pointers, and writes into freed blocks; some inputs turn guarded sampling up so
// that every block is guarded. Every block gets a fill pattern. The oracle, in the child:
// a newly handed-out block must not overlap any live block (address ranges), and the
// pattern of every live block the misuse did not touch must be intact when it is freed.
// A violation is recorded in memory shared with the parent, and the child carries on; at
// the end it frees everything and hands its cache back (MarkThreadIdle), so misuse still in
// flight reaches the checks. The parent then requires one of:
//   - a clean exit (no violation);
//   - death by SIGABRT after a one-line "tcmalloc: " diagnosis on stderr (a violation before
//     it is allowed: the checks run when objects move between tiers, so the overlap a misuse
//     causes can exist until then; what is ruled out is an overlap nobody reports);
//   - death by SIGSEGV only after a misuse that can put a block the program still writes
//     on the thread's own free list (an interior free, a double free, a write after free):
//     the program's next write forges that list's link word, which decodes to an
//     unpredictable address, and the pop after it faults (README "Misuse that is detected").
// Anything else (a silent overlap, a clean exit after a violation, an undiagnosed abort)
// fails the input. Built like the api target: the static library, no ASan. Under libFuzzer
// the child's coverage is not seen by the parent, so this target searches by mutation of
// its seeds alone; the replay in CTest runs the seeds and 500 random inputs.
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <gperftools/malloc_extension.h>

#include "fuzz_input.h"

namespace tcm::fuzz {
namespace {

struct Shared {
  int violations;      // overlaps or corrupted patterns seen by the child
  int list_misuse;     // misuses that can leave a written block on a thread's list
};

struct Block {
  char* p;
  size_t size;
  uint8_t seed;
  bool tainted;  // touched by a misuse: its pattern is not checked
};

constexpr int kMaxLive = 64;
constexpr int kMaxFreed = 64;

FUZZ_NO_COVERAGE void Fill(const Block& b) {
  for (size_t i = 0; i < b.size; ++i) b.p[i] = static_cast<char>(b.seed + i * 7);
}
FUZZ_NO_COVERAGE bool Intact(const Block& b) {
  for (size_t i = 0; i < b.size; ++i)
    if (b.p[i] != static_cast<char>(b.seed + i * 7)) return false;
  return true;
}

class Child {
 public:
  explicit Child(Shared* shared) : shared_(shared) {}

  void Run(FuzzInput& in) {
    if (in.Range(0, 3) == 0)
      MallocExtension::instance()->SetNumericProperty("tcmalloc.guarded_sample_rate", 1);
    int steps = 0;
    while (!in.empty() && ++steps < 400) {
      // Mostly ordinary use, so misuse meets a heap in many states; a foreign free ends
      // the run at once, so it is the rarest.
      const uint64_t op = in.Range(0, 31);
      if (op < 14) Allocate(in);
      else if (op < 24) FreeLive(in);
      else if (op < 27) FreeInterior(in);
      else if (op < 29) FreeAgain(in);
      else if (op < 31) WriteAfterFree(in);
      else FreeForeign(in);
    }
    while (live_ > 0) Release(0);
    MallocExtension::instance()->MarkThreadIdle();
  }

 private:
  void Violation() { __atomic_fetch_add(&shared_->violations, 1, __ATOMIC_RELAXED); }

  void Allocate(FuzzInput& in) {
    if (live_ == kMaxLive) return;
    // Sizes >= 16: the 8-byte class has no per-object free bits (README).
    const size_t size = in.Bool() ? in.Range(16, 256) : in.Range(16, 20000);
    char* p = static_cast<char*>(malloc(size));
    if (p == nullptr) return;
    for (int i = 0; i < live_; ++i)
      if (p < blocks_[i].p + blocks_[i].size && blocks_[i].p < p + size) Violation();
    Block b{p, size, static_cast<uint8_t>(in.Byte()), false};
    Fill(b);
    blocks_[live_++] = b;
    Forget(p);  // handed out again: no longer a stale pointer of ours
  }

  void Release(int i) {
    const Block b = blocks_[i];
    if (!b.tainted && !Intact(b)) Violation();
    blocks_[i] = blocks_[--live_];
    free(b.p);
    Remember(b.p);
  }

  void FreeLive(FuzzInput& in) {
    if (live_ > 0) Release(static_cast<int>(in.Range(0, live_ - 1)));
  }

  void FreeInterior(FuzzInput& in) {
    if (live_ == 0) return;
    Block& b = blocks_[in.Range(0, live_ - 1)];
    b.tainted = true;
    __atomic_fetch_add(&shared_->list_misuse, 1, __ATOMIC_RELAXED);
    free(b.p + in.Range(1, b.size - 1));
  }

  // A pointer freed before (possibly handed out and freed again since: then a plain
  // double free). If it is live again under another block, that block is freed by it.
  void FreeAgain(FuzzInput& in) {
    if (freed_count_ == 0) return;
    char* p = freed_[in.Range(0, freed_count_ - 1)];
    for (int i = 0; i < live_; ++i) {
      if (blocks_[i].p == p) {
        blocks_[i] = blocks_[--live_];
        break;
      }
      if (p > blocks_[i].p && p < blocks_[i].p + blocks_[i].size) blocks_[i].tainted = true;
    }
    __atomic_fetch_add(&shared_->list_misuse, 1, __ATOMIC_RELAXED);
    free(p);
  }

  void WriteAfterFree(FuzzInput& in) {
    if (freed_count_ == 0) return;
    char* p = freed_[in.Range(0, freed_count_ - 1)];
    for (int i = 0; i < live_; ++i)
      if (p >= blocks_[i].p && p < blocks_[i].p + blocks_[i].size) blocks_[i].tainted = true;
    __atomic_fetch_add(&shared_->list_misuse, 1, __ATOMIC_RELAXED);
    uint64_t v = in.U64();
    memcpy(p, &v, sizeof(v));
  }

  void FreeForeign(FuzzInput& in) {
    static char global[64];
    char local[64];
    char* p = in.Bool() ? global : local;
    free(p + in.Range(0, 48));
  }

  void Remember(char* p) {
    if (freed_count_ < kMaxFreed) freed_[freed_count_++] = p;
    else freed_[reinterpret_cast<uintptr_t>(p) % kMaxFreed] = p;
  }
  void Forget(char* p) {
    for (int i = 0; i < freed_count_; ++i)
      if (freed_[i] == p) freed_[i] = freed_[--freed_count_];
  }

  Shared* shared_;
  Block blocks_[kMaxLive];
  int live_ = 0;
  char* freed_[kMaxFreed];
  int freed_count_ = 0;
};

Shared* SharedPage() {
  static Shared* page = static_cast<Shared*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  FUZZ_CHECK(page != MAP_FAILED);
  return page;
}

}  // namespace
}  // namespace tcm::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tcm::fuzz;
  Shared* shared = SharedPage();
  memset(shared, 0, sizeof(*shared));
  int err[2];
  FUZZ_CHECK(pipe(err) == 0);
  const pid_t pid = fork();
  FUZZ_CHECK(pid >= 0);
  if (pid == 0) {
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none);
    // libFuzzer's own SIGABRT handler would turn a diagnosed abort into its exit code 77:
    // the child must die of the signal, as a program would.
    signal(SIGABRT, SIG_DFL);
    dup2(err[1], 2);
    close(err[0]);
    FuzzInput in(data, size);
    Child child(shared);
    child.Run(in);
    _exit(0);
  }
  close(err[1]);
  char out[4096];
  size_t got = 0;
  ssize_t n;
  while ((n = read(err[0], out + got, sizeof(out) - 1 - got)) > 0) got += static_cast<size_t>(n);
  out[got] = '\0';
  close(err[0]);
  int status = 0;
  FUZZ_CHECK(waitpid(pid, &status, 0) == pid);
  const bool diagnosed = strstr(out, "tcmalloc: ") != nullptr;
  if (getenv("MISUSE_FUZZ_VERBOSE") != nullptr)
    fprintf(stderr, "status %#x violations %d list misuse %d: %s\n", status, shared->violations, shared->list_misuse,
            out);
  if (WIFEXITED(status)) {
    FUZZ_CHECK(WEXITSTATUS(status) == 0);
    FUZZ_CHECK(shared->violations == 0);  // a silent overlap or corruption
  } else {
    FUZZ_CHECK(WIFSIGNALED(status));
    if (WTERMSIG(status) == SIGABRT) {
      FUZZ_CHECK(diagnosed);
    } else {
      FUZZ_CHECK(WTERMSIG(status) == SIGSEGV && shared->list_misuse > 0);
    }
  }
  return 0;
}
