// platform/vdso.h: finding the vDSO's functions through either hash table, refusing images
// that are not one, and the coarse clock that calls the vDSO's clock_gettime directly.
#include "platform/vdso.h"

#include <elf.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <vector>

#include "platform/os.h"

namespace tcm::vdso {
namespace {

// The names the x86-64 kernel exports (the SGX one only on some kernels).
constexpr const char* kNames[] = {"__vdso_clock_gettime", "__vdso_gettimeofday", "__vdso_time",
                                  "__vdso_clock_getres", "__vdso_getcpu"};

// A writable copy of the process's vDSO, 16-byte aligned like the original's headers.
struct ImageCopy {
  std::vector<uint64_t> words;
  const unsigned char* original = nullptr;
  unsigned char* bytes() { return reinterpret_cast<unsigned char*>(words.data()); }
  // The dynamic entry with `tag` in the copy, or nullptr.
  Elf64_Dyn* Dynamic(int64_t tag) {
    const auto* header = reinterpret_cast<const Elf64_Ehdr*>(bytes());
    const auto* phdrs = reinterpret_cast<const Elf64_Phdr*>(bytes() + header->e_phoff);
    for (unsigned i = 0; i < header->e_phnum; ++i) {
      if (phdrs[i].p_type != PT_DYNAMIC) continue;
      for (auto* d = reinterpret_cast<Elf64_Dyn*>(bytes() + phdrs[i].p_offset); d->d_tag != DT_NULL; ++d) {
        if (d->d_tag == tag) return d;
      }
    }
    return nullptr;
  }
  // Every defined function's name, read through the section headers (which the look-up
  // does not use), so a miscounted symbol table shows as a name not found.
  std::vector<const char*> FunctionNames() {
    std::vector<const char*> names;
    const auto* header = reinterpret_cast<const Elf64_Ehdr*>(bytes());
    const auto* sections = reinterpret_cast<const Elf64_Shdr*>(bytes() + header->e_shoff);
    for (unsigned i = 0; header->e_shoff != 0 && i < header->e_shnum; ++i) {
      if (sections[i].sh_type != SHT_DYNSYM) continue;
      const auto* syms = reinterpret_cast<const Elf64_Sym*>(bytes() + sections[i].sh_offset);
      const char* strings = reinterpret_cast<const char*>(bytes() + sections[sections[i].sh_link].sh_offset);
      for (size_t k = 0; k < sections[i].sh_size / sizeof(Elf64_Sym); ++k) {
        if (ELF64_ST_TYPE(syms[k].st_info) == STT_FUNC && syms[k].st_shndx != SHN_UNDEF) {
          names.push_back(strings + syms[k].st_name);
        }
      }
    }
    return names;
  }
  // Where `name` is found in the copy, as an offset from its start (-1 if not found).
  intptr_t OffsetOf(const char* name) {
    const void* at = FindFunction(bytes(), name);
    return at == nullptr ? -1 : static_cast<const unsigned char*>(at) - bytes();
  }
};

bool CopyProcessImage(ImageCopy* copy) {
  const auto* base = static_cast<const unsigned char*>(ProcessImage());
  if (base == nullptr) return false;
  const auto* header = reinterpret_cast<const Elf64_Ehdr*>(base);
  const auto* phdrs = reinterpret_cast<const Elf64_Phdr*>(base + header->e_phoff);
  size_t bytes = 0;
  for (unsigned i = 0; i < header->e_phnum; ++i) {
    if (phdrs[i].p_type == PT_LOAD) bytes = std::max<size_t>(bytes, phdrs[i].p_offset + phdrs[i].p_filesz);
  }
  // The kernel maps the whole file, section headers included.
  bytes = std::max<size_t>(bytes, header->e_shoff + size_t{header->e_shnum} * header->e_shentsize);
  copy->words.assign((bytes + 7) / 8, 0);
  memcpy(copy->bytes(), base, bytes);
  copy->original = base;
  return true;
}

#define REQUIRE_VDSO()                                                    \
  if (ProcessImage() == nullptr) GTEST_SKIP() << "no vDSO (valgrind?)"

TEST(Vdso, FindsTheKernelsFunctionsInThisProcess) {
  REQUIRE_VDSO();
  EXPECT_NE(FindFunction(ProcessImage(), "__vdso_clock_gettime"), nullptr);
  EXPECT_NE(FindFunction(ProcessImage(), "__vdso_getcpu"), nullptr);
  EXPECT_EQ(FindFunction(ProcessImage(), "__vdso_no_such_function"), nullptr);
  EXPECT_EQ(FindFunction(ProcessImage(), ""), nullptr);
  EXPECT_EQ(FindFunction(nullptr, "__vdso_clock_gettime"), nullptr);
}

TEST(Vdso, ItsClockAgreesWithLibcs) {
  REQUIRE_VDSO();
  const ClockGettimeFn fn = FindClockGettime(ProcessImage());
  ASSERT_NE(fn, nullptr);
  const auto ns = [](const timespec& t) { return t.tv_sec * 1000000000ll + t.tv_nsec; };
  for (clockid_t id : {CLOCK_MONOTONIC, CLOCK_MONOTONIC_COARSE, CLOCK_REALTIME}) {
    // Ours between two of libc's reads. The wall clock may be stepped (NTP, settimeofday)
    // between two reads: one ordered triple in three tries is the claim, where a function
    // that read another clock, or garbage, fails all three.
    bool ordered = false;
    for (int attempt = 0; attempt < 3 && !ordered; ++attempt) {
      struct timespec before, ours, after;
      clock_gettime(id, &before);
      ASSERT_EQ(fn(id, &ours), 0);
      clock_gettime(id, &after);
      ordered = ns(before) <= ns(ours) && ns(ours) <= ns(after);
    }
    EXPECT_TRUE(ordered) << "clock " << id;
  }
}

// Both hash tables lead to the same symbols: with DT_HASH hidden the GNU table counts them,
// with DT_GNU_HASH hidden the SysV one does; with neither, nothing is found.
TEST(Vdso, EitherHashTableCountsTheSymbols) {
  REQUIRE_VDSO();
  ImageCopy copy;
  ASSERT_TRUE(CopyProcessImage(&copy));
  Elf64_Dyn* sysv = copy.Dynamic(DT_HASH);
  Elf64_Dyn* gnu = copy.Dynamic(DT_GNU_HASH);
  if (sysv == nullptr || gnu == nullptr) GTEST_SKIP() << "this vDSO has one hash table only";
  std::vector<const char*> names = copy.FunctionNames();
  for (const char* name : kNames) {
    if (strcmp(name, "__vdso_clock_gettime") == 0 || strcmp(name, "__vdso_getcpu") == 0) {
      EXPECT_NE(std::find_if(names.begin(), names.end(), [&](const char* n) { return strcmp(n, name) == 0; }),
                names.end()) << name;
    }
  }
  ASSERT_GE(names.size(), 4u);
  std::vector<intptr_t> both;
  for (const char* name : names) {
    both.push_back(copy.OffsetOf(name));
    EXPECT_GT(both.back(), 0) << name;
    // The copy's answer is the original's, moved by the copy's place.
    const void* in_original = FindFunction(copy.original, name);
    EXPECT_EQ(both.back(), static_cast<const unsigned char*>(in_original) - copy.original) << name;
  }
  sysv->d_tag = DT_DEBUG;  // a tag the look-up ignores
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(copy.OffsetOf(names[i]), both[i]) << names[i];
  sysv->d_tag = DT_HASH;
  gnu->d_tag = DT_DEBUG;
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(copy.OffsetOf(names[i]), both[i]) << names[i];
  sysv->d_tag = DT_DEBUG;
  EXPECT_EQ(copy.OffsetOf(names[0]), -1);
}

TEST(Vdso, RefusesWhatIsNotA64BitSharedObject) {
  REQUIRE_VDSO();
  ImageCopy copy;
  ASSERT_TRUE(CopyProcessImage(&copy));
  ASSERT_GT(copy.OffsetOf(kNames[0]), 0);
  auto* header = reinterpret_cast<Elf64_Ehdr*>(copy.bytes());
  header->e_ident[EI_MAG1] = 'X';
  EXPECT_EQ(copy.OffsetOf(kNames[0]), -1);
  header->e_ident[EI_MAG1] = 'E';
  header->e_ident[EI_CLASS] = ELFCLASS32;
  EXPECT_EQ(copy.OffsetOf(kNames[0]), -1);
  header->e_ident[EI_CLASS] = ELFCLASS64;
  header->e_type = ET_EXEC;
  EXPECT_EQ(copy.OffsetOf(kNames[0]), -1);
  header->e_type = ET_DYN;
  copy.Dynamic(DT_SYMTAB)->d_tag = DT_DEBUG;
  EXPECT_EQ(copy.OffsetOf(kNames[0]), -1);
}

// The coarse clock takes the vDSO's function where there is one and libc's where not.
TEST(Vdso, TheCoarseClockCallsTheVdsoDirectly) {
  EXPECT_EQ(os::ChooseClockGettime(nullptr), &clock_gettime);
  const uint64_t first = os::MonotonicCoarseNs();
  if (ProcessImage() == nullptr) {
    EXPECT_FALSE(os::CoarseClockReadsVdso());
  } else {
    EXPECT_EQ(os::ChooseClockGettime(ProcessImage()), FindClockGettime(ProcessImage()));
    EXPECT_TRUE(os::CoarseClockReadsVdso());
  }
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  const uint64_t libc_now = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
  const uint64_t second = os::MonotonicCoarseNs();
  EXPECT_LE(first, second);
  EXPECT_GE(second, libc_now);  // read after libc's, from the same clock
}

}  // namespace
}  // namespace tcm::vdso
