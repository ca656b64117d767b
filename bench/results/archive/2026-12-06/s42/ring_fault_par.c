// Session 42, development VM (lab/NOTES.md 88): aligned MADV_HUGEPAGE mappings faulted by one thread's
// memset against N threads' per-2 MiB-block MADV_POPULATE_WRITE. gcc -O2 -pthread; ./a.out MIB THREADS
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#define B (2ul<<20)
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e3+t.tv_nsec/1e6;}
static char*p; static size_t nb; static int nt; static int next;
static void* w(void*a){ for(;;){ int i=__atomic_fetch_add(&next,1,0); if(i>=nb) return 0; madvise(p+i*B,B,MADV_POPULATE_WRITE);} }
static char* mk(size_t b){char*raw=mmap(0,b+B,3,MAP_PRIVATE|MAP_ANONYMOUS,-1,0); char*q=(char*)(((uintptr_t)raw+B-1)&~(uintptr_t)(B-1)); madvise(q,b,MADV_HUGEPAGE); return q;}
int main(int c,char**v){ size_t b=(size_t)atoi(v[1])<<20; nt=atoi(v[2]); nb=b/B;
 for(int r=0;r<5;r++){ char*q=mk(b); double t=now(); memset(q,0,b); double a=now()-t;
  p=mk(b); next=0; pthread_t th[64]; t=now(); for(int i=0;i<nt;i++) pthread_create(&th[i],0,w,0); for(int i=0;i<nt;i++) pthread_join(th[i],0); double e=now()-t;
  printf("%zu MiB: memset 1 thread %.2f ms, populate %d threads %.2f ms (incl. thread start)\n", b>>20, a, nt, e); munmap(q,b); munmap(p,b);} }
