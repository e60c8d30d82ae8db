// Syscall wrappers. Uses raw syscalls where glibc's wrapper could allocate or take locks.
#include "platform/os.h"

#include "platform/vdso.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>

// glibc's sbrk does the bookkeeping of the break (__curbrk) that brk(2) alone would not;
// __sbrk is its internal name, which libtcmalloc's own sbrk does not interpose.
extern "C" void* __sbrk(intptr_t increment);

namespace tcm::os {

void* RawMmap(void* start, size_t length, int prot, int flags, int fd, int64_t offset) {
  return reinterpret_cast<void*>(syscall(SYS_mmap, start, length, prot, flags, fd, offset));
}

int RawMunmap(void* start, size_t length) { return static_cast<int>(syscall(SYS_munmap, start, length)); }

void* RawMremap(void* old_addr, size_t old_size, size_t new_size, int flags, void* new_addr) {
  return reinterpret_cast<void*>(syscall(SYS_mremap, old_addr, old_size, new_size, flags, new_addr));
}

void* RawSbrk(intptr_t increment) { return __sbrk(increment); }

// The allocator's own mappings go straight to the kernel: in libtcmalloc the symbol `mmap`
// is ours, and reporting our own memory to the mmap hooks would count the heap twice (and
// call hooks under the page heap lock).
void* MapAnonymous(size_t bytes) {
  int saved = errno;
  void* p = RawMmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  errno = saved;  // a failed mmap must not leak EINVAL etc. into the caller's errno
  return p == MAP_FAILED ? nullptr : p;
}

void Unmap(void* p, size_t bytes) {
  int saved = errno;
  RawMunmap(p, bytes);
  errno = saved;
}

void* ReserveNoAccess(size_t bytes) {
  int saved = errno;
  void* p = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  errno = saved;
  return p == MAP_FAILED ? nullptr : p;
}

bool SetAccess(void* p, size_t bytes, bool read_write) {
  int saved = errno;
  bool ok = mprotect(p, bytes, read_write ? PROT_READ | PROT_WRITE : PROT_NONE) == 0;
  errno = saved;
  return ok;
}

bool ReleasePages(void* p, size_t bytes) {
  int saved = errno;
  int rc;
  do {
    rc = madvise(p, bytes, MADV_DONTNEED);
  } while (rc != 0 && errno == EAGAIN);
  errno = saved;
  return rc == 0;
}

bool AdviseHugePages(void* p, size_t bytes) {
  ErrnoKeeper keep;
  return madvise(p, bytes, MADV_HUGEPAGE) == 0;
}

bool AdviseNoHugePages(void* p, size_t bytes) {
  ErrnoKeeper keep;
  return madvise(p, bytes, MADV_NOHUGEPAGE) == 0;
}

bool CollapseHugePages(void* p, size_t bytes) {
#ifndef MADV_COLLAPSE
  constexpr int MADV_COLLAPSE = 25;
#endif
  ErrnoKeeper keep;
  return madvise(p, bytes, MADV_COLLAPSE) == 0;
}

// Raw calls, not platform/files.h: that file is the profiler's and the checker's, not in
// the core library.
ThpMode ReadThpMode() {
  ErrnoKeeper keep;
  char buf[128];
  ssize_t n = -1;
  const int fd = static_cast<int>(
      syscall(SYS_openat, AT_FDCWD, "/sys/kernel/mm/transparent_hugepage/enabled", O_RDONLY | O_CLOEXEC));
  if (fd >= 0) {
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
  }
  if (n <= 0) return ThpMode::kUnknown;
  buf[n] = '\0';
  // e.g. "always [madvise] never": the selected mode is the bracketed word.
  if (strstr(buf, "[never]") != nullptr) return ThpMode::kNever;
  if (strstr(buf, "[madvise]") != nullptr) return ThpMode::kMadvise;
  if (strstr(buf, "[always]") != nullptr) return ThpMode::kAlways;
  return ThpMode::kUnknown;
}

bool RemovePages(void* p, size_t bytes) {
  int saved = errno;
  bool ok = madvise(p, bytes, MADV_REMOVE) == 0;
  errno = saved;
  return ok;
}

bool PageResidency(uintptr_t start, size_t pages, unsigned char* out) {
  ErrnoKeeper k;
  return syscall(SYS_mincore, start, pages * 4096, out) == 0;
}

size_t ResidentBytes(uintptr_t start, size_t bytes) {
  constexpr size_t kPage = 4096;
  unsigned char vec[512];  // one byte a page: 2 MiB a call
  size_t resident = 0;
  const size_t pages = (bytes + kPage - 1) / kPage;
  for (size_t done = 0; done < pages;) {
    const size_t n = pages - done < sizeof(vec) ? pages - done : sizeof(vec);
    if (PageResidency(start + done * kPage, n, vec)) {
      for (const unsigned char* v = vec; v != vec + n; ++v) resident += (*v & 1u) * kPage;
    }
    done += n;
  }
  return resident;
}

void* Sbrk(intptr_t increment) {
  int saved = errno;
  void* p = RawSbrk(increment);
  errno = saved;
  return p == reinterpret_cast<void*>(-1) ? nullptr : p;
}

void WriteStderr(const char* buf, size_t len) {
  int saved = errno;
  while (len > 0) {
    ssize_t n = syscall(SYS_write, 2, buf, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    buf += n;
    len -= static_cast<size_t>(n);
  }
  errno = saved;
}

void Abort() {
  // abort() may run atexit-ish machinery in odd states; raise SIGABRT directly first.
  syscall(SYS_tgkill, syscall(SYS_getpid), syscall(SYS_gettid), SIGABRT);
  abort();
}

void FutexWait(std::atomic<int>* word, int expected) {
  int saved = errno;
  syscall(SYS_futex, reinterpret_cast<int*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
  errno = saved;
}

void FutexWake(std::atomic<int>* word, int count) {
  int saved = errno;
  syscall(SYS_futex, reinterpret_cast<int*>(word), FUTEX_WAKE_PRIVATE, count, nullptr, nullptr, 0);
  errno = saved;
}

void Yield() { sched_yield(); }

namespace {

int FindClockThenRead(clockid_t id, struct timespec* ts);

// Starts at the finder, so the first read looks up the vDSO's clock_gettime (vdso.h says
// why) and every later one calls it directly. Threads racing the first read store the same
// value; relaxed is enough, as either value reads the clock.
constinit std::atomic<vdso::ClockGettimeFn> g_clock_gettime{FindClockThenRead};

int FindClockThenRead(clockid_t id, struct timespec* ts) {
  const vdso::ClockGettimeFn fn = ChooseClockGettime(vdso::ProcessImage());
  g_clock_gettime.store(fn, std::memory_order_relaxed);
  return fn(id, ts);
}

}  // namespace

vdso::ClockGettimeFn ChooseClockGettime(const void* vdso_image) {
  const vdso::ClockGettimeFn fn = vdso::FindClockGettime(vdso_image);
  return fn != nullptr ? fn : &clock_gettime;
}

bool CoarseClockReadsVdso() {
  MonotonicCoarseNs();
  return g_clock_gettime.load(std::memory_order_relaxed) != &clock_gettime;
}

uint64_t MonotonicCoarseNs() {
  struct timespec ts;
  g_clock_gettime.load(std::memory_order_relaxed)(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void SleepNs(uint64_t ns) {
  struct timespec ts;
  ts.tv_sec = static_cast<time_t>(ns / 1000000000ull);
  ts.tv_nsec = static_cast<long>(ns % 1000000000ull);
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

int CreateUnlinkedFile(const char* dir) {
  int saved = errno;
  // O_TMPFILE makes the file nameless from the start (tmpfs, ext4); hugetlbfs lacks it,
  // so fall back to a unique name that is unlinked at once.
  int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    char path[512];
    for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
      snprintf(path, sizeof(path), "%s/tcmalloc.%d.%d", dir, GetPid(), attempt);
      fd = open(path, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
      if (fd >= 0) unlink(path);
      else if (errno != EEXIST) break;
    }
  }
  errno = saved;
  return fd;
}

int OpenReadWrite(const char* path) {
  int saved = errno;
  int fd = open(path, O_RDWR | O_CLOEXEC);
  errno = saved;
  return fd;
}

bool ResizeFile(int fd, size_t bytes) {
  int saved = errno;
  bool ok = ftruncate(fd, static_cast<off_t>(bytes)) == 0;
  errno = saved;
  return ok;
}

void* MapFile(int fd, size_t bytes, size_t offset, bool shared) {
  int saved = errno;
  void* p = RawMmap(nullptr, bytes, PROT_READ | PROT_WRITE, shared ? MAP_SHARED : MAP_PRIVATE, fd,
                    static_cast<int64_t>(offset));
  errno = saved;
  return p == MAP_FAILED ? nullptr : p;
}

void CloseFd(int fd) {
  int saved = errno;
  close(fd);
  errno = saved;
}

size_t FileSystemBlockSize(int fd) {
  struct statfs st;
  if (fstatfs(fd, &st) != 0 || st.f_bsize <= 0) return 0;
  return static_cast<size_t>(st.f_bsize);
}

size_t FileSizeIfRegular(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
  return static_cast<size_t>(st.st_size);
}

int GetPid() { return static_cast<int>(syscall(SYS_getpid)); }

uint64_t Random64() {
  uint64_t r = 0;
  if (syscall(SYS_getrandom, &r, sizeof(r), 0x1 /* GRND_NONBLOCK */) == static_cast<long>(sizeof(r))) return r;
  // Bytes 8..15 of AT_RANDOM are glibc's pointer guard, 0..7 its stack guard: take a mix of
  // both with the time, so leaking our secret does not hand out either of theirs.
  uint64_t words[2] = {0, 0};
  if (const void* at = reinterpret_cast<const void*>(getauxval(AT_RANDOM))) memcpy(words, at, sizeof(words));
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  r = (words[0] * 0x9E3779B97F4A7C15ull) ^ (words[1] >> 7) ^ static_cast<uint64_t>(ts.tv_nsec) * 0xBF58476D1CE4E5B9ull;
  return r;
}

bool ForEachEnv(void (*fn)(const char* record, void* ctx), void* ctx) {
  // /proc/self/environ holds the initial environment as NAME=value\0 records. Read it in
  // chunks on the stack; a record may straddle two chunks, so carry the partial tail.
  int saved = errno;
  int fd = static_cast<int>(syscall(SYS_openat, AT_FDCWD, "/proc/self/environ", O_RDONLY | O_CLOEXEC));
  if (fd < 0) {
    errno = saved;
    return false;
  }
  char chunk[4096];
  char record[1024];
  size_t rec_len = 0;
  bool rec_overflow = false;
  for (;;) {
    ssize_t n = syscall(SYS_read, fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      char c = chunk[i];
      if (c != '\0') {
        if (rec_len + 1 < sizeof(record)) record[rec_len++] = c; else rec_overflow = true;
        continue;
      }
      record[rec_len] = '\0';
      if (!rec_overflow) fn(record, ctx);
      rec_len = 0;
      rec_overflow = false;
    }
  }
  syscall(SYS_close, fd);
  errno = saved;
  return true;
}

namespace {
struct EnvLookup {
  const char* name;
  size_t name_len;
  char* buf;
  size_t len;
  bool found;
};

void MatchEnvRecord(const char* record, void* ctx) {
  auto* q = static_cast<EnvLookup*>(ctx);
  if (q->found || strncmp(record, q->name, q->name_len) != 0 || record[q->name_len] != '=') return;
  size_t vlen = strlen(record + q->name_len + 1);
  if (vlen >= q->len) vlen = q->len - 1;
  memcpy(q->buf, record + q->name_len + 1, vlen);
  q->buf[vlen] = '\0';
  q->found = true;
}
}  // namespace

bool GetEnv(const char* name, char* buf, size_t len) {
  EnvLookup q{name, strlen(name), buf, len, false};
  ForEachEnv(MatchEnvRecord, &q);
  return q.found;
}

}  // namespace tcm::os
