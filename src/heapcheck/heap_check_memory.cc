// Whole-file reads for the heap checker (see heap_check_memory.h).
#include "heapcheck/heap_check_memory.h"

#include "platform/files.h"
#include "platform/os.h"

namespace tcm::heapcheck {

bool ReadWholeFile(const char* path, MappedArray<char>* out) {
  out->Clear();
  int fd = os::OpenForReading(path);
  if (fd < 0) return false;
  bool ok = true;
  for (;;) {
    // /proc files report size 0, so read until end of file, growing as needed.
    if (!out->Reserve(out->size() + 65536)) {
      ok = false;
      break;
    }
    const size_t before = out->size();
    out->Resize(before + 65536);
    long n = os::ReadFd(fd, out->data() + before, 65536);
    if (n <= 0) {
      out->Resize(before);
      ok = n == 0;
      break;
    }
    out->Resize(before + static_cast<size_t>(n));
  }
  os::CloseFd(fd);
  if (ok && out->Reserve(out->size() + 1)) {
    out->data()[out->size()] = '\0';
    return true;
  }
  return false;
}

}  // namespace tcm::heapcheck
