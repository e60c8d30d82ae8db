// ProfileWriter and the profiler's file operations (see heap_profile_io.h).
#include "profiler/heap_profile_io.h"

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "platform/files.h"
#include "platform/os.h"

namespace tcm {

// One buffer of this size serves a whole dump in file mode; in memory mode it is the
// starting size. Large enough that a typical profile costs a handful of write(2)s.
static constexpr size_t kWriterChunk = 256 * 1024;

ProfileWriter::ProfileWriter(int fd) : fd_(fd) {}

ProfileWriter::~ProfileWriter() {
  if (buf_ != nullptr) os::Unmap(buf_, cap_);
}

void ProfileWriter::Flush() {
  if (!os::WriteAllFd(fd_, buf_, used_)) failed_ = true;
  used_ = 0;
}

bool ProfileWriter::Reserve(size_t n) {
  if (failed_) return false;
  if (buf_ == nullptr) {
    cap_ = kWriterChunk;
    while (fd_ < 0 && cap_ < n) cap_ *= 2;
    buf_ = static_cast<char*>(os::MapAnonymous(cap_));
    if (buf_ == nullptr) {
      cap_ = 0;
      failed_ = true;
      return false;
    }
  }
  if (cap_ - used_ >= n) return true;
  if (fd_ >= 0) {
    // Append never asks for more than one buffer at a time in file mode.
    Flush();
    return !failed_;
  }
  size_t cap = cap_;
  while (cap - used_ < n) cap *= 2;
  char* grown = static_cast<char*>(os::MapAnonymous(cap));
  if (grown == nullptr) {
    failed_ = true;
    return false;
  }
  memcpy(grown, buf_, used_);
  os::Unmap(buf_, cap_);
  buf_ = grown;
  cap_ = cap;
  return true;
}

void ProfileWriter::Append(const char* data, size_t n) {
  while (n > 0) {
    // In file mode feed the buffer in pieces no larger than itself.
    const size_t piece = (fd_ >= 0 && n > kWriterChunk) ? kWriterChunk : n;
    if (!Reserve(piece)) return;
    memcpy(buf_ + used_, data, piece);
    used_ += piece;
    data += piece;
    n -= piece;
  }
}

void ProfileWriter::Printf(const char* fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  // Integer, hex and %s conversions do not allocate in glibc's vsnprintf.
  int n = vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  if (n <= 0) return;
  Append(line, static_cast<size_t>(n) < sizeof(line) ? static_cast<size_t>(n) : sizeof(line) - 1);
}

bool ProfileWriter::AppendFile(const char* path) {
  const int fd = os::OpenForReading(path);
  if (fd < 0) return false;
  char chunk[4096];
  bool ok = true;
  for (;;) {
    const long n = os::ReadFd(fd, chunk, sizeof(chunk));
    if (n < 0) ok = false;
    if (n <= 0) break;
    Append(chunk, static_cast<size_t>(n));
  }
  os::CloseFd(fd);
  return ok;
}

bool ProfileWriter::Finish() {
  if (fd_ >= 0 && buf_ != nullptr && !failed_) Flush();
  return !failed_;
}

int OpenProfileFile(const char* path) {
  int error = 0;
  const int fd = os::OpenForWriting(path, &error);
  if (fd < 0) errno = error;  // the caller reports it
  return fd;
}

void CloseProfileFile(int fd) { os::CloseFd(fd); }

void ProfileLog(const char* fmt, ...) {
  char line[1200];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  size_t len = static_cast<size_t>(n) < sizeof(line) - 1 ? static_cast<size_t>(n) : sizeof(line) - 2;
  line[len++] = '\n';
  os::WriteStderr(line, len);
}

}  // namespace tcm
