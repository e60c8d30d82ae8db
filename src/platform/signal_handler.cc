#include "platform/signal_handler.h"

#include <csignal>
#include <cstring>

namespace tcm::os {

bool SetSignalHandler(int sig, void (*handler)(int)) {
  if (sig <= 0 || sig >= NSIG || sig == SIGKILL || sig == SIGSTOP) return false;
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = handler;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  return sigaction(sig, &sa, nullptr) == 0;
}

}  // namespace tcm::os
