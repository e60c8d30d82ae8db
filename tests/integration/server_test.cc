// A server's life: load 1M small keys and values into a hash table, delete them all, then
// serve light traffic (a put and a get per millisecond, 2000 of them) with no call into the
// allocator but new and delete. RSS must come back under 10% of the loaded figure.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <unordered_map>

#include "memory_util.h"

namespace {

std::string Key(uint64_t i) { return "user:" + std::to_string(i * 2654435761u) + ":session"; }
std::string Value(uint64_t i) {
  return "{\"id\":" + std::to_string(i) + ",\"state\":\"active\",\"ttl\":3600,\"region\":\"eu-west\",\"agent\":\"Mozilla/5.0 (X11; Linux x86_64)\"}";
}

TEST(Server, EmptiedTableGoesBackWhileServingLightTraffic) {
  constexpr uint64_t kKeys = 1 << 20;
  std::unordered_map<std::string, std::string> table;
  for (uint64_t i = 0; i < kKeys; ++i) table.emplace(Key(i), Value(i));
  const size_t loaded = ResidentBytes();
  for (uint64_t i = 0; i < kKeys; ++i) table.erase(Key(i));
  ASSERT_TRUE(table.empty());
  const size_t emptied = ResidentBytes();
  for (uint64_t t = 0; t < 2000; ++t) {
    table[Key(kKeys + t)] = Value(t);
    EXPECT_EQ(table.count(Key(kKeys + t)), 1u);
    if (t % 16 == 15) table.clear();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const size_t served = ResidentBytes();
  printf("RSS loaded %.1f MiB, emptied %.1f MiB, after light traffic %.1f MiB (%.3f of loaded)\n", MiB(loaded),
         MiB(emptied), MiB(served), static_cast<double>(served) / static_cast<double>(loaded));
  EXPECT_LT(served, loaded / 10);
}

}  // namespace
