// Test-only fault injection: makes the system allocator (and the metadata arena) fail on
// the Nth request from now, or once N more bytes have been asked for. Compiled in only
// with -DTCMALLOC_FAULT_INJECTION=ON (the tcmalloc_minimal_faulty test library); the
// release libraries contain none of it. Controlled through the exported C function
// tcmalloc_testing_inject_faults() declared below (tests declare it themselves).
#ifndef TCMALLOC_FAULT_INJECTION_H_
#define TCMALLOC_FAULT_INJECTION_H_

#include <cstddef>

namespace tcm {

#ifdef TCM_FAULT_INJECTION
// True if this request must fail (and counts it).
bool InjectedFault(size_t bytes);
#else
constexpr bool InjectedFault(size_t) { return false; }
#endif

}  // namespace tcm

// after_requests: requests that still succeed before every later one fails (-1: no limit).
// after_bytes: bytes that may still be obtained before requests fail (-1: no limit).
// Both -1 turns injection off. Returns the number of requests refused so far.
extern "C" long long tcmalloc_testing_inject_faults(long long after_requests, long long after_bytes);

#endif  // TCMALLOC_FAULT_INJECTION_H_
