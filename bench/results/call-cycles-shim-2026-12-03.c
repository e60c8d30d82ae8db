/* Cycles spent inside malloc, calloc, realloc and free, by call type (bench/README.md,
 * "Thirty-fifth session"). Preloaded in front of the allocator it forwards to:
 *   gcc -O2 -shared -fPIC -o /tmp/timeshim.so bench/results/call-cycles-shim-2026-12-03.c -ldl
 *   LD_PRELOAD=/tmp/timeshim.so:LIB build/bench/t-test1 2 1000000 65536 1000
 * prints calls, TSC cycles a call (rdtsc around the forwarded call, ~30-40 cycles of its own)
 * and realloc's moves at exit. Allocations made by dlsym itself come from a static buffer. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <x86intrin.h>
static void *(*rm)(size_t); static void *(*rc)(size_t,size_t); static void *(*rr)(void*,size_t); static void (*rf)(void*);
static __thread int busy;
static uint64_t n[4], cyc[4];
static void init(void){ rm=dlsym(RTLD_NEXT,"malloc"); rc=dlsym(RTLD_NEXT,"calloc"); rr=dlsym(RTLD_NEXT,"realloc"); rf=dlsym(RTLD_NEXT,"free"); }
#define T0 uint64_t t0=__rdtsc();
#define T1(i) uint64_t t1=__rdtsc(); __atomic_fetch_add(&n[i],1,__ATOMIC_RELAXED); __atomic_fetch_add(&cyc[i],t1-t0,__ATOMIC_RELAXED);
static char boot[1<<16]; static size_t bootn;
void *malloc(size_t s){ if(!rm){ if(busy){void*p=boot+bootn; bootn+=(s+15)&~15; return p;} busy=1; init(); busy=0;} T0 void*p=rm(s); T1(0) return p; }
void *calloc(size_t a,size_t b){ if(!rc){ if(busy){void*p=boot+bootn; bootn+=(a*b+15)&~15; return p;} busy=1; init(); busy=0;} T0 void*p=rc(a,b); T1(1) return p; }
static uint64_t moves; void *realloc(void*q,size_t s){ if(!rr) init(); T0 void*p=rr(q,s); T1(2) if(p!=q) __atomic_fetch_add(&moves,1,__ATOMIC_RELAXED); return p; }
void free(void*q){ if((char*)q>=boot && (char*)q<boot+sizeof boot) return; if(!rf) init(); T0 rf(q); T1(3) }
__attribute__((destructor)) static void fin(void){ const char*nm[4]={"malloc","calloc","realloc","free"}; fprintf(stderr,"realloc moves=%lu\n",moves); for(int i=0;i<4;i++) fprintf(stderr,"%s n=%lu cyc/call=%.0f total_Mcyc=%.0f\n",nm[i],n[i],n[i]?(double)cyc[i]/n[i]:0,cyc[i]/1e6); }
