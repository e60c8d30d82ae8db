// The "next" word stored in the first bytes of every free small object, encoded.
//
// A free object's link is stored as next ^ slot ^ secret, where slot is the object's own
// address and secret a per-process random word (glibc calls the same idea safe-linking).
// A use-after-free write of a chosen address into a free object therefore decodes to an
// address the writer cannot predict, instead of redirecting a later malloc; the tiers that
// know the span (the central free list) check every decoded link against it and abort.
//
// Every tier that links free objects (span free lists, chains moving between caches and the
// central list, thread-cache lists) goes through SetLink/GetLink, so one encoding holds
// everywhere and a chain can change hands without being re-encoded.
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

TCM_ALWAYS_INLINE uintptr_t EncodeLink(const void* slot, const void* next) {
  uintptr_t v = reinterpret_cast<uintptr_t>(next);
  if constexpr (kHardenedBuild) v ^= reinterpret_cast<uintptr_t>(slot) ^ link_internal::g_secret;
  return v;
}

TCM_ALWAYS_INLINE void* DecodeLink(const void* slot, uintptr_t stored) {
  if constexpr (kHardenedBuild) stored ^= reinterpret_cast<uintptr_t>(slot) ^ link_internal::g_secret;
  return reinterpret_cast<void*>(stored);
}

// Stores `next` as obj's link.
TCM_ALWAYS_INLINE void SetLink(void* obj, const void* next) {
  *static_cast<uintptr_t*>(obj) = EncodeLink(obj, next);
}

// obj's link, decoded. Not validated: callers that know obj's span check the result.
TCM_ALWAYS_INLINE void* GetLink(const void* obj) {
  return DecodeLink(obj, *static_cast<const uintptr_t*>(obj));
}

}  // namespace tcm

#endif  // TCMALLOC_FREELIST_LINK_H_
