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

}  // namespace
}  // namespace tcm::os
