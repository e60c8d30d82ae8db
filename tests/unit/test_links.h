// Free-list links in unit tests: read and written through freelist_link.h's encoding, as
// the allocator's tiers do, with the same `NextOf(obj) = next` syntax as a raw word.
#ifndef TCMALLOC_TESTS_UNIT_TEST_LINKS_H_
#define TCMALLOC_TESTS_UNIT_TEST_LINKS_H_

#include "core/freelist_link.h"

namespace tcm::testing {

struct LinkRef {
  void* obj;
  operator void*() const { return GetLink(obj); }
  LinkRef& operator=(void* next) {
    SetLink(obj, next);
    return *this;
  }
};
inline LinkRef NextOf(void* obj) { return LinkRef{obj}; }
// The word as stored (encoded), for tests that corrupt or inspect it.
inline void*& RawWord(void* obj) { return *static_cast<void**>(obj); }

}  // namespace tcm::testing

#endif  // TCMALLOC_TESTS_UNIT_TEST_LINKS_H_
