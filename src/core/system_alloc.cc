#include "core/system_alloc.h"

#include <cstring>

#include "base/config.h"
#include "base/log.h"
#include "core/fault_injection.h"
#include "platform/os.h"

namespace tcm {

static size_t RoundUp(size_t n, size_t align) { return (n + align - 1) & ~(align - 1); }

const char* SystemAllocator::SourceName(Source s) {
  static const char* const kNames[kNumSources] = {"user", "memfs", "devmem", "mmap", "sbrk"};
  return kNames[s];
}

size_t SystemAllocator::total_bytes() const {
  size_t t = 0;
  for (size_t b : bytes_) t += b;
  return t;
}

void SystemAllocator::SetUserSource(UserAllocFn fn, void* ctx) noexcept {
  SpinLockHolder h(&lock_);
  user_fn_ = fn;
  user_ctx_ = ctx;
  enabled_[kUser] = fn != nullptr;
}

void SystemAllocator::ConfigureMemfs(const char* dir, size_t limit, bool abort_on_fail,
                                     bool ignore_mmap_fail, bool map_private) {
  size_t n = strlen(dir);
  if (n == 0 || n >= sizeof(memfs_dir_)) return;
  memcpy(memfs_dir_, dir, n + 1);
  memfs_limit_ = limit;
  memfs_abort_ = abort_on_fail;
  memfs_ignore_mmap_fail_ = ignore_mmap_fail;
  memfs_private_ = map_private;
  enabled_[kMemfs] = true;
}

void SystemAllocator::ConfigureDevmem(const char* device, size_t start, size_t limit) {
  size_t n = strlen(device);
  if (n == 0 || n >= sizeof(devmem_path_) || (limit != 0 && limit <= start)) return;
  memcpy(devmem_path_, device, n + 1);
  devmem_cursor_ = start;
  devmem_limit_ = limit;
  enabled_[kDevmem] = true;
}

void* SystemAllocator::AllocBuiltin(size_t bytes, size_t alignment, size_t* actual) {
  return AllocFrom(kMemfs, bytes, alignment, actual, nullptr, nullptr);
}

void* SystemAllocator::Alloc(size_t bytes, size_t alignment, size_t* actual, bool* zeroed, Source* from) {
  return AllocFrom(kUser, bytes, alignment, actual, zeroed, from);
}

bool SystemAllocator::AdviseHugePages(void* p, size_t bytes, Source from) {
  // memfs (hugetlbfs or tmpfs files), a device window and a program's allocator are not
  // anonymous memory: the advice does not apply. sbrk memory is anonymous, but the break is
  // shared with the program and foreign allocators: leave it as it is.
  if (!thp_available() || from != kMmap) return false;
  if (!os::AdviseHugePages(p, bytes)) return false;
  advised_bytes_ += bytes;
  return true;
}

bool SystemAllocator::AdviseNoHugePages(void* p, size_t bytes) {
  return thp_available() && os::AdviseNoHugePages(p, bytes);
}

bool SystemAllocator::CollapseHugePages(void* p, size_t bytes) {
  if (!thp_available() || !os::CollapseHugePages(p, bytes)) return false;
  collapsed_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  return true;
}

void* SystemAllocator::AllocFrom(int first, size_t bytes, size_t alignment, size_t* actual, bool* zeroed,
                                 Source* from) {
  if (alignment < kPageSize) alignment = kPageSize;
  if (bytes > kMaxAllocation) return nullptr;
  bytes = RoundUp(bytes, alignment);
  if (InjectedFault(bytes)) return nullptr;
  for (int s = first; s < kNumSources; ++s) {
    if (!enabled_[s]) continue;
    void* p = nullptr;
    switch (static_cast<Source>(s)) {
      case kUser: {
        size_t got = 0;
        p = user_fn_(user_ctx_, bytes, &got, alignment);
        if (p != nullptr && (got < bytes || (reinterpret_cast<uintptr_t>(p) & (alignment - 1)) != 0)) {
          Log("user SysAllocator returned %zu bytes at %p for a request of %zu aligned to %zu; "
              "out of memory", got, p, bytes, alignment);
          p = nullptr;  // unusable; leaked rather than misused
        }
        // A program's allocator replaces the built-in sources (as in gperftools): it falls
        // back to them itself if it wants to (GetSystemAllocator before SetSystemAllocator),
        // so its NULL is out of memory, not a cue to map memory behind its back.
        if (p == nullptr) return nullptr;
        bytes = got & ~(kPageSize - 1);
        break;
      }
      case kMemfs: p = AllocMemfs(bytes, alignment); break;
      case kDevmem: p = AllocDevmem(bytes, alignment); break;
      case kMmap: p = AllocMmap(bytes, alignment); break;
      case kSbrk: p = AllocSbrk(bytes, alignment); break;
      case kNumSources: break;
    }
    if (p == nullptr) continue;
    bytes_[s] += bytes;
    if (s != kMmap && s != kSbrk) only_anonymous_ = false;
    if (actual != nullptr) *actual = bytes;
    if (from != nullptr) *from = static_cast<Source>(s);
    // Fresh anonymous memory, fresh file pages and a new program break read as zero; a
    // device window or a program's allocator may not.
    if (zeroed != nullptr) *zeroed = s == kMmap || s == kSbrk || s == kMemfs;
    return p;
  }
  return nullptr;
}

void* SystemAllocator::AllocMmap(size_t bytes, size_t alignment) {
  // mmap only guarantees 4 KiB alignment: over-map by (alignment - 4 KiB) and trim both ends.
  size_t extra = alignment > 4096 ? alignment - 4096 : 0;
  if (bytes + extra < bytes) return nullptr;
  char* raw = static_cast<char*>(os::MapAnonymous(bytes + extra));
  if (raw == nullptr) return nullptr;
  uintptr_t start = RoundUp(reinterpret_cast<uintptr_t>(raw), alignment);
  char* aligned = reinterpret_cast<char*>(start);
  if (aligned > raw) os::Unmap(raw, static_cast<size_t>(aligned - raw));
  size_t tail = static_cast<size_t>(raw + bytes + extra - (aligned + bytes));
  if (tail > 0) os::Unmap(aligned + bytes, tail);
  return aligned;
}

void* SystemAllocator::AllocSbrk(size_t bytes, size_t alignment) {
  SpinLockHolder h(&lock_);
  // Someone else (a foreign allocator, the program) may move the break between our calls;
  // take the current break, ask for enough to align, and give back nothing on failure.
  char* cur = static_cast<char*>(os::Sbrk(0));
  if (cur == nullptr) return nullptr;
  size_t pad = RoundUp(reinterpret_cast<uintptr_t>(cur), alignment) - reinterpret_cast<uintptr_t>(cur);
  size_t total = bytes + pad;
  if (total < bytes || total > static_cast<size_t>(INTPTR_MAX)) return nullptr;
  char* got = static_cast<char*>(os::Sbrk(static_cast<intptr_t>(total)));
  if (got == nullptr) return nullptr;
  if (got != cur) {
    // The break moved under us: our block is [got, got+total); realign inside it.
    pad = RoundUp(reinterpret_cast<uintptr_t>(got), alignment) - reinterpret_cast<uintptr_t>(got);
    if (pad + bytes > total) return nullptr;  // rare; the memory is leaked, not corrupted
  }
  return got + pad;
}

void* SystemAllocator::AllocMemfs(size_t bytes, size_t alignment) {
  SpinLockHolder h(&lock_);
  if (memfs_limit_ != 0 && bytes_[kMemfs] + bytes > memfs_limit_) {
    if (memfs_abort_) Crash("memfs: limit of %zu bytes reached (TCMALLOC_MEMFS_ABORT_ON_FAIL)", memfs_limit_);
    return nullptr;
  }
  int fd = os::CreateUnlinkedFile(memfs_dir_);
  if (fd < 0) {
    if (memfs_abort_) Crash("memfs: cannot create a file in %s", memfs_dir_);
    Log("memfs: cannot create a file in %s; falling back to the next memory source", memfs_dir_);
    enabled_[kMemfs] = false;
    return nullptr;
  }
  // Over-size by the alignment so an aligned block of `bytes` fits in the mapping, and round
  // to the file system's block: hugetlbfs refuses sizes that are not whole huge pages.
  size_t block = os::FileSystemBlockSize(fd);
  if (block < 4096) block = 4096;
  size_t map_len = RoundUp(bytes + alignment, block);
  void* p = nullptr;
  if (os::ResizeFile(fd, map_len)) p = os::MapFile(fd, map_len, 0, !memfs_private_);
  os::CloseFd(fd);  // the mapping keeps the (unlinked) file alive
  if (p == nullptr) {
    if (memfs_abort_) Crash("memfs: mmap of %zu bytes in %s failed", map_len, memfs_dir_);
    if (!memfs_ignore_mmap_fail_) {
      Log("memfs: mmap of %zu bytes in %s failed; falling back to the next memory source", map_len, memfs_dir_);
      enabled_[kMemfs] = false;
    }
    return nullptr;
  }
  char* raw = static_cast<char*>(p);
  char* aligned = reinterpret_cast<char*>(RoundUp(reinterpret_cast<uintptr_t>(raw), alignment));
  return aligned;  // the slack at both ends stays mapped and unused
}

void* SystemAllocator::AllocDevmem(size_t bytes, size_t alignment) {
  SpinLockHolder h(&lock_);
  if (devmem_fd_ < 0) {
    devmem_fd_ = os::OpenReadWrite(devmem_path_);
    if (devmem_fd_ < 0) {
      Log("devmem: cannot open %s; falling back to the next memory source", devmem_path_);
      enabled_[kDevmem] = false;
      return nullptr;
    }
  }
  // The device maps at 4 KiB granularity: map one extra 4 KiB page and trim, so the block
  // we keep is aligned in the address space too.
  size_t offset = RoundUp(devmem_cursor_, 4096);
  size_t map_len = bytes + (alignment > 4096 ? alignment - 4096 : 0);
  size_t end = offset + map_len;
  size_t file_size = os::FileSizeIfRegular(devmem_fd_);  // 0 for devices: size unknown
  if ((devmem_limit_ != 0 && end > devmem_limit_) || (file_size != 0 && end > file_size)) {
    return nullptr;  // the window is used up
  }
  char* raw = static_cast<char*>(os::MapFile(devmem_fd_, map_len, offset, true));
  if (raw == nullptr) {
    Log("devmem: cannot map %s at offset %zu; falling back to the next memory source", devmem_path_, offset);
    enabled_[kDevmem] = false;
    return nullptr;
  }
  devmem_cursor_ = end;
  char* aligned = reinterpret_cast<char*>(RoundUp(reinterpret_cast<uintptr_t>(raw), alignment));
  if (aligned > raw) os::Unmap(raw, static_cast<size_t>(aligned - raw));
  size_t tail = static_cast<size_t>(raw + map_len - (aligned + bytes));
  if (tail > 0) os::Unmap(aligned + bytes, tail);
  return aligned;
}

bool SystemAllocator::Release(void* p, size_t bytes, bool* zeroed) {
  if (!release_enabled_) return false;
  if (!only_anonymous_ && os::RemovePages(p, bytes)) {
    *zeroed = true;  // file-backed: the backing store is gone, the pages read as zero
    return true;
  }
  if (!os::ReleasePages(p, bytes)) return false;
  *zeroed = only_anonymous_;
  return true;
}

}  // namespace tcm
