/* Touch cost of fresh anonymous memory with and without MADV_HUGEPAGE (bench/README,
 * "Thirty-seventh session"). Usage: thp-fault MIB HP  (HP 1: madvise(MADV_HUGEPAGE) first).
 * Build: gcc -O2 thp-fault-2026-12-03.c -o thp-fault */
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
int main(int c,char**v){ size_t n=(size_t)atoi(v[1])<<20; int hp=atoi(v[2]);
 char*p=mmap(0,n+(2<<20),PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
 p=(char*)(((unsigned long)p+(2<<20)-1)&~((2UL<<20)-1));
 if(hp) madvise(p,n,MADV_HUGEPAGE);
 struct timespec a,b; clock_gettime(CLOCK_MONOTONIC,&a);
 for(size_t i=0;i<n;i+=4096)p[i]=1;
 clock_gettime(CLOCK_MONOTONIC,&b);
 printf("hp=%d %.3f s\n",hp,(b.tv_sec-a.tv_sec)+(b.tv_nsec-a.tv_nsec)/1e9);}
