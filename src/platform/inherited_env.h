// Marking an environment variable so that programs this process execs can tell they were
// started by it (gperftools' convention for HEAPPROFILE: the high bit of the value's first
// byte). The mark is made in place in the process's environment strings, which the kernel
// copies to an exec'd program; /proc/self/environ (os::GetEnv) shows it too.
#ifndef TCMALLOC_PLATFORM_INHERITED_ENV_H_
#define TCMALLOC_PLATFORM_INHERITED_ENV_H_

namespace tcm::os {

// Sets the high bit of the first byte of NAME's value in `environ`. False if NAME is
// absent or empty (nothing to mark). Not thread-safe against setenv/putenv (run it from a
// constructor, before the program's threads).
bool MarkEnvValueForChildren(const char* name);

}  // namespace tcm::os

#endif  // TCMALLOC_PLATFORM_INHERITED_ENV_H_
