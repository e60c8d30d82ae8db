/* Throwaway model behind bench/README "Forty-first session" (not part of any build): the
 * large_churn benchmark's own loop (one byte written every 4 KiB of a 4 MiB block, then its
 * last byte, 20000 times) over a block that starts `skew` bytes past a 2 MiB boundary, with
 * the region advised MADV_HUGEPAGE (huge=1) or MADV_NOHUGEPAGE (huge=0). No allocator runs.
 * gcc -O2 page-offset-touch-2026-12-04.c -o touch && ./touch 0 0 && ./touch 0x2b0 0 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){ size_t sz=4<<20; long skew=strtol(argv[1],0,0); int huge=atoi(argv[2]);
 char* base=mmap(0,16<<20,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
 char* a=(char*)(((unsigned long)base+(2<<20)-1)&~((2UL<<20)-1));
 if(huge) madvise(a,8<<20,MADV_HUGEPAGE); else madvise(a,8<<20,MADV_NOHUGEPAGE);
 char*p=a+skew; double t=now();
 for(int i=0;i<20000;i++){ for(size_t o=0;o<sz;o+=4096)p[o]=(char)i; p[sz-1]=1; __asm__ volatile(""::"r"(p):"memory");}
 printf("skew %#lx huge %d: %.2f us/iter\n",skew,huge,(now()-t)/20000*1e6);}
