#include "core/pagemap.h"

#include "base/log.h"
#include "platform/os.h"

namespace tcm {

alignas(4096) uint32_t PageMap::empty_class_leaf_[kClassLeafLength];

bool PageMap::Ensure(PageId start, Length n) {
  if (n.n == 0) return true;
  uintptr_t last = start.index + n.n - 1;
  if ((last >> kPageBits) != 0 || last < start.index) return false;
  for (uintptr_t p = start.index; p <= last;) {
    size_t r = p >> (kLeafBits + kMidBits);
    size_t m = (p >> kLeafBits) & (kMidLength - 1);
    if (root_[r] == nullptr) {
      // Zeroed by the allocator: every leaf slot reads "missing" with no write of ours, so
      // a mid costs address space and only the pages its leaves' slots are on.
      auto* mid = static_cast<Mid*>(alloc_(sizeof(Mid)));
      if (mid == nullptr) return false;
      node_bytes_ += sizeof(Mid);
      // Publish only a fully initialised node: lock-free readers may load it right away.
      __atomic_store_n(&root_[r], mid, __ATOMIC_RELEASE);
    }
    Mid* mid = root_[r];
    if (mid->leaves[m] == nullptr) {
      auto* leaf = static_cast<Leaf*>(alloc_(sizeof(Leaf)));
      if (leaf == nullptr) return false;
      node_bytes_ += sizeof(Leaf);
      __atomic_store_n(&mid->leaves[m], leaf, __ATOMIC_RELEASE);
    }
    // Next leaf boundary.
    p = ((p >> kLeafBits) + 1) << kLeafBits;
  }
  for (uintptr_t p = start.index; p <= last; p = ((p >> kClassLeafBits) + 1) << kClassLeafBits) {
    if (MutableClassLeaf(PageId{p}) == nullptr) return false;
  }
  return true;
}

uint32_t* PageMap::MutableClassLeaf(PageId p) {
  const size_t slot = p.index >> kClassLeafBits;
  uint32_t* leaf = ClassLeaf(slot);
  if (leaf == empty_class_leaf_) {
    // Zero-filled address space; pages are backed only where classes get written.
    leaf = static_cast<uint32_t*>(os::MapAnonymous(kClassLeafBytes));
    if (leaf == nullptr) return nullptr;
    ++class_leaves_;
    __atomic_store_n(&class_base_[slot], reinterpret_cast<uintptr_t>(leaf) - Bias(slot), __ATOMIC_RELEASE);
  }
  return leaf;
}

PageMap::Leaf* PageMap::MutableLeaf(PageId p) {
  Mid* mid = root_[p.index >> (kLeafBits + kMidBits)];
  TCM_CHECK(mid != nullptr);
  Leaf* leaf = mid->leaves[(p.index >> kLeafBits) & (kMidLength - 1)];
  TCM_CHECK(leaf != nullptr);
  return leaf;
}

}  // namespace tcm
