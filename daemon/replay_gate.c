/* replay_gate.c - `tlcapd replay --budgets FILE`: the budget gate (SPEC 13, docs/budgets.md):
 * the watch as the engine's tap over the capture, then its report (budget/report.h).
 */
#include "daemon/replay-int.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/out.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "base/fileread.h"
#include "budget/report.h"
#include "formats/evmap.h"
#include "store/seg/segread.h"

/* An area's name: the mapping's, else the evlog mapping's (names as the stream brings them). */
static const char *gate_area_name(void *ud, uint32_t handle) {
  rp_t *rp = ud;
  const tlc_map_area_t *a = rp->has_mapping ? tlc_mapping_find(&rp->mapping, handle) : NULL;
  if (a != NULL && a->name[0] != '\0')
    return a->name;
  if (rp->stream != NULL && rp->stream->pipe.evmap != NULL)
    return tlc_evmap_name(rp->stream->pipe.evmap, handle);
  return NULL;
}

/* A context's name as the exports show it: a task's CONTEXTS name, else core<N>, task<HEX>,
 * thread<HEX> (tlc_ctx_name). */
static const char *gate_ctx_name(void *ud, uint32_t context, char *buf, size_t len) {
  rp_t *rp = ud;
  tlc_ctx_t c;
  const char *n;
  if (rp->stream == NULL || rp->stream->pipe.engine == NULL ||
      tlc_engine_context(rp->stream->pipe.engine, context, &c) != 0)
    return NULL;
  if (c.kind == TLC_CTXK_TASK && rp->has_mapping &&
      (n = tlc_mapping_ctx_name(&rp->mapping, c.key)) != NULL)
    return n;
  if (c.kind == TLC_CTXK_CORE && c.core == TLC_CORE_UNKNOWN)
    snprintf(buf, len, "core?");
  else if (c.kind == TLC_CTXK_CORE)
    snprintf(buf, len, "core%u", (unsigned)c.core);
  else
    snprintf(buf, len, "%s%llX", c.kind == TLC_CTXK_TASK ? "task" : "thread",
             (unsigned long long)c.key);
  return buf;
}

static int64_t gate_wall(void *ud) {
  (void)ud;
  return 0; /* a replay has no arrival time */
}

/* Where the gate's violations are stored, when it reads a target's stored segments
 * (--state-dir): as the live daemon finds them (daemon/budgetd.c, docs/budgets.md "What a
 * violation holds"), so that a live run and a replay of its segments give the same locations.
 * After each batch of events the engine took, a batch is exact when the engine's change
 * sequence moved by one per event (no gap, no ignored record) and its events are consecutive
 * 24-byte records of one segment; a run of exact batches maps a sequence s to the offset
 * off0 + (s - seq0) * 24. The run before (prev) is kept when the new one carries on at the
 * next segment's first byte right after the old one's last record (a rotation), so that a
 * record one rotation back is found, as live. The batch's violations (up to GL_BATCH) are
 * located from the two runs; an end found in neither stays 0. */
#define GL_BATCH  256
#define GL_RECORD 24

typedef struct gl_run {
  int valid;
  size_t fi;                       /* the stream's file */
  uint64_t seg, size;              /* its segment sequence and content bytes */
  uint64_t seq0, off0, seq1, off1; /* first and last record of the run */
} gl_run_t;

struct gate_loc {
  uint64_t seq, gaps; /* the engine's after the last batch */
  size_t info_fi;     /* the file whose manifest info_ok, info_seg and info_bytes are of */
  int info_ok;
  uint64_t info_seg, info_bytes;
  gl_run_t run, prev;
  size_t npend;
  struct {
    uint32_t budget;
    uint64_t count, seq_start, seq_end;
  } pend[GL_BATCH];
};

/* The segment sequence and content bytes of the stream's file fi (its manifest, read once). */
static int gl_info(struct gate_loc *g, tlc_hist_stream_t *s, size_t fi) {
  if (g->info_fi != fi + 1) {
    tlc_segread_t *sr;
    tlc_seginfo_t info;
    char err[200];
    g->info_fi = fi + 1;
    g->info_ok = 0;
    if (fi < s->nfiles &&
        tlc_segread_open(s->files[fi], TLC_FMT_NONE, 0, &sr, err, sizeof(err)) == 0) {
      tlc_segread_info(sr, &info);
      tlc_segread_close(sr);
      g->info_ok = 1;
      g->info_seg = info.seq;
      g->info_bytes = info.bytes;
    }
  }
  return g->info_ok;
}

static int gl_find(const struct gate_loc *g, uint64_t seq, uint64_t *seg, uint64_t *off) {
  const gl_run_t *r[2] = { &g->run, &g->prev };
  for (int i = 0; i < 2; i++)
    if (r[i]->valid && seq >= r[i]->seq0 && seq <= r[i]->seq1) {
      *seg = r[i]->seg;
      *off = r[i]->off0 + (seq - r[i]->seq0) * GL_RECORD;
      return 1;
    }
  return 0;
}

/* After a batch of n events the engine took: the runs, then the batch's violations located. */
static void gl_batch(rp_t *rp, tlc_hist_stream_t *s, const tlc_event_t *evs, int n) {
  struct gate_loc *g = rp->gloc;
  tlc_engine_t *e = s->pipe.engine;
  uint64_t seq, gaps;
  if (g == NULL || e == NULL)
    return;
  seq = tlc_engine_seq(e);
  gaps = tlc_engine_counters(e)->gaps;
  if (n > 0 && seq - g->seq == (uint64_t)n && gaps == g->gaps && gl_info(g, s, s->fi) &&
      evs[n - 1].offset - evs[0].offset == (uint64_t)(n - 1) * GL_RECORD) {
    gl_run_t *r = &g->run;
    uint64_t first = g->seq + 1;
    if (r->valid && r->fi == s->fi && r->seq1 + 1 == first &&
        r->off1 + GL_RECORD == evs[0].offset) {
      r->seq1 = seq; /* the run goes on */
      r->off1 = evs[n - 1].offset;
    } else {
      /* a new segment right after the old run's last record: the old run is kept as prev */
      if (r->valid && r->fi != s->fi && r->seq1 + 1 == first && evs[0].offset == 0 &&
          r->off1 + GL_RECORD == r->size)
        g->prev = *r;
      else
        g->prev.valid = 0;
      r->valid = 1;
      r->fi = s->fi;
      r->seg = g->info_seg;
      r->size = g->info_bytes;
      r->seq0 = first;
      r->off0 = evs[0].offset;
      r->seq1 = seq;
      r->off1 = evs[n - 1].offset;
    }
  } else {
    g->run.valid = 0;
    g->prev.valid = 0;
  }
  for (size_t i = 0; i < g->npend; i++) {
    uint64_t loc[4] = { 0, 0, 0, 0 };
    int first = gl_find(g, g->pend[i].seq_start, &loc[0], &loc[1]);
    int last = gl_find(g, g->pend[i].seq_end, &loc[2], &loc[3]);
    if (first || last)
      (void)tlc_bwatch_locate(rp->watch, g->pend[i].budget, g->pend[i].count, g->pend[i].seq_end,
                              loc);
  }
  g->npend = 0;
  g->seq = seq;
  g->gaps = gaps;
}

/* Every violation as the gate counts it. --around v:BUDGET:N: the one named is kept, however
 * many came after it (the watch keeps only the last budget_keep). On stored segments: listed
 * for gl_batch. */
static void vref_seen(void *ud, const tlc_violation_t *v) {
  rp_t *rp = ud;
  const tlc_tbudget_t *b;
  struct gate_loc *g = rp->gloc;
  if (g != NULL && g->npend < GL_BATCH) {
    g->pend[g->npend].budget = v->budget;
    g->pend[g->npend].count = v->count;
    g->pend[g->npend].seq_start = v->seq_start;
    g->pend[g->npend].seq_end = v->seq_end;
    g->npend++;
  }
  if (!rp->has_vref)
    return;
  b = tlc_bwatch_budget(rp->watch, v->budget);
  if (!rp->vfound && v->count == rp->vn && b != NULL && strcmp(b->name, rp->vname) == 0) {
    rp->vfirst = *v;
    rp->vfound = 1;
  }
}

/* Reads --budgets and makes the watch for the target the inputs name. 0 or the exit status. */
int tlc__rp_gate_load(rp_t *rp) {
  char *text = NULL, err[600];
  size_t len = 0;
  tlc_bwatch_opts_t o;
  int r = tlc_file_read(rp->budgets_path, 16u << 20, &text, &len);
  if (r < 0) {
    fprintf(stderr, "tlcapd replay: %s: %s\n", rp->budgets_path, tlc_strerror(r));
    return 2;
  }
  r = tlc_tbudget_parse(&rp->budgets, text, len, rp->budgets_path, err, sizeof(err));
  tlc_free(text);
  if (r != 0) {
    fprintf(stderr, "tlcapd replay: %s\n", r == -1 ? err : tlc_strerror(r));
    return 2;
  }
  memset(&o, 0, sizeof(o));
  o.area_name = gate_area_name;
  o.ctx_name = gate_ctx_name;
  o.wall_ms = gate_wall;
  o.on_violation = vref_seen;
  o.ud = rp;
  if (tlc_bwatch_new(&rp->watch, rp->json_target != NULL ? rp->json_target : "", &rp->budgets,
                     &o) != 0) {
    fprintf(stderr, "tlcapd replay: %s\n", tlc_strerror(TLC_ENOMEM));
    return 1;
  }
  return 0;
}

/* The displayed names of a violation's or counter's area and context. */
static void gate_names(void *ud, uint32_t handle, uint8_t row_kind, uint64_t state,
                       uint32_t context, char *area, size_t alen, char *ctx, size_t clen) {
  rp_t *rp = ud;
  const char *n;
  if (row_kind == TLC_ROW_STATE) {
    (void)tlc_mapping_state_display(rp->has_mapping ? &rp->mapping : NULL, handle, state, area,
                                    alen);
  } else if ((n = gate_area_name(rp, handle)) != NULL && n[0] != '\0') {
    snprintf(area, alen, "%s", n);
  } else {
    snprintf(area, alen, "%08X", handle);
  }
  if (context == TLC_CTX_NONE || (n = gate_ctx_name(rp, context, ctx, clen)) == NULL)
    snprintf(ctx, clen, "-");
  else if (n != ctx)
    snprintf(ctx, clen, "%s", n);
}

/* The gate's report (budget/report.h): the budgets with their totals, the counts per
 * (budget, area, context), the kept violations of each budget (oldest first) and each
 * budget's worst. */
static void gate_report(rp_t *rp, tlc_out_t *o) {
  tlc_breport_opts_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.json = rp->export_ == EX_JSON;
  ro.target = rp->json_target;
  ro.budgets_file = rp->budgets_path;
  ro.names = gate_names;
  ro.ud = rp;
  if (tlc_breport_write(rp->watch, o, &ro) != 0)
    fprintf(stderr, "tlcapd replay: %s\n", tlc_strerror(TLC_ENOMEM));
}

/* Pass 1 with the watch as the engine's tap, then the report. 0 (none), 3 (violations) or 1. */
int tlc__rp_budget_gate(rp_t *rp, tlc_hist_stream_t *s, tlc_out_t *o) {
  const tlc_event_t *evs;
  if (rp->export_ != EX_TEXT1 && rp->export_ != EX_JSON) {
    fprintf(stderr, "tlcapd replay: --budgets prints its report as text1 or json\n");
    return 2;
  }
  struct gate_loc *g = NULL;
  int n;
  rp->stream = s;
  /* stored segments of bin10/bin11 (24-byte records): their violations located */
  if (rp->state_dir != NULL &&
      (s->conf.format == TLC_FMT_BIN10 || s->conf.format == TLC_FMT_BIN11) &&
      (g = tlc_calloc(1, sizeof(*g))) != NULL && s->pipe.engine != NULL)
    g->seq = tlc_engine_seq(s->pipe.engine);
  rp->gloc = g;
  while ((n = tlc_hist_stream_next(s, &evs)) > 0)
    gl_batch(rp, s, evs, n);
  gate_report(rp, o);
  rp->gloc = NULL;
  tlc_free(g);
  rp->stream = NULL;
  return tlc_bwatch_all(rp->watch) > 0 ? 3 : 0;
}
