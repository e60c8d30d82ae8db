// A program written the way a gperftools user writes one: only the public headers.
#include <gperftools/tcmalloc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

int main() {
  int major = 0, minor = 0;
  const char* patch = nullptr;
  const char* version = tc_version(&major, &minor, &patch);
  void* p = malloc(100);
  // Our allocator is the one in use: tc_malloc_size knows the block.
  size_t usable = tc_malloc_size(p);
  free(p);
  if (usable < 100 || strstr(version, "gperftools") == nullptr) return 1;
  std::printf("%s %d.%d usable=%zu\n", version, major, minor, usable);
  return 0;
}
