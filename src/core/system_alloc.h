// System allocator: where the page heap's memory comes from.
//
// Sources are tried in a fixed order, each falling back to the next:
//   user    a SysAllocator plugged in by the program (MallocExtension::SetSystemAllocator);
//           when set it is the only source: its NULL (or a block that breaks the contract)
//           is out of memory, as in gperftools (it may call the built-in sources itself)
//   memfs   files created and unlinked in a hugetlbfs/tmpfs directory, mapped shared (or
//           private), up to a size limit (TCMALLOC_MEMFS_*)
//   devmem  an offset window of a device file, /dev/mem by default (TCMALLOC_DEVMEM_*);
//           modern kernels refuse /dev/mem mappings, and then this source simply fails
//   mmap    anonymous memory (unless TCMALLOC_SKIP_MMAP)
//   sbrk    the program break (unless TCMALLOC_SKIP_SBRK)
// Memory is always requested in page-aligned chunks of at least kMinSystemAlloc, never
// per allocation. Bytes obtained are counted per source.
//
// Locking: Alloc is called with the page heap lock held; the sources' own state (sbrk,
// memfs and devmem cursors) is additionally guarded by lock_.
#ifndef TCMALLOC_SYSTEM_ALLOC_H_
#define TCMALLOC_SYSTEM_ALLOC_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "base/spinlock.h"
#include "platform/os.h"

namespace tcm {

class SystemAllocator {
 public:
  enum Source { kUser = 0, kMemfs, kDevmem, kMmap, kSbrk, kNumSources };
  using UserAllocFn = void* (*)(void* ctx, size_t size, size_t* actual, size_t alignment);

  constexpr SystemAllocator() = default;

  // Returns memory of at least `bytes` (rounded up to a multiple of `alignment`), aligned to
  // `alignment` (a power of two >= kPageSize); *actual receives the size obtained and
  // *zeroed whether it is known to read as zeros. nullptr if every enabled source failed.
  // *from (if given) receives the source that gave the memory.
  void* Alloc(size_t bytes, size_t alignment, size_t* actual, bool* zeroed, Source* from = nullptr);

  // Like Alloc, but only from the built-in sources (what GetSystemAllocator hands a program
  // to fall back to). Counts the bytes under the source that gave them.
  void* AllocBuiltin(size_t bytes, size_t alignment, size_t* actual);

  // Returns physical memory of a range we obtained back to the OS; false if unsupported
  // or disabled (TCMALLOC_DISABLE_MEMORY_RELEASE). *zeroed tells whether the range now
  // reads as zeros: true for anonymous memory, and for shared file memory only if its
  // backing store could be punched out (MADV_DONTNEED does not zero shared mappings).
  bool Release(void* p, size_t bytes, bool* zeroed);

  // Transparent huge pages. The mode is read once by the composition root
  // (os::ReadThpMode) and set here; tests set it by hand. Advice applies only to anonymous
  // mmap memory and only when the mode is madvise or always (never: the kernel would ignore
  // it; unknown: no THP support).
  void set_thp_mode(os::ThpMode m) { thp_mode_ = m; }
  os::ThpMode thp_mode() const { return thp_mode_; }
  bool thp_available() const { return thp_mode_ == os::ThpMode::kMadvise || thp_mode_ == os::ThpMode::kAlways; }
  // Advises [p, p+bytes), memory this allocator gave from `from`, MADV_HUGEPAGE. False (and
  // nothing done) when THP is unavailable or the source is not anonymous mmap memory.
  bool AdviseHugePages(void* p, size_t bytes, Source from);
  size_t advised_bytes() const { return advised_bytes_; }
  // Takes the advice back (MADV_NOHUGEPAGE) from [p, p+bytes), advised memory; false if THP
  // is unavailable or the kernel refused.
  bool AdviseNoHugePages(void* p, size_t bytes);
  // Collapses [p, p+bytes) (advised anonymous memory) into huge pages now; false if THP is
  // unavailable or the kernel refused. Callable without any lock (no state but a counter).
  bool CollapseHugePages(void* p, size_t bytes);
  size_t collapsed_bytes() const { return collapsed_bytes_.load(std::memory_order_relaxed); }

  void set_enabled(Source s, bool on) { enabled_[s] = on; }
  bool enabled(Source s) const { return enabled_[s]; }
  void set_release_enabled(bool on) { release_enabled_ = on; }
  size_t bytes_from(Source s) const { return bytes_[s]; }
  size_t total_bytes() const;
  static const char* SourceName(Source s);

  void SetUserSource(UserAllocFn fn, void* ctx) noexcept;
  // memfs: directory, limit in bytes (0 = none), flags.
  void ConfigureMemfs(const char* dir, size_t limit, bool abort_on_fail, bool ignore_mmap_fail,
                      bool map_private);
  // devmem: device path and the window [start, limit) in bytes (limit 0 = unbounded).
  void ConfigureDevmem(const char* device, size_t start, size_t limit);

 private:
  void* AllocFrom(int first_source, size_t bytes, size_t alignment, size_t* actual, bool* zeroed, Source* from);
  void* AllocMmap(size_t bytes, size_t alignment);
  void* AllocSbrk(size_t bytes, size_t alignment);
  void* AllocMemfs(size_t bytes, size_t alignment);
  void* AllocDevmem(size_t bytes, size_t alignment);

  SpinLock lock_;
  bool enabled_[kNumSources] = {false, false, false, true, true};
  bool release_enabled_ = true;
  bool only_anonymous_ = true;  // no memfs/devmem/user memory handed out yet
  size_t bytes_[kNumSources] = {};
  os::ThpMode thp_mode_ = os::ThpMode::kUnknown;
  size_t advised_bytes_ = 0;
  std::atomic<size_t> collapsed_bytes_{0};

  UserAllocFn user_fn_ = nullptr;
  void* user_ctx_ = nullptr;

  char memfs_dir_[256] = {};
  size_t memfs_limit_ = 0;
  bool memfs_abort_ = false;
  bool memfs_ignore_mmap_fail_ = false;
  bool memfs_private_ = false;

  char devmem_path_[256] = {};
  int devmem_fd_ = -1;
  size_t devmem_cursor_ = 0;
  size_t devmem_limit_ = 0;
};

}  // namespace tcm

#endif  // TCMALLOC_SYSTEM_ALLOC_H_
