// LD_PRELOAD sampler of glibc malloc state, for soak_drive.sh (not part of any test).
// Build: gcc -O2 -shared -fPIC -o malloc_sampler.so malloc_sampler.c -lpthread
// With MSAMPLE=FILE set, appends every second
//   "seconds VmRSS_KiB RssAnon_KiB RssFile_KiB in_use_bytes free_bytes mmapped_bytes arena_bytes"
// (mallinfo2 over all arenas) to FILE, and every 30 s malloc_info XML to FILE.xml.
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static void* loop(void* arg) {
  const char* out = getenv("MSAMPLE");
  if (!out) return NULL;
  char xml[512];
  snprintf(xml, sizeof xml, "%s.xml", out);
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0;; ++i) {
    sleep(1);
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    long rss = 0, anon = 0, file = 0;
    char line[256];
    FILE* st = fopen("/proc/self/status", "r");
    while (st && fgets(line, sizeof line, st)) {
      sscanf(line, "VmRSS: %ld", &rss);
      sscanf(line, "RssAnon: %ld", &anon);
      sscanf(line, "RssFile: %ld", &file);
    }
    if (st) fclose(st);
    struct mallinfo2 m = mallinfo2();
    FILE* f = fopen(out, "a");
    if (f) {
      fprintf(f, "%ld %ld %ld %ld %zu %zu %zu %zu\n", (long)(t.tv_sec - t0.tv_sec), rss, anon, file,
              m.uordblks, m.fordblks, m.hblkhd, m.arena);
      fclose(f);
    }
    if (i % 30 == 29) {
      FILE* x = fopen(xml, "a");
      if (x) {
        fprintf(x, "<t s=\"%ld\"/>\n", (long)(t.tv_sec - t0.tv_sec));
        malloc_info(0, x);
        fclose(x);
      }
    }
  }
  return NULL;
}
__attribute__((constructor)) static void start(void) {
  if (!getenv("MSAMPLE")) return;
  pthread_t th;
  pthread_create(&th, NULL, loop, NULL);
  pthread_detach(th);
}
