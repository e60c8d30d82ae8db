// A SysAllocator installed with MallocExtension::SetSystemAllocator that returns NULL is
// out of memory, as in gperftools: malloc returns NULL with ENOMEM, operator new runs the
// new-handler and then throws std::bad_alloc. (It used to be bypassed: the allocator
// quietly fell back to mmap.)
#include <gperftools/malloc_extension.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <new>

namespace {

class RefusingSysAllocator : public SysAllocator {
 public:
  void* Alloc(size_t, size_t*, size_t) override {
    ++calls;
    return nullptr;
  }
  int calls = 0;
};

int g_handler_calls = 0;
void CountingNewHandler() {
  ++g_handler_calls;
  std::set_new_handler(nullptr);  // the next failure throws
}

constexpr size_t kHuge = size_t{512} << 20;  // more than the page heap holds: it must grow

class SysAllocOom : public ::testing::Test {
 protected:
  void SetUp() override {
    original_ = MallocExtension::instance()->GetSystemAllocator();
    MallocExtension::instance()->SetSystemAllocator(&refusing_);
  }
  void TearDown() override { MallocExtension::instance()->SetSystemAllocator(original_); }
  RefusingSysAllocator refusing_;
  SysAllocator* original_ = nullptr;
};

TEST_F(SysAllocOom, MallocReturnsNullWithEnomem) {
  errno = 0;
  void* p = malloc(kHuge);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_GE(refusing_.calls, 1);
  free(p);
}

TEST_F(SysAllocOom, NewRunsTheNewHandlerThenThrows) {
  g_handler_calls = 0;
  std::set_new_handler(CountingNewHandler);
  bool threw = false;
  try {
    char* volatile p = new char[kHuge];
    delete[] p;
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  std::set_new_handler(nullptr);
  EXPECT_TRUE(threw);
  EXPECT_EQ(g_handler_calls, 1);
  EXPECT_GE(refusing_.calls, 2) << "the allocation is retried after the new-handler";
}

TEST_F(SysAllocOom, NothrowNewReturnsNull) {
  char* p = new (std::nothrow) char[kHuge];
  EXPECT_EQ(p, nullptr);
  delete[] p;
}

TEST(SysAllocRestore, TheBuiltInAllocatorServesAgainOnceRestored) {
  void* p = malloc(kHuge);
  ASSERT_NE(p, nullptr);
  free(p);
}

}  // namespace
