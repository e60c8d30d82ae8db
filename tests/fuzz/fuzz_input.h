// A byte stream read as a sequence of small decisions, for the fuzz targets in this folder.
// Same role as libFuzzer's FuzzedDataProvider, but our own so the targets also build with
// g++ (tests/fuzz/CMakeLists.txt replays the corpus without libFuzzer). Reading past the
// end yields zeros, so every input, even the empty one, is a valid program.
#ifndef TCMALLOC_TESTS_FUZZ_FUZZ_INPUT_H_
#define TCMALLOC_TESTS_FUZZ_FUZZ_INPUT_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

// For the targets' own bulk loops (filling and checking memory): coverage feedback from them
// is noise to libFuzzer and costs more than the loop itself.
#if defined(__clang__)
#define FUZZ_NO_COVERAGE __attribute__((no_sanitize("coverage")))
#else
#define FUZZ_NO_COVERAGE
#endif

namespace tcm::fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool empty() const { return pos_ >= size_; }
  size_t remaining() const { return empty() ? 0 : size_ - pos_; }

  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint16_t U16() { return static_cast<uint16_t>(Byte() | (Byte() << 8)); }
  uint32_t U32() { return static_cast<uint32_t>(U16()) | (static_cast<uint32_t>(U16()) << 16); }
  uint64_t U64() { return static_cast<uint64_t>(U32()) | (static_cast<uint64_t>(U32()) << 32); }

  // A value in [lo, hi] (inclusive), from as few bytes as the range needs.
  uint64_t Range(uint64_t lo, uint64_t hi) {
    const uint64_t span = hi - lo;
    uint64_t v;
    if (span < 0x100) {
      v = Byte();
    } else if (span < 0x10000) {
      v = U16();
    } else if (span < 0x100000000) {
      v = U32();
    } else {
      v = U64();
    }
    return span == UINT64_MAX ? v : lo + v % (span + 1);
  }
  bool Bool() { return (Byte() & 1) != 0; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// A failed check: print what and where, then abort so libFuzzer keeps the input as a crash.
// fputs to unbuffered stderr does not allocate (the API fuzzer's malloc may be broken).
[[noreturn]] inline void Fail(const char* file, int line, const char* what) {
  char buf[512];
  snprintf(buf, sizeof(buf), "%s:%d: fuzz check failed: %s\n", file, line, what);
  fputs(buf, stderr);
  abort();
}

}  // namespace tcm::fuzz

#define FUZZ_CHECK(cond) \
  do {                   \
    if (!(cond)) ::tcm::fuzz::Fail(__FILE__, __LINE__, #cond); \
  } while (0)

#endif  // TCMALLOC_TESTS_FUZZ_FUZZ_INPUT_H_
