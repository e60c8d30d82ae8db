// A main() for the fuzz targets without libFuzzer: each argument is an input file or a
// directory of them (a corpus), run once through LLVMFuzzerTestOneInput. `--random N SEED`
// runs N pseudo-random inputs on top, so CTest exercises each target beyond its corpus
// without needing clang. scripts/fuzz.sh links the same targets with -fsanitize=fuzzer
// instead (libFuzzer brings its own main).
#include <dirent.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

size_t g_runs = 0;

bool RunFile(const std::string& path) {
  FILE* f = fopen(path.c_str(), "rb");
  if (f == nullptr) {
    perror(path.c_str());
    return false;
  }
  std::vector<uint8_t> bytes;
  uint8_t buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) bytes.insert(bytes.end(), buf, buf + n);
  fclose(f);
  LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  ++g_runs;
  return true;
}

bool RunPath(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    perror(path.c_str());
    return false;
  }
  if (!S_ISDIR(st.st_mode)) return RunFile(path);
  DIR* d = opendir(path.c_str());
  if (d == nullptr) {
    perror(path.c_str());
    return false;
  }
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') names.push_back(path + "/" + e->d_name);
  }
  closedir(d);
  bool ok = true;
  for (const std::string& name : names) ok &= RunFile(name);
  return ok;
}

// splitmix64: a fixed, seedable stream, so a failing random run can be repeated.
uint64_t Next(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

int main(int argc, char** argv) {
  bool ok = true;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--random") == 0 && i + 2 < argc) {
      const long count = strtol(argv[i + 1], nullptr, 10);
      uint64_t state = strtoull(argv[i + 2], nullptr, 10);
      i += 2;
      std::vector<uint8_t> input;
      for (long r = 0; r < count; ++r) {
        input.resize(Next(&state) % 512);
        for (uint8_t& b : input) b = static_cast<uint8_t>(Next(&state));
        LLVMFuzzerTestOneInput(input.data(), input.size());
        ++g_runs;
      }
      continue;
    }
    ok &= RunPath(argv[i]);
  }
  printf("replayed %zu inputs\n", g_runs);
  return ok && g_runs > 0 ? 0 : 1;
}
