// Raw file system calls (see files.h for why raw, and for each contract).
#include "platform/files.h"
#include "platform/os.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace tcm::os {

namespace {

int OpenAt(const char* path, int flags, int mode, int* error) {
  ErrnoKeeper k;
  long fd;
  do {
    fd = syscall(SYS_openat, AT_FDCWD, path, flags | O_CLOEXEC, mode);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0 && error != nullptr) *error = errno;
  return static_cast<int>(fd);
}
}  // namespace

int OpenForReading(const char* path, int* error) { return OpenAt(path, O_RDONLY, 0, error); }

int OpenForWriting(const char* path, int* error) {
  return OpenAt(path, O_WRONLY | O_CREAT | O_TRUNC, 0644, error);
}

long ReadFd(int fd, void* buf, size_t n) {
  ErrnoKeeper k;
  for (;;) {
    const long r = syscall(SYS_read, fd, buf, n);
    if (r < 0 && errno == EINTR) continue;
    return r;
  }
}

bool WriteAllFd(int fd, const void* buf, size_t n) {
  ErrnoKeeper k;
  const char* p = static_cast<const char*>(buf);
  while (n > 0) {
    const long r = syscall(SYS_write, fd, p, n);
    if (r < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (r == 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

const void* MapFileReadOnly(const char* path, size_t* size) {
  ErrnoKeeper k;
  const int fd = OpenForReading(path);
  if (fd < 0) return nullptr;
  struct stat st;
  void* p = MAP_FAILED;
  if (syscall(SYS_fstat, fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    *size = static_cast<size_t>(st.st_size);
    // Straight to the kernel: in libtcmalloc `mmap` is the interposed one, whose hooks must
    // not see our own mappings (os::Unmap, which undoes this one, is raw too).
    p = RawMmap(nullptr, *size, PROT_READ, MAP_PRIVATE, fd, 0);
  }
  syscall(SYS_close, fd);
  return p == MAP_FAILED ? nullptr : p;
}

size_t ReadLink(const char* path, char* buf, size_t len) {
  ErrnoKeeper k;
  if (len == 0) return 0;
  const long r = syscall(SYS_readlinkat, AT_FDCWD, path, buf, len - 1);
  const size_t n = r > 0 ? static_cast<size_t>(r) : 0;
  buf[n] = '\0';
  return n;
}

}  // namespace tcm::os
