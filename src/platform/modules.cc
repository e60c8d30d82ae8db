// dl_iterate_phdr and dlsym behind the contract of modules.h.
#include "platform/modules.h"

#include <dlfcn.h>
#include <link.h>

namespace tcm::os {

namespace {
struct Visit {
  void (*fn)(const LoadedModule&, void*);
  void* ctx;
};

int OnPhdr(struct dl_phdr_info* info, size_t, void* arg) {
  const Visit* v = static_cast<const Visit*>(arg);
  LoadedModule m{};
  m.path = info->dlpi_name != nullptr ? info->dlpi_name : "";
  m.bias = info->dlpi_addr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_LOAD && m.num_segments < LoadedModule::kMaxSegments) {
      m.segments[m.num_segments++] = LoadedModule::Segment{info->dlpi_addr + ph.p_vaddr, ph.p_memsz,
                                                           (ph.p_flags & PF_W) != 0};
    } else if (ph.p_type == PT_TLS) {
      m.tls_size = ph.p_memsz;
    }
  }
  m.tls_block = reinterpret_cast<uintptr_t>(info->dlpi_tls_data);
  v->fn(m, v->ctx);
  return 0;
}
}  // namespace

void ForEachLoadedModule(void (*fn)(const LoadedModule& module, void* ctx), void* ctx) {
  Visit v{fn, ctx};
  dl_iterate_phdr(&OnPhdr, &v);
}

void* NextSymbol(const char* name) { return dlsym(RTLD_NEXT, name); }

void* GlobalSymbol(const char* name) { return dlsym(RTLD_DEFAULT, name); }

}  // namespace tcm::os
