// Translation unit for the g++ real-program test.
//
// The point is the compile: cc1plus parses several heavy standard headers (<regex> above all)
// and instantiates many templates, which allocates millions of tree nodes, hash tables and
// obstacks. The compiled program is then run too (preloaded in the preloaded run) and its
// output compared; it is deterministic: fixed inputs, threads whose results are combined in a
// fixed order. One deliberate -Wall warning (`unused_on_purpose`) checks that diagnostics come
// out the same.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <iostream>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <variant>
#include <vector>

namespace {

// Deterministic generator shared by all the workloads below.
class Lcg {
 public:
  explicit Lcg(std::uint64_t seed) : state_(seed) {}
  std::uint32_t Next() {
    state_ = state_ * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<std::uint32_t>(state_ >> 33);
  }
  std::string Word(std::size_t len) {
    std::string s;
    for (std::size_t i = 0; i < len; ++i) s.push_back(static_cast<char>('a' + Next() % 26));
    return s;
  }

 private:
  std::uint64_t state_;
};

// Compile-time recursion: one distinct class template instantiation per N, to make the
// compiler allocate lots of template specialisations.
template <int N>
struct Fib {
  static constexpr std::uint64_t kValue = Fib<N - 1>::kValue + Fib<N - 2>::kValue;
};
template <>
struct Fib<1> {
  static constexpr std::uint64_t kValue = 1;
};
template <>
struct Fib<0> {
  static constexpr std::uint64_t kValue = 0;
};

template <typename Seq, std::size_t... I>
std::uint64_t SumFibs(std::index_sequence<I...>) {
  return (Fib<static_cast<int>(I)>::kValue + ...);
}

// A generic container report instantiated for many container types.
template <typename Container>
std::string Describe(const std::string& label, const Container& c) {
  std::ostringstream out;
  out << label << ": size=" << c.size();
  std::size_t shown = 0;
  for (const auto& item : c) {
    if (shown++ == 3) break;
    if constexpr (requires { item.first; }) {
      out << ' ' << item.first << "=>" << item.second;
    } else {
      out << ' ' << item;
    }
  }
  return out.str();
}

using Value = std::variant<int, double, std::string, std::vector<int>>;

struct ValuePrinter {
  std::string operator()(int v) const { return "int " + std::to_string(v); }
  std::string operator()(double v) const { return "double " + std::to_string(v); }
  std::string operator()(const std::string& v) const { return "string " + v; }
  std::string operator()(const std::vector<int>& v) const {
    return "vector sum " + std::to_string(std::accumulate(v.begin(), v.end(), 0));
  }
};

void Containers() {
  Lcg rng(7);
  std::map<std::string, int> ordered;
  std::unordered_map<int, std::string> hashed;
  std::set<std::uint32_t> uniq;
  std::list<std::string> words;
  std::deque<int> dq;
  for (int i = 0; i < 200000; ++i) {
    std::string w = rng.Word(1 + rng.Next() % 16);
    ordered[w] += i;
    hashed.emplace(i, w);
    uniq.insert(rng.Next() % 100000);
    if (i % 4 == 0) words.push_back(w);
    dq.push_back(i);
    if (i % 3 == 0) dq.pop_front();
  }
  for (int i = 0; i < 200000; i += 2) hashed.erase(i);
  words.sort();
  words.unique();
  std::cout << Describe("map", ordered) << '\n';
  std::cout << "unordered_map: size=" << hashed.size() << " [1]=" << hashed.at(1) << '\n';
  std::cout << Describe("set", uniq) << '\n';
  std::cout << Describe("list", words) << '\n';
  std::cout << "deque: size=" << dq.size() << " front=" << dq.front() << '\n';
}

void Regexes() {
  Lcg rng(11);
  std::string corpus;
  for (int i = 0; i < 3000; ++i) {
    corpus += "user" + std::to_string(rng.Next() % 500) + "@host" +
              std::to_string(rng.Next() % 40) + ".example tag=" + rng.Word(5) + '\n';
  }
  const std::regex email(R"((\w+)@(host\d+)\.example)");
  std::map<std::string, int> hosts;
  for (auto it = std::sregex_iterator(corpus.begin(), corpus.end(), email);
       it != std::sregex_iterator(); ++it) {
    ++hosts[(*it)[2].str()];
  }
  std::cout << Describe("hosts", hosts) << '\n';
  const std::string swapped =
      std::regex_replace(corpus, std::regex(R"(tag=(\w+))"), "label<$1>");
  std::cout << "swapped: " << swapped.size() << ' ' << swapped.substr(0, 44) << '\n';
}

void Variants() {
  std::vector<Value> values;
  for (int i = 0; i < 12; ++i) {
    switch (i % 4) {
      case 0: values.emplace_back(i); break;
      case 1: values.emplace_back(i / 4.0); break;
      case 2: values.emplace_back(std::string(static_cast<std::size_t>(i), 'v')); break;
      default: values.emplace_back(std::vector<int>(static_cast<std::size_t>(i), i)); break;
    }
  }
  for (const auto& v : values) std::cout << std::visit(ValuePrinter{}, v) << '\n';
  std::optional<std::string> maybe;
  int unused_on_purpose = 42;  // -Wall: the diagnostic is part of the compared output
  std::cout << "optional: " << maybe.value_or("empty") << '\n';
}

void Threads() {
  // Each thread allocates and frees independently; some blocks are handed to the main thread
  // to free, which crosses thread caches. Results are printed in thread-index order.
  constexpr int kThreads = 4;
  std::vector<std::uint64_t> sums(kThreads);
  std::vector<std::vector<std::unique_ptr<std::string>>> handoff(kThreads);
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back([t, &sums, &handoff] {
      Lcg rng(100 + static_cast<std::uint64_t>(t));
      std::vector<std::unique_ptr<std::string>> live;
      std::uint64_t sum = 0;
      for (int i = 0; i < 300000; ++i) {
        live.push_back(std::make_unique<std::string>(1 + rng.Next() % 300, 'a' + t));
        if (live.size() > 1000) {
          live[rng.Next() % live.size()].swap(live.back());
          sum += live.back()->size();
          live.pop_back();
        }
      }
      sums[static_cast<std::size_t>(t)] = sum;
      handoff[static_cast<std::size_t>(t)] = std::move(live);
    });
  }
  for (auto& th : pool) th.join();
  for (int t = 0; t < kThreads; ++t) {
    std::cout << "thread " << t << " sum " << sums[static_cast<std::size_t>(t)] << " kept "
              << handoff[static_cast<std::size_t>(t)].size() << '\n';
  }
  handoff.clear();  // freed here, on the main thread
}

}  // namespace

int main() {
  std::cout << "fib sum " << SumFibs<void>(std::make_index_sequence<90>{}) << '\n';
  Containers();
  Regexes();
  Variants();
  Threads();
  std::cout << "done\n";
  return 0;
}
