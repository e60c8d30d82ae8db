/* Throwaway model behind bench/README "Forty-first session" (not part of any build): a memory
 * word incremented by one non-inlined call and decremented by the next, with the two calls
 * addressing it the same way or differently, to see which forms this core forwards a store
 * to the next load at no cost. gcc -O2 store-forward-addressing-2026-12-04.c */
#include <stdio.h>
#include <stdint.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
uint32_t used[64];
uint32_t* volatile gu = used;
__attribute__((noinline)) void inc_di(uint32_t* u){ __asm__ volatile("incl (%0)"::"D"(u):"memory");}
__attribute__((noinline)) void dec_di(uint32_t* u){ __asm__ volatile("decl (%0)"::"D"(u):"memory");}
__attribute__((noinline)) void dec_si(uint32_t* u){ __asm__ volatile("movq %0,%%rsi\n\tdecl (%%rsi)"::"D"(u):"memory","rsi");}
__attribute__((noinline)) void dec_idx(uint32_t* u){ __asm__ volatile("xorl %%eax,%%eax\n\tdecl (%0,%%rax,4)"::"D"(u):"memory","rax");}
__attribute__((noinline)) void dec_disp(uint32_t* u){ __asm__ volatile("leaq -4(%0),%%rsi\n\tdecl 4(%%rsi)"::"D"(u):"memory","rsi");}
uint32_t gword;
__attribute__((noinline)) void inc_rip(void){ __asm__ volatile("incl gword(%%rip)":::"memory");}
__attribute__((noinline)) void dec_rip(void){ __asm__ volatile("decl gword(%%rip)":::"memory");}
int main(){ long N=200000000; uint32_t* u=gu;
 double t=now(); for(long i=0;i<N;i++){inc_di(u);dec_di(u);} double a=now()-t;
 t=now(); for(long i=0;i<N;i++){inc_di(u);dec_si(u);} double b=now()-t;
 t=now(); for(long i=0;i<N;i++){inc_di(u);dec_idx(u);} double c=now()-t;
 t=now(); for(long i=0;i<N;i++){inc_di(u);dec_disp(u);} double d=now()-t;
 t=now(); for(long i=0;i<N;i++){inc_rip();dec_rip();} double e=now()-t;
 printf("rip-relative %.2f  ",e/N*1e9);
 printf("same reg %.2f  other reg %.2f  indexed %.2f  other disp %.2f ns\n",a/N*1e9,b/N*1e9,c/N*1e9,d/N*1e9);}
