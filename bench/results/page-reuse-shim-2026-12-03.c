/* Page reuse distance (bench/README.md, "Thirty-fifth session"): for every 4 KiB page a
 * returned block covers, how many allocator calls ago a block covering that page was last
 * allocated or freed (the program touched it then), or "fresh" if never. Measures whether an
 * allocator hands back recently used memory. One global lock: timings under it mean nothing.
 *   gcc -O2 -shared -fPIC -o /tmp/reuse.so bench/results/page-reuse-shim-2026-12-03.c -ldl -lpthread
 *   LD_PRELOAD=/tmp/reuse.so:LIB build/bench/t-test1 2 1000000 65536 1000
 * (Under gperftools' library the run did not finish: not investigated.) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <pthread.h>
static void *(*rm)(size_t); static void *(*rc)(size_t,size_t); static void *(*rr)(void*,size_t); static void (*rf)(void*);
static char boot[1<<16]; static size_t bootn; static __thread int busy;
static void init(void){ rm=dlsym(RTLD_NEXT,"malloc"); rc=dlsym(RTLD_NEXT,"calloc"); rr=dlsym(RTLD_NEXT,"realloc"); rf=dlsym(RTLD_NEXT,"free"); }
#define HB 24
static uint64_t pk[1<<HB], pv[1<<HB];   /* page -> last op */
static uint64_t ak[1<<HB], av[1<<HB];   /* addr -> size */
static pthread_spinlock_t lk; static uint64_t op; static uint64_t hist[8];
static uint64_t *slot(uint64_t *k, uint64_t key){ uint64_t h=(key*0x9E3779B97F4A7C15ull)>>(64-HB); while(k[h] && k[h]!=key) h=(h+1)&((1<<HB)-1); return &k[h]; }
static void touch(void *p, size_t s, int count){ uint64_t a=(uint64_t)p; for(uint64_t pg=a>>12; pg<=(a+s-1)>>12; pg++){ uint64_t *k=slot(pk,pg); uint64_t *v=&pv[k-pk]; if(count){ int b; if(!*k) b=7; else { uint64_t d=op-*v; b= d<64?0: d<512?1: d<4096?2: d<32768?3: d<262144?4: 5;} hist[b]++; } *k=pg; *v=op; } }
static void on_alloc(void*p,size_t s){ if(!p||!s) return; pthread_spin_lock(&lk); op++; touch(p,s,1); uint64_t*k=slot(ak,(uint64_t)p); *k=(uint64_t)p; av[k-ak]=s; pthread_spin_unlock(&lk); }
static void on_free(void*p){ if(!p) return; pthread_spin_lock(&lk); op++; uint64_t*k=slot(ak,(uint64_t)p); if(*k){ touch(p,av[k-ak],0); av[k-ak]=0; /* keep key as tombstone */ } pthread_spin_unlock(&lk); }
void *malloc(size_t s){ if(!rm){ if(busy){void*p=boot+bootn; bootn+=(s+15)&~15; return p;} busy=1; init(); busy=0;} void*p=rm(s); if(!busy){busy=1; on_alloc(p,s); busy=0;} return p; }
void *calloc(size_t a,size_t b){ if(!rc){ if(busy){void*p=boot+bootn; bootn+=(a*b+15)&~15; return p;} busy=1; init(); busy=0;} void*p=rc(a,b); if(!busy){busy=1; on_alloc(p,a*b); busy=0;} return p; }
void *realloc(void*q,size_t s){ if(!rr) init(); void*p=rr(q,s); if(p!=q){ busy=1; on_free(q); on_alloc(p,s); busy=0;} return p; }
void free(void*q){ if((char*)q>=boot && (char*)q<boot+sizeof boot) return; if(!rf) init(); if(!busy){busy=1; on_free(q); busy=0;} rf(q); }
__attribute__((constructor)) static void ini(void){ pthread_spin_init(&lk,0); }
__attribute__((destructor)) static void fin(void){ uint64_t t=0; for(int i=0;i<8;i++) t+=hist[i]; const char*n[8]={"<64","<512","<4K","<32K","<256K",">=256K","","fresh"}; fprintf(stderr,"page reuse distance (ops): "); for(int i=0;i<8;i++) if(i!=6) fprintf(stderr,"%s %.1f%%  ",n[i],100.0*hist[i]/t); fprintf(stderr," pages=%lu\n",t); }
