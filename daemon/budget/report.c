/* report.c - a watch's violations as a document (report.h). */
#include "budget/report.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/json.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

typedef struct rep {
  const tlc_bwatch_t *w;
  const tlc_breport_opts_t *ro;
  tlc_out_t *o;
  tlc_json_w_t *jw; /* NULL: text */
  long only;        /* the one budget written, or -1: every one */
} rep_t;

const char *tlc_breport_ref(const char *name, const tlc_violation_t *v, char *buf, size_t len) {
  snprintf(buf, len, "v:%s:%" PRIu64, name, v->count);
  return buf;
}

static void names(const rep_t *g, uint32_t handle, uint8_t row_kind, uint64_t state,
                  uint32_t context, char *area, size_t alen, char *ctx, size_t clen) {
  snprintf(area, alen, "%08X", handle);
  snprintf(ctx, clen, "-");
  if (g->ro->names != NULL)
    g->ro->names(g->ro->ud, handle, row_kind, state, context, area, alen, ctx, clen);
}

static void limit_text(char *buf, size_t len, const tlc_tbudget_t *b, int has, int64_t v) {
  if (!has)
    snprintf(buf, len, "-");
  else
    snprintf(buf, len, "%" PRId64 "%s", v, b->stat == TLC_BSTAT_RATE ? "" : "ns");
}

static void count_cb(void *ud, const tlc_bcount_t *c) {
  rep_t *g = ud;
  char area[300], ctx[128];
  const tlc_tbudget_t *b;
  if (g->only >= 0 && c->budget != (uint32_t)g->only)
    return;
  b = tlc_bwatch_budget(g->w, c->budget);
  names(g, c->handle, c->row_kind, c->state, c->context, area, sizeof(area), ctx, sizeof(ctx));
  if (g->jw != NULL) {
    tlc_json_w_open(g->jw, NULL, '{');
    tlc_json_w_str(g->jw, "budget", b->name);
    tlc_json_w_hex8(g->jw, "handle", c->handle);
    tlc_json_w_str(g->jw, "area", area);
    tlc_json_w_str(g->jw, "context", c->context == TLC_CTX_NONE ? NULL : ctx);
    tlc_json_w_u64(g->jw, "violations", c->count);
    tlc_json_w_close(g->jw, '}');
  } else {
    tlc_out_printf(g->o, "%s\t%s\t%s\t%" PRIu64 "\n", b->name, area, ctx, c->count);
  }
}

static void violation(const rep_t *g, const tlc_violation_t *v, const char *key) {
  char area[300], ctx[128], ref[300];
  const tlc_tbudget_t *b = tlc_bwatch_budget(g->w, v->budget);
  names(g, v->handle, v->row_kind, v->state, v->context, area, sizeof(area), ctx, sizeof(ctx));
  if (g->jw != NULL) {
    tlc_json_w_open(g->jw, key, '{');
    tlc_json_w_str(g->jw, "budget", b->name);
    tlc_json_w_str(g->jw, "stat", tlc_tbudget_stat_name(v->stat));
    tlc_json_w_hex8(g->jw, "handle", v->handle);
    tlc_json_w_str(g->jw, "area", area);
    tlc_json_w_str(g->jw, "context", v->context == TLC_CTX_NONE ? NULL : ctx);
    tlc_json_w_str(g->jw, "limit_kind", v->over ? "max" : "min");
    tlc_json_w_i64(g->jw, "value", v->value);
    tlc_json_w_i64(g->jw, "limit", v->limit);
    tlc_json_w_i64(g->jw, "start_ns", v->start);
    tlc_json_w_i64(g->jw, "end_ns", v->end);
    tlc_json_w_u64(g->jw, "epoch", v->epoch);
    tlc_json_w_u64(g->jw, "seq_start", v->seq_start);
    tlc_json_w_u64(g->jw, "seq_end", v->seq_end);
    tlc_json_w_u64(g->jw, "number", v->count);
    if (v->seg_first != 0 || v->seg_last != 0) { /* stored (budgetd.c): where its records are */
      tlc_json_w_u64(g->jw, "seg_first", v->seg_first);
      tlc_json_w_u64(g->jw, "off_first", v->off_first);
      tlc_json_w_u64(g->jw, "seg_last", v->seg_last);
      tlc_json_w_u64(g->jw, "off_last", v->off_last);
    }
    if (v->wall_ms != 0)
      tlc_json_w_i64(g->jw, "wall_ms", v->wall_ms);
    tlc_json_w_str(g->jw, "ref", tlc_breport_ref(b->name, v, ref, sizeof(ref)));
    tlc_json_w_close(g->jw, '}');
  } else {
    tlc_out_printf(g->o,
                   "%s\t%s\t%s\t%s\t%s\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t%" PRId64
                   "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\n",
                   b->name, area, ctx, tlc_tbudget_stat_name(v->stat), v->over ? "max" : "min",
                   v->value, v->limit, v->start, v->end, v->epoch, v->seq_start, v->seq_end);
  }
}

/* Every budget's, or the one asked for's. */
static uint64_t all_of(const rep_t *g) {
  if (g->w == NULL)
    return 0;
  return g->only >= 0 ? tlc_bwatch_total(g->w, (size_t)g->only) : tlc_bwatch_all(g->w);
}

int tlc_breport_write(const tlc_bwatch_t *w, tlc_out_t *o, const tlc_breport_opts_t *ro) {
  size_t i, j, nb = w != NULL ? tlc_bwatch_nbudgets(w) : 0;
  size_t keep = ro->keep ? ro->keep : w != NULL ? tlc_bwatch_keep(w) : 0;
  tlc_violation_t *kept = nb > 0 && keep > 0 ? tlc_malloc(keep * sizeof(*kept)) : NULL;
  tlc_json_w_t jw;
  rep_t g = { w, ro, o, ro->json ? &jw : NULL, -1 };
  size_t shown = nb;
  if (nb > 0 && keep > 0 && kept == NULL)
    return TLC_ENOMEM;
  if (ro->budget != NULL) {
    g.only = -2; /* an unknown name: no budget */
    shown = 0;
    for (i = 0; i < nb; i++)
      if (strcmp(tlc_bwatch_budget(w, i)->name, ro->budget) == 0) {
        g.only = (long)i;
        shown = 1;
      }
  }
#define SHOWN(i) (g.only == -1 || (long)(i) == g.only)
  if (g.jw != NULL) {
    tlc_json_w_init(&jw, o, 0);
    tlc_json_w_open(&jw, NULL, '{');
    tlc_json_w_str(&jw, "target", ro->target);
    if (ro->budgets_file != NULL)
      tlc_json_w_str(&jw, "budgets_file", ro->budgets_file);
    tlc_json_w_u64(&jw, "violations", g.only == -2 ? 0 : all_of(&g));
    tlc_json_w_open(&jw, "budgets", '[');
  } else {
    tlc_out_printf(o, "BUDGETS\t%s\t%s\t%zu budgets\t%" PRIu64 " violations\n",
                   ro->budgets_file != NULL ? ro->budgets_file : "-",
                   ro->target != NULL ? ro->target : "-", shown, g.only == -2 ? 0 : all_of(&g));
    tlc_out_printf(o, "NAME\tSTAT\tAREA\tCONTEXT\tMIN\tMAX\tWINDOW\tVIOLATIONS\n");
  }
  for (i = 0; i < nb; i++) {
    const tlc_tbudget_t *b = tlc_bwatch_budget(w, i);
    char mn[32], mx[32], win[32];
    if (!SHOWN(i))
      continue;
    limit_text(mn, sizeof(mn), b, b->has_min, b->min);
    limit_text(mx, sizeof(mx), b, b->has_max, b->max);
    snprintf(win, sizeof(win), b->window_ns > 0 ? "%" PRId64 "ns" : "-", b->window_ns);
    if (g.jw != NULL) {
      tlc_json_w_open(&jw, NULL, '{');
      tlc_json_w_str(&jw, "name", b->name);
      tlc_json_w_str(&jw, "origin", b->origin);
      tlc_json_w_str(&jw, "stat", tlc_tbudget_stat_name(b->stat));
      tlc_json_w_str(&jw, "area", b->area);
      tlc_json_w_str(&jw, "context", b->context[0] ? b->context : "any");
      if (b->has_min)
        tlc_json_w_i64(&jw, "min", b->min);
      if (b->has_max)
        tlc_json_w_i64(&jw, "max", b->max);
      if (b->window_ns > 0)
        tlc_json_w_i64(&jw, "window_ns", b->window_ns);
      tlc_json_w_u64(&jw, "violations", tlc_bwatch_total(w, i));
      if (tlc_bwatch_worst(w, i) != NULL)
        violation(&g, tlc_bwatch_worst(w, i), "worst");
      tlc_json_w_close(&jw, '}');
    } else {
      tlc_out_printf(o, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%" PRIu64 "\n", b->name,
                     tlc_tbudget_stat_name(b->stat), b->area, b->context[0] ? b->context : "any",
                     mn, mx, win, tlc_bwatch_total(w, i));
    }
  }
  if (g.jw != NULL) {
    tlc_json_w_close(&jw, ']');
    tlc_json_w_open(&jw, "counts", '[');
  } else {
    tlc_out_printf(o, "\nCOUNTS\nBUDGET\tAREA\tCONTEXT\tVIOLATIONS\n");
  }
  if (w != NULL && g.only != -2)
    tlc_bwatch_counts(w, count_cb, &g);
  if (g.jw != NULL)
    tlc_json_w_close(&jw, ']');
  for (j = 0; j < 2; j++) {
    if (g.jw != NULL)
      tlc_json_w_open(&jw, j == 0 ? "violations_kept" : "worst", '[');
    else
      tlc_out_printf(o,
                     "\n%s\nBUDGET\tAREA\tCONTEXT\tSTAT\tLIMIT_KIND\tVALUE\tLIMIT\tSTART_NS\t"
                     "END_NS\tEPOCH\tSEQ_START\tSEQ_END\n",
                     j == 0 ? "VIOLATIONS" : "WORST");
    for (i = 0; i < nb; i++) {
      if (!SHOWN(i))
        continue;
      if (j == 1) {
        if (tlc_bwatch_worst(w, i) != NULL)
          violation(&g, tlc_bwatch_worst(w, i), NULL);
      } else if (kept != NULL) {
        size_t k, n = tlc_bwatch_recent(w, i, kept, keep);
        for (k = 0; k < n; k++)
          violation(&g, &kept[k], NULL);
      }
    }
    if (g.jw != NULL)
      tlc_json_w_close(&jw, ']');
  }
#undef SHOWN
  if (g.jw != NULL) {
    tlc_json_w_close(&jw, '}');
    tlc_out_printf(o, "\n");
  }
  tlc_free(kept);
  return 0;
}
