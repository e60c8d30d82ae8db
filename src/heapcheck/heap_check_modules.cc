#include "heapcheck/heap_check_modules.h"

#include <algorithm>
#include <cstring>

#include "api/introspection.h"
#include "platform/modules.h"

namespace tcm::heapcheck {

namespace {

bool BaseNameStarts(const char* path, const char* prefix) {
  const char* base = strrchr(path, '/');
  base = base != nullptr ? base + 1 : path;
  return strncmp(base, prefix, strlen(prefix)) == 0;
}

// The C and C++ runtimes, the dynamic loader, and this library: their data is system
// bookkeeping, a root at every level.
bool IsSystemLibrary(const char* path) {
  static const char* const kSystem[] = {"ld-linux", "ld64.so", "libc.so", "libm.so", "libpthread.so", "libdl.so",
                                        "librt.so", "libresolv.so", "libnss_", "libanl.so", "libutil.so",
                                        "libstdc++.so", "libgcc_s.so", "libtcmalloc"};
  for (const char* s : kSystem)
    if (BaseNameStarts(path, s)) return true;
  return false;
}

bool IsIgnoredLibrary(const char* path, const char* list) {
  while (*list) {
    const char* end = list;
    while (*end && *end != ':' && *end != ',') ++end;
    const size_t len = static_cast<size_t>(end - list);
    if (len > 0 && path[0] != '\0') {
      for (const char* p = path; *p; ++p)
        if (strncmp(p, list, len) == 0) return true;
    }
    list = *end ? end + 1 : end;
  }
  return false;
}

struct ModuleCollector {
  MappedArray<ModuleInfo>* out;
  uintptr_t tp;
  const char* ignore_libs;
};

void OnModule(const os::LoadedModule& mod, void* arg) {
  auto* c = static_cast<ModuleCollector*>(arg);
  ModuleInfo m{};
  strncpy(m.path, mod.path, sizeof(m.path) - 1);
  m.lo = ~uintptr_t{0};
  for (int i = 0; i < mod.num_segments; ++i) {
    const os::LoadedModule::Segment& seg = mod.segments[i];
    if (seg.start < m.lo) m.lo = seg.start;
    if (seg.start + seg.size > m.hi) m.hi = seg.start + seg.size;
    if (seg.writable && m.num_writable < 4) m.writable[m.num_writable++] = Range{Hide(seg.start), Hide(seg.start + seg.size)};
  }
  m.tls_size = mod.tls_size;
  // Static TLS sits just below the thread pointer; a block elsewhere is dynamic TLS (a
  // heap object reached through the thread's DTV), or not allocated in this thread yet.
  const uintptr_t data = mod.tls_block;
  if (m.tls_size > 0 && data != 0 && data < c->tp && c->tp - data < (uintptr_t{64} << 20) &&
      !introspection::IsHeapMemory(data)) {
    m.tls_offset = static_cast<intptr_t>(data - c->tp);
  } else {
    m.tls_size = 0;
  }
  m.loader = BaseNameStarts(m.path, "ld-linux") || BaseNameStarts(m.path, "ld64.so");
  m.system = IsSystemLibrary(m.path);
  m.ignored = IsIgnoredLibrary(m.path, c->ignore_libs);
  if (m.lo < m.hi) c->out->Push(m);
}

}  // namespace

void CollectModules(const char* ignore_libs, MappedArray<ModuleInfo>* out) {
  ModuleCollector c{out, reinterpret_cast<uintptr_t>(__builtin_thread_pointer()), ignore_libs};
  os::ForEachLoadedModule(&OnModule, &c);
  std::sort(out->begin(), out->end(), [](const ModuleInfo& a, const ModuleInfo& b) { return a.lo < b.lo; });
}

const ModuleInfo* ModuleOf(const MappedArray<ModuleInfo>& mods, uintptr_t pc) {
  size_t lo = 0, hi = mods.size();
  while (lo < hi) {  // first module starting above pc - 1
    const size_t mid = (lo + hi) / 2;
    if (mods[mid].lo <= pc - 1) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0) return nullptr;
  const ModuleInfo& m = mods[lo - 1];
  return pc - 1 < m.hi ? &m : nullptr;
}

}  // namespace tcm::heapcheck
