// The operating-system contract: the only layer that includes system headers or makes
// syscalls. Each primitive states its alignment, zeroing and failure behaviour.
#ifndef TCMALLOC_PLATFORM_OS_H_
#define TCMALLOC_PLATFORM_OS_H_

#include "platform/vdso.h"

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>

namespace tcm::os {

// Restores errno on scope exit: the primitives here never leak a system call's errno into
// the caller's (malloc must leave errno alone unless it fails).
class ErrnoKeeper {
 public:
  ErrnoKeeper() : saved_(errno) {}
  ~ErrnoKeeper() { errno = saved_; }
  ErrnoKeeper(const ErrnoKeeper&) = delete;
  ErrnoKeeper& operator=(const ErrnoKeeper&) = delete;

 private:
  int saved_;
};

// Fresh anonymous private read-write memory, zero-filled, aligned to the OS page (4 KiB).
// Returns nullptr (errno untouched by contract) on failure.
void* MapAnonymous(size_t bytes);
void Unmap(void* p, size_t bytes);

// Address space with no access and no memory behind it (guard pages), aligned to the OS
// page; nullptr on failure. SetAccess makes [p, p+bytes) (OS-page aligned) read-write or
// inaccessible again; false if the kernel refused.
void* ReserveNoAccess(size_t bytes);
bool SetAccess(void* p, size_t bytes, bool read_write);

// Gives the physical pages of [p, p+bytes) back to the kernel; the range stays mapped and
// reads back as zeros. Returns false if the kernel refused.
bool ReleasePages(void* p, size_t bytes);

// Asks the kernel to back [p, p+bytes) (anonymous, 2 MiB aligned for effect) with
// transparent huge pages (MADV_HUGEPAGE). False if the kernel refused or lacks THP.
bool AdviseHugePages(void* p, size_t bytes);
// The opposite (MADV_NOHUGEPAGE): khugepaged leaves [p, p+bytes) alone. False if refused.
bool AdviseNoHugePages(void* p, size_t bytes);
// Makes the kernel back [p, p+bytes) with huge pages now, copying the small pages already
// there (MADV_COLLAPSE, Linux 6.1). Slow (a copy per huge page): for memory that is mostly
// in use and was faulted in before it was advised. False if refused or unsupported.
bool CollapseHugePages(void* p, size_t bytes);

// The system's transparent huge page mode, read from
// /sys/kernel/mm/transparent_hugepage/enabled: the word in brackets.
enum class ThpMode { kUnknown, kNever, kMadvise, kAlways };
ThpMode ReadThpMode();

// Residency of the 4 KiB pages of [start, start + pages * 4096), which must be mapped:
// one byte per page into out, bit 0 set if resident (mincore). False if the kernel refused.
bool PageResidency(uintptr_t start, size_t pages, unsigned char* out);
// Bytes of [start, start+bytes) (OS-page aligned, mapped) that are resident, by
// PageResidency a 2 MiB piece at a time; a piece the kernel refuses counts none. For
// statistics, not for hot paths.
size_t ResidentBytes(uintptr_t start, size_t bytes);

// Frees the backing store of a shared file mapping range (MADV_REMOVE: tmpfs, hugetlbfs);
// afterwards it reads as zeros. False where unsupported (private or anonymous memory).
bool RemovePages(void* p, size_t bytes);

// The system calls behind the program's mmap/munmap/mremap/sbrk, made directly (not through
// glibc's symbols, which libtcmalloc interposes) with their usual results and errno: mmap
// and mremap return MAP_FAILED ((void*)-1), munmap -1, sbrk (void*)-1 on failure.
void* RawMmap(void* start, size_t length, int prot, int flags, int fd, int64_t offset);
int RawMunmap(void* start, size_t length);
void* RawMremap(void* old_addr, size_t old_size, size_t new_size, int flags, void* new_addr);
void* RawSbrk(intptr_t increment);

// Moves the program break by `increment` bytes; returns the old break or nullptr on failure.
void* Sbrk(intptr_t increment);

// Writes all of buf to stderr (fd 2), retrying short writes; never allocates.
void WriteStderr(const char* buf, size_t len);

[[noreturn]] void Abort();

// Blocks while *word == expected (spurious wake-ups allowed).
void FutexWait(std::atomic<int>* word, int expected);
void FutexWake(std::atomic<int>* word, int count);
void Yield();

// Reads NAME=value from the process's initial environment without using `environ` (which
// may not be set up yet when the first malloc arrives). Copies the value into buf
// (NUL-terminated, truncated to len-1). Returns false if the variable is absent.
bool GetEnv(const char* name, char* buf, size_t len);

// Calls fn(record, ctx) for each "NAME=value" record of the initial environment, reading
// /proc/self/environ once (records longer than 1 KiB are skipped). False if unreadable.
bool ForEachEnv(void (*fn)(const char* record, void* ctx), void* ctx);

int GetPid();

// 64 unpredictable bits from the kernel (getrandom, without blocking); if that fails, the
// loader's AT_RANDOM bytes mixed with the clock. Never fails, never allocates.
uint64_t Random64();

// Files for the memfs and device memory sources. Each returns -1/nullptr/false on failure.
int CreateUnlinkedFile(const char* dir);  // a new file in dir, already unlinked
int OpenReadWrite(const char* path);
bool ResizeFile(int fd, size_t bytes);
// Maps bytes of fd at offset (a multiple of 4 KiB), shared or private, read-write.
void* MapFile(int fd, size_t bytes, size_t offset, bool shared);
void CloseFd(int fd);
// Block size of the file system holding fd (the huge page size on hugetlbfs); 0 if unknown.
size_t FileSystemBlockSize(int fd);
// Size of fd if it is a regular file, 0 otherwise (devices).
size_t FileSizeIfRegular(int fd);

// Monotonic time in ns from the coarse clock (vDSO: no syscall, ~4 ms resolution). It calls
// the vDSO's clock_gettime itself, not libc's (platform/vdso.h says why), where there is one.
uint64_t MonotonicCoarseNs();
// The clock_gettime MonotonicCoarseNs uses with this vDSO image: the image's own, or libc's
// when the image is null or has none (valgrind).
vdso::ClockGettimeFn ChooseClockGettime(const void* vdso_image);
// Whether MonotonicCoarseNs reads the clock through the vDSO directly (after a first read).
bool CoarseClockReadsVdso();
void SleepNs(uint64_t ns);

}  // namespace tcm::os

#endif  // TCMALLOC_PLATFORM_OS_H_
