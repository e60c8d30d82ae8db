// The "next" word stored in the first bytes of every free small object, encoded.
//
// A free object's link is stored XORed with a per-process random secret (and, inside spans,
// with the slot's own address too; glibc calls the idea safe-linking). A use-after-free
// write of a chosen address into a free object therefore decodes to an address the writer
// cannot predict, instead of redirecting a later malloc; the tier that knows the span (the
// central free list) checks every decoded link against it and aborts, and a fault that a
// wild decoded address causes inside the allocator is reported (api/allocation.cc).
//
// Two encodings: chain links (SetLink/GetLink) for thread-cache lists and the batches that
// change hands between tiers without being re-encoded, and span links
// (SetSpanLink/GetSpanLink) for the lists inside spans, which the central list converts
// as objects enter and leave.
//
// The secret is fixed before the first object is linked (InitLinkSecret, from the
// composition root's one-time initialisation) and never changes afterwards: changing it
// would make every existing link undecodable. It is 0 until then, and stays 0 when the
// hardening is compiled out (TCMALLOC_HARDENED=OFF makes the encoding the identity).
#ifndef TCMALLOC_FREELIST_LINK_H_
#define TCMALLOC_FREELIST_LINK_H_

#include <cstdint>

#include "base/config.h"

namespace tcm {

#ifdef TCM_NO_HARDENING
inline constexpr bool kHardenedBuild = false;
#else
inline constexpr bool kHardenedBuild = true;
#endif

namespace link_internal {
inline constinit uintptr_t g_secret TCM_HIDDEN = 0;
}  // namespace link_internal

// REQUIRES: no object has been linked yet (called once, during initialisation).
inline void InitLinkSecret(uint64_t random) {
  if constexpr (kHardenedBuild) link_internal::g_secret = static_cast<uintptr_t>(random) | 1;
}
inline uintptr_t LinkSecret() { return link_internal::g_secret; }

// The word is read and written with memcpy: a misused free (an interior pointer) can hand
// us an unaligned "object" before the batch check rejects it, and an unaligned access is
// undefined behaviour in C++ (on x86-64 memcpy compiles to the same single mov).
TCM_ALWAYS_INLINE void StoreWord(void* obj, uintptr_t v) { __builtin_memcpy(obj, &v, sizeof(v)); }
TCM_ALWAYS_INLINE uintptr_t LoadWord(const void* obj) {
  uintptr_t v;
  __builtin_memcpy(&v, obj, sizeof(v));
  return v;
}

// Chain links: thread-cache lists and the batches that move between tiers. next ^ secret:
// one XOR with a memory operand each way, so malloc's and free's fast paths pay one
// instruction each (mixing in the slot address too would cost two more per pair).
TCM_ALWAYS_INLINE void SetLink(void* obj, const void* next) {
  uintptr_t v = reinterpret_cast<uintptr_t>(next);
  if constexpr (kHardenedBuild) v ^= link_internal::g_secret;
  StoreWord(obj, v);
}

// obj's chain link, decoded. Not validated: a forged word decodes to an address the writer
// cannot choose without the secret; callers that know obj's span check the result.
TCM_ALWAYS_INLINE void* GetLink(const void* obj) {
  uintptr_t v = LoadWord(obj);
  if constexpr (kHardenedBuild) v ^= link_internal::g_secret;
  return reinterpret_cast<void*>(v);
}

// Span links: the free lists inside spans (central_freelist.cc), off the fast paths, also
// mix in the slot's own address, so an encoded word copied from one free block to another
// decodes to garbage there.
TCM_ALWAYS_INLINE void SetSpanLink(void* obj, const void* next) {
  uintptr_t v = reinterpret_cast<uintptr_t>(next);
  if constexpr (kHardenedBuild) v ^= reinterpret_cast<uintptr_t>(obj) ^ link_internal::g_secret;
  StoreWord(obj, v);
}

TCM_ALWAYS_INLINE void* GetSpanLink(const void* obj) {
  uintptr_t v = LoadWord(obj);
  if constexpr (kHardenedBuild) v ^= reinterpret_cast<uintptr_t>(obj) ^ link_internal::g_secret;
  return reinterpret_cast<void*>(v);
}

}  // namespace tcm

#endif  // TCMALLOC_FREELIST_LINK_H_
