// Reading the vDSO's dynamic symbol table (vdso.h says why).
//
// The vDSO is a prelinked shared object: its addresses are relative to its first PT_LOAD
// segment's p_vaddr (0 on x86-64), so the load bias is the image's address minus that.
// Counting the symbols needs a hash table: DT_HASH's second word is the symbol count; for
// DT_GNU_HASH, the highest symbol a bucket starts at, followed along its chain to the entry
// with the low bit set, is the last one.
#include "platform/vdso.h"

#include <elf.h>
#include <sys/auxv.h>

#include <cstdint>
#include <cstring>

namespace tcm::vdso {
namespace {

struct Tables {
  uintptr_t bias = 0;  // the image's address minus its first PT_LOAD's p_vaddr
  const Elf64_Sym* symbols = nullptr;
  const char* strings = nullptr;
  uint64_t string_bytes = 0;
  const uint32_t* sysv_hash = nullptr;
  const uint32_t* gnu_hash = nullptr;
};

bool ReadTables(const unsigned char* base, Tables* out) {
  const auto* header = reinterpret_cast<const Elf64_Ehdr*>(base);
  if (memcmp(header->e_ident, ELFMAG, SELFMAG) != 0 || header->e_ident[EI_CLASS] != ELFCLASS64 ||
      header->e_type != ET_DYN || header->e_machine != EM_X86_64 ||
      header->e_phentsize != sizeof(Elf64_Phdr)) {
    return false;
  }
  const auto* phdrs = reinterpret_cast<const Elf64_Phdr*>(base + header->e_phoff);
  bool have_load = false;
  const Elf64_Dyn* dynamic = nullptr;
  for (unsigned i = 0; i < header->e_phnum; ++i) {
    if (phdrs[i].p_type == PT_LOAD && !have_load) {
      have_load = true;
      out->bias = reinterpret_cast<uintptr_t>(base) + phdrs[i].p_offset - phdrs[i].p_vaddr;
    } else if (phdrs[i].p_type == PT_DYNAMIC) {
      dynamic = reinterpret_cast<const Elf64_Dyn*>(base + phdrs[i].p_offset);
    }
  }
  if (!have_load || dynamic == nullptr) return false;
  for (const Elf64_Dyn* d = dynamic; d->d_tag != DT_NULL; ++d) {
    const uintptr_t at = out->bias + d->d_un.d_ptr;
    switch (d->d_tag) {
      case DT_SYMTAB: out->symbols = reinterpret_cast<const Elf64_Sym*>(at); break;
      case DT_STRTAB: out->strings = reinterpret_cast<const char*>(at); break;
      case DT_STRSZ: out->string_bytes = d->d_un.d_val; break;
      case DT_HASH: out->sysv_hash = reinterpret_cast<const uint32_t*>(at); break;
      case DT_GNU_HASH: out->gnu_hash = reinterpret_cast<const uint32_t*>(at); break;
      default: break;
    }
  }
  return out->symbols != nullptr && out->strings != nullptr &&
         (out->sysv_hash != nullptr || out->gnu_hash != nullptr);
}

// The number of entries in the symbol table.
uint32_t SymbolCount(const Tables& t) {
  if (t.sysv_hash != nullptr) return t.sysv_hash[1];
  // DT_GNU_HASH: nbuckets, symoffset, bloom words (64-bit each), shift; then the buckets
  // and the chains, whose entry i describes symbol symoffset + i.
  const uint32_t buckets = t.gnu_hash[0], first = t.gnu_hash[1], bloom_words = t.gnu_hash[2];
  const uint32_t* bucket = t.gnu_hash + 4 + 2 * bloom_words;
  const uint32_t* chain = bucket + buckets;
  uint32_t last = 0;
  for (uint32_t b = 0; b < buckets; ++b) last = bucket[b] > last ? bucket[b] : last;
  if (last < first) return first;
  while ((chain[last - first] & 1) == 0) ++last;
  return last + 1;
}

}  // namespace

const void* FindFunction(const void* image, const char* name) {
  if (image == nullptr) return nullptr;
  const auto* base = static_cast<const unsigned char*>(image);
  Tables t;
  if (!ReadTables(base, &t)) return nullptr;
  const uint32_t count = SymbolCount(t);
  for (uint32_t i = 0; i < count; ++i) {
    const Elf64_Sym& s = t.symbols[i];
    if (ELF64_ST_TYPE(s.st_info) != STT_FUNC || s.st_shndx == SHN_UNDEF) continue;
    if (t.string_bytes != 0 && s.st_name >= t.string_bytes) continue;
    if (strcmp(t.strings + s.st_name, name) == 0) {
      return reinterpret_cast<const void*>(t.bias + s.st_value);
    }
  }
  return nullptr;
}

const void* ProcessImage() { return reinterpret_cast<const void*>(getauxval(AT_SYSINFO_EHDR)); }

ClockGettimeFn FindClockGettime(const void* image) {
  return reinterpret_cast<ClockGettimeFn>(const_cast<void*>(FindFunction(image, "__vdso_clock_gettime")));
}

}  // namespace tcm::vdso
