// STL-heavy C++ workload: the allocation pattern of ordinary C++ code -- node containers,
// strings past the small-string buffer, vectors that grow by doubling, and everything freed by
// destructors in bulk -- all through operator new/delete, which every allocator under test
// replaces too.
//
// Usage: stl_mix [threads=2] [rounds=200] [keys=500] [seed=1]
// Each round builds a map from string keys to growing vectors, an unordered_map of strings, a
// sorted vector of strings and a list, erases half of the map, and destroys it all. The
// checksum is printed so the compiler cannot drop the work. ops counts keys (each costs about
// half a dozen allocations: map node, string, vector growth, hash node, list node) over all
// rounds and threads.
#include <algorithm>
#include <cstdint>
#include <list>
#include <map>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "bench_util.h"

namespace {

uint64_t Round(bench_rng* rng, uint64_t keys) {
  std::map<std::string, std::vector<int>> by_name;
  std::unordered_map<uint64_t, std::string> by_id;
  std::list<std::string> log;
  std::vector<std::string> names;
  for (uint64_t i = 0; i < keys; ++i) {
    uint64_t id = bench_rng_next(rng);
    // 20+ characters: longer than libstdc++'s 15-byte small-string buffer, so it allocates.
    std::string name = "customer-" + std::to_string(id % 1000000007u) + "-record";
    auto& values = by_name[name];
    for (uint64_t v = 0, n = 1 + id % 24; v < n; ++v) values.push_back(static_cast<int>(v));
    by_id.emplace(id, name);
    if (i % 4 == 0) log.push_back(name + " added");
    names.push_back(std::move(name));
  }
  std::sort(names.begin(), names.end());
  uint64_t sum = names.size() + log.size() + by_id.size();
  for (auto it = by_name.begin(); it != by_name.end();) {
    sum += it->second.size();
    it = (it->second.size() % 2 == 0) ? by_name.erase(it) : std::next(it);
  }
  return sum + by_name.size();
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t threads = bench_arg(argc, argv, 1, 2);
  uint64_t rounds = bench_arg(argc, argv, 2, 200);
  uint64_t keys = bench_arg(argc, argv, 3, 500);
  uint64_t seed = bench_arg(argc, argv, 4, 1);
  std::vector<uint64_t> sums(threads);
  std::vector<std::thread> pool;
  pool.reserve(threads);

  double w0 = bench_wall(), c0 = bench_cpu();
  for (uint64_t t = 0; t < threads; ++t) {
    pool.emplace_back([&sums, t, rounds, keys, seed] {
      bench_rng rng;
      bench_rng_seed(&rng, seed * 31337u + t);
      for (uint64_t r = 0; r < rounds; ++r) sums[t] += Round(&rng, keys);
    });
  }
  for (auto& th : pool) th.join();
  double w1 = bench_wall(), c1 = bench_cpu();

  uint64_t checksum = 0;
  for (uint64_t s : sums) checksum += s;
  bench_report(threads * rounds * keys, w1 - w0, c1 - c0);
  printf(" checksum=%llu\n", static_cast<unsigned long long>(checksum));
  return 0;
}
