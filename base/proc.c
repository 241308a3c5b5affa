/* proc.c - this process's own figures from /proc (see proc.h). */
#include "base/proc.h"

#include "base/err.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* The boot time, seconds since the Unix epoch (/proc/stat "btime"), or 0. */
static uint64_t boot_time(void) {
  char line[256];
  uint64_t bt = 0;
  FILE *f = fopen("/proc/stat", "re");
  if (f == NULL)
    return 0;
  while (fgets(line, sizeof(line), f) != NULL)
    if (strncmp(line, "btime ", 6) == 0) {
      bt = strtoull(line + 6, NULL, 10);
      break;
    }
  fclose(f);
  return bt;
}

/* /proc/self/stat: the fields after the command name (which may hold spaces and ')'). */
static int read_stat(tlc_proc_t *out) {
  char buf[1024];
  unsigned long utime, stime, vsize;
  unsigned long long start;
  long rss, tick = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
  size_t n;
  char *p;
  FILE *f = fopen("/proc/self/stat", "re");
  if (f == NULL)
    return -errno;
  n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  p = strrchr(buf, ')');
  if (p == NULL || tick <= 0 || page <= 0)
    return TLC_EINVAL;
  /* fields 3.. : state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
   * stime cutime cstime priority nice threads itrealvalue starttime vsize rss */
  if (sscanf(p + 1,
             " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %*d %*d %*d %*d %*d %*d %llu "
             "%lu %ld",
             &utime, &stime, &start, &vsize, &rss) != 5)
    return TLC_EINVAL;
  out->cpu_seconds = (double)(utime + stime) / (double)tick;
  out->start_time = (double)boot_time() + (double)start / (double)tick;
  out->virtual_bytes = vsize;
  out->resident_bytes = rss > 0 ? (uint64_t)rss * (uint64_t)page : 0;
  return 0;
}

int tlc_proc_self(tlc_proc_t *out) {
  struct rlimit rl;
  struct dirent *e;
  DIR *d;
  int rc;
  memset(out, 0, sizeof(*out));
  rc = read_stat(out);
  if (rc != 0) {
    memset(out, 0, sizeof(*out));
    return rc;
  }
  d = opendir("/proc/self/fd");
  if (d != NULL) {
    while ((e = readdir(d)) != NULL)
      if (e->d_name[0] != '.')
        out->open_fds++;
    closedir(d);
    if (out->open_fds > 0)
      out->open_fds--; /* the listing's own descriptor */
  }
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
    out->max_fds = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur;
  return 0;
}
