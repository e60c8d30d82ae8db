// Reporting that never allocates: a Printer that formats into a caller's buffer, and fatal
// diagnostics formatted on the stack and written with write(2).
#ifndef TCMALLOC_BASE_LOG_H_
#define TCMALLOC_BASE_LOG_H_

#include <cstddef>

namespace tcm {

// Appends printf-formatted text to a fixed buffer, always NUL-terminated; output past the
// end is dropped and remembered (truncated()).
class Printer {
 public:
  Printer(char* buf, size_t len) : buf_(buf), left_(len) {
    if (left_ > 0) buf_[0] = '\0';
  }
  void Printf(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  bool truncated() const { return truncated_; }
  size_t written() const { return written_; }

 private:
  char* buf_;
  size_t left_;
  size_t written_ = 0;
  bool truncated_ = false;
};

// Prints "tcmalloc: <message>\n" to stderr.
void Log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Prints "tcmalloc: <message>\n" to stderr and aborts the process.
[[noreturn]] void Crash(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace tcm

// Internal invariant: cheap enough to keep in release builds, never on the fast path.
#define TCM_CHECK(cond)                                                          \
  do {                                                                           \
    if (__builtin_expect(!(cond), 0))                                            \
      ::tcm::Crash("%s:%d: internal check failed: %s", __FILE__, __LINE__, #cond); \
  } while (0)

// Checks that only the debug build (-DTCMALLOC_DEBUG / TCM_DEBUG) pays for.
#ifdef TCM_DEBUG
#define TCM_DCHECK(cond) TCM_CHECK(cond)
inline constexpr bool kDebugBuild = true;
#else
#define TCM_DCHECK(cond) \
  do {                   \
  } while (0)
inline constexpr bool kDebugBuild = false;
#endif

#endif  // TCMALLOC_BASE_LOG_H_
