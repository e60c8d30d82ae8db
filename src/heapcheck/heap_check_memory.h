// The heap checker's memory: hidden addresses, growable arrays of anonymous memory and
// whole-file reads, none of which allocate through malloc or take a libc lock.
//
// Why: the checker runs its liveness scan while every other thread is stopped at an
// arbitrary instruction, possibly inside malloc, stdio or the dynamic loader with their
// locks held. Its system calls are the raw ones of src/platform/ (os.h, files.h,
// threads.h, modules.h); it makes none of its own.
#ifndef TCMALLOC_HEAP_CHECK_MEMORY_H_
#define TCMALLOC_HEAP_CHECK_MEMORY_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "platform/os.h"

namespace tcm::heapcheck {

// Every address the checker stores in its own memory is kept with the top 16 bits set.
// Such a value is not a canonical user-space address, so even if the checker's memory
// were ever scanned as a root it could not keep a leaked object alive; and because user
// addresses are below 2^47 the tag preserves their order (sorting and binary search work
// on tagged values unchanged).
inline constexpr uintptr_t kHideTag = uintptr_t{0xFFFF} << 48;
inline constexpr uintptr_t Hide(uintptr_t a) { return a | kHideTag; }
inline constexpr uintptr_t Reveal(uintptr_t h) { return h & ~kHideTag; }

// A half-open address range, both ends hidden.
struct Range {
  uintptr_t lo;
  uintptr_t hi;
};

// A growable array of trivially copyable T in anonymous memory (never malloc). Growth maps
// a bigger block, copies and unmaps the old one, so pointers into it do not survive growth.
// Not thread-safe; its owner's lock guards it.
template <typename T>
class MappedArray {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  constexpr MappedArray() = default;
  MappedArray(const MappedArray&) = delete;
  MappedArray& operator=(const MappedArray&) = delete;
  ~MappedArray() { Release(); }

  // Makes room for at least n elements; false if the OS refused memory.
  bool Reserve(size_t n) {
    if (n <= capacity_) return true;
    size_t cap = capacity_ == 0 ? 256 : capacity_;
    while (cap < n) cap *= 2;
    const size_t bytes = RoundUp(cap * sizeof(T));
    T* fresh = static_cast<T*>(os::MapAnonymous(bytes));
    if (fresh == nullptr) return false;
    if (size_ > 0) std::memcpy(static_cast<void*>(fresh), static_cast<const void*>(data_), size_ * sizeof(T));
    Release(/*keep_size=*/true);
    data_ = fresh;
    capacity_ = bytes / sizeof(T);
    return true;
  }
  bool Push(const T& v) {
    if (size_ == capacity_ && !Reserve(size_ + 1)) return false;
    data_[size_++] = v;
    return true;
  }
  // Grows to n elements; new ones read as zero bytes. False if out of memory.
  bool Resize(size_t n) {
    if (!Reserve(n)) return false;
    if (n > size_) std::memset(static_cast<void*>(data_ + size_), 0, (n - size_) * sizeof(T));
    size_ = n;
    return true;
  }
  void Clear() { size_ = 0; }
  void Swap(MappedArray& o) {
    T* d = data_;
    data_ = o.data_;
    o.data_ = d;
    size_t t = size_;
    size_ = o.size_;
    o.size_ = t;
    t = capacity_;
    capacity_ = o.capacity_;
    o.capacity_ = t;
  }
  // Gives the memory back to the OS (scrubbing it first is unnecessary: unmapped).
  void Release(bool keep_size = false) {
    if (data_ != nullptr) os::Unmap(data_, RoundUp(capacity_ * sizeof(T)));
    data_ = nullptr;
    capacity_ = 0;
    if (!keep_size) size_ = 0;
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  // The mapping holding the elements (hidden ends), for excluding it from the roots.
  Range Extent() const {
    const uintptr_t lo = reinterpret_cast<uintptr_t>(data_);
    return Range{Hide(lo), Hide(lo + RoundUp(capacity_ * sizeof(T)))};
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  T& back() { return data_[size_ - 1]; }
  void PopBack() { --size_; }

 private:
  static size_t RoundUp(size_t b) { return (b + 4095) & ~size_t{4095}; }
  T* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

// Reads all of a file (typically under /proc) into *out, NUL-terminated (the terminator is
// not counted in out->size()). False if the file cannot be opened or memory ran out.
bool ReadWholeFile(const char* path, MappedArray<char>* out);

}  // namespace tcm::heapcheck

#endif  // TCMALLOC_HEAP_CHECK_MEMORY_H_
