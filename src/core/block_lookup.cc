#include "core/block_lookup.h"

#include "base/config.h"
#include "core/size_classes.h"

namespace tcm {

Block FindBlock(const PageMap& pagemap, uintptr_t addr) noexcept {
  if (addr == 0 || (addr >> kAddressBits) != 0) return Block{};
  Span* span = pagemap.GetSpan(PageId::FromAddr(addr));
  if (span == nullptr || span->location != Span::kInUse) return Block{};
  // Entries of a page run's interior pages can be stale: the span must really cover addr
  // (in-use spans never overlap, so one that does is the right one).
  const uintptr_t start = span->start_addr();
  const uintptr_t end = start + span->length.bytes();
  if (addr < start || addr >= end) return Block{};
  if (span->sizeclass == 0) return Block{start, end - start, 0, span};
  // realloc asks this on every call: a reciprocal, not a 64-bit division (30-90 cycles,
  // 1-2% of t-test1 at 64 KiB, which reallocs one call in eight).
  const size_t size = SizeMap::ClassSize(span->sizeclass);
  const uintptr_t block = start + SizeMap::ObjectIndex(span->sizeclass, addr - start) * size;
  if (block + size > end) return Block{};  // the tail that holds no whole object
  return Block{block, size, span->sizeclass, span};
}

}  // namespace tcm
