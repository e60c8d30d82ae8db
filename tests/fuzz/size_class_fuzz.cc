// Fuzz target: the size-class map and nallocx-style rounding (GoodSize), with the real
// allocator of tcmalloc_core as the judge of what a request actually gets.
//
// For each (size, alignment) drawn from the input:
//   - sizes up to kMaxSize map to a class that fits, is the smallest that fits, wastes at
//     most max(15 B, 1/8), is 16-byte aligned from 16 B on, and whose span holds an object;
//   - GoodSize(size, align) fits the request, keeps the alignment, is a fixed point
//     (rounding a rounded size changes nothing), is monotone in size, and wastes less than
//     a page above kMaxSize; it is 0 exactly for impossible requests;
//   - for requests up to 8 MiB, the allocator's own AllocateAligned hands out a block that
//     is aligned and whose usable size is exactly GoodSize (what nallocx promises).
// Runs inside a process whose malloc is the sanitizer's: tcmalloc_core has no overrides, and
// its memory comes from mmap.
#include <cerrno>

#include "api/allocation.h"
#include "fuzz_input.h"
#include "core/size_classes.h"

namespace tcm::fuzz {
namespace {

size_t PickSize(FuzzInput& in) {
  switch (in.Byte() % 8) {
    case 0: return in.Range(0, 256);
    case 1:
    case 2: return in.Range(0, kMaxSize);
    case 3: return in.Range(kMaxSize - 64, kMaxSize + 64);
    case 4: return in.Range(kMaxSize, 8 << 20);
    case 5: return in.Range(0, kMaxAllocation + kPageSize);
    case 6: return SIZE_MAX - in.Range(0, 2 * kPageSize);  // overflow bait
    default: return in.U64();
  }
}

size_t PickAlign(FuzzInput& in) {
  const uint8_t b = in.Byte();
  if (b < 96) return 0;                        // plain malloc
  if (b < 250) return size_t{1} << (b % 23);   // 1 B .. 4 MiB
  return size_t{1} << in.Range(23, 47);        // absurd alignments
}

void CheckClassMap(size_t size) {
  if (size > kMaxSize) return;
  const size_t cl = SizeMap::ClassIndex(size);
  FUZZ_CHECK(cl >= 1 && cl < kNumClasses);
  const size_t got = SizeMap::ClassSize(cl);
  FUZZ_CHECK(got >= size);
  FUZZ_CHECK(cl == 1 || SizeMap::ClassSize(cl - 1) < size);
  FUZZ_CHECK(got - size <= (size / 8 > 15 ? size / 8 : 15));
  FUZZ_CHECK(got < 16 || got % 16 == 0);
  FUZZ_CHECK(SizeMap::ObjectsPerSpan(cl) >= 1);
  FUZZ_CHECK(SizeMap::ClassIndex(got) == cl);
  const size_t batch = SizeMap::NumToMove(cl);
  // 32 with per-thread caches, 128 with per-CPU caches (api/globals.cc), at most 64 KiB.
  FUZZ_CHECK(batch >= 2 && batch <= 128 && (batch == 2 || batch * got <= 64 * 1024));
}

void CheckGoodSize(size_t size, size_t align) {
  const size_t a = align == 0 ? 1 : align;
  const size_t r = GoodSize(size, a);
  if (r == 0) {
    // Only a request no machine could satisfy is refused.
    FUZZ_CHECK(size > kMaxAllocation || a > kMaxAllocation);
    return;
  }
  FUZZ_CHECK(r >= size);
  FUZZ_CHECK(r >= 1);
  if (a <= kPageSize) FUZZ_CHECK(r % a == 0 || r % kPageSize == 0 || a <= 16);
  FUZZ_CHECK(GoodSize(r, a) == r);
  if (size < SIZE_MAX) {
    const size_t r1 = GoodSize(size + 1, a);
    FUZZ_CHECK(r1 == 0 || r1 >= r);
  }
  if (size > kMaxSize) FUZZ_CHECK(r - size < kPageSize);
}

void CheckAllocation(size_t size, size_t align) {
  if (size > (8 << 20) || align > (4 << 20)) return;
  const size_t a = align == 0 ? 1 : align;
  void* p = align == 0 ? Allocate(size) : AllocateAligned(a, size);
  FUZZ_CHECK(p != nullptr);
  FUZZ_CHECK(reinterpret_cast<uintptr_t>(p) % a == 0);
  if (size >= 16) FUZZ_CHECK(reinterpret_cast<uintptr_t>(p) % 16 == 0);
  const size_t usable = UsableSize(p, "size_class_fuzz");
  FUZZ_CHECK(usable >= size);
  FUZZ_CHECK(usable == GoodSize(size, a));
  // The whole usable size is ours to write.
  static_cast<char*>(p)[0] = 1;
  static_cast<char*>(p)[usable - 1] = 2;
  Deallocate(p);
}

}  // namespace
}  // namespace tcm::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tcm::fuzz::FuzzInput in(data, size);
  for (int i = 0; i < 64 && !in.empty(); ++i) {
    const size_t n = tcm::fuzz::PickSize(in);
    const size_t align = tcm::fuzz::PickAlign(in);
    tcm::fuzz::CheckClassMap(n);
    tcm::fuzz::CheckGoodSize(n, align);
    tcm::fuzz::CheckAllocation(n, align);
  }
  return 0;
}
