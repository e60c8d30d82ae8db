// Server-shaped memory test: a key-value store loads `keys` small keys and values into a
// hash table, deletes them all, and then serves light traffic (a get and a put of a
// short-lived key every millisecond) for `serve_ms` milliseconds, on one thread, with no
// call into the allocator but new/delete. Does the memory of the emptied table go back?
//
// Usage: kv_server [keys=1M] [serve_ms=2000]
// Reports rss_loaded_mib (table full), rss_emptied_mib (right after deleting every key),
// rss_served_mib (after the light traffic) and served_frac = rss_served / rss_loaded;
// ops counts keys inserted and erased.
#include <cstdint>
#include <ctime>
#include <string>
#include <unordered_map>

#include "bench_util.h"

namespace {

std::string Key(uint64_t i) { return "user:" + std::to_string(i * 2654435761u) + ":session"; }
std::string Value(uint64_t i) { return "{\"id\":" + std::to_string(i) + ",\"state\":\"active\",\"ttl\":3600}"; }

}  // namespace

int main(int argc, char** argv) {
  const uint64_t keys = bench_arg(argc, argv, 1, 1 << 20);
  const uint64_t serve_ms = bench_arg(argc, argv, 2, 2000);
  const double w0 = bench_wall(), c0 = bench_cpu();
  auto* table = new std::unordered_map<std::string, std::string>();
  for (uint64_t i = 0; i < keys; ++i) table->emplace(Key(i), Value(i));
  const long loaded = bench_rss_bytes();
  for (uint64_t i = 0; i < keys; ++i) table->erase(Key(i));
  if (!table->empty()) bench_die("kv_server: table not empty");
  const long emptied = bench_rss_bytes();
  const double w1 = bench_wall(), c1 = bench_cpu();
  // Light traffic: the emptied table stays (with its bucket array), as in a server.
  struct timespec ms = {0, 1000000};
  uint64_t hits = 0;
  for (uint64_t t = 0; t < serve_ms; ++t) {
    (*table)[Key(keys + t)] = Value(t);
    hits += table->count(Key(keys + t / 2));
    if (t % 16 == 15) table->clear();
    nanosleep(&ms, nullptr);
  }
  const long served = bench_rss_bytes();
  bench_report(2 * keys, w1 - w0, c1 - c0);
  printf(" rss_loaded_mib=%.1f rss_emptied_mib=%.1f rss_served_mib=%.1f served_frac=%.3f hits=%llu\n",
         static_cast<double>(loaded) / 1048576.0, static_cast<double>(emptied) / 1048576.0,
         static_cast<double>(served) / 1048576.0, static_cast<double>(served) / static_cast<double>(loaded),
         static_cast<unsigned long long>(hits));
  delete table;
  return 0;
}
