#include "base/log.h"

#include <cstdarg>
#include <cstdio>

#include "platform/os.h"

namespace tcm {

void Printer::Printf(const char* fmt, ...) {
  if (left_ == 0) {
    truncated_ = true;
    return;
  }
  va_list ap;
  va_start(ap, fmt);
  // vsnprintf with integer/string/fixed-point conversions does not allocate in glibc.
  int n = vsnprintf(buf_, left_, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  size_t used = static_cast<size_t>(n);
  if (used >= left_) {
    truncated_ = true;
    used = left_ - 1;
  }
  buf_ += used;
  left_ -= used;
  written_ += used;
}

static void VLog(const char* fmt, va_list ap) {
  char buf[512];
  int n = snprintf(buf, sizeof(buf), "tcmalloc: ");
  int m = vsnprintf(buf + n, sizeof(buf) - static_cast<size_t>(n) - 1, fmt, ap);
  size_t len = static_cast<size_t>(n) + (m < 0 ? 0 : static_cast<size_t>(m));
  if (len > sizeof(buf) - 2) len = sizeof(buf) - 2;
  buf[len++] = '\n';
  os::WriteStderr(buf, len);
}

void Log(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  VLog(fmt, ap);
  va_end(ap);
}

void Crash(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  VLog(fmt, ap);
  va_end(ap);
  os::Abort();
}

}  // namespace tcm
