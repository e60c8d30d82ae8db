/* Throwaway model behind bench/README "Twenty-fifth session", "What the pair loop is not
 * waiting for" (not part of any build). The per-CPU slab's pop and push in plain C, without
 * rseq, called through non-inlined functions: `stack` is the slab as it is (each call loads
 * `current`, which the previous call stored); `hot` puts a one-object slot in front of it, so
 * in a malloc/free pair loop a free's store depends on nothing the previous call stored.
 *   gcc -O2 -o /tmp/chain bench/results/pair-chain-model-2026-11-28.c && /tmp/chain
 * prints ns a pair for both, three times (10^8 pairs each). */
#include <stdio.h>
#include <stdint.h>
#include <time.h>
#include <stdlib.h>
struct H { uint32_t cur; uint16_t end, begin; } __attribute__((aligned(8)));
static struct H hdr[128];
static void* slots[65536];
static void* hot[128];
static double now(){struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec+t.tv_nsec*1e-9;}
__attribute__((noinline)) void* pop(size_t cl){ struct H* h=(struct H*)((volatile char*)hdr+cl*8); uint32_t c=h->cur; if(c<=h->begin) return 0; void* r=slots[c-1]; *(volatile uint32_t*)&h->cur=c-1; return r;}
__attribute__((noinline)) int push(size_t cl, void* p){ struct H* h=(struct H*)((volatile char*)hdr+cl*8); uint32_t c=h->cur; if(c>=h->end) return 0; if(slots[c-1]==p) return 0; slots[c]=p; *(volatile uint32_t*)&h->cur=c+1; return 1;}
__attribute__((noinline)) void* hpop(size_t cl){ void* volatile* s=(void* volatile*)&hot[cl]; void* r=*s; if(r){ if(hdr[cl].end==0) return 0; *s=0; return r;} return pop(cl);}
__attribute__((noinline)) int hpush(size_t cl, void* p){ void* volatile* s=(void* volatile*)&hot[cl]; if(*s==0){ if(hdr[cl].end==0) return 0; *s=p; return 1;} return push(cl,p);}
int main(int argc,char**argv){ long n=100000000; size_t cl=argc>5?5:3; static char objs[64][16];
 hdr[cl].begin=100; hdr[cl].cur=100+32; hdr[cl].end=100+64; for(int i=0;i<32;i++) slots[100+i]=objs[i];
 for(int rep=0;rep<3;rep++){
 double t=now(); for(long i=0;i<n;i++){ void* p=pop(cl); push(cl,p);} double a=now()-t;
 t=now(); for(long i=0;i<n;i++){ void* p=hpop(cl); hpush(cl,p);} double b=now()-t;
 printf("stack %.2f ns, hot %.2f ns\n",a/n*1e9,b/n*1e9);}
}
