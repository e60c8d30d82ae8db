/* Throwaway behind README's producer/consumer row (2026-12-06): preloaded after our library,
 * a thread samples the process's RSS every 2 ms and keeps MallocExtension_GetStats' text from
 * the highest sample, printed at exit. Not part of any build:
 *   gcc -O2 -shared -fPIC bench/results/stats-at-peak-2026-12-06.c -o /tmp/snap.so \
 *       -Lbuild/src -ltcmalloc_minimal -lpthread
 *   LD_PRELOAD="build/src/libtcmalloc_minimal.so /tmp/snap.so" build/bench/xmalloc 1 2M 64 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <stdlib.h>
extern void MallocExtension_GetStats(char* buf, int len);
static char best[16384], cur[16384];
static long best_rss;
static long rss_kb(void){ FILE*f=fopen("/proc/self/statm","r"); long a,b; if(fscanf(f,"%ld %ld",&a,&b)!=2)b=0; fclose(f); return b*4; }
static void* loop(void*x){ (void)x; for(;;){ long r=rss_kb(); if(r>best_rss){ MallocExtension_GetStats(cur,sizeof cur); best_rss=r; memcpy(best,cur,sizeof best);} usleep(2000);} return 0; }
static void fin(void){ fprintf(stderr,"RSS at snapshot %ld KiB\n%s\n",best_rss,best); }
__attribute__((constructor)) static void init(void){ pthread_t t; pthread_create(&t,0,loop,0); atexit(fin); }
