// Fragments free memory (touch N GiB in 4 KiB pages, give back every other page), then times
// what the staging ring's build does: a 2 MiB-aligned MADV_HUGEPAGE mapping written, against
// the same with MADV_NOHUGEPAGE; reports how much came as huge pages.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e3+t.tv_nsec/1e6;}
static long huge_kb(void* p){FILE*f=fopen("/proc/self/smaps","r");char l[512];long kb=-1;int in=0;unsigned long a,b;
 while(fgets(l,sizeof l,f)){ if(sscanf(l,"%lx-%lx",&a,&b)==2){in=(a<=(unsigned long)p&&(unsigned long)p<b);continue;}
  if(in&&sscanf(l,"AnonHugePages: %ld",&kb)==1)break;} fclose(f);return kb;}
static void ring(size_t bytes,int huge){
  size_t slack=2<<20; char*m=mmap(0,bytes+slack,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
  char*p=(char*)(((unsigned long)m+slack-1)&~(slack-1));
  madvise(p,bytes,huge?MADV_HUGEPAGE:MADV_NOHUGEPAGE);
  double t=now(); memset(p,0,bytes); double ms=now()-t;
  printf("  %s %zu MiB: %.2f ms, AnonHugePages %ld kB\n",huge?"huge  ":"nohuge",bytes>>20,ms,huge_kb(p));
  munmap(m,bytes+slack);
}
int main(int c,char**v){setvbuf(stdout,0,_IONBF,0);
  size_t gib=c>1?atol(v[1]):0; size_t n=gib<<30;
  printf("before fragmenting:\n"); for(int i=0;i<2;i++){ring(24<<20,1);ring(24<<20,0);}
  if(!n)return 0;
  char*f=mmap(0,n,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE,-1,0); if(f==MAP_FAILED){perror("mmap");return 1;}
  madvise(f,n,MADV_NOHUGEPAGE);
  double t=now(); for(size_t c=0;c<n;c+=(1ul<<30)){ for(size_t i=c;i<c+(1ul<<30);i+=4096)f[i]=1;
  for(size_t i=c;i<c+(1ul<<30);i+=8192)madvise(f+i,4096,MADV_DONTNEED);}
  setvbuf(stdout,0,_IONBF,0);printf("fragmented %zu GiB (every other page freed) in %.0f ms\n",gib,now()-t);
  system("grep -E 'MemFree|MemAvailable' /proc/meminfo; cat /proc/buddyinfo");
  for(int i=0;i<3;i++){ring(24<<20,1);ring(24<<20,0);}
  ring(48<<20,1);ring(48<<20,0);
  system("grep -E 'compact_stall|compact_fail|compact_success|thp_fault_alloc|thp_fault_fallback ' /proc/vmstat");
  return 0;
}
