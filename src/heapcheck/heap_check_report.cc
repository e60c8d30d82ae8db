// Leak reports (see heap_check_report.h).
//
// Function names come from the symbol tables of the loaded files themselves (.symtab, or
// .dynsym when the file is stripped), read through a read-only mapping: no debug-info
// reader, no external symbolizer process. pprof, pointed at the profile, does better.
#include "heapcheck/heap_check_report.h"

#include <cxxabi.h>
#include <elf.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/log.h"
#include "platform/files.h"
#include "platform/modules.h"
#include "platform/os.h"

namespace tcm::heapcheck {

void LeakSet::Finish(const StackTable& stacks) {
  std::sort(objects_.begin(), objects_.end(), [](const LeakedObject& a, const LeakedObject& b) {
    return a.stack != b.stack ? a.stack < b.stack : a.addr < b.addr;
  });
  buckets_.Clear();
  for (size_t i = 0; i < objects_.size(); ++i) {
    const LeakedObject& o = objects_[i];
    if (buckets_.empty() || buckets_.back().stack != o.stack) {
      LeakBucket b{};
      b.stack = o.stack;
      b.first = static_cast<uint32_t>(i);
      b.depth = static_cast<uint32_t>(stacks.Get(o.stack, &b.pcs));
      if (!buckets_.Push(b)) break;
    }
    buckets_.back().count += 1;
    buckets_.back().bytes += o.size;
  }
  std::sort(buckets_.begin(), buckets_.end(), [](const LeakBucket& a, const LeakBucket& b) {
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    if (a.count != b.count) return a.count > b.count;
    return a.stack < b.stack;
  });
}

namespace {

// Output to a file descriptor through a fixed buffer.
class Out {
 public:
  explicit Out(int fd) : fd_(fd) {}
  ~Out() { Flush(); }
  void Printf(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n < 0) return;
    Write(line, std::min<size_t>(static_cast<size_t>(n), sizeof(line) - 1));
  }
  void Write(const char* s, size_t n) {
    if (used_ + n > sizeof(buf_)) Flush();
    if (n > sizeof(buf_)) {
      ok_ &= fd_ == 2 ? (os::WriteStderr(s, n), true) : os::WriteAllFd(fd_, s, n);
      return;
    }
    std::memcpy(buf_ + used_, s, n);
    used_ += n;
  }
  void Flush() {
    if (used_ == 0) return;
    if (fd_ == 2) os::WriteStderr(buf_, used_);
    else ok_ &= os::WriteAllFd(fd_, buf_, used_);
    used_ = 0;
  }
  bool ok() const { return ok_; }

 private:
  int fd_;
  bool ok_ = true;
  size_t used_ = 0;
  char buf_[8192] = {};
};

// Names of functions by address, from the loaded files' own symbol tables.
class Symbolizer {
 public:
  Symbolizer() { os::ForEachLoadedModule(&Symbolizer::OnModule, this); }
  ~Symbolizer() {
    for (const Module& m : modules_)
      if (m.file != nullptr) os::Unmap(const_cast<void*>(m.file), m.file_size);
  }

  // Writes "name+0xoff (file)" or "(file+0xoff)" for pc into buf.
  void Describe(uintptr_t pc, char* buf, size_t len) {
    buf[0] = '\0';
    Module* m = ModuleOf(pc);
    if (m == nullptr) return;
    // A return address points after the call: look up the call instruction itself.
    const uintptr_t rel = pc - 1 - m->bias;
    uintptr_t sym_start = 0;
    const char* name = m->file != nullptr || Load(m) ? Lookup(m, rel, &sym_start) : nullptr;
    const char* base = std::strrchr(m->path, '/');
    base = base != nullptr ? base + 1 : m->path;
    if (name != nullptr) {
      int status = -1;
      char* demangled = abi::__cxa_demangle(name, nullptr, nullptr, &status);
      snprintf(buf, len, "%s+0x%lx (%s)", status == 0 && demangled != nullptr ? demangled : name,
               static_cast<unsigned long>(rel + 1 - sym_start), base);
      std::free(demangled);
    } else {
      snprintf(buf, len, "(%s+0x%lx)", base, static_cast<unsigned long>(rel + 1));
    }
  }

 private:
  struct Module {
    char path[256];
    uintptr_t lo, hi, bias;
    const void* file;
    size_t file_size;
    bool tried;
  };

  static void OnModule(const os::LoadedModule& mod, void* arg) {
    auto* self = static_cast<Symbolizer*>(arg);
    Module m{};
    m.bias = mod.bias;
    m.lo = ~uintptr_t{0};
    for (int i = 0; i < mod.num_segments; ++i) {
      m.lo = std::min<uintptr_t>(m.lo, mod.segments[i].start);
      m.hi = std::max<uintptr_t>(m.hi, mod.segments[i].start + mod.segments[i].size);
    }
    if (mod.path[0] == '\0') {
      // The main program: its own name is only known through /proc.
      os::ReadLink("/proc/self/exe", m.path, sizeof(m.path));
    } else {
      std::strncpy(m.path, mod.path, sizeof(m.path) - 1);
    }
    if (m.lo < m.hi) self->modules_.Push(m);
  }

  Module* ModuleOf(uintptr_t pc) {
    for (Module& m : modules_)
      if (pc > m.lo && pc <= m.hi) return &m;  // pc is a return address: pc - 1 is inside
    return nullptr;
  }

  bool Load(Module* m) {
    if (m->tried) return m->file != nullptr;
    m->tried = true;
    if (m->path[0] != '/') return false;  // the vDSO and other pseudo files
    m->file = os::MapFileReadOnly(m->path, &m->file_size);
    return m->file != nullptr;
  }

  // The function symbol covering rel (an address relative to the load bias), if any.
  static const char* Lookup(const Module* m, uintptr_t rel, uintptr_t* start) {
    const auto* bytes = static_cast<const unsigned char*>(m->file);
    if (m->file_size < sizeof(Elf64_Ehdr) || std::memcmp(bytes, ELFMAG, SELFMAG) != 0) return nullptr;
    const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(bytes);
    if (eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_shoff == 0 ||
        eh->e_shoff + static_cast<uint64_t>(eh->e_shnum) * sizeof(Elf64_Shdr) > m->file_size)
      return nullptr;
    const auto* sh = reinterpret_cast<const Elf64_Shdr*>(bytes + eh->e_shoff);
    const char* best = nullptr;
    // .symtab when present (it also names static functions), else .dynsym.
    for (uint32_t want : {uint32_t{SHT_SYMTAB}, uint32_t{SHT_DYNSYM}}) {
      for (int s = 0; s < eh->e_shnum && best == nullptr; ++s) {
        if (sh[s].sh_type != want || sh[s].sh_link >= eh->e_shnum) continue;
        const Elf64_Shdr& strtab = sh[sh[s].sh_link];
        if (sh[s].sh_offset + sh[s].sh_size > m->file_size || strtab.sh_offset + strtab.sh_size > m->file_size)
          continue;
        const auto* syms = reinterpret_cast<const Elf64_Sym*>(bytes + sh[s].sh_offset);
        const size_t n = sh[s].sh_size / sizeof(Elf64_Sym);
        uintptr_t best_start = 0;
        for (size_t i = 0; i < n; ++i) {
          const Elf64_Sym& sym = syms[i];
          if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == SHN_UNDEF) continue;
          if (rel < sym.st_value || rel >= sym.st_value + (sym.st_size == 0 ? 1 : sym.st_size)) continue;
          if (sym.st_name >= strtab.sh_size) continue;
          if (best == nullptr || sym.st_value > best_start) {
            best = reinterpret_cast<const char*>(bytes + strtab.sh_offset + sym.st_name);
            best_start = sym.st_value;
          }
        }
        if (best != nullptr) *start = best_start;
      }
      if (best != nullptr) break;
    }
    return best;
  }

  MappedArray<Module> modules_;
};

}  // namespace

bool WriteLeakProfile(const LeakSet& leaks, const char* path, bool identify) {
  const int fd = os::OpenForWriting(path);
  if (fd < 0) return false;
  bool ok;
  {
    Out out(fd);
    const unsigned long objects = leaks.total_objects();
    const unsigned long bytes = leaks.total_bytes();
    out.Printf("heap profile: %6lu: %8lu [%6lu: %8lu] @ heapprofile\n", objects, bytes, objects, bytes);
    for (size_t b = 0; b < leaks.num_buckets(); ++b) {
      const LeakBucket& bk = leaks.bucket(b);
      // With HEAP_CHECK_IDENTIFY_LEAKS every object is its own entry whose innermost
      // "caller" is the object's address, so pprof can show individual objects.
      const size_t entries = identify ? bk.count : 1;
      for (size_t e = 0; e < entries; ++e) {
        const unsigned long n = identify ? 1 : bk.count;
        const unsigned long sz = identify ? leaks.object(bk.first + e).size : bk.bytes;
        out.Printf("%6lu: %8lu [%6lu: %8lu] @", n, sz, n, sz);
        if (identify) out.Printf(" 0x%016lx", static_cast<unsigned long>(Reveal(leaks.object(bk.first + e).addr)));
        for (uint32_t i = 0; i < bk.depth; ++i) out.Printf(" 0x%016lx", static_cast<unsigned long>(bk.pcs[i]));
        out.Printf("\n");
      }
    }
    out.Printf("\nMAPPED_LIBRARIES:\n");
    MappedArray<char> maps;
    if (ReadWholeFile("/proc/self/maps", &maps)) out.Write(maps.data(), maps.size());
    out.Flush();
    ok = out.ok();
  }
  os::CloseFd(fd);
  return ok;
}

bool ReportLeaks(const LeakSet& leaks, const ReportOptions& o) {
  const bool wrote = WriteLeakProfile(leaks, o.profile_path, o.identify);
  Out err(2);
  err.Printf("Leak check %s detected leaks of %lu bytes in %lu objects\n", o.check_name,
             static_cast<unsigned long>(leaks.total_bytes()), static_cast<unsigned long>(leaks.total_objects()));
  if (o.brief) {
    if (!wrote) err.Printf("Could not write the leak profile %s\n", o.profile_path);
    return wrote;
  }
  size_t shown = leaks.num_buckets();
  if (o.max_leaks > 0 && shown > static_cast<size_t>(o.max_leaks)) shown = static_cast<size_t>(o.max_leaks);
  err.Printf("The %zu largest leaks:\n", shown);
  Symbolizer symbols;
  char where[768];
  for (size_t b = 0; b < shown; ++b) {
    const LeakBucket& bk = leaks.bucket(b);
    err.Printf("Leak of %lu bytes in %lu objects allocated from:\n", static_cast<unsigned long>(bk.bytes),
               static_cast<unsigned long>(bk.count));
    for (uint32_t i = 0; i < bk.depth; ++i) {
      symbols.Describe(bk.pcs[i], where, sizeof(where));
      err.Printf("\t@ %lx %s\n", static_cast<unsigned long>(bk.pcs[i]), where);
    }
    if (o.identify) {
      for (uint64_t k = 0; k < bk.count; ++k) {
        const LeakedObject& obj = leaks.object(bk.first + k);
        err.Printf("\tleaked object %#lx of %lu bytes\n", static_cast<unsigned long>(Reveal(obj.addr)),
                   static_cast<unsigned long>(obj.size));
      }
    }
  }
  if (shown < leaks.num_buckets())
    err.Printf("(%zu more leak stacks are in the profile; HEAP_CHECK_MAX_LEAKS=0 prints all)\n",
               leaks.num_buckets() - shown);
  if (!wrote) {
    err.Printf("Could not write the leak profile %s (HEAP_CHECK_DUMP_DIRECTORY picks another directory)\n",
               o.profile_path);
    return false;
  }
  err.Printf("\nIf the preceding stack traces are not enough to find the leaks, try running THIS shell command:\n\n");
  err.Printf("%s %s \"%s\" --inuse_objects --lines --heapcheck  --edgefraction=1e-10 --nodefraction=1e-10 --gv\n\n",
             o.pprof_path, o.program_path, o.profile_path);
  // The line above is gperftools' (Perl) pprof syntax, which tools expect verbatim; the Go
  // pprof that replaced it takes its options first.
  err.Printf("(With the Go pprof: %s -top -inuse_objects -lines %s \"%s\")\n\n", o.pprof_path, o.program_path,
             o.profile_path);
  err.Printf("If you are still puzzled about why the leaks are there, try rerunning this program with "
             "HEAP_CHECK_TEST_POINTER_ALIGNMENT=1 and/or with HEAP_CHECK_MAX_POINTER_OFFSET=-1\n");
  return true;
}

}  // namespace tcm::heapcheck
