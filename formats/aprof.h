/* aprof.h - aprof (input-sensitive profiler) report reader and its JSON view.
 *
 * Reads every report layout tlcap knows of, from an in-memory buffer:
 *  - version 0 (no `v` line; aprof's oldest reports): `r NAME ADDRESS IMAGE ID` and
 *    `p ROUTINE-ID RMS TIME OCCURRENCES` (TIME = mean cost per call);
 *  - version 2: `r "name" "image" id`, `p id rms min max sum occ real-sum self-sum`;
 *  - version 3: 10 numbers, version 2's and then self-min self-max;
 *  - version 4 (the seed's layout, tlcap's own export): 12 numbers,
 *    `p id rms min max sum sqr-sum occ real-sum self-sum self-min self-max self-sqr`, the same
 *    for `q` (calling-context points), `x routine-id context-id parent-id|-1` (the CCT);
 *  - versions 5 and 6: the 12, or 14 (+ ratio-sum ratio-sqr-sum: v5's rvms ratio numerators,
 *    v6's deprecated input-size sums), and in version 6 16 or 18 (+ cumulative syscall and
 *    thread input sums, + self syscall and thread input sums: drms mode).
 * The `v` line (which must come before any routine or point) decides which counts a point may
 * have; versions 1 and above 6 are refused. Without a `v` line the count decides (4, 8, 10, 12
 * or 14). `v 3` over 12 numbers (what tlcap exported before it wrote `v 4`) reads as version
 * 4. Every `p` and `q` line of a report must use the same layout. Header lines: v e t c f a m k
 * i g; routine lines r u d; aprof-plot's `fav` line is skipped. Anything else is an error
 * naming the line.
 *
 * The model keeps what the file holds and marks what it lacks (tlc_aprof_t.fields), so that a
 * writer can produce the 12-number layout from any of them where the numbers exist.
 *
 * Pure: no I/O. A tlc_aprof_t owns everything in it; not thread-safe.
 */
#ifndef TLC_APROF_H
#define TLC_APROF_H

#include "base/out.h"
#include "formats/mapping.h" /* tlc_parse_err_t */

#include <stddef.h>
#include <stdint.h>

/* Which numbers the points of a report carry (tlc_aprof_t.fields). */
#define TLC_APF_MIN           0x0001u
#define TLC_APF_MAX           0x0002u
#define TLC_APF_SUM           0x0004u
#define TLC_APF_SQR_SUM       0x0008u
#define TLC_APF_OCC           0x0010u
#define TLC_APF_REAL_SUM      0x0020u
#define TLC_APF_SELF_SUM      0x0040u
#define TLC_APF_SELF_MIN      0x0080u
#define TLC_APF_SELF_MAX      0x0100u
#define TLC_APF_SELF_SQR      0x0200u
#define TLC_APF_AVG           0x0400u /* version 0: mean cost per call */
#define TLC_APF_RATIO_SUM     0x0800u /* rvms reports */
#define TLC_APF_RATIO_SQR     0x1000u
#define TLC_APF_CUMUL_SYSCALL 0x2000u /* version 6, drms mode */
#define TLC_APF_CUMUL_THREAD  0x4000u
#define TLC_APF_SELF_SYSCALL  0x8000u
#define TLC_APF_SELF_THREAD   0x10000u

/* Most values on a `p`/`q` line, the id included. */
#define TLC_APROF_MAX_VALUES 18

/* One performance point (`p`: of a routine, `q`: of a calling context). Fields the layout lacks
 * are 0. */
typedef struct tlc_aprof_point {
  uint64_t rms;
  uint64_t min, max, sum, sqr_sum, occ;
  uint64_t real_sum, self_sum, self_min, self_max, self_sqr_sum;
  uint64_t avg;
  uint64_t ratio_sum, ratio_sqr_sum;
  uint64_t cumul_syscall, cumul_thread, self_syscall, self_thread;
  uint64_t owner; /* routine id (p) or context id (q) as written */
  uint64_t line;  /* 1-based line of the point in the report */
} tlc_aprof_point_t;

typedef struct tlc_aprof_routine {
  uint64_t id;
  char *name;       /* never NULL */
  char *image;      /* never NULL ("NONE" in aprof's reports when unknown) */
  char *mangled;    /* `u` line, or NULL */
  char *demangled;  /* `d` line (full demangled name with arguments), or NULL */
  uint64_t address; /* version 0 only */
  uint8_t has_address;
  uint8_t has_distinct_rms;
  uint64_t distinct_rms; /* optional 4th field of a quoted `r` line */
  size_t first_point;    /* its points: points[first_point .. first_point + npoints) */
  size_t npoints;
  uint64_t line;
} tlc_aprof_routine_t;

/* A calling context tree node (`x` line). */
typedef struct tlc_aprof_ctx {
  uint64_t id;
  uint64_t routine_id;
  int64_t parent_id;  /* -1 for a root */
  size_t routine;     /* index into routines */
  size_t parent;      /* index into contexts, SIZE_MAX for a root */
  size_t first_point; /* its points: cpoints[first_point .. first_point + npoints) */
  size_t npoints;
  uint64_t line;
} tlc_aprof_ctx_t;

typedef struct tlc_aprof {
  uint64_t version; /* `v`, 0 when absent */
  uint8_t has_version;
  char *metric; /* `m`; "bb-count" (the format's default) when absent */
  uint8_t has_metric;
  char *mtime;         /* `e`, or NULL */
  char *date;          /* `t`, or NULL */
  char *command;       /* `f`, or NULL */
  char *app;           /* `a`, or NULL */
  char *input_metric;  /* `i` (rms / rvms), or NULL */
  uint64_t total_cost; /* `k` */
  uint8_t has_total_cost;
  uint8_t has_granularity;
  uint64_t granularity; /* `g` (memory resolution) */
  char **comments;      /* `c` lines in order */
  size_t ncomments, capcomments;
  unsigned layout; /* values per p/q line including the id: 4, 8, 10, 12, 14, 16 or 18; 0 = no
                      points */
  unsigned fields; /* TLC_APF_* the points carry */
  tlc_aprof_routine_t *routines; /* in file order */
  size_t nroutines, caproutines;
  tlc_aprof_point_t *points; /* `p` points grouped by routine (file order within a routine) */
  size_t npoints, cappoints;
  tlc_aprof_ctx_t *contexts; /* in file order */
  size_t ncontexts, capcontexts;
  tlc_aprof_point_t *cpoints; /* `q` points grouped by context */
  size_t ncpoints, capcpoints;
  /* caps (0 = default 10,000,000 each); comments count against max_points */
  size_t max_routines, max_points, max_contexts;
} tlc_aprof_t;

/* Initialises an empty report (caps at their defaults; set them before parsing). */
void tlc_aprof_init(tlc_aprof_t *a);
/* Frees everything a report owns. Safe on zeroed memory and after a failed parse. */
void tlc_aprof_fini(tlc_aprof_t *a);

/* Parses a whole report buf[0..len) into `a` (which must be freshly initialised). Returns 0,
 * or a negative error (TLC_ESYNTAX bad line, TLC_ERANGE number too large, TLC_ELIMIT a cap
 * reached, TLC_ENOMEM) with *err naming the 1-based line (and byte offset) and the reason.
 * After a failure `a` holds a partial report that only tlc_aprof_fini may touch. */
int tlc_aprof_parse(tlc_aprof_t *a, const char *buf, size_t len, tlc_parse_err_t *err);

/* Whether buf[0..len) looks like an aprof report: its first lines (up to 8, within 4 KiB) all
 * start with a tag letter followed by a blank, and it has no NUL byte there. A plausibility
 * test for format auto-detection, not a parse. Returns 1 or 0. */
int tlc_aprof_sniff(const char *buf, size_t len);

/* Writes the report as one JSON document (schema "tlcap-aprof/1", docs/report-json.md) and a
 * newline. Returns 0 or the output's sticky error. */
int tlc_aprof_to_json(const tlc_aprof_t *a, tlc_out_t *o);

#endif
