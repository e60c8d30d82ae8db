/* Throwaway model behind bench/README "Forty-first session" (not part of any build): the
 * per-CPU pop and push in plain C without rseq (no section is armed), with the slab header
 * and slot array as the library lays them out, the CPU number read from glibc's rseq area
 * (%fs:0x924, built for glibc's offset on this host), CD=1 adds the TLS countdown.
 * gcc -O2 -fPIC -ftls-model=initial-exec -DCD=1 -DSIXTEEN=1 percpu-pair-model-2026-12-04.c */
#include <stdio.h>
#include <stdint.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
struct hdr { uint32_t cur; uint16_t end, begin; };
char slab[2<<19] __attribute__((aligned(4096)));
char* volatile gslabs = slab;
__thread int64_t countdown = 1LL<<60;
__thread uint32_t cpu_id = 0; __thread void* rseq_cs;
#ifndef CD
#define CD 0
#endif
#ifndef SIXTEEN
#define SIXTEEN 0
#endif
__attribute__((noinline)) void* pop(size_t cl, size_t size){
  if (CD) { if ((countdown -= size) < 0) return 0; }
  rseq_cs = &rseq_cs;
  uint32_t cpu; __asm__ volatile("movl %%fs:0x924, %0":"=r"(cpu)); if (cpu >= 2) return 0; char* s = gslabs + ((size_t)cpu << 19);
  struct hdr* h = (struct hdr*)(s + cl*8);
  uint32_t c = h->cur;
  if (SIXTEEN ? (uint16_t)c <= h->begin : c <= h->begin) return 0;
  void* r = ((void**)s)[c-1]; h->cur = c-1; return r;}
__attribute__((noinline)) int push(size_t cl, void*p){
  rseq_cs = &rseq_cs;
  uint32_t cpu; __asm__ volatile("movl %%fs:0x924, %0":"=r"(cpu)); if (cpu >= 2) return 0; char* s = gslabs + ((size_t)cpu << 19);
  struct hdr* h = (struct hdr*)(s + cl*8);
  uint32_t c = h->cur;
  if (SIXTEEN ? (uint16_t)c >= h->end : c >= h->end) return 0;
  ((void**)s)[c] = p; h->cur = c+1; return 1;}
int main(){ long N=200000000; for(int k=0;k<2;k++){struct hdr* h=(struct hdr*)(slab+(k<<19)+16); h->cur=1000; h->end=2000; h->begin=500;}
 double t=now(); for(long i=0;i<N;i++){void*p=pop(2,16); __asm__ volatile(""::"r"(p)); push(2,p);} double a=now()-t;
 printf("CD=%d SIXTEEN=%d %.2f ns\n",CD,SIXTEEN,a/N*1e9);}
