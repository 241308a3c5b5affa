/* budget.h - timing budgets (SPEC section 13): their definition and the budget file.
 *
 * A budget names what to watch and its limits:
 *
 *   [budget isr_tick]
 *   target  = board-*        fnmatch glob on the target name (default: every target)
 *   area    = SysTick_Handler   a mapped name, an 8-digit handle (0x optional) or a glob
 *   context = any            a context's name (core0, task1A, thread3, or the RTOS's task
 *                            name) or `any` (default)
 *   stat    = period         net, gross, call, period, outside or rate
 *   max     = 1.05ms         and/or min; durations with a unit: ns, us, ms, s (250us, 1.5ms, 2s)
 *   min     = 950us
 *   window  = 1s             rate only: E events per window (max/min are then counts)
 *
 * A glob is any area spelling with *, ? or [ in it; a name without them is matched exactly,
 * an 8-digit hex number (with or without 0x) is a handle. A budget file (--budgets FILE) holds
 * only [budget NAME] sections and # or ; comments; the daemon's INI file may hold them among its
 * other sections (the config module feeds each key to tlc_tbudget_set_key).
 *
 * Pure: no I/O, no globals; errors are messages naming "FILE:LINE: [budget NAME] key: why".
 */
#ifndef TLC_FORMATS_BUDGET_H
#define TLC_FORMATS_BUDGET_H

#include <stddef.h>
#include <stdint.h>

/* stat: the sample kinds of enum tlc_kind (formats/stats.h), and rate */
enum { TLC_BSTAT_RATE = 5 };
enum { TLC_BAREA_NAME = 0, TLC_BAREA_HANDLE = 1, TLC_BAREA_GLOB = 2 };

#define TLC_BUDGET_NAME_MAX 63
#define TLC_BUDGET_PAT_MAX  255
#define TLC_BUDGET_MAX      4096 /* budgets in one set */

typedef struct tlc_tbudget {
  char name[TLC_BUDGET_NAME_MAX + 1];
  char target[TLC_BUDGET_PAT_MAX + 1];   /* glob; "*" by default */
  char area[TLC_BUDGET_PAT_MAX + 1];     /* as written */
  char context[TLC_BUDGET_NAME_MAX + 1]; /* "" = any */
  uint8_t area_kind;                     /* TLC_BAREA_* */
  uint8_t stat;                          /* enum tlc_kind, or TLC_BSTAT_RATE */
  uint8_t has_max, has_min;
  uint32_t handle;   /* TLC_BAREA_HANDLE */
  int64_t max, min;  /* ns (a count for rate) */
  int64_t window_ns; /* rate: the window (> 0) */
  char origin[160];  /* "FILE:LINE" of its section */
} tlc_tbudget_t;

typedef struct tlc_tbudget_set {
  tlc_tbudget_t *b; /* n of them, names unique */
  size_t n, cap;
} tlc_tbudget_set_t;

/* A budget with its defaults (target "*", context any, no limit yet), named `name` (checked:
 * letters, digits, _ - . and at most TLC_BUDGET_NAME_MAX). 0, or -1 with a message. */
int tlc_tbudget_init(tlc_tbudget_t *b, const char *name, const char *origin, char *err,
                     size_t errlen);
/* Sets one key of b (target, area, context, stat, max, min, window). 0, or -1 with a message
 * "key: why" (unknown key, bad value). */
int tlc_tbudget_set_key(tlc_tbudget_t *b, const char *key, const char *val, char *err,
                        size_t errlen);
/* Checks that b is complete: an area, a max or a min (min <= max), a window for rate and none
 * otherwise. 0, or -1 with a message. */
int tlc_tbudget_check(const tlc_tbudget_t *b, char *err, size_t errlen);

/* A duration with its unit (ns, us, ms, s; fractions allowed: 1.5ms) into *ns; a count (digits
 * only) when `count`. 0, or -1 (no unit, bad number, negative, overflow). */
int tlc_tbudget_duration(const char *s, int count, int64_t *ns);
/* The stat's name: net, gross, call, period, outside, rate. */
const char *tlc_tbudget_stat_name(unsigned stat);
/* 1 when b applies to target `name` (its glob), else 0. */
int tlc_tbudget_target_match(const tlc_tbudget_t *b, const char *name);
/* 1 when b's area matches (handle, its mapped name; name may be NULL or ""), else 0. */
int tlc_tbudget_area_match(const tlc_tbudget_t *b, uint32_t handle, const char *name);

void tlc_tbudget_set_init(tlc_tbudget_set_t *s);
void tlc_tbudget_set_fini(tlc_tbudget_set_t *s);
/* Appends a complete budget (copied). 0; -1 with a message for a duplicate name or when the
 * set holds TLC_BUDGET_MAX; TLC_ENOMEM. */
int tlc_tbudget_set_add(tlc_tbudget_set_t *s, const tlc_tbudget_t *b, char *err, size_t errlen);
/* The index of budget `name`, or -1. */
long tlc_tbudget_set_find(const tlc_tbudget_set_t *s, const char *name);

/* Parses a budget file (text[0..len), named fname in messages) into s (cleared first): only
 * [budget NAME] sections, `key = value` lines, comments and blank lines. 0, or -1 with
 * "FILE:LINE: [budget NAME] key: why" in err (s then holds nothing); TLC_ENOMEM. */
int tlc_tbudget_parse(tlc_tbudget_set_t *s, const char *text, size_t len, const char *fname,
                      char *err, size_t errlen);

#endif
