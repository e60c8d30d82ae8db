// ByteBudget: what is taken never exceeds the limit, also with threads racing for it, and
// everything given back is there again.
#include "core/byte_budget.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace tcm {
namespace {

// Closed (after the surplus rule fired) until the next maintenance pass opens it: nothing
// can be taken, and what was taken can still be given back.
TEST(ByteBudget, AClosedBudgetRefusesUntilOpened) {
  ByteBudget b;
  b.Init(8192 * 4);
  ASSERT_TRUE(b.Take(8192));
  b.Close();
  EXPECT_TRUE(b.closed());
  EXPECT_FALSE(b.Take(8192));
  EXPECT_EQ(b.used(), 8192u);
  b.Give(8192);
  EXPECT_EQ(b.used(), 0u);
  EXPECT_FALSE(b.Take(8192));
  b.Open();
  EXPECT_FALSE(b.closed());
  EXPECT_TRUE(b.Take(8192));
  EXPECT_EQ(b.used(), 8192u);
}

TEST(ByteBudget, TakesUpToTheLimitAndGivesBack) {
  ByteBudget b;
  EXPECT_FALSE(b.Take(1));  // no limit set: nothing to take
  b.Init(8192 * 3);
  EXPECT_TRUE(b.Take(8192));
  EXPECT_TRUE(b.Take(8192));
  EXPECT_TRUE(b.Take(8192));
  EXPECT_FALSE(b.Take(8192));
  EXPECT_EQ(b.used(), 8192u * 3);
  b.Give(8192);
  EXPECT_EQ(b.used(), 8192u * 2);
  EXPECT_FALSE(b.Take(8193));  // a failed take reserves nothing
  EXPECT_TRUE(b.Take(8192));
  b.Give(8192 * 3);
  EXPECT_EQ(b.used(), 0u);
  EXPECT_EQ(b.limit(), 8192u * 3);
}

TEST(ByteBudget, RacingThreadsNeverHoldMoreThanTheLimit) {
  ByteBudget b;
  b.Init(10 * 4096);
  std::atomic<long> held{0};
  std::atomic<long> most{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100000; ++i) {
        if (!b.Take(4096)) continue;
        const long now = held.fetch_add(1) + 1;
        long m = most.load();
        while (now > m && !most.compare_exchange_weak(m, now)) {
        }
        held.fetch_sub(1);
        b.Give(4096);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(most.load(), 10);
  EXPECT_EQ(b.used(), 0u);
}

}  // namespace
}  // namespace tcm
