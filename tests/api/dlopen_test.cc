// dlopen/dlsym/dlclose paths: a module that allocates in its constructor is opened, called
// (memory crosses the boundary both ways) and closed, repeatedly and while other threads
// allocate; dlsym of a missing symbol and dlopen of a missing file make glibc allocate and free
// its error strings.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

#ifndef TCM_DLOPEN_LIB_PATH
#error "TCM_DLOPEN_LIB_PATH must name the module built from dlopen_lib.cc"
#endif

namespace {

using MakeStringFn = char* (*)(const char*, size_t);
using FreeFn = void (*)(void*);
using NewVectorFn = std::vector<int>* (*)(size_t);
using CtorOkFn = int (*)();

template <typename Fn>
Fn Lookup(void* handle, const char* name) {
  return reinterpret_cast<Fn>(dlsym(handle, name));
}

// One open/use/close cycle; memory the module returned is freed after dlclose.
void OpenUseClose() {
  void* handle = dlopen(TCM_DLOPEN_LIB_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  auto ctor_ok = Lookup<CtorOkFn>(handle, "DlLibConstructorOk");
  auto make_string = Lookup<MakeStringFn>(handle, "DlLibMakeString");
  auto lib_free = Lookup<FreeFn>(handle, "DlLibFree");
  auto new_vector = Lookup<NewVectorFn>(handle, "DlLibNewVector");
  ASSERT_TRUE(ctor_ok && make_string && lib_free && new_vector) << dlerror();
  EXPECT_EQ(ctor_ok(), 1) << "module constructor's allocations are broken";

  char* s = make_string("abc", 1000);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(strlen(s), 3000u);
  if (&tc_malloc_size != nullptr) {
    EXPECT_GE(tc_malloc_size(s), 3001u);
  }

  void* mine = malloc(tcm_test::Opaque(size_t{50000}));
  ASSERT_NE(mine, nullptr);
  lib_free(mine);  // freed by the module

  std::vector<int>* v = new_vector(10000);
  ASSERT_EQ(v->size(), 10000u);
  EXPECT_EQ((*v)[9999], 7);

  EXPECT_EQ(dlclose(handle), 0) << dlerror();
  free(s);  // after dlclose
  delete v;
}

TEST(Dlopen, OpenCallCloseRepeatedly) {
  for (int i = 0; i < 50; ++i) {
    OpenUseClose();
    if (HasFatalFailure()) return;
  }
}

TEST(Dlopen, OpenCallCloseWhileOtherThreadsAllocate) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&stop, t] {
      tcm_test::Rng rng(static_cast<uint64_t>(t) + 1);
      std::vector<void*> held(64, nullptr);
      while (!stop.load(std::memory_order_relaxed)) {
        void*& slot = held[rng.Below(held.size())];
        free(slot);
        slot = malloc(tcm_test::SkewedSize(rng, 300000));
      }
      for (void* p : held) free(p);
    });
  }
  for (int i = 0; i < 30; ++i) {
    OpenUseClose();
    if (HasFatalFailure()) break;
  }
  stop = true;
  for (std::thread& t : threads) t.join();
}

TEST(Dlsym, MissingSymbolReportsAnError) {
  void* self = dlopen(nullptr, RTLD_NOW);
  ASSERT_NE(self, nullptr);
  for (int i = 0; i < 1000; ++i) {
    const std::string name = "tcm_no_such_symbol_" + std::to_string(i);
    EXPECT_EQ(dlsym(self, name.c_str()), nullptr);
    const char* err = dlerror();  // glibc malloc'd this string and frees it on the next error
    ASSERT_NE(err, nullptr);
    EXPECT_NE(strstr(err, name.c_str()), nullptr) << err;
    EXPECT_EQ(dlsym(RTLD_DEFAULT, name.c_str()), nullptr);
  }
  EXPECT_EQ(dlclose(self), 0);
  // dlerror() with no pending error returns NULL.
  (void)dlerror();
  EXPECT_EQ(dlerror(), nullptr);
}

TEST(Dlopen, MissingLibraryReportsAnError) {
  for (int i = 0; i < 200; ++i) {
    EXPECT_EQ(dlopen("libtcm_does_not_exist.so", RTLD_NOW), nullptr);
    const char* err = dlerror();
    ASSERT_NE(err, nullptr);
    EXPECT_NE(strstr(err, "libtcm_does_not_exist.so"), nullptr) << err;
  }
}

TEST(Dlopen, ThreadsCreatedAfterDlopenUseTheModule) {
  void* handle = dlopen(TCM_DLOPEN_LIB_PATH, RTLD_NOW | RTLD_GLOBAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  auto make_string = Lookup<MakeStringFn>(handle, "DlLibMakeString");
  ASSERT_NE(make_string, nullptr);
  std::vector<std::thread> threads;
  std::vector<char*> results(8, nullptr);
  for (size_t t = 0; t < results.size(); ++t) {
    threads.emplace_back([&, t] { results[t] = make_string("xy", 100 * (t + 1)); });
  }
  for (std::thread& t : threads) t.join();
  for (size_t t = 0; t < results.size(); ++t) {
    ASSERT_NE(results[t], nullptr);
    EXPECT_EQ(strlen(results[t]), 200 * (t + 1));
    free(results[t]);
  }
  EXPECT_EQ(dlclose(handle), 0);
}

}  // namespace
