// Thread exit: thousands of short-lived threads, each allocating and freeing, freeing blocks
// that other (already dead) threads allocated, and allocating and freeing again from
// thread_local and pthread-key destructors while they exit. Per-thread caches must be reclaimed:
// the resident set stays bounded (a loose limit, not a measurement).
#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace {

using tcm_test::CheckPattern;
using tcm_test::FillPattern;

constexpr size_t kMiB = 1024 * 1024;
constexpr size_t kRssLimit = 200 * kMiB;

struct Block {
  void* p;
  size_t n;
  uint32_t seed;
};

// Only a prefix is patterned: enough to catch a block handed out twice, cheap for big blocks.
size_t Checked(size_t n) { return n < 512 ? n : 512; }

class Handoff {
 public:
  void Put(const Block& b) {
    std::lock_guard<std::mutex> lock(mu_);
    blocks_.push_back(b);
  }
  bool Take(Block* b) {
    std::lock_guard<std::mutex> lock(mu_);
    if (blocks_.empty()) return false;
    *b = blocks_.back();
    blocks_.pop_back();
    return true;
  }
  size_t Size() {
    std::lock_guard<std::mutex> lock(mu_);
    return blocks_.size();
  }

 private:
  std::mutex mu_;
  std::vector<Block> blocks_;
};

std::atomic<int> g_corruptions{0};

void VerifyAndFree(const Block& b) {
  if (!CheckPattern(b.p, Checked(b.n), b.seed)) g_corruptions.fetch_add(1);
  free(b.p);
}

// thread_local object whose destructor frees during thread exit.
struct ExitTimeHolder {
  ~ExitTimeHolder() {
    for (const Block& b : blocks) VerifyAndFree(b);
    std::string scratch(1000, 'x');  // and allocates once more, after the thread's last call
  }
  std::vector<Block> blocks;
};
thread_local ExitTimeHolder t_exit_holder;

pthread_key_t g_key;

// pthread-key destructor: frees the value, and on the first round installs another
// allocation so that glibc runs the destructors a second time.
void KeyDestructor(void* value) {
  Block* b = static_cast<Block*>(value);
  const bool again = b->seed % 2 == 0;
  VerifyAndFree(*b);
  delete b;
  if (again) {
    Block* next = new Block{malloc(64), 64, 1};
    FillPattern(next->p, 64, 1);
    pthread_setspecific(g_key, next);
  }
}

void ThreadBody(Handoff* handoff, uint64_t id) {
  tcm_test::Rng rng(id + 1);
  std::vector<Block> mine;
  for (int i = 0; i < 100; ++i) {
    const size_t n = tcm_test::SkewedSize(rng, 300 * 1024);
    const uint32_t seed = static_cast<uint32_t>(id * 1000 + static_cast<uint64_t>(i));
    void* p = malloc(n);
    if (p == nullptr) {
      g_corruptions.fetch_add(1);
      return;
    }
    FillPattern(p, Checked(n), seed);
    mine.push_back({p, n, seed});
  }
  Block foreign;
  for (int i = 0; i < 30 && handoff->Take(&foreign); ++i) VerifyAndFree(foreign);
  for (size_t i = 0; i < mine.size(); ++i) {
    if (i % 4 == 0) {
      handoff->Put(mine[i]);  // freed later by some other thread
    } else if (i % 4 == 1 && handoff->Take(&foreign)) {
      t_exit_holder.blocks.push_back(foreign);  // freed by this thread's exit path
      VerifyAndFree(mine[i]);
    } else {
      VerifyAndFree(mine[i]);
    }
  }
  void* key_value = malloc(200);
  FillPattern(key_value, 200, static_cast<uint32_t>(id));
  pthread_setspecific(g_key, new Block{key_value, 200, static_cast<uint32_t>(id)});
}

TEST(ThreadChurn, FiveThousandShortLivedThreadsInBatches) {
  ASSERT_EQ(pthread_key_create(&g_key, KeyDestructor), 0);
  Handoff handoff;
  constexpr int kThreads = 5000;
  constexpr int kBatch = 50;
  size_t rss_after_first_thousand = 0;
  for (int base = 0; base < kThreads; base += kBatch) {
    std::vector<std::thread> batch;
    for (int i = 0; i < kBatch; ++i) {
      batch.emplace_back(ThreadBody, &handoff, static_cast<uint64_t>(base + i));
    }
    for (std::thread& t : batch) t.join();
    if (base + kBatch == 1000) rss_after_first_thousand = tcm_test::ResidentBytes();
  }
  const size_t rss_end = tcm_test::ResidentBytes();
  std::cout << "RSS after 1000 threads: " << rss_after_first_thousand / kMiB
            << " MiB, after 5000: " << rss_end / kMiB << " MiB, blocks in hand-off: "
            << handoff.Size() << "\n";
  EXPECT_EQ(g_corruptions.load(), 0) << "blocks were corrupted or allocations failed";
  EXPECT_LT(rss_end, kRssLimit) << "memory grows with the number of threads that have exited";
  Block b;
  while (handoff.Take(&b)) VerifyAndFree(b);
  EXPECT_EQ(g_corruptions.load(), 0);
  pthread_key_delete(g_key);
}

TEST(ThreadChurn, DetachedThreadsExitingConcurrently) {
  std::mutex mu;
  std::condition_variable cv;
  int running = 0;
  std::atomic<int> failures{0};
  constexpr int kThreads = 1000;
  for (int i = 0; i < kThreads; ++i) {
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return running < 64; });  // bound the number alive at once
      ++running;
    }
    std::thread([&, i] {
      tcm_test::Rng rng(static_cast<uint64_t>(i) + 77);
      std::vector<void*> blocks;
      for (int k = 0; k < 50; ++k) {
        void* p = malloc(tcm_test::SkewedSize(rng, 64 * 1024));
        if (p == nullptr) failures.fetch_add(1);
        blocks.push_back(p);
      }
      for (void* p : blocks) free(p);
      std::lock_guard<std::mutex> lock(mu);
      --running;
      cv.notify_all();
    }).detach();
  }
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return running == 0; });
  EXPECT_EQ(failures.load(), 0);
  EXPECT_LT(tcm_test::ResidentBytes(), kRssLimit);
}

TEST(ThreadChurn, ThreadsFreeingEachOthersMemoryConcurrently) {
  // Producer/consumer pairs that live briefly: every block is allocated by one thread and freed
  // by another, while both are alive, and the pairs come and go.
  std::atomic<int> failures{0};
  for (int round = 0; round < 100; ++round) {
    Handoff queue;
    std::atomic<bool> done{false};
    std::thread producer([&] {
      for (int i = 0; i < 2000; ++i) {
        const size_t n = 16 + static_cast<size_t>(i % 64) * 16;
        void* p = malloc(n);
        if (p == nullptr) {
          failures.fetch_add(1);
          continue;
        }
        FillPattern(p, Checked(n), static_cast<uint32_t>(i));
        queue.Put({p, n, static_cast<uint32_t>(i)});
      }
      done = true;
    });
    std::thread consumer([&] {
      Block b;
      for (;;) {
        if (queue.Take(&b)) {
          VerifyAndFree(b);
        } else if (done.load()) {
          if (!queue.Take(&b)) break;
          VerifyAndFree(b);
        } else {
          std::this_thread::yield();
        }
      }
    });
    producer.join();
    consumer.join();
  }
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(g_corruptions.load(), 0);
}

}  // namespace
