/* test_engine_oracle.c - property tests: the engine against the brute-force oracle.
 *
 * Thousands of random streams of each kind (single core, several cores, bin10, recursion, lines
 * inside functions, data and state areas with a variable -> state mapping, RTOS contexts with
 * task switches, streams cut mid-way, garbage, evlog threads with out-of-order times) go into
 * both; at a few points in each stream the two tables must agree on every field of every row
 * (windows and Neutral rows included; quantiles within the histogram's 1% bound, since the
 * oracle's are exact). On a mismatch the kind, seed and row are printed; rerun one stream with
 * TLC_ORACLE_SEED=<seed> TLC_ORACLE_KIND=<kind>.
 * The engine's tap sees the same samples as its snapshot's dists (count, min and max per row and
 * kind), in the order their closing events came.
 * Budgets (SPEC 13): random budgets on every stream (areas by handle, name and glob, any or one
 * context, every sample kind, max and/or min) watched through the tap, directly (the engine
 * asks which rows are watched) or behind the test's own tap; their violations are the oracle's
 * samples above a max or below a min, compared one by one (value, limit, start, end, epoch),
 * with the counts per (budget, area, context), the totals, the kept ring and the worst.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "budget/budget.h"
#include "engine/engine.h"
#include "formats/budget.h"
#include "formats/mapping.h"
#include "formats/stats.h"
#include "oracle.h"
#include "rng.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXEV      600
#define EV_GAPCALL 0xFE /* test marker: call tlc_engine_gap instead of pushing */

enum kind {
  K_SINGLE,
  K_MULTI,
  K_BIN10,
  K_RECURSION,
  K_LINES,
  K_DATA,
  K_RTOS,
  K_CUT,
  K_GARBAGE,
  K_EVLOG,
  K_RTOS_GARBAGE,
  K_FREERTOS,
  K_RESET,
  K_COUNT
};
static const char *const kind_name[K_COUNT] = { "single",  "multi", "bin10",        "recursion",
                                                "lines",   "data",  "rtos",         "cut",
                                                "garbage", "evlog", "rtos-garbage", "freertos",
                                                "reset" };

typedef struct gen {
  rng_t r;
  int kind;
  tlc_format_t fmt;
  tlc_event_t ev[MAXEV];
  size_t n;
  int64_t t;
  /* per context model stacks of handles (contexts 0..7) */
  uint32_t st[8][64];
  unsigned depth[8];
  /* K_FREERTOS: the packed layout (0: FreeRTOS's id 0xFFFF, state 0xFF0000; 1: id 0xFF,
   * state 0xF00), whether every non-running state stops, each core's running task (-1: none) */
  int layout, stop_all;
  int run[2];
  uint16_t next_flags; /* flags of the next event emitted (a clock restart's) */
} gen_t;

static void emit(gen_t *g, uint32_t handle, unsigned type, uint64_t data, unsigned core,
                 uint64_t thread) {
  tlc_event_t *e;
  if (g->n >= MAXEV)
    return;
  e = &g->ev[g->n++];
  memset(e, 0, sizeof(*e));
  /* time: mostly forward by 0..300 ns, sometimes equal */
  g->t += (int64_t)rng_below(&g->r, 300);
  e->time_ns = g->t;
  e->handle = handle;
  e->type = (uint8_t)type;
  e->data = data;
  e->core = (uint8_t)core;
  e->thread = thread;
  e->flags = g->next_flags;
  g->next_flags = 0;
}

/* One well-formed-ish step of nested code activity in model context `cx`. */
static void code_step(gen_t *g, unsigned cx, unsigned core, uint64_t thread, unsigned nfun,
                      int lines, int recursion) {
  unsigned d = g->depth[cx], x = (unsigned)rng_below(&g->r, 100);
  uint32_t h;
  if (d == 0 || (x < 40 && d < 60)) {
    if (lines && d > 0 && rng_chance(&g->r, 1, 2))
      h = 0x10000000u | (uint32_t)rng_below(&g->r, nfun * 2);
    else if (recursion && d > 0 && rng_chance(&g->r, 2, 3))
      h = g->st[cx][d - 1];
    else
      h = (uint32_t)rng_below(&g->r, nfun);
    if (d > 0 && !lines && rng_chance(&g->r, 1, 2))
      emit(g, g->st[cx][d - 1], TLC_EV_SUSPEND, 0, core, thread);
    emit(g, h, TLC_EV_ENTRY, 0, core, thread);
    g->st[cx][g->depth[cx]++] = h;
  } else if (x < 75) {
    h = g->st[cx][--g->depth[cx]];
    emit(g, h, TLC_EV_EXIT, 0, core, thread);
    if (g->depth[cx] > 0 && rng_chance(&g->r, 1, 2))
      emit(g, g->st[cx][g->depth[cx] - 1], TLC_EV_RESUME, 0, core, thread);
  } else if (x < 88) {
    h = g->st[cx][rng_below(&g->r, d)];
    emit(g, h, rng_chance(&g->r, 1, 2) ? TLC_EV_SUSPEND : TLC_EV_RESUME, 0, core, thread);
  } else if (x < 94) {
    /* X of a non-innermost activation: truncates those above */
    unsigned p = (unsigned)rng_below(&g->r, d);
    h = g->st[cx][p];
    emit(g, h, TLC_EV_EXIT, 0, core, thread);
    g->depth[cx] = p;
  } else if (x < 97) {
    /* X of something not open (anomaly), or S/R of something not open (partial) */
    h = 0x00000100u | (uint32_t)rng_below(&g->r, 3);
    emit(g, h, (unsigned)rng_below(&g->r, 3), 0, core, thread);
  } else {
    /* a backwards step in time */
    g->t -= (int64_t)rng_below(&g->r, 400);
  }
}

static void data_step(gen_t *g, unsigned core) {
  unsigned x = (unsigned)rng_below(&g->r, 100);
  if (x < 35)
    emit(g, 0x20000000u | (uint32_t)rng_below(&g->r, 3), TLC_EV_WRITE, rng_below(&g->r, 5), core,
         0);
  else if (x < 45)
    emit(g, 0x40000000u | (uint32_t)rng_below(&g->r, 2), TLC_EV_WRITE, rng_next(&g->r), core, 0);
  else if (x < 75)
    emit(g, 0x30000001u | (uint32_t)rng_below(&g->r, 2),
         rng_chance(&g->r, 1, 4) ? TLC_EV_ENTRY : TLC_EV_WRITE, rng_below(&g->r, 4), core, 0);
  else if (x < 85)
    emit(g, 0x30000001u | (uint32_t)rng_below(&g->r, 2), TLC_EV_EXIT, 0, core, 0);
  else if (x < 92)
    emit(g, 0x50000000u, TLC_EV_WRITE, rng_below(&g->r, 3), core, 0);
  else if (x < 95)
    emit(g, 0x20000000u, (unsigned)rng_below(&g->r, 4), 0, core, 0); /* non-W on data */
  else if (x < 98)
    emit(g, 0x30000002u, (unsigned)rng_below(&g->r, 2) + 1, 0, core, 0); /* S/R on a state */
  else
    g->t -= (int64_t)rng_below(&g->r, 500);
}

static void garbage(gen_t *g) {
  tlc_event_t *e;
  unsigned x = (unsigned)rng_below(&g->r, 100);
  if (x < 8 && g->n < MAXEV) {
    e = &g->ev[g->n++];
    memset(e, 0, sizeof(*e));
    e->type = EV_GAPCALL;
    return;
  }
  emit(g, ((uint32_t)rng_below(&g->r, 8) << 28) | (uint32_t)rng_below(&g->r, 4),
       x < 15   ? TLC_EV_NONE
       : x < 20 ? 5 + (unsigned)rng_below(&g->r, 3)
                : (unsigned)rng_below(&g->r, 5),
       rng_below(&g->r, 4), rng_chance(&g->r, 1, 2) ? 0 : TLC_CORE_UNKNOWN, rng_below(&g->r, 2));
  if (g->n > 0 && rng_chance(&g->r, 1, 10))
    g->ev[g->n - 1].flags |= TLC_EVF_GAP;
  if (rng_chance(&g->r, 1, 5))
    g->t -= (int64_t)rng_below(&g->r, 2000);
}

/* A board reset, or something like one: time steps back by up to 20,000 ns (more or less than
 * the test's clock_reset_ns), after a tlc_engine_gap call (a reconnect), with TLC_EVF_RESTART
 * (the decoder confirmed it), with TLC_EVF_GAP (a resync), or with nothing (out of order). */
static void reset_step(gen_t *g) {
  unsigned how = (unsigned)rng_below(&g->r, 4);
  g->t -= 200 + (int64_t)rng_below(&g->r, 20000);
  if (how == 0 && g->n < MAXEV) {
    memset(&g->ev[g->n], 0, sizeof(g->ev[0]));
    g->ev[g->n++].type = EV_GAPCALL;
  } else if (how == 1) {
    g->next_flags = TLC_EVF_RESTART;
  } else if (how == 2) {
    g->next_flags = TLC_EVF_GAP;
  }
}

static void rtos_switch(gen_t *g, unsigned core) {
  /* task values 1..4 on context area 0x30000000; sometimes an X on it (changes no context) */
  if (rng_chance(&g->r, 1, 8))
    emit(g, 0x30000000u, TLC_EV_EXIT, 0, core, 0);
  else
    emit(g, 0x30000000u, rng_chance(&g->r, 1, 5) ? TLC_EV_ENTRY : TLC_EV_WRITE,
         1 + rng_below(&g->r, 4), core, 0);
}

/* FreeRTOS states (../shared/samples/winidea/FreeRTOSProfiler.xml): RUNNING 1 runs; READY 2,
 * DELETED 4, BLOCKED 5, SUSPENDED 6 end the run; CREATED 3 is in neither list (unless every
 * non-running state stops). */
enum { FR_RUNNING = 1, FR_READY = 2, FR_CREATED = 3, FR_DELETED = 4, FR_BLOCKED = 5 };
#define FR_TASKS 5

static void fr_write(gen_t *g, unsigned core, unsigned task, unsigned state) {
  uint64_t v, junk = rng_below(&g->r, 256);
  if (g->layout == 0) /* (state << 16) + task tag, a blocking reason in bits 24-31 */
    v = ((uint64_t)state << 16) + task +
        (state == FR_BLOCKED || rng_chance(&g->r, 1, 8) ? junk << 24 : 0);
  else /* id 0xFF, state 0xF00, other bits anything */
    v = ((uint64_t)state << 8) + task + (rng_chance(&g->r, 1, 3) ? junk << 12 : 0);
  emit(g, 0x30000000u, rng_chance(&g->r, 1, 6) ? TLC_EV_ENTRY : TLC_EV_WRITE, v, core, 0);
}

/* One step on `core` as iSYSTEM's FreeRTOS instrumentation writes isystem_trace: at a switch the
 * outgoing task's new state (preempted: READY; blocked: BLOCKED with a reason; SUSPENDED;
 * DELETED), then RUNNING for the incoming one (a task runs on one core at a time); CREATED for
 * a new task; now and then a stopped state of a task that is not this core's; code in between
 * in the running task's context (model context = task, or 5 + core for "no task"). */
static void freertos_step(gen_t *g, unsigned core) {
  static const unsigned out_states[] = {
    FR_READY, FR_READY, FR_BLOCKED, FR_BLOCKED, 6, FR_DELETED
  };
  unsigned x = (unsigned)rng_below(&g->r, 100), other = core ^ 1u;
  if (x < 12) {
    if (g->run[core] >= 0) {
      fr_write(g, core, (unsigned)g->run[core], out_states[rng_below(&g->r, 6)]);
      g->run[core] = -1;
    }
    if (rng_chance(&g->r, 5, 6)) {
      unsigned task = (unsigned)rng_below(&g->r, FR_TASKS);
      if ((int)task != g->run[other]) {
        fr_write(g, core, task, FR_RUNNING);
        g->run[core] = (int)task;
      }
    }
  } else if (x < 14) {
    unsigned task = (unsigned)rng_below(&g->r, FR_TASKS);
    fr_write(g, core, task, FR_CREATED);
    if (g->stop_all && (int)task == g->run[core])
      g->run[core] = -1;
  } else if (x < 16) {
    if (g->run[other] >= 0) /* the other core's task, written on this core: no change */
      fr_write(g, core, (unsigned)g->run[other], FR_BLOCKED);
  } else if (x < 17) {
    emit(g, 0x30000000u, TLC_EV_EXIT, 0, core, 0);
  } else {
    unsigned cx = g->run[core] >= 0 ? (unsigned)g->run[core] : 5 + core;
    code_step(g, cx, core, 0, 4, rng_chance(&g->r, 1, 4), rng_chance(&g->r, 1, 8));
  }
}

static void generate(gen_t *g, int kind, uint64_t seed, size_t len) {
  static const unsigned cores[4] = { 0, 1, 2, TLC_CORE_UNKNOWN };
  memset(g, 0, sizeof(*g));
  rng_seed(&g->r, seed);
  g->kind = kind;
  g->fmt = TLC_FMT_BIN11;
  g->t = rng_chance(&g->r, 1, 4) ? -(int64_t)rng_below(&g->r, 100000) : 0;
  g->layout = (int)rng_below(&g->r, 2);
  g->stop_all = rng_chance(&g->r, 1, 3);
  g->run[0] = g->run[1] = -1;
  while (g->n < len) {
    unsigned c;
    switch (kind) {
    case K_SINGLE:
      code_step(g, 0, 0, 0, 6, 0, 0);
      break;
    case K_MULTI:
      c = (unsigned)rng_below(&g->r, 4);
      code_step(g, c, cores[c], 0, 5, 0, 0);
      break;
    case K_BIN10:
      g->fmt = TLC_FMT_BIN10;
      code_step(g, 0, TLC_CORE_UNKNOWN, 0, 5, rng_chance(&g->r, 1, 3), 0);
      if (rng_chance(&g->r, 1, 10))
        data_step(g, TLC_CORE_UNKNOWN);
      break;
    case K_RECURSION:
      code_step(g, 0, 0, 0, 2, 0, 1);
      break;
    case K_LINES:
      code_step(g, 0, 0, 0, 3, 1, 0);
      break;
    case K_DATA:
      data_step(g, (unsigned)rng_below(&g->r, 2));
      if (rng_chance(&g->r, 1, 5))
        code_step(g, 0, 0, 0, 3, 0, 0);
      break;
    case K_RTOS:
    case K_RTOS_GARBAGE:
      c = (unsigned)rng_below(&g->r, 2);
      if (rng_chance(&g->r, 1, 6))
        rtos_switch(g, c);
      else
        code_step(g, c, c, 0, 4, rng_chance(&g->r, 1, 4), 0);
      if (kind == K_RTOS_GARBAGE && rng_chance(&g->r, 1, 6))
        garbage(g);
      break;
    case K_FREERTOS:
      freertos_step(g, (unsigned)rng_below(&g->r, 2));
      break;
    case K_CUT:
      c = (unsigned)rng_below(&g->r, 2);
      code_step(g, c, c, 0, 4, rng_chance(&g->r, 1, 3), rng_chance(&g->r, 1, 5));
      if (rng_chance(&g->r, 1, 8))
        data_step(g, c);
      break;
    case K_GARBAGE:
      if (rng_chance(&g->r, 1, 2))
        garbage(g);
      else if (rng_chance(&g->r, 1, 2))
        code_step(g, 0, 0, 0, 3, 1, 0);
      else
        data_step(g, 0);
      break;
    case K_RESET:
      c = (unsigned)rng_below(&g->r, 2);
      if (rng_chance(&g->r, 1, 5))
        data_step(g, c);
      else if (rng_chance(&g->r, 1, 6))
        rtos_switch(g, c);
      else
        code_step(g, c, c, 0, 4, rng_chance(&g->r, 1, 4), rng_chance(&g->r, 1, 6));
      if (rng_chance(&g->r, 1, 30))
        reset_step(g);
      break;
    case K_EVLOG:
      g->fmt = TLC_FMT_EVLOG;
      c = (unsigned)rng_below(&g->r, 3);
      {
        int64_t keep = g->t;
        /* threads' clocks are read before the lock: up to 500 ns backwards across threads */
        if (rng_chance(&g->r, 1, 4))
          g->t -= (int64_t)rng_below(&g->r, 500);
        code_step(g, c, TLC_CORE_UNKNOWN, 0x1000 + c, 4, 0, 0);
        if (g->t < keep)
          g->t = keep;
      }
      if (rng_chance(&g->r, 1, 8))
        data_step(g, TLC_CORE_UNKNOWN);
      break;
    default:
      return;
    }
  }
  if (kind == K_CUT && g->n > 20) {
    /* cut mid-way at both ends: partial activations at the start, open ones at the end */
    size_t a = (size_t)rng_below(&g->r, g->n / 3), b = g->n - (size_t)rng_below(&g->r, g->n / 3);
    memmove(g->ev, g->ev + a, (b - a) * sizeof(g->ev[0]));
    g->n = b - a;
  }
}

/* ---- comparison ---- */

static char where[256];

static int q_ok(int64_t eng, int64_t exact) {
  int64_t d = eng > exact ? eng - exact : exact - eng;
  if (exact < 128)
    return d == 0;
  return (double)d <= (double)exact * 0.01;
}

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "MISMATCH %s: ", where);                                                     \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, "\n");                                                                       \
      return 0;                                                                                    \
    }                                                                                              \
  } while (0)

static int at_eq(const tlc_at_t *a, const tlc_at_t *b) {
  return a->known == b->known && a->start == b->start && a->end == b->end && a->epoch == b->epoch &&
         a->seq_start == b->seq_start && a->seq_end == b->seq_end;
}

static const char *at_str(const tlc_at_t *a, char *buf, size_t len) {
  snprintf(buf, len, "{known %u [%" PRId64 ", %" PRId64 "] epoch %u seq %" PRIu64 "..%" PRIu64 "}",
           a->known, a->start, a->end, a->epoch, a->seq_start, a->seq_end);
  return buf;
}

/* Compares an engine dist a with the oracle's b: counts, sums, extremes and when they were
 * taken, quantiles within their error. */
static int cmp_dist(const tlc_dist_t *a, const tlc_dist_t *b, const char *what, int quant) {
  char sa[128], sb[128];
  unsigned i;
  CHECK(a->n == b->n, "%s n %" PRIu64 " vs %" PRIu64, what, a->n, b->n);
  CHECK(a->sum == b->sum, "%s sum %" PRId64 " vs %" PRId64, what, a->sum, b->sum);
  if (a->n == 0)
    return 1;
  CHECK(a->min == b->min, "%s min %" PRId64 " vs %" PRId64, what, a->min, b->min);
  CHECK(a->max == b->max, "%s max %" PRId64 " vs %" PRId64, what, a->max, b->max);
  CHECK(a->sumsq_hi == b->sumsq_hi && a->sumsq_lo == b->sumsq_lo, "%s sumsq", what);
  CHECK(at_eq(&a->min_at, &b->min_at), "%s min_at %s vs %s", what, at_str(&a->min_at, sa, 128),
        at_str(&b->min_at, sb, 128));
  CHECK(at_eq(&a->max_at, &b->max_at), "%s max_at %s vs %s", what, at_str(&a->max_at, sa, 128),
        at_str(&b->max_at, sb, 128));
  if (quant) {
    CHECK(a->has_q, "%s has_q", what);
    for (i = 0; i < TLC_NQUANT; i++)
      CHECK(q_ok(a->q[i], b->q[i]), "%s q[%u] %" PRId64 " vs exact %" PRId64, what, i, a->q[i],
            b->q[i]);
  }
  return 1;
}

static int cmp_tables(const tlc_table_t *e, const tlc_table_t *o, int quant) {
  size_t i;
  unsigned k, w;
  CHECK(e->ncontexts == o->ncontexts, "ncontexts %zu vs %zu", e->ncontexts, o->ncontexts);
  for (i = 0; i < e->ncontexts; i++)
    CHECK(e->contexts[i].kind == o->contexts[i].kind &&
              e->contexts[i].core == o->contexts[i].core &&
              e->contexts[i].key == o->contexts[i].key,
          "context %zu", i);
  CHECK(e->counters.events == o->counters.events, "events");
  CHECK(e->counters.anomalies == o->counters.anomalies, "anomalies %" PRIu64 " vs %" PRIu64,
        e->counters.anomalies, o->counters.anomalies);
  CHECK(e->counters.gaps == o->counters.gaps, "gaps");
  CHECK(e->counters.clock_resets == o->counters.clock_resets,
        "clock_resets %" PRIu64 " vs %" PRIu64, e->counters.clock_resets, o->counters.clock_resets);
  CHECK(e->counters.dropped_area_limit == 0, "dropped");
  if (e->counters.events > 0) {
    CHECK(e->first_time == o->first_time, "first_time");
    CHECK(e->last_time == o->last_time, "last_time");
  }
  CHECK(e->nwindows == o->nwindows, "nwindows");
  CHECK(e->nrows == o->nrows, "nrows %zu vs %zu", e->nrows, o->nrows);
  for (i = 0; i < e->nrows; i++) {
    const tlc_stat_t *a = &e->rows[i], *b = &o->rows[i];
    char what[64];
    CHECK(a->handle == b->handle && a->context == b->context && a->state == b->state,
          "row %zu key %08X/%u/%" PRIu64 " vs %08X/%u/%" PRIu64, i, a->handle, a->context, a->state,
          b->handle, b->context, b->state);
    CHECK(a->kind == b->kind, "row %08X kind", a->handle);
    CHECK(a->count == b->count, "row %08X/%u/%" PRIu64 " count %" PRIu64 " vs %" PRIu64, a->handle,
          a->context, a->state, a->count, b->count);
    CHECK(a->anomalies == b->anomalies, "row %08X/%u/%" PRIu64 " anomalies %" PRIu64 " vs %" PRIu64,
          a->handle, a->context, a->state, a->anomalies, b->anomalies);
    CHECK(a->has_value == b->has_value && a->value == b->value && a->value_min == b->value_min &&
              a->value_max == b->value_max,
          "row %08X values", a->handle);
    for (k = 0; k < TLC_NKINDS; k++) {
      CHECK(a->total[k] == b->total[k], "row %08X/%u/%" PRIu64 " total[%u] %" PRId64 " vs %" PRId64,
            a->handle, a->context, a->state, k, a->total[k], b->total[k]);
      snprintf(what, sizeof(what), "row %08X/%u/%" PRIu64 " dist[%u]", a->handle, a->context,
               a->state, k);
      if (!cmp_dist(&a->dist[k], &b->dist[k], what, quant))
        return 0;
    }
    CHECK(a->nwin == b->nwin, "row %08X nwin %u vs %u", a->handle, a->nwin, b->nwin);
    for (w = 0; w < a->nwin; w++) {
      CHECK(a->win[w].count == b->win[w].count,
            "row %08X/%u/%" PRIu64 " win[%u] count %" PRIu64 " vs %" PRIu64, a->handle, a->context,
            a->state, w, a->win[w].count, b->win[w].count);
      for (k = 0; k < TLC_NKINDS; k++) {
        const tlc_wdist_t *x = &a->win[w].k[k], *y = &b->win[w].k[k];
        CHECK(x->n == y->n && x->sum == y->sum &&
                  (x->n == 0 || (x->min == y->min && x->max == y->max)),
              "row %08X/%u/%" PRIu64 " win[%u] kind %u: n %" PRIu64 "/%" PRIu64 " sum %" PRId64
              "/%" PRId64,
              a->handle, a->context, a->state, w, k, x->n, y->n, x->sum, y->sum);
      }
    }
  }
  return 1;
}

/* ---- driver ---- */

static tlc_mapping_t g_map;

static void build_mapping(void) {
  tlc_map_area_t a;
  tlc_mapping_init(&g_map);
  memset(&a, 0, sizeof(a));
  a.handle = 0x20000000u;
  a.parent = TLC_NO_HANDLE;
  a.state_handle = 0x30000010u;
  assert_int_equal(tlc_mapping_add(&g_map, &a), 0);
  a.handle = 0x40000001u;
  a.state_handle = 0x50000000u;
  assert_int_equal(tlc_mapping_add(&g_map, &a), 0);
  tlc_mapping_finish(&g_map);
}

/* Row r of a full snapshot as a snapshot asking for sample kinds `kinds` only (0: all) gives
 * it: the other kinds' distributions and window entries empty (GROSS is CALL's copy without
 * context_area, so asking for GROSS fills CALL too). */
static tlc_stat_t masked(const tlc_table_t *f, const tlc_stat_t *r, unsigned kinds) {
  tlc_stat_t x = *r;
  unsigned k, w;
  if (kinds == 0)
    return x;
  if (!f->has_context_area && (kinds & (1u << TLC_GROSS)))
    kinds |= 1u << TLC_CALL;
  for (k = 0; k < TLC_NKINDS; k++)
    if (!(kinds & (1u << k))) {
      memset(&x.dist[k], 0, sizeof(x.dist[k]));
      for (w = 0; w < TLC_MAX_WINDOWS; w++)
        memset(&x.win[w].k[k], 0, sizeof(x.win[w].k[k]));
    }
  return x;
}

/* A delta snapshot (since `since`, optionally neutral_only, sample kinds `kinds`) against the
 * full snapshot `f` taken with the same windows and quantiles and Neutral rows: its rows are
 * rows of f (masked to those kinds), identical and in f's order; every row of f changed after
 * `since` is in it, except that with neutral_only (and more than one context) no per-context
 * code row is. Returns 1 when it holds. */
static int check_delta(const tlc_table_t *f, const tlc_table_t *d, uint64_t since, int only,
                       unsigned kinds) {
  size_t i, j = 0;
  int multi = f->ncontexts > 1;
  for (i = 0; i < f->nrows; i++) {
    const tlc_stat_t rm = masked(f, &f->rows[i], kinds), *r = &rm;
    int percontext = r->kind == TLC_ROW_CODE && r->context != TLC_CTX_NEUTRAL;
    int excluded = only && multi && percontext;
    if (j < d->nrows && memcmp(&d->rows[j], r, sizeof(*r)) == 0) {
      if (excluded) {
        fprintf(stderr, "%s: neutral_only delta has per-context row %08x/%u\n", where, r->handle,
                r->context);
        return 0;
      }
      j++;
    } else if (!excluded && (since == 0 || r->seq > since)) {
      fprintf(stderr, "%s: delta since %" PRIu64 " lacks row %08x/%u (seq %" PRIu64 ")\n", where,
              since, r->handle, r->context, r->seq);
      return 0;
    }
  }
  if (j != d->nrows) {
    fprintf(stderr, "%s: delta row %zu (%08x/%u) is not a row of the full snapshot\n", where, j,
            d->rows[j].handle, d->rows[j].context);
    return 0;
  }
  return 1;
}

/* The delta contract itself: a row that a delta since the previous cut leaves out is, in a full
 * snapshot now, what it was in the full snapshot of that cut (but for seq). Without windows and
 * Neutral rows (rows whose windows only slid with T are left out by design: engine.h). */
static int check_unchanged(const tlc_table_t *prev, const tlc_table_t *cur, const tlc_table_t *d) {
  size_t i;
  for (i = 0; i < cur->nrows; i++) {
    const tlc_stat_t *r = &cur->rows[i], *p;
    tlc_stat_t a, b;
    if (tlc_table_find(d, r->handle, r->context, r->state) != NULL)
      continue;
    p = tlc_table_find(prev, r->handle, r->context, r->state);
    if (p == NULL) {
      fprintf(stderr, "%s: delta lacks the new row %08x/%u\n", where, r->handle, r->context);
      return 0;
    }
    a = *r;
    b = *p;
    a.seq = b.seq = 0;
    if (memcmp(&a, &b, sizeof(a)) != 0) {
      fprintf(stderr, "%s: delta lacks the changed row %08x/%u\n", where, r->handle, r->context);
      return 0;
    }
  }
  return 1;
}

/* The engine's tap (tlc_engine_opts_t.tap): what it saw, per (row, kind). */
#define TAPMAX 4096
typedef struct tapent {
  uint32_t handle, context;
  uint64_t state;
  uint8_t row_kind, kind;
  uint64_t n;
  int64_t min, max;
} tapent_t;
typedef struct tapacc {
  tapent_t e[TAPMAX];
  size_t n;
  uint64_t last_seq;
  int bad;
  tlc_bwatch_t *w; /* budgets behind this tap (NULL: attached to the engine directly) */
} tapacc_t;

/* w's violations of budgets other than rates so far */
static uint64_t sample_violations(const tlc_bwatch_t *w) {
  uint64_t n = 0;
  for (size_t i = 0; i < tlc_bwatch_nbudgets(w); i++)
    if (tlc_bwatch_budget(w, i)->stat != TLC_BSTAT_RATE)
      n += tlc_bwatch_total(w, i);
  return n;
}

static int tap_cb(void *ud, const tlc_engine_sample_t *s) {
  tapacc_t *a = ud;
  size_t i;
  /* a sample's times and sequence numbers are its events': the closing one is the latest */
  if (s->kind > TLC_TAP_GAP || s->value < 0 || s->seq_start > s->seq_end ||
      s->seq_end < a->last_seq || (s->kind == TLC_TAP_COUNT && s->value != 1))
    a->bad = 1;
  a->last_seq = s->seq_end;
  if (a->w != NULL) {
    tlc_engine_sample_t x = *s;
    uint64_t before = sample_violations(a->w);
    if (s->kind != TLC_TAP_GAP)
      (void)tlc_bwatch_want(a->w, s->handle, s->context, s->row_kind, s->state, &x.cookie);
    /* the watch's answer: the violations of this sample (a rate's are not its) */
    if ((uint64_t)tlc_bwatch_tap(a->w, &x) != sample_violations(a->w) - before)
      a->bad = 1;
  }
  if (s->kind == TLC_TAP_GAP)
    return 0;
  for (i = 0; i < a->n; i++) {
    tapent_t *x = &a->e[i];
    if (x->handle == s->handle && x->context == s->context && x->state == s->state &&
        x->row_kind == s->row_kind && x->kind == s->kind)
      break;
  }
  if (i == a->n) {
    if (a->n == TAPMAX) {
      a->bad = 1;
      return 0;
    }
    memset(&a->e[a->n], 0, sizeof(a->e[0]));
    a->e[i].handle = s->handle;
    a->e[i].context = s->context;
    a->e[i].state = s->state;
    a->e[i].row_kind = s->row_kind;
    a->e[i].kind = s->kind;
    a->e[i].min = INT64_MAX;
    a->e[i].max = INT64_MIN;
    a->n++;
  }
  a->e[i].n++;
  if (s->value < a->e[i].min)
    a->e[i].min = s->value;
  if (s->value > a->e[i].max)
    a->e[i].max = s->value;
  return 0;
}

/* Every sample a snapshot's dists count went through the tap, and nothing else: per row (other
 * than Neutral ones) and kind, the tap's count, min and max are the dist's; its TLC_TAP_COUNT
 * marks are the row's COUNT. */
static int cmp_tap(const tapacc_t *a, const tlc_table_t *t) {
  size_t i, seen = 0;
  unsigned k;
  if (a->bad) {
    fprintf(stderr, "%s: a tap sample out of order or of a bad kind\n", where);
    return 0;
  }
  for (i = 0; i < t->nrows; i++) {
    const tlc_stat_t *r = &t->rows[i];
    if (r->context == TLC_CTX_NEUTRAL)
      continue;
    for (k = 0; k <= TLC_TAP_COUNT; k++) {
      tlc_dist_t cnt = { 0 };
      const tlc_dist_t *d = k < TLC_NKINDS ? &r->dist[k] : &cnt;
      const tapent_t *x = NULL;
      size_t j;
      for (j = 0; j < a->n; j++)
        if (a->e[j].handle == r->handle && a->e[j].context == r->context &&
            a->e[j].state == r->state && a->e[j].row_kind == r->kind && a->e[j].kind == k)
          x = &a->e[j];
      if (k == TLC_TAP_COUNT) {
        cnt.n = r->count;
        cnt.min = cnt.max = 1;
      }
      if (x == NULL ? d->n != 0 : x->n != d->n || x->min != d->min || x->max != d->max) {
        fprintf(stderr,
                "%s: tap of row %08x ctx %u state %llu kind %u: n %llu min %lld max %lld, "
                "snapshot n %llu min %lld max %lld\n",
                where, r->handle, r->context, (unsigned long long)r->state, k,
                (unsigned long long)(x ? x->n : 0), (long long)(x ? x->min : 0),
                (long long)(x ? x->max : 0), (unsigned long long)d->n, (long long)d->min,
                (long long)d->max);
        return 0;
      }
      seen += x != NULL;
    }
  }
  if (seen != a->n) {
    fprintf(stderr, "%s: the tap saw samples of %zu (row, kind) pairs, the snapshot %zu\n", where,
            a->n, seen);
    return 0;
  }
  return 1;
}

/* ---- budgets against the oracle ---- */

#define BMAX  6
#define VMAX  8192
#define BKEEP 64
typedef struct bviol {
  uint32_t budget, handle, context;
  uint64_t state;
  int64_t value, limit, start, end;
  uint64_t epoch;
} bviol_t;

typedef struct bctx {
  tlc_tbudget_set_t set;
  bviol_t eng[VMAX], orc[VMAX];
  size_t neng, norc;
  int overflow;
} bctx_t;

static const char *b_area_name(void *ud, uint32_t handle) {
  static char buf[16];
  (void)ud;
  snprintf(buf, sizeof(buf), "A%08X", handle);
  return buf;
}

static const char *b_ctx_name(void *ud, uint32_t context, char *buf, size_t len) {
  (void)ud;
  snprintf(buf, len, "ctx%u", context);
  return buf;
}

static void b_on_violation(void *ud, const tlc_violation_t *v) {
  bctx_t *b = ud;
  bviol_t *x;
  if (b->neng == VMAX) {
    b->overflow = 1;
    return;
  }
  x = &b->eng[b->neng++];
  memset(x, 0, sizeof(*x));
  x->budget = v->budget;
  x->handle = v->handle;
  x->context = v->context;
  x->state = v->state;
  x->value = v->value;
  x->limit = v->limit;
  x->start = v->start;
  x->end = v->end;
  x->epoch = v->epoch;
}

/* Random budgets over the stream's handles. */
static void make_budgets(bctx_t *b, const gen_t *g, uint64_t seed) {
  uint32_t hs[32];
  size_t nh = 0, i, j, nb;
  rng_t r;
  char err[256];
  rng_seed(&r, seed ^ 0xB0D6E75EEDull);
  for (i = 0; i < g->n && nh < 32; i++) {
    for (j = 0; j < nh && hs[j] != g->ev[i].handle; j++)
      ;
    if (j == nh && g->ev[i].type != EV_GAPCALL)
      hs[nh++] = g->ev[i].handle;
  }
  tlc_tbudget_set_init(&b->set);
  nb = 1 + (size_t)rng_below(&r, BMAX);
  for (i = 0; i < nb && nh > 0; i++) {
    tlc_tbudget_t x;
    char name[32], v[64];
    uint32_t h = hs[rng_below(&r, nh)];
    unsigned how = (unsigned)rng_below(&r, 4);
    int64_t mx = (int64_t)rng_below(&r, 900);
    snprintf(name, sizeof(name), "b%zu", i);
    assert_int_equal(tlc_tbudget_init(&x, name, "oracle", err, sizeof(err)), 0);
    if (how == 0)
      snprintf(v, sizeof(v), "%08X", h);
    else if (how == 1)
      snprintf(v, sizeof(v), "A%08X", h);
    else if (how == 2)
      snprintf(v, sizeof(v), "A%X*", h >> 28);
    else
      snprintf(v, sizeof(v), "A*");
    assert_int_equal(tlc_tbudget_set_key(&x, "area", v, err, sizeof(err)), 0);
    if (rng_chance(&r, 1, 3)) {
      snprintf(v, sizeof(v), "ctx%u", (unsigned)rng_below(&r, 4));
      assert_int_equal(tlc_tbudget_set_key(&x, "context", v, err, sizeof(err)), 0);
    }
    assert_int_equal(tlc_tbudget_set_key(&x, "stat",
                                         tlc_tbudget_stat_name((unsigned)rng_below(&r, 5)), err,
                                         sizeof(err)),
                     0);
    if (rng_chance(&r, 3, 4)) {
      snprintf(v, sizeof(v), "%" PRId64 "ns", mx);
      assert_int_equal(tlc_tbudget_set_key(&x, "max", v, err, sizeof(err)), 0);
    }
    if (!x.has_max || rng_chance(&r, 1, 3)) {
      snprintf(v, sizeof(v), "%" PRId64 "ns", (int64_t)rng_below(&r, (uint64_t)mx + 1));
      assert_int_equal(tlc_tbudget_set_key(&x, "min", v, err, sizeof(err)), 0);
    }
    assert_int_equal(tlc_tbudget_check(&x, err, sizeof(err)), 0);
    assert_int_equal(tlc_tbudget_set_add(&b->set, &x, err, sizeof(err)), 0);
  }
}

/* The oracle's violations: each sample of a budget's kind whose row it watches, above its
 * max or below its min. */
static bctx_t *g_bc;
static void b_oracle_sample(void *ud, const tlc_oracle_sample_t *x) {
  bctx_t *b = ud;
  size_t i;
  char name[16], cn[16];
  snprintf(name, sizeof(name), "A%08X", x->handle);
  snprintf(cn, sizeof(cn), "ctx%u", x->context);
  for (i = 0; i < b->set.n; i++) {
    const tlc_tbudget_t *d = &b->set.b[i];
    bviol_t *v;
    int over, under;
    if (d->stat != x->kind || !tlc_tbudget_area_match(d, x->handle, name))
      continue;
    if (d->context[0] != '\0' && (x->context == TLC_CTX_NONE || strcmp(d->context, cn) != 0))
      continue;
    over = d->has_max && x->value > d->max;
    under = d->has_min && x->value < d->min;
    if (!over && !under)
      continue;
    if (b->norc == VMAX) {
      b->overflow = 1;
      return;
    }
    v = &b->orc[b->norc++];
    memset(v, 0, sizeof(*v));
    v->budget = (uint32_t)i;
    v->handle = x->handle;
    v->context = x->context;
    v->state = x->state;
    v->value = x->value;
    v->limit = over ? d->max : d->min;
    v->start = x->start;
    v->end = x->end;
    v->epoch = x->epoch;
  }
}

static int bviol_cmp(const void *pa, const void *pb) {
  const bviol_t *a = pa, *b = pb;
  /* the fields in order of significance, as signed 64-bit values compared in turn */
  const int64_t x[] = { a->budget, a->handle, a->context, (int64_t)a->state, (int64_t)a->epoch,
                        a->end,    a->start,  a->value,   a->limit },
                y[] = { b->budget, b->handle, b->context, (int64_t)b->state, (int64_t)b->epoch,
                        b->end,    b->start,  b->value,   b->limit };
  size_t i;
  for (i = 0; i < sizeof(x) / sizeof(x[0]); i++)
    if (x[i] != y[i])
      return x[i] < y[i] ? -1 : 1;
  return 0;
}

typedef struct bcount_acc {
  const bctx_t *b;
  int bad;
} bcount_acc_t;

static void b_count_cb(void *ud, const tlc_bcount_t *c) {
  bcount_acc_t *a = ud;
  size_t i;
  uint64_t n = 0;
  for (i = 0; i < a->b->norc; i++) {
    const bviol_t *v = &a->b->orc[i];
    n += v->budget == c->budget && v->handle == c->handle && v->context == c->context &&
         v->state == c->state;
  }
  if (n != c->count) {
    fprintf(stderr, "%s: budget %u area %08x ctx %u: %llu violations counted, oracle %llu\n", where,
            c->budget, c->handle, c->context, (unsigned long long)c->count, (unsigned long long)n);
    a->bad = 1;
  }
}

/* The watch's violations, counts, totals, ring and worst against the oracle's. */
static int cmp_budgets(bctx_t *b, const tlc_bwatch_t *w, const tlc_oracle_t *o) {
  static bviol_t sorted[VMAX];
  size_t i;
  bcount_acc_t acc = { b, 0 };
  b->norc = 0;
  tlc_oracle_samples(o, b_oracle_sample, b);
  if (b->overflow)
    return 1; /* too many to compare (not a failure of the engine) */
  memcpy(sorted, b->eng, b->neng * sizeof(sorted[0]));
  qsort(sorted, b->neng, sizeof(sorted[0]), bviol_cmp);
  qsort(b->orc, b->norc, sizeof(b->orc[0]), bviol_cmp);
  for (i = 0; i < b->neng || i < b->norc; i++) {
    if (i >= b->neng || i >= b->norc || bviol_cmp(&sorted[i], &b->orc[i]) != 0) {
      const bviol_t *x = i < b->neng ? &sorted[i] : &b->orc[i];
      fprintf(stderr,
              "%s: budget violations differ at %zu (engine %zu, oracle %zu): budget %u area "
              "%08x ctx %u value %lld start %lld end %lld (%s)\n",
              where, i, b->neng, b->norc, x->budget, x->handle, x->context, (long long)x->value,
              (long long)x->start, (long long)x->end, i < b->neng ? "engine's" : "oracle's");
      return 0;
    }
  }
  tlc_bwatch_counts(w, b_count_cb, &acc);
  if (acc.bad)
    return 0;
  if (tlc_bwatch_all(w) != b->norc || tlc_bwatch_dropped_keys(w) != 0) {
    fprintf(stderr, "%s: %llu violations in all, oracle %zu\n", where,
            (unsigned long long)tlc_bwatch_all(w), b->norc);
    return 0;
  }
  for (i = 0; i < b->set.n; i++) {
    static tlc_violation_t kept[BKEEP];
    size_t j, n = 0, nk, first;
    int64_t best = -1;
    const tlc_violation_t *worst = tlc_bwatch_worst(w, i);
    for (j = 0; j < b->norc; j++)
      if (b->orc[j].budget == i) {
        int64_t d = b->orc[j].value > b->orc[j].limit ? b->orc[j].value - b->orc[j].limit
                                                      : b->orc[j].limit - b->orc[j].value;
        n++;
        if (d > best)
          best = d;
      }
    if (tlc_bwatch_total(w, i) != n || (n == 0) != (worst == NULL) ||
        (worst != NULL &&
         (worst->over ? worst->value - worst->limit : worst->limit - worst->value) != best)) {
      fprintf(stderr, "%s: budget %zu: total %llu (oracle %zu) or worst differ\n", where, i,
              (unsigned long long)tlc_bwatch_total(w, i), n);
      return 0;
    }
    /* the ring: the last BKEEP of this budget's, in the order they came */
    nk = tlc_bwatch_recent(w, i, kept, BKEEP);
    first = n > BKEEP ? n - BKEEP : 0;
    if (nk != n - first)
      return 0;
    for (j = 0, n = 0; j < b->neng; j++) {
      if (b->eng[j].budget != i)
        continue;
      if (n >= first &&
          (kept[n - first].value != b->eng[j].value || kept[n - first].end != b->eng[j].end ||
           kept[n - first].handle != b->eng[j].handle)) {
        fprintf(stderr, "%s: budget %zu: kept violation %zu differs\n", where, i, n - first);
        return 0;
      }
      n++;
    }
  }
  return 1;
}

static int run_one(int kind, uint64_t seed) {
  static tapacc_t tap;
  static bctx_t bc;
  tlc_bwatch_t *bw = NULL;
  tlc_bwatch_opts_t bo;
  int direct;
  static gen_t g;
  tlc_engine_t *e = NULL;
  tlc_oracle_t *o = NULL;
  tlc_engine_opts_t eo;
  tlc_oracle_opts_t oo;
  tlc_table_t te, to, tp;
  tlc_snap_opts_t so = { 0, 1, 1, 1, 0, 0 };
  uint64_t since = 0;
  size_t len, i, cut[3];
  unsigned ci = 0;
  int ok = 1;
  rng_t pr;
  rng_seed(&pr, seed ^ 0xABCDEFull);
  len = 20 + (size_t)rng_below(&pr, MAXEV - 20);
  generate(&g, kind, seed, len);
  tlc_engine_opts_default(&eo);
  memset(&oo, 0, sizeof(oo));
  eo.nwindows = oo.nwindows = (uint32_t)rng_below(&pr, TLC_MAX_WINDOWS + 1);
  for (i = 0; i < eo.nwindows; i++)
    eo.window_ns[i] = oo.window_ns[i] = (int64_t)(10 + rng_below(&pr, 20000));
  /* small thresholds where time steps back (resets, garbage), else the default 1 s */
  if (kind == K_RESET || kind == K_GARBAGE || kind == K_RTOS_GARBAGE)
    eo.clock_reset_ns = (int64_t)(100 + rng_below(&pr, 5000));
  oo.clock_reset_ns = eo.clock_reset_ns;
  if (kind == K_RTOS || kind == K_RTOS_GARBAGE ||
      ((kind == K_GARBAGE || kind == K_DATA || kind == K_RESET) && rng_chance(&pr, 1, 3))) {
    eo.has_context_area = oo.has_context_area = 1;
    eo.context_area = oo.context_area = 0x30000000u;
  }
  if (kind == K_FREERTOS) {
    static const uint64_t running[] = { FR_RUNNING },
                          stopped[] = { FR_READY, FR_DELETED, FR_BLOCKED, 6 };
    eo.has_context_area = oo.has_context_area = 1;
    eo.context_area = oo.context_area = 0x30000000u;
    eo.pack.id_mask = oo.id_mask = g.layout == 0 ? 0xFFFFu : 0xFFu;
    eo.pack.state_mask = oo.state_mask = g.layout == 0 ? 0xFF0000u : 0xF00u;
    oo.running = running;
    oo.nrunning = 1; /* eo.pack.run is {1} by default */
    oo.stopped_all = eo.pack.stop_all = (uint8_t)g.stop_all;
    if (!g.stop_all) {
      oo.stopped = stopped;
      oo.nstopped = eo.pack.nstop = 4;
      memcpy(eo.pack.stop, stopped, sizeof(stopped));
    }
  }
  if (kind == K_DATA || kind == K_GARBAGE || kind == K_BIN10 || rng_chance(&pr, 1, 4))
    eo.mapping = oo.mapping = &g_map;
  eo.histograms = 1;
  memset(&tap, 0, sizeof(tap));
  eo.tap = tap_cb;
  eo.tap_ud = &tap;
  assert_int_equal(tlc_engine_new(&e, g.fmt, &eo), 0);
  /* budgets: behind the test's tap, or the engine's tap themselves (then the tap's own check
   * is off: it sees nothing) */
  g_bc = &bc;
  bc.neng = bc.norc = 0;
  bc.overflow = 0;
  make_budgets(&bc, &g, seed);
  memset(&bo, 0, sizeof(bo));
  bo.keep = BKEEP;
  bo.area_name = b_area_name;
  bo.ctx_name = b_ctx_name;
  bo.on_violation = b_on_violation;
  bo.ud = &bc;
  assert_int_equal(tlc_bwatch_new(&bw, "t", &bc.set, &bo), 0);
  direct = (seed & 1) != 0;
  if (direct)
    tlc_bwatch_attach(bw, e);
  else
    tap.w = bw;
  assert_int_equal(tlc_oracle_new(&o, g.fmt, &oo), 0);
  tlc_table_init(&te);
  tlc_table_init(&to);
  tlc_table_init(&tp);
  cut[0] = (size_t)rng_below(&pr, g.n + 1);
  cut[1] = (size_t)rng_below(&pr, g.n + 1);
  cut[2] = g.n;
  if (cut[0] > cut[1]) {
    size_t x = cut[0];
    cut[0] = cut[1];
    cut[1] = x;
  }
  for (i = 0; i <= g.n && ok;) {
    while (ci < 3 && cut[ci] <= i && ok) {
      so.neutral = (uint8_t)rng_chance(&pr, 3, 4);
      so.windows = (uint8_t)rng_chance(&pr, 3, 4);
      assert_int_equal(tlc_engine_snapshot(e, &te, &so), 0);
      assert_int_equal(tlc_oracle_table(o, &to, so.windows, so.neutral), 0);
      snprintf(where, sizeof(where), "kind=%s seed=%" PRIu64 " after %zu of %zu events",
               kind_name[kind], seed, i, g.n);
      ok = cmp_tables(&te, &to, 1);
      if (ok && !direct)
        ok = cmp_tap(&tap, &te);
      if (ok)
        ok = cmp_budgets(&bc, bw, o);
      if (ok) { /* a delta since the previous cut against a full snapshot */
        tlc_snap_opts_t sf = { 0, so.windows, 1, 1, 0, 0 }, sd = sf;
        tlc_table_t tf, td;
        tlc_table_init(&tf);
        tlc_table_init(&td);
        sd.since_seq = since;
        sd.neutral = (uint8_t)rng_chance(&pr, 1, 2);
        sd.neutral_only = (uint8_t)rng_chance(&pr, 1, 2);
        sd.kinds = (uint8_t)(rng_chance(&pr, 1, 2) ? rng_below(&pr, 1u << TLC_NKINDS) : 0);
        if (!sd.neutral && !sd.neutral_only)
          sf.neutral = 0;
        assert_int_equal(tlc_engine_snapshot(e, &tf, &sf), 0);
        assert_int_equal(tlc_engine_snapshot(e, &td, &sd), 0);
        ok = check_delta(&tf, &td, since, sd.neutral_only, sd.kinds);
        if (ok) { /* and every row left out is unchanged since the previous cut */
          tlc_snap_opts_t pf = { 0, 0, 0, 1, 0, 0 }, pd = pf;
          tlc_table_t tc, tdl;
          tlc_table_init(&tc);
          tlc_table_init(&tdl);
          pd.since_seq = since;
          assert_int_equal(tlc_engine_snapshot(e, &tc, &pf), 0);
          assert_int_equal(tlc_engine_snapshot(e, &tdl, &pd), 0);
          if (since != 0)
            ok = check_unchanged(&tp, &tc, &tdl);
          tlc_table_fini(&tp);
          tp = tc;
          tlc_table_fini(&tdl);
        }
        since = tf.seq;
        tlc_table_fini(&tf);
        tlc_table_fini(&td);
      }
      ci++;
    }
    if (i == g.n || !ok)
      break;
    if (g.ev[i].type == EV_GAPCALL) {
      tlc_engine_gap(e);
      tlc_oracle_gap(o);
      i++;
    } else if (rng_chance(&pr, 1, 2) && i + 2 <= cut[ci] && g.ev[i + 1].type != EV_GAPCALL) {
      tlc_engine_push(e, &g.ev[i], 2);
      tlc_oracle_push(o, &g.ev[i], 2);
      i += 2;
    } else {
      tlc_engine_push(e, &g.ev[i], 1);
      tlc_oracle_push(o, &g.ev[i], 1);
      i++;
    }
  }
  /* a snapshot does not change the engine: a second one is identical */
  if (ok) {
    tlc_table_t t2;
    tlc_table_init(&t2);
    assert_int_equal(tlc_engine_snapshot(e, &t2, &so), 0);
    assert_int_equal(t2.nrows, te.nrows);
    if (te.nrows > 0)
      assert_memory_equal(t2.rows, te.rows, te.nrows * sizeof(te.rows[0]));
    tlc_table_fini(&t2);
  }
  if (!ok)
    fprintf(stderr, "replay: TLC_ORACLE_KIND=%s TLC_ORACLE_SEED=%" PRIu64 "\n", kind_name[kind],
            seed);
  tlc_table_fini(&te);
  tlc_table_fini(&to);
  tlc_table_fini(&tp);
  tlc_engine_free(e);
  tlc_oracle_free(o);
  tlc_bwatch_free(bw);
  tlc_tbudget_set_fini(&bc.set);
  return ok;
}

/* Streams per kind: 1000 (11 kinds: 11,000 streams), 500 under sanitizers to stay < 60 s. */
#if defined(__SANITIZE_ADDRESS__)
#define STREAMS_DEFAULT 500
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STREAMS_DEFAULT 500
#endif
#endif
#ifndef STREAMS_DEFAULT
#define STREAMS_DEFAULT 1000
#endif

static unsigned streams_per_kind(void) {
  const char *s = getenv("TLC_ORACLE_STREAMS");
  return s != NULL ? (unsigned)strtoul(s, NULL, 10) : STREAMS_DEFAULT;
}

static void run_kind(int kind) {
  const char *ks = getenv("TLC_ORACLE_KIND"), *ss = getenv("TLC_ORACLE_SEED");
  unsigned i, n = streams_per_kind(), fails = 0;
  if (ks != NULL && strcmp(ks, kind_name[kind]) != 0)
    return;
  if (ss != NULL) {
    assert_true(run_one(kind, strtoull(ss, NULL, 10)));
    return;
  }
  for (i = 0; i < n && fails < 3; i++)
    if (!run_one(kind, 1000003ull * (uint64_t)(kind + 1) + i))
      fails++;
  assert_int_equal(fails, 0);
}

#define KIND_TEST(name, k)                                                                         \
  static void test_##name(void **state) {                                                          \
    (void)state;                                                                                   \
    run_kind(k);                                                                                   \
  }
KIND_TEST(single, K_SINGLE)
KIND_TEST(multi, K_MULTI)
KIND_TEST(bin10, K_BIN10)
KIND_TEST(recursion, K_RECURSION)
KIND_TEST(lines, K_LINES)
KIND_TEST(data, K_DATA)
KIND_TEST(rtos, K_RTOS)
KIND_TEST(cut, K_CUT)
KIND_TEST(garbage, K_GARBAGE)
KIND_TEST(evlog, K_EVLOG)
KIND_TEST(rtos_garbage, K_RTOS_GARBAGE)
KIND_TEST(freertos, K_FREERTOS)
KIND_TEST(reset, K_RESET)

/* Many areas on 4 cores: 3,000 functions x 4 contexts, more code rows than the engine's row
 * cache has slots (engine.c: RCACHE), so rows share slots and are looked up again after another
 * row took their slot; nested calls with S and R, compared with the oracle at three points. */
static void test_many_areas(void **state) {
  enum { N = 40000 };
  tlc_event_t *ev = calloc(N, sizeof(*ev));
  uint32_t st[4][32], fun[3000];
  unsigned d[4] = { 0, 0, 0, 0 }, k;
  size_t n = 0, i, at, m;
  int64_t t = 0;
  rng_t r;
  tlc_engine_t *e = NULL;
  tlc_oracle_t *o = NULL;
  tlc_engine_opts_t eo;
  tlc_oracle_opts_t oo;
  tlc_table_t te, to;
  tlc_snap_opts_t so = { 0, 1, 1, 1, 0, 0 };
  (void)state;
  assert_non_null(ev);
  rng_seed(&r, 77);
  /* function handles spread over the whole range (area nibble 0), as addresses would be: slots
   * are shared between the functions of one context too */
  for (k = 0; k < 3000; k++)
    fun[k] = (uint32_t)rng_below(&r, 0x10000000u);
#define PUT(h, ty, c)                                                                              \
  do {                                                                                             \
    ev[n].time_ns = t;                                                                             \
    ev[n].handle = (h);                                                                            \
    ev[n].type = (uint8_t)(ty);                                                                    \
    ev[n].core = (uint8_t)(c);                                                                     \
    n++;                                                                                           \
  } while (0)
  while (n + 2 < N) {
    unsigned c = (unsigned)rng_below(&r, 4);
    t += 1 + (int64_t)rng_below(&r, 200);
    if (d[c] == 0 || (d[c] < 30 && rng_chance(&r, 1, 2))) {
      uint32_t h = fun[rng_below(&r, 3000)];
      if (d[c] > 0)
        PUT(st[c][d[c] - 1], TLC_EV_SUSPEND, c);
      PUT(h, TLC_EV_ENTRY, c);
      st[c][d[c]++] = h;
    } else {
      PUT(st[c][--d[c]], TLC_EV_EXIT, c);
      if (d[c] > 0)
        PUT(st[c][d[c] - 1], TLC_EV_RESUME, c);
    }
  }
#undef PUT
  tlc_engine_opts_default(&eo);
  memset(&oo, 0, sizeof(oo));
  eo.nwindows = oo.nwindows = 3;
  for (k = 0; k < 3; k++)
    eo.window_ns[k] = oo.window_ns[k] = (int64_t)100000 << (3 * k);
  assert_int_equal(tlc_engine_new(&e, TLC_FMT_BIN11, &eo), 0);
  assert_int_equal(tlc_oracle_new(&o, TLC_FMT_BIN11, &oo), 0);
  tlc_table_init(&te);
  tlc_table_init(&to);
  for (k = 1, i = 0; k <= 3; k++) {
    for (at = n * k / 3; i < at; i += m) {
      m = at - i < 256 ? at - i : 256; /* tlcapd's batches */
      tlc_engine_push(e, ev + i, m);
      tlc_oracle_push(o, ev + i, m);
    }
    assert_int_equal(tlc_engine_snapshot(e, &te, &so), 0);
    assert_int_equal(tlc_oracle_table(o, &to, 1, 1), 0);
    snprintf(where, sizeof(where), "many areas after %zu of %zu events", at, n);
    assert_true(te.nrows > 3000);
    assert_true(cmp_tables(&te, &to, 1));
  }
  tlc_table_fini(&te);
  tlc_table_fini(&to);
  tlc_engine_free(e);
  tlc_oracle_free(o);
  free(ev);
}

static int setup(void **state) {
  (void)state;
  build_mapping();
  return 0;
}

static int teardown(void **state) {
  (void)state;
  tlc_mapping_fini(&g_map);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_single),       cmocka_unit_test(test_multi),
    cmocka_unit_test(test_bin10),        cmocka_unit_test(test_recursion),
    cmocka_unit_test(test_lines),        cmocka_unit_test(test_data),
    cmocka_unit_test(test_rtos),         cmocka_unit_test(test_cut),
    cmocka_unit_test(test_garbage),      cmocka_unit_test(test_evlog),
    cmocka_unit_test(test_rtos_garbage), cmocka_unit_test(test_many_areas),
    cmocka_unit_test(test_freertos),     cmocka_unit_test(test_reset),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
