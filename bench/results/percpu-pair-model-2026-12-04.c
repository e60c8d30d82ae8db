/* Throwaway model behind bench/README "Forty-first session" (not part of any build): the
 * per-CPU pop and push in plain C without rseq (no section is armed: rseq_cs is stored to a
 * TLS word), with the slab header and slot array laid out as the library lays them out, the
 * TLS sampling countdown, and the CPU number read from glibc's rseq area (%fs:0x924: glibc's
 * offset on this host). Options, each 0 or 1: -DLIM=1 the entry's two limit compares,
 * -DDF=1 push's double-free check, -DASM=1 the library's pop sequence as inline assembly
 * (-DCMPB='"..."' replaces its 16-bit compare), -DINDIRECT=1 calls through function pointers.
 * gcc -O2 -fPIC -ftls-model=initial-exec [options] percpu-pair-model-2026-12-04.c */
#include <stdio.h>
#include <stdint.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
struct hdr { uint32_t cur; uint16_t end, begin; };
char slab[2<<19] __attribute__((aligned(4096)));
char* volatile gslabs = slab;
__thread int64_t countdown = 1LL<<60;
__thread void* rseq_cs;
size_t lim1 = 0, lim2 = 1<<20; uint32_t ncpu = 2;
#ifndef ASM
#define ASM 0
#endif
#ifndef CMPB
#define CMPB "cmpw 6(%[h]), %w[cur]\n\t"
#endif
#ifndef INDIRECT
#define INDIRECT 0
#endif
#ifndef LIM
#define LIM 0
#endif
#ifndef DF
#define DF 0
#endif
__attribute__((noinline)) void* pop(size_t size){
  if (LIM) { if (size < lim1) return 0; if (size >= lim2) return 0; }
  size_t cl = (size+7)>>3;
  if ((countdown -= size) < 0) return 0;
  rseq_cs = &rseq_cs;  /* a TLS word: storing to glibc's real rseq_cs needs a real descriptor */
  uint32_t cpu; __asm__ volatile("movl %%fs:0x924, %0":"=r"(cpu)); if (cpu >= ncpu) return 0;
  char* s = gslabs + ((size_t)cpu << 19);
#if ASM
  uintptr_t h, cur; void* r; uintptr_t sl=(uintptr_t)s;
  __asm__ volatile goto("leaq (%[slab],%[cl],8), %[h]\n\tmovl (%[h]), %k[cur]\n\t" CMPB "jbe %l[miss]\n\t"
   "leaq -8(%[slab],%[cur],8), %[slab]\n\tmovq (%[slab]), %[r]\n\tdecl %k[cur]\n\tmovl %k[cur], (%[h])\n\t"
   : [h]"=&r"(h), [cur]"=&r"(cur), [r]"=&r"(r), [slab]"+r"(sl) : [cl]"r"(cl) : "cc","memory" : miss);
  return r; miss: return 0; }
#else
  struct hdr* h = (struct hdr*)(s + cl*8);
  uint32_t c = h->cur;
  if ((uint16_t)c <= h->begin) return 0;
  void* r = ((void**)s)[c-1]; h->cur = c-1; return r;}
#endif
__attribute__((noinline)) int push(void*p){
  if (LIM) { if ((uintptr_t)p < lim1) return 0; if ((uintptr_t)p >= (uintptr_t)1<<47) return 0; }
  size_t cl = 2;
  rseq_cs = &rseq_cs;  /* a TLS word: storing to glibc's real rseq_cs needs a real descriptor */
  uint32_t cpu; __asm__ volatile("movl %%fs:0x924, %0":"=r"(cpu)); if (cpu >= ncpu) return 0;
  char* s = gslabs + ((size_t)cpu << 19);
  struct hdr* h = (struct hdr*)(s + cl*8);
  uint32_t c = h->cur;
  if ((uint16_t)c >= h->end) return 0;
  if (DF && ((void**)s)[c-1] == p) return 0;
  ((void**)s)[c] = p; h->cur = c+1; return 1;}
int main(){ long N=200000000; for(int k=0;k<2;k++){struct hdr* h=(struct hdr*)(slab+(k<<19)+16); h->cur=1000; h->end=2000; h->begin=500;}
 void*(*volatile fp)(size_t)=pop; int(*volatile fq)(void*)=push;
 void*(*P)(size_t)=INDIRECT?fp:pop; int(*Q)(void*)=INDIRECT?fq:push;
 double t=now(); for(long i=0;i<N;i++){void*p=P(16); __asm__ volatile(""::"r"(p)); Q(p);} double a=now()-t;
 printf("ASM=%d LIM=%d DF=%d %.2f ns\n",ASM,LIM,DF,a/N*1e9);}
