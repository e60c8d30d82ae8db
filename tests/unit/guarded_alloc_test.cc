// GuardedPool: the slots of guarded sampling, driven directly over a private arena (no
// signal handler here: an access to a protected page simply kills the death-test child
// with SIGSEGV, and OnFault's reports are checked by calling it).
#include "core/guarded_alloc.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cstring>
#include <set>
#include <vector>

namespace tcm {
namespace {

constexpr size_t kSlot = GuardedPool::kSlotBytes;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif
#else
constexpr bool kAsan = false;
#endif

#if defined(__SANITIZE_THREAD__)
constexpr bool kTsan = true;
#else
constexpr bool kTsan = false;
#endif

// Died of the access: SIGSEGV, or under a sanitizer (scripts/sanitize.sh), whose own SEGV
// handler reports it: AddressSanitizer exits with status 1 or aborts (abort_on_error=1),
// ThreadSanitizer exits with status 66.
bool DiedOfTheFault(int status) {
  if (WIFSIGNALED(status)) return WTERMSIG(status) == SIGSEGV || (kAsan && WTERMSIG(status) == SIGABRT);
  if (!WIFEXITED(status)) return false;
  return (kAsan && WEXITSTATUS(status) == 1) || (kTsan && WEXITSTATUS(status) == 66);
}

class GuardedPoolTest : public ::testing::Test {
 protected:
  void* Alloc(size_t size, size_t usable) { return pool_.Allocate(size, usable, &arena_, pcs_, 2); }
  void Free(void* p) { pool_.Deallocate(p, pcs_, 2); }

  Arena arena_;
  GuardedPool pool_;
  void* pcs_[2] = {reinterpret_cast<void*>(0x1234), reinterpret_cast<void*>(0x5678)};
};

TEST_F(GuardedPoolTest, BlocksAlternateBetweenTheRightAndTheLeftGuard) {
  char* a = static_cast<char*>(Alloc(60, 64));
  char* b = static_cast<char*>(Alloc(60, 64));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ((reinterpret_cast<uintptr_t>(a) + 64) % kSlot, 0u);  // ends at a guard
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % kSlot, 0u);         // starts after a guard
  EXPECT_TRUE(pool_.Contains(a));
  EXPECT_FALSE(pool_.Contains(&arena_));
  EXPECT_EQ(pool_.UsableSize(a), 64u);
  EXPECT_EQ(pool_.UsableSize(a + 8), 0u);  // not a block start
  memset(a, 1, 64);
  memset(b, 2, 64);
  EXPECT_EQ(pool_.live(), 2u);
  Free(a);
  Free(b);
  EXPECT_EQ(pool_.live(), 0u);
  EXPECT_EQ(pool_.total_allocations(), 2u);
}

TEST_F(GuardedPoolTest, FreedSlotsAreReusedOldestFirstAndThePoolIsBounded) {
  std::vector<void*> blocks;
  std::set<uintptr_t> slots;
  for (size_t i = 0; i < GuardedPool::kSlots; ++i) {
    void* p = Alloc(16, 16);
    ASSERT_NE(p, nullptr);
    blocks.push_back(p);
    slots.insert(reinterpret_cast<uintptr_t>(p) / kSlot);
  }
  EXPECT_EQ(slots.size(), GuardedPool::kSlots);  // distinct slots
  EXPECT_EQ(Alloc(16, 16), nullptr);             // all taken: the caller allocates normally
  EXPECT_EQ(pool_.resident_bytes(), GuardedPool::kSlots * kSlot);
  // Free two; the first freed is the first reused (the quarantine is FIFO).
  Free(blocks[5]);
  Free(blocks[9]);
  void* again = Alloc(16, 16);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(again) / kSlot, reinterpret_cast<uintptr_t>(blocks[5]) / kSlot);
  Free(again);
  for (size_t i = 0; i < blocks.size(); ++i)
    if (i != 5 && i != 9) Free(blocks[i]);
  EXPECT_EQ(pool_.live(), 0u);
}

TEST_F(GuardedPoolTest, TooBigForASlotIsRefused) {
  EXPECT_EQ(Alloc(kSlot + 1, kSlot + 16), nullptr);
  EXPECT_NE(Alloc(kSlot, kSlot), nullptr);
}

using GuardedPoolDeathTest = GuardedPoolTest;

TEST_F(GuardedPoolDeathTest, GuardPagesAndFreedBlocksAreInaccessible) {
  char* right = static_cast<char*>(Alloc(64, 64));
  char* left = static_cast<char*>(Alloc(64, 64));
  EXPECT_EXIT(right[64] = 1, DiedOfTheFault, "");
  EXPECT_EXIT(left[-1] = 1, DiedOfTheFault, "");
  Free(right);
  EXPECT_EXIT(right[0] = 1, DiedOfTheFault, "");
}

TEST_F(GuardedPoolDeathTest, FaultReportsNameTheKindAndTheStacks) {
  char* right = static_cast<char*>(Alloc(50, 64));
  char* left = static_cast<char*>(Alloc(64, 64));
  EXPECT_DEATH(pool_.OnFault(right + 64 + 3),
               "heap-buffer-overflow at 0x[0-9a-f]+: 3 bytes after the 64-byte block 0x[0-9a-f]+ \\(50 bytes "
               "requested\\)\n  allocated by:\n    #0 0x1234");
  EXPECT_DEATH(pool_.OnFault(left - 2), "heap-buffer-underflow at 0x[0-9a-f]+: 2 bytes before");
  Free(right);
  EXPECT_DEATH(pool_.OnFault(right + 10), "use-after-free at 0x[0-9a-f]+: 10 bytes into.*freed by:\n    #0 0x1234");
  EXPECT_DEATH(Free(right), "double-free");
  EXPECT_DEATH(Free(left + 8), "invalid pointer 0x[0-9a-f]+ \\(not the start of a live guarded block\\)");
  // Not ours: OnFault returns.
  int local = 0;
  pool_.OnFault(&local);
}

}  // namespace
}  // namespace tcm
