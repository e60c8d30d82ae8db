// The platform's SIGSEGV handler: the claim sees every fault first (address and pc), and a
// fault it does not claim reaches the handler installed before ours, or the default action.
#include "platform/fault_handler.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

namespace tcm::os {
namespace {

volatile int* const kWild = reinterpret_cast<volatile int*>(64);

void ClaimEverything(const void* addr, const void* pc) {
  // Exit code 3 when both addresses arrived as expected.
  _exit(addr == kWild && pc != nullptr ? 3 : 4);
}

void ClaimNothing(const void*, const void*) {}

// The address goes through an empty asm so the compiler cannot see (and reject) the store.
void Fault() {
  volatile int* p = kWild;
  asm volatile("" : "+r"(p));
  *p = 1;
}

TEST(FaultHandlerDeathTest, TheClaimSeesTheAddressAndThePc) {
  EXPECT_EXIT(
      {
        InstallFaultHandler(ClaimEverything);
        Fault();
      },
      testing::ExitedWithCode(3), "");
}

void ProgramsHandler(int) { _exit(42); }

TEST(FaultHandlerDeathTest, UnclaimedFaultsReachTheHandlerInstalledBefore) {
  EXPECT_EXIT(
      {
        signal(SIGSEGV, ProgramsHandler);
        InstallFaultHandler(ClaimNothing);
        Fault();
      },
      testing::ExitedWithCode(42), "");
}

TEST(FaultHandlerDeathTest, UnclaimedFaultsGetTheDefaultActionOtherwise) {
  EXPECT_EXIT(
      {
        signal(SIGSEGV, SIG_DFL);
        InstallFaultHandler(ClaimNothing);
        Fault();
      },
      testing::KilledBySignal(SIGSEGV), "");
}

// Fills the stack below the caller with a marker, where glibc's sigaction then has its
// kernel_sigaction.
__attribute__((noinline)) void DirtyTheStack() {
  volatile unsigned char junk[16384];
  for (volatile unsigned char& b : junk) b = 0xab;
}

__attribute__((noinline)) bool ReplaceAfterDirtying(int sig, const struct sigaction* act, struct sigaction* old) {
  DirtyTheStack();
  return ReplaceSignalAction(sig, act, old);
}

TEST(ReplaceSignalAction, TheOldActionKeepsItsMembersAndNoStaleBytes) {
  struct sigaction first;
  __builtin_memset(&first, 0, sizeof(first));
  first.sa_handler = ProgramsHandler;
  sigemptyset(&first.sa_mask);
  sigaddset(&first.sa_mask, SIGUSR1);
  sigaddset(&first.sa_mask, SIGRTMIN + 1);
  ASSERT_EQ(sigaction(SIGUSR2, &first, nullptr), 0);

  struct sigaction mine;
  __builtin_memset(&mine, 0, sizeof(mine));
  mine.sa_handler = SIG_IGN;
  struct sigaction old;
  __builtin_memset(&old, 0x5a, sizeof(old));
  ASSERT_TRUE(ReplaceAfterDirtying(SIGUSR2, &mine, &old));
  EXPECT_EQ(old.sa_handler, &ProgramsHandler);
  EXPECT_EQ(sigismember(&old.sa_mask, SIGUSR1), 1);
  EXPECT_EQ(sigismember(&old.sa_mask, SIGRTMIN + 1), 1);
  EXPECT_EQ(sigismember(&old.sa_mask, SIGUSR2), 0);
  // Past the kernel's 64 signals: zero, not the marker glibc's frame left (checked to be
  // there with plain sigaction when this test was written).
  const unsigned char* bytes = reinterpret_cast<const unsigned char*>(&old.sa_mask);
  for (size_t i = (NSIG - 1) / 8; i < sizeof(old.sa_mask); ++i) EXPECT_EQ(bytes[i], 0) << "byte " << i;
  sigaction(SIGUSR2, &old, nullptr);
}

}  // namespace
}  // namespace tcm::os
