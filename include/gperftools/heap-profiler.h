/* The heap profiler of libtcmalloc (link with -ltcmalloc, or LD_PRELOAD libtcmalloc.so).
 *
 * While it runs, every allocation is recorded with its call stack; dumps are written in
 * gperftools' heap profile text format, which pprof reads:
 *
 *   HeapProfilerStart("/tmp/myprog");     // files /tmp/myprog.0001.heap, .0002.heap, ...
 *   ...
 *   HeapProfilerDump("after loading");    // one more file, now
 *   HeapProfilerStop();
 *
 * Setting HEAPPROFILE=<prefix> in the environment starts it when the library loads. Dumps
 * are also written every HEAP_PROFILE_ALLOCATION_INTERVAL bytes allocated (default 1 GiB),
 * whenever in-use bytes grow by HEAP_PROFILE_INUSE_INTERVAL (default 100 MiB), every
 * HEAP_PROFILE_TIME_INTERVAL seconds (checked at allocations; default 0 = never), and at
 * exit. A forked child writes <prefix>_<pid>.NNNN.heap. Declarations match gperftools. */
#ifndef TCMALLOC_HEAP_PROFILER_H_
#define TCMALLOC_HEAP_PROFILER_H_

#include <stddef.h>

#ifndef PERFTOOLS_DLL_DECL
#define PERFTOOLS_DLL_DECL __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Starts recording; dumps go to <prefix>.NNNN.heap. Does nothing if already running. */
PERFTOOLS_DLL_DECL void HeapProfilerStart(const char* prefix);

/* Non-zero while the profiler runs. */
PERFTOOLS_DLL_DECL int IsHeapProfilerRunning(void);

/* Stops recording and forgets the recorded data. Does nothing if not running. */
PERFTOOLS_DLL_DECL void HeapProfilerStop(void);

/* Writes the next <prefix>.NNNN.heap now; `reason` appears in the log line. Does nothing
 * if not running. */
PERFTOOLS_DLL_DECL void HeapProfilerDump(const char* reason);

/* The current profile as text (with its MAPPED_LIBRARIES section), in a buffer from
 * malloc that the caller frees; an empty string if the profiler is not running. */
PERFTOOLS_DLL_DECL char* GetHeapProfile(void);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* TCMALLOC_HEAP_PROFILER_H_ */
