// Size classes: every small request (<= kMaxSize) is rounded up to one of kNumClasses sizes.
//
// Legend of a class (SizeClassInfo):
//   size   bytes per object; 8, then multiples of 16 (glibc alignment for >= 16 B requests),
//          spaced 16 apart up to 128 B and then 8 classes per power of two, so rounding never
//          wastes more than 1/8 of a request above 128 B (and at most 15 B below).
//   pages  length of the span that is carved into objects of this class: the fewest pages
//          that waste at most 1/8 of the span at its tail (1/32 for objects below 4 KiB:
//          kSubPageTailDivisor) and hold >= 8 objects or 64 KiB; from kFewObjectsSize
//          (32 KiB) up, the fewest that hold one object.
//   batch  num_objects_to_move: objects moved at once between a thread cache and the central
//          list, about 64 KiB worth, clamped to [2, 32].
// Class 0 is "not a small object" (large spans, free pages, unknown memory).
//
// Lookup (ClassIndex) is one table load: the table has one byte per 8-byte step of size up
// to kMaxSize (256 KiB: a table of 32 KiB, read-only and shared), so there is no branch on
// the size.
#ifndef TCMALLOC_SIZE_CLASSES_H_
#define TCMALLOC_SIZE_CLASSES_H_

#include <array>
#include <cstddef>
#include <cstdint>

#include "base/config.h"

namespace tcm {

struct SizeClassInfo {
  uint32_t size;
  uint16_t pages;
  uint16_t batch;
};

namespace size_class_internal {

inline constexpr size_t kMaxClasses = 128;
inline constexpr size_t kDefaultMaxBatch = 32;

struct Table {
  SizeClassInfo info[kMaxClasses];
  size_t count;  // including class 0
};

constexpr size_t NextSize(size_t s) {
  if (s < 16) return 16;
  if (s < 128) return s + 16;
  size_t band = 128;
  while (band * 2 <= s) band *= 2;
  return s + band / 8;
}

// Objects this big get spans of one object rather than 64-104 KiB spans of two: a span goes
// back to the page heap only when all its objects are free, and a 96 KiB span pinned by one
// live 48 KiB object was the central lists' share of t-test1's peak at 64 KiB blocks
// (issue 12). The tail past the object is never touched: address space, not resident memory.
inline constexpr size_t kFewObjectsSize = 32 * 1024;

// Objects smaller than an OS page leave a tail that shares a page with the span's last
// object, so it is resident whenever the span is in use: held to 1/32 of the span. Under
// 1/8, 832, 1664, 2816 and 3328 B spans wasted 8.3-8.6% of every span, and a burst of
// 256 MiB of 64-3904 B blocks (bench/light_batches) kept 13.6 MiB of tails, 5% of its
// heap (peak 292 MiB against glibc's 260); at 1/32 the peak is 281, and these spans are
// 2-8 pages instead of 1-4. From 4 KiB up, most of a tail is OS pages that no object
// reaches, and bigger spans there would pin more free memory per live object (t-test1's
// 8-32 KiB classes): 1/8 stays.
inline constexpr size_t kSubPageTailDivisor = 32;

constexpr uint16_t PagesFor(size_t size) {
  size_t pages = 1;
  for (;;) {
    size_t span = pages * kPageSize;
    bool fits = span >= size;
    bool low_waste = (span % size) <= span / (size < 4096 ? kSubPageTailDivisor : 8);
    bool enough = span / size >= 8 || span >= 64 * 1024 || size >= kFewObjectsSize;
    if (fits && low_waste && enough) return static_cast<uint16_t>(pages);
    ++pages;
  }
}

constexpr uint16_t BatchFor(size_t size) {
  size_t n = 64 * 1024 / size;
  if (n < 2) n = 2;
  if (n > kDefaultMaxBatch) n = kDefaultMaxBatch;
  return static_cast<uint16_t>(n);
}

constexpr Table MakeTable() {
  Table t{};
  t.info[0] = {0, 0, 0};
  size_t n = 1;
  for (size_t s = 8; s <= kMaxSize; s = NextSize(s)) {
    t.info[n++] = {static_cast<uint32_t>(s), PagesFor(s), BatchFor(s)};
  }
  t.count = n;
  return t;
}

inline constexpr Table kTable = MakeTable();

constexpr size_t IndexOf(size_t size) { return (size + 7) >> 3; }
inline constexpr size_t kIndexCount = IndexOf(kMaxSize) + 1;

constexpr std::array<uint8_t, kIndexCount> MakeIndex() {
  std::array<uint8_t, kIndexCount> idx{};
  size_t cl = 1;
  // For each index, the smallest class whose size covers every request mapping to it.
  for (size_t i = 0; i < kIndexCount; ++i) {
    size_t max_req = i * 8;
    while (kTable.info[cl].size < max_req) ++cl;
    idx[i] = static_cast<uint8_t>(cl);
  }
  return idx;
}

}  // namespace size_class_internal

inline constexpr size_t kNumClasses = size_class_internal::kTable.count;

namespace size_class_internal {
constexpr std::array<uint64_t, kMaxClasses> DivisionMagics() {
  std::array<uint64_t, kMaxClasses> m{};
  // ceil(2^64 / size): ~0 / size is floor((2^64 - 1) / size), one below it exactly when
  // size divides 2^64 (a power of two) and equal to floor(2^64 / size) otherwise.
  for (size_t cl = 1; cl < kTable.count; ++cl) m[cl] = ~uint64_t{0} / kTable.info[cl].size + 1;
  return m;
}

// ceil(2^32 / size), for the vectorised batch check's 32-bit block-start test.
constexpr std::array<uint32_t, kMaxClasses> DivisionMagics32() {
  std::array<uint32_t, kMaxClasses> m{};
  for (size_t cl = 1; cl < kTable.count; ++cl) m[cl] = static_cast<uint32_t>(0xffffffffu / kTable.info[cl].size + 1);
  return m;
}

constexpr std::array<uint16_t, kMaxClasses> InitialBatches() {
  std::array<uint16_t, kMaxClasses> b{};
  for (size_t cl = 0; cl < kTable.count; ++cl) b[cl] = kTable.info[cl].batch;
  return b;
}
}  // namespace size_class_internal

// Immutable, compile-time tables: usable before any initialisation.
struct SizeMap {
  static constexpr auto& kInfo = size_class_internal::kTable.info;
  static constexpr std::array<uint8_t, size_class_internal::kIndexCount> kIndex =
      size_class_internal::MakeIndex();

  // REQUIRES size <= kMaxSize.
  static TCM_ALWAYS_INLINE size_t ClassIndex(size_t size) {
    return kIndex[size_class_internal::IndexOf(size)];
  }
  static constexpr size_t ClassSize(size_t cl) { return kInfo[cl].size; }
  static constexpr size_t ClassPages(size_t cl) { return kInfo[cl].pages; }
  // num_objects_to_move: the compile-time batch, capped at run time by
  // TCMALLOC_TRANSFER_NUM_OBJ (SetMaxBatch, before any cache exists).
  static size_t NumToMove(size_t cl) { return batch_[cl]; }
  static void SetMaxBatch(size_t max_batch) {
    for (size_t cl = 1; cl < kNumClasses; ++cl) {
      size_t n = 64 * 1024 / kInfo[cl].size;
      if (n < 2) n = 2;
      if (n > max_batch) n = max_batch;
      batch_[cl] = static_cast<uint16_t>(n);
    }
  }
  static constexpr size_t ObjectsPerSpan(size_t cl) {
    return kInfo[cl].pages * kPageSize / kInfo[cl].size;
  }
  // Division by a class's size without a division instruction (30-90 cycles for 64 bits),
  // from one 64x64->128-bit multiplication by ceil(2^64 / size) (kDivisionMagic, the
  // magic of the class): the high half is offset / size, and size divides offset exactly
  // when the low half is below the magic (the remainder is the low half's fraction of
  // 2^64, scaled by size; Lemire, Kaser and Kurz, "Faster remainder by direct computation",
  // 2019). Exact for offsets below 2^32, which every span offset is (checked below, and
  // exhaustively by size_classes_test); from 2^32 up the index is still at least
  // offset / size, so a stale offset never passes for an object of the span.
  static constexpr std::array<uint64_t, size_class_internal::kMaxClasses> kDivisionMagic =
      size_class_internal::DivisionMagics();
  static TCM_ALWAYS_INLINE size_t IndexByMagic(uint64_t magic, size_t offset) {
    return static_cast<size_t>((static_cast<unsigned __int128>(offset) * magic) >> 64);
  }
  // The same, and whether offset is that object's first byte (the batch checks' test, which
  // took a second multiplication, index * size == offset, before).
  static TCM_ALWAYS_INLINE size_t ExactObjectIndex(uint64_t magic, size_t offset, bool* starts_object) {
    const unsigned __int128 product = static_cast<unsigned __int128>(offset) * magic;
    *starts_object = static_cast<uint64_t>(product) < magic;
    return static_cast<size_t>(product >> 64);
  }
  // Whether size divides offset: the low half alone, one 64-bit multiplication.
  static TCM_ALWAYS_INLINE bool StartsObject(uint64_t magic, size_t offset) { return offset * magic < magic; }
  // The same test in 32 bits, with ceil(2^32 / size): exact for offsets below 2^16 and sizes
  // up to 2^16 (the numerator's and the divisor's bits add up to 32; Lemire et al. as
  // above), which is what a 32-bit vector lane can multiply (CentralFreeList's batch check).
  static constexpr uint32_t kSmallOffsetLimit = uint32_t{1} << 16;
  static constexpr std::array<uint32_t, size_class_internal::kMaxClasses> kDivisionMagic32 =
      size_class_internal::DivisionMagics32();
  static TCM_ALWAYS_INLINE bool StartsObjectSmall(uint32_t magic32, uint32_t offset) {
    return offset * magic32 < magic32;
  }
  // Index of the object of class cl that contains byte `offset` of its span.
  static TCM_ALWAYS_INLINE size_t ObjectIndex(size_t cl, size_t offset) {
    return IndexByMagic(kDivisionMagic[cl], offset);
  }

 private:
  static inline constinit std::array<uint16_t, size_class_internal::kMaxClasses> batch_ =
      size_class_internal::InitialBatches();
};

// Compile-time guarantees the rest of the allocator relies on.
namespace size_class_internal {
constexpr bool CheckTable() {
  for (size_t cl = 1; cl < kTable.count; ++cl) {
    const auto& c = kTable.info[cl];
    if (cl > 1 && c.size <= kTable.info[cl - 1].size) return false;  // monotone
    if (c.size >= 16 && c.size % 16 != 0) return false;             // glibc alignment
    if (c.pages * kPageSize < c.size) return false;                  // one object fits
    if (c.batch < 2 || c.batch > kDefaultMaxBatch) return false;
    // SizeMap's division by magic is exact for offsets (and sizes) below 2^32.
    if (uint64_t{c.pages} * kPageSize > (uint64_t{1} << 32)) return false;
  }
  return kTable.info[kTable.count - 1].size == kMaxSize && kTable.info[1].size == 8;
}
}  // namespace size_class_internal
static_assert(size_class_internal::CheckTable());
static_assert(kNumClasses <= 255, "classes must fit the pagemap's uint8_t");
static_assert(kNumClasses > 80 && kNumClasses < 100, "about 88 classes, as the design says");

}  // namespace tcm

#endif  // TCMALLOC_SIZE_CLASSES_H_
