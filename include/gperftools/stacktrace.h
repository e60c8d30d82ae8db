// Stack traces of the calling thread (libtcmalloc only, as in gperftools).
//
// Each function fills result[] with up to max_depth return addresses, innermost first,
// starting with the caller of the function and skipping skip_count more frames; it
// returns how many it stored. They never allocate, so they may be called from hooks.
// GetStackFrames also stores in sizes[i] the size in bytes of frame i's stack frame (0
// where unknown, e.g. the outermost one). The WithContext forms accept a signal
// handler's ucontext_t; this implementation unwinds from the calling frame either way
// (the unwinder steps through the signal frame), so uc may be NULL.
#ifndef TCMALLOC_STACKTRACE_H_
#define TCMALLOC_STACKTRACE_H_

#ifndef PERFTOOLS_DLL_DECL
#define PERFTOOLS_DLL_DECL __attribute__((visibility("default")))
#endif

extern PERFTOOLS_DLL_DECL int GetStackFrames(void** result, int* sizes, int max_depth, int skip_count);
extern PERFTOOLS_DLL_DECL int GetStackFramesWithContext(void** result, int* sizes, int max_depth,
                                                        int skip_count, const void* uc);
extern PERFTOOLS_DLL_DECL int GetStackTrace(void** result, int max_depth, int skip_count);
extern PERFTOOLS_DLL_DECL int GetStackTraceWithContext(void** result, int max_depth, int skip_count,
                                                       const void* uc);

#endif  // TCMALLOC_STACKTRACE_H_
