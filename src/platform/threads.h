// Threads and the process, for the heap checker's stop-the-world scan: listing the
// process's threads, signalling one, borrowing a real-time signal for that, reading memory
// that may not be mapped, and timed futex waits. Part of the OS contract of platform/os.h
// (whose GetPid, FutexWait and FutexWake these complement).
//
// Every primitive is a raw system call (sigaction excepted: glibc's wrapper only adds the
// restorer, and takes no lock): they run while other threads are frozen at arbitrary
// instructions, possibly holding malloc's or stdio's locks. None allocates; each leaves
// errno as it found it.
#ifndef TCMALLOC_PLATFORM_THREADS_H_
#define TCMALLOC_PLATFORM_THREADS_H_

#include <signal.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace tcm::os {

int GetTid();

// True if the real and effective user (or group) ids differ: a setuid/setgid program.
bool IsSetuid();

// Thread ids of this process (from /proc/self/task), up to cap of them into tids. Returns
// how many exist (possibly more than cap), or -1 if the directory cannot be read.
int ListThreads(int* tids, int cap);

// Sends sig to thread tid of process tgid (tgkill). False if the thread is gone or the
// kernel refused.
bool SignalThread(int tgid, int tid, int sig);

// A real-time signal that nobody handles (default disposition, no SA_SIGINFO handler),
// searched from the top of the range down (programs that use real-time signals usually
// count up from SIGRTMIN). 0 if there is none.
int FindUnusedRealtimeSignal();

using SigInfoHandler = void (*)(int, siginfo_t*, void*);

// Installs handler for sig with SA_SIGINFO | SA_RESTART and every signal blocked while it
// runs, remembering the disposition it replaces (once: installing the same handler again
// is a no-op that returns true). False if sigaction refused.
bool InstallSignalHandler(int sig, SigInfoHandler handler);

// Puts back the disposition InstallSignalHandler replaced; no-op if it replaced none.
void RestoreSignalHandler(int sig);

// The calling thread's alternate signal stack (sigaltstack), 0 if it has none.
uintptr_t AltSignalStack();

// Copies n bytes at address src of this process into dst without faulting: stops at the
// first page that cannot be read. Returns the bytes copied (0 if the first page cannot be
// read), or -1 when the kernel refuses the call outright (seccomp, very old kernels):
// callers then read memory directly.
long CopyFromSelf(void* dst, uintptr_t src, size_t n);

// Blocks while *word == expected, at most timeout_ns (spurious wake-ups allowed).
void FutexWaitFor(std::atomic<int>* word, int expected, uint64_t timeout_ns);

// Monotonic time in ns (CLOCK_MONOTONIC, vDSO: no syscall, full resolution).
uint64_t MonotonicNs();

}  // namespace tcm::os

#endif  // TCMALLOC_PLATFORM_THREADS_H_
