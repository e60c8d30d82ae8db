#include "platform/fault_handler.h"

#include <signal.h>
#include <ucontext.h>

#include <atomic>
#include <cstring>

namespace tcm::os {

namespace {

std::atomic<FaultClaim> g_claim{nullptr};
struct sigaction g_previous_segv;
struct sigaction g_previous_bus;
std::atomic<bool> g_installed{false};

void PassOn(int sig, siginfo_t* info, void* ucontext) {
  const struct sigaction& prev = sig == SIGSEGV ? g_previous_segv : g_previous_bus;
  if ((prev.sa_flags & SA_SIGINFO) != 0 && prev.sa_sigaction != nullptr) {
    prev.sa_sigaction(sig, info, ucontext);
    return;
  }
  if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN && prev.sa_handler != nullptr) {
    prev.sa_handler(sig);
    return;
  }
  // Default (or ignored, which the kernel does not honour for a real fault): restore the
  // default disposition and return; the instruction faults again and the program dies of
  // it as it would have without us.
  struct sigaction dfl;
  memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
}

const void* FaultingPc(void* ucontext) {
#if defined(__x86_64__)
  return reinterpret_cast<const void*>(static_cast<ucontext_t*>(ucontext)->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  return reinterpret_cast<const void*>(static_cast<ucontext_t*>(ucontext)->uc_mcontext.pc);
#else
  return nullptr;
#endif
}

void OnFault(int sig, siginfo_t* info, void* ucontext) {
  if (FaultClaim claim = g_claim.load(std::memory_order_acquire)) claim(info->si_addr, FaultingPc(ucontext));
  PassOn(sig, info, ucontext);
}

}  // namespace

bool ReplaceSignalAction(int sig, const struct sigaction* act, struct sigaction* old) {
  struct sigaction was;
  __builtin_memset(&was, 0, sizeof(was));
  if (sigaction(sig, act, &was) != 0) return false;
  // Only the members survive (sigemptyset clears just the kernel's 8 bytes, hence memset;
  // a leaked block's address once came this way into our data).
  sigset_t members;
  __builtin_memset(&members, 0, sizeof(members));
  for (int s = 1; s < NSIG; ++s)
    if (sigismember(&was.sa_mask, s) == 1) sigaddset(&members, s);
  was.sa_mask = members;
  *old = was;
  return true;
}

bool InstallFaultHandler(FaultClaim claim) {
  g_claim.store(claim, std::memory_order_release);
  if (g_installed.exchange(true)) return true;
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = OnFault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  bool ok = ReplaceSignalAction(SIGSEGV, &sa, &g_previous_segv);
  ok = ReplaceSignalAction(SIGBUS, &sa, &g_previous_bus) && ok;
  return ok;
}

}  // namespace tcm::os
