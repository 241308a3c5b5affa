/* proc.h - this process's own figures, as node_exporter's process collector reads them.
 *
 * Linux only: /proc/self/stat (CPU time, start time, memory), /proc/self/fd (open descriptors),
 * /proc/stat (boot time) and RLIMIT_NOFILE. Each call reads them afresh (a few small reads and
 * one directory listing: O(open descriptors)). Any thread.
 */
#ifndef TLC_PROC_H
#define TLC_PROC_H

#include <stdint.h>

typedef struct tlc_proc {
  double cpu_seconds;      /* user + system CPU time */
  double start_time;       /* start, seconds since the Unix epoch */
  uint64_t resident_bytes; /* resident set size */
  uint64_t virtual_bytes;  /* virtual memory size */
  uint64_t open_fds;       /* descriptors open */
  uint64_t max_fds;        /* RLIMIT_NOFILE soft limit */
} tlc_proc_t;

/* Fills *out. Returns 0, or a negative errno-style code when /proc/self cannot be read (*out
 * is then zeroed). */
int tlc_proc_self(tlc_proc_t *out);

#endif
