// Output for the heap profiler: a text writer over memory from mmap, and the few file
// operations a dump needs. Nothing here allocates through malloc, so it can run inside an
// allocation hook and with the profiler's lock held.
//
// The file calls (open, write, read) belong with the other syscalls in src/platform/; they
// live here until os.h grows OpenForWrite/OpenForRead/WriteAll/Read.
#ifndef TCMALLOC_HEAP_PROFILE_IO_H_
#define TCMALLOC_HEAP_PROFILE_IO_H_

#include <cstddef>

namespace tcm {

// Accumulates text in an mmap'ed buffer. In file mode (fd >= 0) a full buffer is written to
// the file and reused, so a profile of any size needs one buffer's worth of memory; in
// memory mode (fd < 0) the buffer doubles instead and holds the whole text at the end.
// Errors (a failed write, no memory to grow) are sticky and reported by Finish().
// Not thread-safe: one owner at a time.
class ProfileWriter {
 public:
  explicit ProfileWriter(int fd);
  ~ProfileWriter();
  ProfileWriter(const ProfileWriter&) = delete;
  ProfileWriter& operator=(const ProfileWriter&) = delete;

  void Append(const char* data, size_t n);
  // One formatted piece of at most 511 characters (longer output is cut).
  void Printf(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  // Appends the contents of the file at path (used for /proc/self/maps). False if unreadable.
  bool AppendFile(const char* path);
  // File mode: writes what is buffered. Returns false if anything was lost on the way.
  bool Finish();

  // Memory mode: the text so far (not NUL-terminated) and its length.
  const char* data() const { return buf_; }
  size_t size() const { return used_; }

 private:
  bool Reserve(size_t n);  // room for n more bytes; false (and failed_) if impossible
  void Flush();

  int fd_;
  char* buf_ = nullptr;
  size_t cap_ = 0;
  size_t used_ = 0;
  bool failed_ = false;
};

// Creates or truncates path for writing (mode 0644). Returns the fd, or -1 with errno set.
int OpenProfileFile(const char* path);
void CloseProfileFile(int fd);

// Writes a whole line to stderr as gperftools does (no "tcmalloc:" prefix, since users and
// scripts look for gperftools' exact wording). fmt is printf-style; a newline is added.
void ProfileLog(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace tcm

#endif  // TCMALLOC_HEAP_PROFILE_IO_H_
