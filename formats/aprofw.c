/* aprofw.c - aprof report writer (see aprofw.h; format: seeds/003, 12-number points, which the
 * aprof tools call version 4: aprof-plot reads `v 3` as 10 numbers a point).
 *
 *   v 4
 *   c <comment>
 *   a <app>
 *   m time-usec
 *   k <total cost>
 *   r "<routine name>" "<image: the area's file>" <id>
 *   p <id> <rms> <min> <max> <sum> <sqr-sum> <occ> <real-sum> <self-sum> <self-min> <self-max>
 *     <self-sqr>
 *   x <routine id> <context id> <parent context id | -1>
 *   q <context id> <rms> ... (the same eleven numbers as p)
 *
 * One pass over the timeline. Per context (core, or task with context_area, or evlog thread) a
 * stack of open activations of function areas mirrors SPEC section 2's rules as far as aprof
 * needs them: E pushes; S/R pause/resume the innermost open activation of that area; X closes
 * the innermost open activation of the area, dropping activations above it (truncated: no
 * point); R/S without an open activation push a partial one (no point); a gap (TLC_EVF_GAP)
 * drops everything open. Only activations seen from E to X make points, as for MIN/MAX/AVG.
 *
 * Memory: routines, CCT nodes and contexts live in arrays, found through hash tables
 * (base/htab.h), routines and nodes with caps; the stacks are capped in depth. Cost O(events x 1)
 * amortised; the real-sum rule keeps a per context count of open activations per routine, so no
 * stack scan.
 */
#include "formats/aprofw.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/htab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct point {
  uint64_t occ, sum, min, max, sqr, real, self, self_min, self_max, self_sqr;
} point_t;

typedef struct routine {
  uint32_t handle;
  uint32_t id;
  point_t p;
} routine_t;

typedef struct node {
  uint32_t routine; /* index into routines */
  int64_t parent;   /* node index or -1 */
  point_t p;
} node_t;

typedef struct frame {
  uint32_t routine;
  int64_t node;
  int64_t start;
  int64_t since; /* running since, valid when running */
  uint64_t self;
  uint8_t running, partial;
} frame_t;

typedef struct actx {
  frame_t *stack;
  size_t depth, cap;
  uint32_t *open; /* per routine: open activations in this context (sized lazily) */
  size_t nopen;
} actx_t;

typedef struct aw {
  const tlc_aprofw_opts_t *opts;
  uint64_t raised; /* microsecond costs below 0.5 us but above 0 written as 1 (cost()) */
  routine_t *routines;
  size_t nroutines, caproutines;
  tlc_htab_t rhash; /* handle -> routine index */
  node_t *nodes;
  size_t nnodes, capnodes;
  tlc_htab_t nhash; /* (parent + 1) << 32 | routine -> node index */
  actx_t *ctx;
  size_t nctx, capctx;
  tlc_htab_t ctxhash; /* context key -> ctx index */
  uint64_t dropped;
  int err;
  uint8_t has_task[256];
  uint64_t task[256];
} aw_t;

static uint64_t sat_add(uint64_t a, uint64_t b) {
  return a + b < a ? UINT64_MAX : a + b;
}

static uint64_t sat_sq(uint64_t v) {
  return v != 0 && v > UINT64_MAX / v ? UINT64_MAX : v * v;
}

static void point_add(point_t *p, uint64_t cum, uint64_t self, int real) {
  if (p->occ == 0 || cum < p->min)
    p->min = cum;
  if (cum > p->max)
    p->max = cum;
  if (p->occ == 0 || self < p->self_min)
    p->self_min = self;
  if (self > p->self_max)
    p->self_max = self;
  p->occ++;
  p->sum = sat_add(p->sum, cum);
  p->sqr = sat_add(p->sqr, sat_sq(cum));
  if (real)
    p->real = sat_add(p->real, cum);
  p->self = sat_add(p->self, self);
  p->self_sqr = sat_add(p->self_sqr, sat_sq(self));
}

/* Routine index for a handle, created on first use; -1 over the cap or on failure. */
static int64_t routine_of(aw_t *w, uint32_t handle) {
  const uint64_t *v = tlc_htab_get(&w->rhash, handle);
  routine_t *nr;
  if (v != NULL)
    return (int64_t)*v;
  if (w->nroutines >= w->opts->max_routines) {
    w->dropped++;
    return -1;
  }
  if (tlc_htab_reserve(&w->rhash, w->nroutines + 1) < 0 ||
      (nr = tlc_grow(w->routines, &w->caproutines, w->nroutines + 1, sizeof(*nr), 64)) == NULL) {
    w->err = TLC_ENOMEM;
    return -1;
  }
  w->routines = nr;
  memset(&w->routines[w->nroutines], 0, sizeof(routine_t));
  w->routines[w->nroutines].handle = handle;
  (void)tlc_htab_put(&w->rhash, handle, w->nroutines); /* reserved: cannot fail */
  return (int64_t)w->nroutines++;
}

/* CCT node for (parent, routine), created on first use; -1 over the cap. */
static int64_t node_of(aw_t *w, int64_t parent, uint32_t routine) {
  uint64_t k = ((uint64_t)(parent + 1) << 32) ^ routine;
  const uint64_t *v = tlc_htab_get(&w->nhash, k);
  node_t *nn;
  if (v != NULL)
    return (int64_t)*v;
  if (w->nnodes >= w->opts->max_nodes) {
    w->dropped++;
    return -1;
  }
  if (tlc_htab_reserve(&w->nhash, w->nnodes + 1) < 0 ||
      (nn = tlc_grow(w->nodes, &w->capnodes, w->nnodes + 1, sizeof(*nn), 64)) == NULL) {
    w->err = TLC_ENOMEM;
    return -1;
  }
  w->nodes = nn;
  memset(&w->nodes[w->nnodes], 0, sizeof(node_t));
  w->nodes[w->nnodes].parent = parent;
  w->nodes[w->nnodes].routine = routine;
  (void)tlc_htab_put(&w->nhash, k, w->nnodes); /* reserved: cannot fail */
  return (int64_t)w->nnodes++;
}

/* Context for a key, created on first use; NULL on failure. Valid until the next call. */
static actx_t *ctx_of(aw_t *w, uint64_t key) {
  const uint64_t *v = tlc_htab_get(&w->ctxhash, key);
  actx_t *nc;
  if (v != NULL)
    return &w->ctx[*v];
  if (tlc_htab_reserve(&w->ctxhash, w->nctx + 1) < 0 ||
      (nc = tlc_grow(w->ctx, &w->capctx, w->nctx + 1, sizeof(*nc), 16)) == NULL) {
    w->err = TLC_ENOMEM;
    return NULL;
  }
  w->ctx = nc;
  memset(&w->ctx[w->nctx], 0, sizeof(actx_t));
  (void)tlc_htab_put(&w->ctxhash, key, w->nctx); /* reserved: cannot fail */
  return &w->ctx[w->nctx++];
}

static int open_count_add(aw_t *w, actx_t *c, uint32_t routine, int delta) {
  if (routine >= c->nopen) {
    size_t n = c->nopen ? c->nopen : 16, i;
    uint32_t *no;
    while (n <= routine)
      n *= 2;
    no = tlc_realloc(c->open, n * sizeof(*no));
    if (no == NULL) {
      w->err = TLC_ENOMEM;
      return -1;
    }
    for (i = c->nopen; i < n; i++)
      no[i] = 0;
    c->open = no;
    c->nopen = n;
  }
  c->open[routine] = (uint32_t)((int64_t)c->open[routine] + delta);
  return 0;
}

static void pop(aw_t *w, actx_t *c) {
  frame_t *f = &c->stack[--c->depth];
  open_count_add(w, c, f->routine, -1);
}

static int push(aw_t *w, actx_t *c, uint32_t routine, int64_t t, int running, int partial) {
  frame_t *f, *ns;
  int64_t parent = c->depth ? c->stack[c->depth - 1].node : -1;
  if (c->depth >= w->opts->max_depth) {
    w->dropped++;
    return -1;
  }
  ns = tlc_grow(c->stack, &c->cap, c->depth + 1, sizeof(*ns), 64);
  if (ns != NULL)
    c->stack = ns;
  if (ns == NULL || open_count_add(w, c, routine, 1) < 0) {
    w->err = TLC_ENOMEM;
    return -1;
  }
  f = &c->stack[c->depth++];
  memset(f, 0, sizeof(*f));
  f->routine = routine;
  f->node = parent == -2 ? -2 : node_of(w, parent, routine);
  if (f->node < 0)
    f->node = -2; /* over the CCT cap: this subtree is not in the tree */
  f->start = t;
  f->since = t;
  f->running = (uint8_t)running;
  f->partial = (uint8_t)partial;
  return 0;
}

/* A cost in the report's unit. Microseconds round to the nearest, except that a nonzero time
 * below 0.5 us is written as 1: aprof-plot drops a point whose min, max or sum is 0, so a
 * short activation must not vanish; such costs are counted (a `c` line says how many). */
static uint64_t cost(aw_t *w, int64_t ns) {
  uint64_t us;
  if (ns <= 0)
    return 0;
  if (w->opts->ns)
    return (uint64_t)ns;
  us = ((uint64_t)ns + 500) / 1000;
  if (us == 0) {
    w->raised++;
    us = 1;
  }
  return us;
}

static void on_event(aw_t *w, const tlc_table_t *t, const tlc_event_t *ev) {
  uint64_t key;
  actx_t *c;
  int64_t r;
  size_t i;
  if (t != NULL && t->has_context_area && ev->handle == t->context_area &&
      (ev->type == TLC_EV_WRITE || ev->type == TLC_EV_ENTRY)) {
    w->has_task[ev->core] = 1;
    w->task[ev->core] = ev->data;
  }
  if (tlc_handle_area(ev->handle) != TLC_AREA_FUNCTION || ev->type > TLC_EV_ENTRY)
    return;
  if (ev->evlog != NULL || (t != NULL && t->format == TLC_FMT_EVLOG))
    key = ev->thread;
  else if (w->has_task[ev->core])
    key = ((uint64_t)1 << 63) | w->task[ev->core];
  else
    key = ((uint64_t)1 << 62) | ev->core;
  c = ctx_of(w, key);
  if (c == NULL)
    return;
  r = routine_of(w, ev->handle);
  if (r < 0)
    return;
  /* innermost open activation of this area */
  for (i = c->depth; i > 0; i--)
    if (c->stack[i - 1].routine == (uint32_t)r)
      break;
  switch (ev->type) {
  case TLC_EV_ENTRY:
    push(w, c, (uint32_t)r, ev->time_ns, 1, 0);
    break;
  case TLC_EV_SUSPEND:
  case TLC_EV_RESUME:
    if (i == 0) {
      push(w, c, (uint32_t)r, ev->time_ns, ev->type == TLC_EV_RESUME, 1);
    } else {
      frame_t *f = &c->stack[i - 1];
      if (ev->type == TLC_EV_SUSPEND && f->running) {
        if (ev->time_ns > f->since)
          f->self = sat_add(f->self, (uint64_t)ev->time_ns - (uint64_t)f->since);
        f->running = 0;
      } else if (ev->type == TLC_EV_RESUME && !f->running) {
        f->running = 1;
        f->since = ev->time_ns;
      }
    }
    break;
  default: /* exit */
    if (i == 0)
      return; /* X without an open activation: nothing to measure */
    while (c->depth > i)
      pop(w, c); /* truncated activations above: no point */
    {
      frame_t *f = &c->stack[c->depth - 1];
      uint64_t self_ns = f->self;
      if (f->running && ev->time_ns > f->since)
        self_ns = sat_add(self_ns, (uint64_t)ev->time_ns - (uint64_t)f->since);
      if (!f->partial) {
        uint64_t cum = cost(w, tlc_time_sub(ev->time_ns, f->start));
        uint64_t self = cost(w, self_ns > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)self_ns);
        int real = c->open[f->routine] == 1;
        point_add(&w->routines[f->routine].p, cum, self, real);
        if (f->node >= 0)
          point_add(&w->nodes[f->node].p, cum, self, real);
      }
      pop(w, c);
    }
    break;
  }
}

static void gap(aw_t *w) {
  size_t i;
  for (i = 0; i < w->nctx; i++)
    while (w->ctx[i].depth > 0)
      pop(w, &w->ctx[i]);
}

static void put_name(tlc_out_t *o, const char *s) {
  tlc_out_putc(o, '"');
  for (; *s; s++)
    tlc_out_putc(o, *s == '"' ? '\'' : (*s == '\n' || *s == '\r') ? ' ' : *s);
  tlc_out_putc(o, '"');
}

static void put_point(tlc_out_t *o, const point_t *p) {
  const uint64_t v[10] = { p->min,  p->max,  p->sum,      p->sqr,      p->occ,
                           p->real, p->self, p->self_min, p->self_max, p->self_sqr };
  int i;
  tlc_out_puts(o, " 0");
  for (i = 0; i < 10; i++) {
    tlc_out_putc(o, ' ');
    tlc_out_u64(o, v[i]);
  }
  tlc_out_putc(o, '\n');
}

static int cmp_routine(const void *a, const void *b) {
  const routine_t *x = a, *y = b;
  return x->handle < y->handle ? -1 : x->handle > y->handle;
}

int tlc_aprof_write(tlc_out_t *o, const tlc_aprofw_opts_t *opts_in, const tlc_table_t *t,
                    const tlc_mapping_t *m, tlc_timeline_t *tl) {
  tlc_aprofw_opts_t opts;
  aw_t w;
  int r, n, k;
  size_t i;
  uint32_t *id_of = NULL; /* routine index -> written id (routines are sorted by handle) */
  memset(&opts, 0, sizeof(opts));
  if (opts_in != NULL)
    opts = *opts_in;
  if (opts.max_routines == 0)
    opts.max_routines = 1000000;
  if (opts.max_nodes == 0)
    opts.max_nodes = 4000000;
  if (opts.max_depth == 0)
    opts.max_depth = 4096;
  memset(&w, 0, sizeof(w));
  w.opts = &opts;
  r = tl->rewind(tl->ud);
  while (r == 0 && w.err == 0) {
    const tlc_event_t *evs;
    n = tl->next(tl->ud, &evs);
    if (n < 0)
      r = n;
    if (n <= 0)
      break;
    for (k = 0; k < n && w.err == 0; k++) {
      if (evs[k].flags & TLC_EVF_GAP)
        gap(&w);
      on_event(&w, t, &evs[k]);
    }
  }
  if (r == 0)
    r = w.err;
  if (r == 0 && w.nroutines > 0) {
    /* ids follow handle order; node routine fields are remapped through id_of */
    routine_t *sorted = tlc_malloc(w.nroutines * sizeof(*sorted));
    id_of = tlc_malloc(w.nroutines * sizeof(*id_of));
    if (sorted == NULL || id_of == NULL) {
      tlc_free(sorted);
      r = TLC_ENOMEM;
    } else {
      memcpy(sorted, w.routines, w.nroutines * sizeof(*sorted));
      for (i = 0; i < w.nroutines; i++)
        sorted[i].id = (uint32_t)i; /* remember the original index */
      qsort(sorted, w.nroutines, sizeof(*sorted), cmp_routine);
      for (i = 0; i < w.nroutines; i++)
        id_of[sorted[i].id] = (uint32_t)i + 1;
      tlc_free(w.routines);
      w.routines = sorted;
    }
  }
  if (r == 0) {
    tlc_out_puts(o, "v 4\n");
    tlc_out_puts(o, "c tlcap aprof export: routines are function areas; rms 0 (no input-size "
                    "signal); cost = ");
    tlc_out_puts(o, opts.ns ? "nanoseconds\n" : "microseconds\n");
    tlc_out_puts(o, "a ");
    tlc_out_puts(o, opts.app ? opts.app : "tlcap");
    tlc_out_putc(o, '\n');
    if (opts.command) {
      tlc_out_puts(o, "f ");
      tlc_out_puts(o, opts.command);
      tlc_out_putc(o, '\n');
    }
    tlc_out_puts(o, opts.ns ? "m time-nsec\n" : "m time-usec\n");
    tlc_out_puts(o, "k ");
    tlc_out_u64(o, t != NULL ? cost(&w, tlc_table_total_time(t)) : 0);
    tlc_out_putc(o, '\n');
    for (i = 0; i < w.nroutines; i++) {
      const routine_t *rt = &w.routines[i];
      const tlc_map_area_t *ma = m ? tlc_mapping_find(m, rt->handle) : NULL;
      char fallback[32];
      snprintf(fallback, sizeof(fallback), "fn_%08X", (unsigned)rt->handle);
      tlc_out_puts(o, "r ");
      put_name(o, ma && ma->name[0] ? ma->name : fallback);
      tlc_out_putc(o, ' ');
      put_name(o, ma ? ma->file : "");
      tlc_out_putc(o, ' ');
      tlc_out_u64(o, i + 1);
      tlc_out_putc(o, '\n');
    }
    for (i = 0; i < w.nroutines; i++) {
      if (w.routines[i].p.occ == 0)
        continue;
      tlc_out_puts(o, "p ");
      tlc_out_u64(o, i + 1);
      put_point(o, &w.routines[i].p);
    }
    for (i = 0; i < w.nnodes; i++) {
      tlc_out_puts(o, "x ");
      tlc_out_u64(o, id_of[w.nodes[i].routine]);
      tlc_out_putc(o, ' ');
      tlc_out_u64(o, i + 1);
      tlc_out_putc(o, ' ');
      if (w.nodes[i].parent < 0)
        tlc_out_puts(o, "-1");
      else
        tlc_out_u64(o, (uint64_t)w.nodes[i].parent + 1);
      tlc_out_putc(o, '\n');
    }
    for (i = 0; i < w.nnodes; i++) {
      if (w.nodes[i].p.occ == 0)
        continue;
      tlc_out_puts(o, "q ");
      tlc_out_u64(o, i + 1);
      put_point(o, &w.nodes[i].p);
    }
    if (w.raised) {
      tlc_out_puts(o, "c ");
      tlc_out_u64(o, w.raised);
      tlc_out_puts(o, " costs between 1 and 499 ns written as 1 us (not 0, which aprof-plot "
                      "drops)\n");
    }
    if (w.dropped) {
      tlc_out_puts(o, "c ");
      tlc_out_u64(o, w.dropped);
      tlc_out_puts(o, " activations not written: routine, context-tree or depth cap reached\n");
    }
    r = o->err;
  }
  for (i = 0; i < w.nctx; i++) {
    tlc_free(w.ctx[i].stack);
    tlc_free(w.ctx[i].open);
  }
  tlc_free(w.ctx);
  tlc_htab_fini(&w.ctxhash);
  tlc_free(w.routines);
  tlc_htab_fini(&w.rhash);
  tlc_free(w.nodes);
  tlc_htab_fini(&w.nhash);
  tlc_free(id_of);
  return r;
}
