// Installing a process-wide signal handler (HEAPPROFILESIGNAL). The handler runs on
// whichever thread receives the signal, possibly inside malloc: it must only do
// async-signal-safe work (or defer it).
#ifndef TCMALLOC_PLATFORM_SIGNAL_HANDLER_H_
#define TCMALLOC_PLATFORM_SIGNAL_HANDLER_H_

namespace tcm::os {

// Installs handler for sig with SA_RESTART (interrupted system calls resume). False if sig
// is not a signal that can be caught, or sigaction refused.
bool SetSignalHandler(int sig, void (*handler)(int));

}  // namespace tcm::os

#endif  // TCMALLOC_PLATFORM_SIGNAL_HANDLER_H_
