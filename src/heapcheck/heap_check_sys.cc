// Raw system calls for the heap checker (see heap_check_sys.h for why they must be raw).
// Every function preserves errno: the checker runs inside the program's malloc/free calls
// and at exit, where a changed errno would be visible to the program.
#include "heapcheck/heap_check_sys.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>

namespace tcm::heapcheck {
namespace sys {

namespace {
// Restores errno on scope exit.
class ErrnoKeeper {
 public:
  ErrnoKeeper() : saved_(errno) {}
  ~ErrnoKeeper() { errno = saved_; }

 private:
  int saved_;
};
}  // namespace

int GetTid() { return static_cast<int>(syscall(SYS_gettid)); }
int GetPid() { return static_cast<int>(syscall(SYS_getpid)); }

bool IsSetuid() {
  ErrnoKeeper k;
  return syscall(SYS_getuid) != syscall(SYS_geteuid) || syscall(SYS_getgid) != syscall(SYS_getegid);
}

int OpenRead(const char* path) {
  ErrnoKeeper k;
  return static_cast<int>(syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC));
}

int OpenWriteTruncate(const char* path) {
  ErrnoKeeper k;
  return static_cast<int>(
      syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
}

long Read(int fd, void* buf, size_t n) {
  ErrnoKeeper k;
  for (;;) {
    long r = syscall(SYS_read, fd, buf, n);
    if (r < 0 && errno == EINTR) continue;
    return r;
  }
}

bool WriteAll(int fd, const void* buf, size_t n) {
  ErrnoKeeper k;
  const char* p = static_cast<const char*>(buf);
  while (n > 0) {
    long r = syscall(SYS_write, fd, p, n);
    if (r < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

void Close(int fd) {
  ErrnoKeeper k;
  syscall(SYS_close, fd);
}

const void* MapFileReadOnly(const char* path, size_t* size) {
  ErrnoKeeper k;
  int fd = OpenRead(path);
  if (fd < 0) return nullptr;
  struct stat st;
  void* p = MAP_FAILED;
  if (syscall(SYS_fstat, fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    *size = static_cast<size_t>(st.st_size);
    p = mmap(nullptr, *size, PROT_READ, MAP_PRIVATE, fd, 0);
  }
  Close(fd);
  return p == MAP_FAILED ? nullptr : p;
}

void UnmapFile(const void* p, size_t size) {
  ErrnoKeeper k;
  munmap(const_cast<void*>(p), size);
}

int ListTasks(int* tids, int cap) {
  ErrnoKeeper k;
  int fd = static_cast<int>(
      syscall(SYS_openat, AT_FDCWD, "/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd < 0) return -1;
  // struct linux_dirent64 without the header that defines it for glibc users.
  struct Dirent64 {
    uint64_t d_ino;         // cppcheck-suppress unusedStructMember
    int64_t d_off;          // cppcheck-suppress unusedStructMember
    unsigned short d_reclen;
    unsigned char d_type;   // cppcheck-suppress unusedStructMember
    char d_name[1];
  };
  alignas(8) char buf[4096];
  int count = 0;
  for (;;) {
    long n = syscall(SYS_getdents64, fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      const Dirent64* d = reinterpret_cast<const Dirent64*>(buf + off);
      off += d->d_reclen;
      const char* s = d->d_name;
      if (*s < '0' || *s > '9') continue;  // "." and ".."
      int tid = 0;
      for (; *s >= '0' && *s <= '9'; ++s) tid = tid * 10 + (*s - '0');
      if (count < cap) tids[count] = tid;
      ++count;
    }
  }
  Close(fd);
  return count;
}

int TgKill(int tgid, int tid, int sig) {
  ErrnoKeeper k;
  return syscall(SYS_tgkill, tgid, tid, sig) == 0 ? 0 : -1;
}

long CopyFromSelf(void* dst, uintptr_t src, size_t n) {
  ErrnoKeeper k;
  struct iovec local = {dst, n};
  struct iovec remote = {reinterpret_cast<void*>(src), n};
  long r = syscall(SYS_process_vm_readv, GetPid(), &local, 1UL, &remote, 1UL, 0UL);
  if (r >= 0) return r;
  // EFAULT: the very first page is unreadable (a partial copy returns a short count
  // instead). Anything else means the call itself is unavailable.
  return errno == EFAULT ? 0 : -1;
}

bool Residency(uintptr_t start, size_t pages, unsigned char* out) {
  ErrnoKeeper k;
  return syscall(SYS_mincore, start, pages * 4096, out) == 0;
}

void FutexWait(std::atomic<int>* word, int expected, uint64_t timeout_ns) {
  ErrnoKeeper k;
  struct timespec ts;
  struct timespec* tsp = nullptr;
  if (timeout_ns != 0) {
    ts.tv_sec = static_cast<time_t>(timeout_ns / 1000000000ull);
    ts.tv_nsec = static_cast<long>(timeout_ns % 1000000000ull);
    tsp = &ts;
  }
  syscall(SYS_futex, reinterpret_cast<int*>(word), FUTEX_WAIT_PRIVATE, expected, tsp, nullptr, 0);
}

void FutexWakeAll(std::atomic<int>* word) {
  ErrnoKeeper k;
  syscall(SYS_futex, reinterpret_cast<int*>(word), FUTEX_WAKE_PRIVATE, 0x7fffffff, nullptr, nullptr, 0);
}

uint64_t NowNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace sys

bool ReadWholeFile(const char* path, MappedArray<char>* out) {
  out->Clear();
  int fd = sys::OpenRead(path);
  if (fd < 0) return false;
  bool ok = true;
  for (;;) {
    // /proc files report size 0, so read until end of file, growing as needed.
    if (!out->Reserve(out->size() + 65536)) {
      ok = false;
      break;
    }
    const size_t before = out->size();
    out->Resize(before + 65536);
    long n = sys::Read(fd, out->data() + before, 65536);
    if (n <= 0) {
      out->Resize(before);
      ok = n == 0;
      break;
    }
    out->Resize(before + static_cast<size_t>(n));
  }
  sys::Close(fd);
  if (ok && out->Reserve(out->size() + 1)) {
    out->data()[out->size()] = '\0';
    return true;
  }
  return false;
}

}  // namespace tcm::heapcheck
