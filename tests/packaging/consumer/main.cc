// A program written the way a gperftools user writes one: only the public headers
// (gperftools/tcmalloc.h and gperftools/malloc_extension.h), built by the consumer's tools.
#include <gperftools/malloc_extension.h>
#include <gperftools/tcmalloc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

int main() {
  int major = 0, minor = 0;
  const char* patch = nullptr;
  const char* version = tc_version(&major, &minor, &patch);
  void* p = malloc(100);
  // Our allocator is the one in use: tc_malloc_size and MallocExtension know the block.
  size_t usable = tc_malloc_size(p);
  MallocExtension* ext = MallocExtension::instance();
  size_t heap = 0;
  bool ok = usable >= 100 && strstr(version, "gperftools") != nullptr &&
            ext->GetOwnership(p) == MallocExtension::kOwned && ext->GetAllocatedSize(p) == usable &&
            ext->GetNumericProperty("generic.heap_size", &heap) && heap > 0;
  char stats[2048];
  ext->GetStats(stats, sizeof(stats));
  ok = ok && std::string(stats).find("Bytes in use by application") != std::string::npos;
  free(p);
  ext->ReleaseFreeMemory();
  if (!ok) return 1;
  std::printf("%s %d.%d usable=%zu heap=%zu\n", version, major, minor, usable, heap);
  return 0;
}
