// Memory that libc allocates internally and the program frees with free(): every such block must
// come from the allocator under test (libc calls malloc through the PLT), which tc_malloc_size
// confirms before the block is freed.
#include <dirent.h>
#include <glob.h>
#include <gtest/gtest.h>
#include <limits.h>
#include <pwd.h>
#include <regex.h>
#include <search.h>
#include <stdarg.h>

#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace {

// The block is ours: tc_malloc_size recognises it and reports at least `n` bytes.
void ExpectOurs(const void* p, size_t n, const char* what) {
  ASSERT_NE(p, nullptr) << what;
  ASSERT_NE(&tc_malloc_size, nullptr);
  EXPECT_GE(tc_malloc_size(const_cast<void*>(p)), n) << what;
  EXPECT_EQ(malloc_usable_size(const_cast<void*>(p)), tc_malloc_size(const_cast<void*>(p)))
      << what;
}

TEST(LibcInternals, StrdupAndStrndup) {
  const std::string text(5000, 'q');
  for (int i = 0; i < 1000; ++i) {
    const size_t len = static_cast<size_t>(i) * 5;
    char* a = strdup(text.c_str() + text.size() - len);
    ExpectOurs(a, len + 1, "strdup");
    EXPECT_EQ(strlen(a), len);
    char* b = strndup(text.c_str(), len / 2);
    ExpectOurs(b, len / 2 + 1, "strndup");
    EXPECT_EQ(strlen(b), len / 2);
    free(a);
    free(b);
  }
}

TEST(LibcInternals, GetlineAndGetdelim) {
  std::string content;
  for (int i = 0; i < 200; ++i) content += std::string(static_cast<size_t>(i) * 37, 'L') + "\n";
  FILE* f = fmemopen(const_cast<char*>(content.data()), content.size(), "r");
  ASSERT_NE(f, nullptr);
  char* line = nullptr;
  size_t cap = 0;
  int lines = 0;
  ssize_t got;
  while ((got = getline(&line, &cap, f)) > 0) {  // libc grows `line` with realloc
    EXPECT_EQ(static_cast<size_t>(got), static_cast<size_t>(lines) * 37 + 1);
    ExpectOurs(line, static_cast<size_t>(got) + 1, "getline");
    ++lines;
  }
  EXPECT_EQ(lines, 200);
  free(line);
  rewind(f);
  char* field = nullptr;
  cap = 0;
  EXPECT_GT(getdelim(&field, &cap, 'L', f), 0);
  ExpectOurs(field, 1, "getdelim");
  free(field);
  fclose(f);
}

TEST(LibcInternals, AsprintfAndVasprintf) {
  for (int i = 0; i < 500; ++i) {
    char* s = nullptr;
    const int n = asprintf(&s, "%d:%0*d", i, i * 10, 7);
    ASSERT_GT(n, 0);
    ExpectOurs(s, static_cast<size_t>(n) + 1, "asprintf");
    free(s);
  }
  auto format = [](const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char* s = nullptr;
    const int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    EXPECT_GT(n, 0);
    return s;
  };
  char* v = format("%s-%s", std::string(10000, 'a').c_str(), "b");
  ExpectOurs(v, 10003, "vasprintf");
  free(v);
}

TEST(LibcInternals, OpenMemstream) {
  char* buf = nullptr;
  size_t size = 0;
  FILE* f = open_memstream(&buf, &size);
  ASSERT_NE(f, nullptr);
  for (int i = 0; i < 100000; ++i) fprintf(f, "%d,", i);  // grows into the page heap
  ASSERT_EQ(fclose(f), 0);
  ExpectOurs(buf, size + 1, "open_memstream");
  EXPECT_EQ(strncmp(buf, "0,1,2,3,", 8), 0);
  free(buf);
}

TEST(LibcInternals, RealpathGetcwdAndCurrentDirName) {
  for (int i = 0; i < 100; ++i) {
    char* r = realpath(".", nullptr);
    ExpectOurs(r, strlen(r) + 1, "realpath");
    free(r);
    char* c = getcwd(nullptr, 0);
    ExpectOurs(c, strlen(c) + 1, "getcwd");
    free(c);
    char* d = get_current_dir_name();
    ExpectOurs(d, strlen(d) + 1, "get_current_dir_name");
    free(d);
  }
}

TEST(LibcInternals, Scandir) {
  for (int round = 0; round < 20; ++round) {
    struct dirent** list = nullptr;
    const int n = scandir("/proc/self", &list, nullptr, alphasort);
    ASSERT_GT(n, 2);
    ExpectOurs(list, sizeof(*list) * static_cast<size_t>(n), "scandir array");
    for (int i = 0; i < n; ++i) {
      ExpectOurs(list[i], offsetof(struct dirent, d_name) + strlen(list[i]->d_name) + 1,
                 "scandir entry");
      free(list[i]);
    }
    free(list);
  }
}

TEST(LibcInternals, GlobRegexSearchTreesAndEnvironment) {
  glob_t g;
  ASSERT_EQ(glob("/proc/self/*", 0, nullptr, &g), 0);
  EXPECT_GT(g.gl_pathc, 2u);
  ExpectOurs(g.gl_pathv, sizeof(char*) * g.gl_pathc, "glob");
  globfree(&g);

  for (int i = 0; i < 50; ++i) {
    regex_t re;
    ASSERT_EQ(regcomp(&re, "^(a+|b*)[0-9]{2,5}x$", REG_EXTENDED), 0);
    EXPECT_EQ(regexec(&re, "aaa123x", 0, nullptr, 0), 0);
    EXPECT_NE(regexec(&re, "zzz", 0, nullptr, 0), 0);
    regfree(&re);
  }

  void* root = nullptr;
  std::vector<int> keys(3000);
  auto cmp = [](const void* a, const void* b) {
    return *static_cast<const int*>(a) - *static_cast<const int*>(b);
  };
  for (int i = 0; i < 3000; ++i) {
    keys[static_cast<size_t>(i)] = (i * 7919) % 3000;
    ASSERT_NE(tsearch(&keys[static_cast<size_t>(i)], &root, cmp), nullptr);
  }
  for (int i = 0; i < 3000; ++i) tdelete(&keys[static_cast<size_t>(i)], &root, cmp);
  EXPECT_EQ(root, nullptr);

  for (int i = 0; i < 500; ++i) {  // setenv grows environ with realloc
    const std::string name = "TCM_API_TEST_VAR_" + std::to_string(i);
    ASSERT_EQ(setenv(name.c_str(), std::string(static_cast<size_t>(i), 'e').c_str(), 1), 0);
  }
  for (int i = 0; i < 500; ++i) {
    const std::string name = "TCM_API_TEST_VAR_" + std::to_string(i);
    ASSERT_EQ(unsetenv(name.c_str()), 0);
  }
}

TEST(LibcInternals, StdioAndNssInThreads) {
  // fopen/fclose allocate FILE objects and buffers; getpwuid loads NSS modules with dlopen.
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([] {
      for (int i = 0; i < 200; ++i) {
        FILE* f = fopen("/proc/self/status", "r");
        ASSERT_NE(f, nullptr);
        char buf[256];
        EXPECT_NE(fgets(buf, sizeof(buf), f), nullptr);
        fclose(f);
      }
      struct passwd pw;
      struct passwd* result = nullptr;
      std::vector<char> buf(16384);
      getpwuid_r(getuid(), &pw, buf.data(), buf.size(), &result);  // may legitimately miss
    });
  }
  for (std::thread& t : threads) t.join();
  (void)getpwuid(getuid());
}

}  // namespace
