// Files for the heap profiler and the heap checker: profiles written out, /proc and
// symbol tables read in. Part of the OS contract of platform/os.h (whose CloseFd,
// FileSizeIfRegular and Unmap these pair with).
//
// Every primitive is a raw system call: no malloc, no libc lock (the checker calls them
// while other threads are frozen, possibly inside stdio or malloc), no buffering. Each
// leaves errno as it found it; a failure's errno is handed back through *error when the
// caller wants it. EINTR is retried.
#ifndef TCMALLOC_PLATFORM_FILES_H_
#define TCMALLOC_PLATFORM_FILES_H_

#include <cstddef>

namespace tcm::os {

// Opens path read-only (close-on-exec). Returns the fd, or -1 (*error = errno if given).
int OpenForReading(const char* path, int* error = nullptr);

// Creates or truncates path for writing, mode 0644 (close-on-exec). Returns the fd, or -1
// (*error = errno if given).
int OpenForWriting(const char* path, int* error = nullptr);

// Reads up to n bytes. Returns the count (0 at end of file), or -1 on error.
long ReadFd(int fd, void* buf, size_t n);

// Writes all of buf, retrying short writes. False if the kernel refused part of it.
bool WriteAllFd(int fd, const void* buf, size_t n);

// Maps a whole regular, non-empty file read-only and private; *size receives its length.
// Page-aligned. nullptr on failure (also for /proc files, which report size 0). Release
// with os::Unmap(p, *size).
const void* MapFileReadOnly(const char* path, size_t* size);

// The target of the symbolic link at path, NUL-terminated and truncated to len - 1 bytes.
// Returns its length, or 0 (buf = "") if path is not a readable link.
size_t ReadLink(const char* path, char* buf, size_t len);

}  // namespace tcm::os

#endif  // TCMALLOC_PLATFORM_FILES_H_
