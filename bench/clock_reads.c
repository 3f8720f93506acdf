/* bench/clock_reads.c: an LD_PRELOAD library that counts clock_gettime calls by clock
 * (std's Instant::now and SystemTime::now go through it) and writes the counts to stderr
 * on SIGUSR2. Built and used by bench/clock_reads. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static atomic_long calls[16];
static int (*real_clock_gettime)(clockid_t, struct timespec *);

int clock_gettime(clockid_t id, struct timespec *ts) {
  if (!real_clock_gettime) real_clock_gettime = dlsym(RTLD_NEXT, "clock_gettime");
  atomic_fetch_add_explicit(&calls[id & 15], 1, memory_order_relaxed);
  return real_clock_gettime(id, ts);
}

static void report(int sig) {
  (void)sig;
  char line[160];
  long other = 0;
  for (int i = 0; i < 16; i++)
    if (i != CLOCK_MONOTONIC && i != CLOCK_REALTIME) other += calls[i];
  int n = snprintf(line, sizeof line, "clock_reads: monotonic %ld realtime %ld other %ld\n",
                   (long)calls[CLOCK_MONOTONIC], (long)calls[CLOCK_REALTIME], other);
  if (n > 0) (void)!write(2, line, (size_t)n);
}

__attribute__((constructor)) static void install(void) { signal(SIGUSR2, report); }
