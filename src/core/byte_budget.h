// ByteBudget: bytes that many owners may hold together, reserved and given back without a
// lock (one atomic add each way). The central lists' kept empty spans share one
// (central_freelist.h): each list may keep spans for its own next allocations, and the
// budget bounds what all of them keep at once, whatever the number of classes and shards.
#ifndef TCMALLOC_BYTE_BUDGET_H_
#define TCMALLOC_BYTE_BUDGET_H_

#include <cstddef>

namespace tcm {

class ByteBudget {
 public:
  constexpr ByteBudget() = default;

  // Sets the limit. REQUIRES nothing reserved yet.
  void Init(size_t limit) {
    limit_ = limit;
    __atomic_store_n(&left_, static_cast<ptrdiff_t>(limit), __ATOMIC_RELAXED);
  }
  // Reserves bytes; false (nothing reserved) when fewer are left or the budget is closed.
  bool Take(size_t bytes) {
    if (__atomic_load_n(&closed_, __ATOMIC_RELAXED)) return false;
    const ptrdiff_t n = static_cast<ptrdiff_t>(bytes);
    if (__atomic_sub_fetch(&left_, n, __ATOMIC_RELAXED) >= 0) return true;
    __atomic_add_fetch(&left_, n, __ATOMIC_RELAXED);  // a racing Take may have failed meanwhile
    return false;
  }
  // Gives back bytes a Take reserved.
  void Give(size_t bytes) { __atomic_add_fetch(&left_, static_cast<ptrdiff_t>(bytes), __ATOMIC_RELAXED); }
  size_t limit() const { return limit_; }
  // A closed budget refuses every Take until it is opened again; what is reserved stays.
  void Close() { __atomic_store_n(&closed_, true, __ATOMIC_RELAXED); }
  void Open() {
    if (__atomic_load_n(&closed_, __ATOMIC_RELAXED)) __atomic_store_n(&closed_, false, __ATOMIC_RELAXED);
  }
  bool closed() const { return __atomic_load_n(&closed_, __ATOMIC_RELAXED); }
  // Bytes reserved now (racy; between a failed Take's two steps it may read high).
  size_t used() const {
    const ptrdiff_t left = __atomic_load_n(&left_, __ATOMIC_RELAXED);
    if (left >= static_cast<ptrdiff_t>(limit_)) return 0;
    return limit_ - static_cast<size_t>(left > 0 ? left : 0);
  }

 private:
  size_t limit_ = 0;
  ptrdiff_t left_ = 0;  // dips below zero only inside a failing Take
  bool closed_ = false;
};

}  // namespace tcm

#endif  // TCMALLOC_BYTE_BUDGET_H_
