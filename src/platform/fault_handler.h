// A SIGSEGV/SIGBUS handler for the allocator's own guard pages, chained to the program's.
//
// The allocator asks once for a claim function; on a fault the handler calls it with the
// faulting address. A claim that recognises the address reports and aborts (it does not
// return); otherwise the fault is passed on exactly as if we were not there: to the handler
// the program had installed before ours, or, with none, to the default action (the faulting
// instruction re-runs with the default disposition, so the program dies of the same signal
// with the same core). A handler the program installs after ours replaces ours, as the
// program asked.
#ifndef TCMALLOC_PLATFORM_FAULT_HANDLER_H_
#define TCMALLOC_PLATFORM_FAULT_HANDLER_H_

#include <signal.h>

namespace tcm::os {

// Called in signal context with the faulting address and the faulting instruction's
// address (nullptr where unknown); must not return if it claims the fault.
using FaultClaim = void (*)(const void* addr, const void* pc);

// Installs the handler for SIGSEGV and SIGBUS (once; later calls only replace the claim).
// Returns false if sigaction failed.
bool InstallFaultHandler(FaultClaim claim);

// sigaction(sig, act, old) whose *old holds no stale bytes: glibc fills only the kernel's
// 8 bytes of old->sa_mask and leaves the other 120 as its stack held them, which the heap
// checker would scan as roots wherever the old action is kept. False if sigaction refused.
bool ReplaceSignalAction(int sig, const struct sigaction* act, struct sigaction* old);

}  // namespace tcm::os

#endif  // TCMALLOC_PLATFORM_FAULT_HANDLER_H_
