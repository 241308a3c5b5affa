/* report.c - trend and diff figures and documents (report.h). */
#include "rollup/report.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const kind_names[TLC_NKINDS] = { "net", "gross", "call", "period", "outside" };

int tlc_rollup_kind_parse(const char *s) {
  for (int k = 0; k < TLC_NKINDS; k++)
    if (strcmp(s, kind_names[k]) == 0)
      return k;
  return -1;
}

const char *tlc_rollup_kind_name(unsigned k) {
  return k < TLC_NKINDS ? kind_names[k] : "?";
}

/* ---- names ---- */

int tlc_rollup_names_add(tlc_rollup_names_t *nm, uint32_t handle, const char *name) {
  char *c;
  if (name == NULL || name[0] == '\0')
    return 0;
  if (nm->n == nm->cap) {
    size_t nc = nm->cap ? nm->cap * 2 : 16;
    tlc_rollup_name_t *nv = tlc_realloc(nm->v, nc * sizeof(*nv));
    if (nv == NULL)
      return TLC_ENOMEM;
    nm->v = nv;
    nm->cap = nc;
  }
  if ((c = tlc_strndup(name, strlen(name))) == NULL)
    return TLC_ENOMEM;
  nm->v[nm->n].handle = handle;
  nm->v[nm->n].name = c;
  nm->n++;
  return 0;
}

static int name_cmp(const void *pa, const void *pb) {
  const tlc_rollup_name_t *a = pa, *b = pb;
  if (a->handle != b->handle)
    return a->handle < b->handle ? -1 : 1;
  return a < b ? -1 : a > b; /* stable: the first added first */
}

void tlc_rollup_names_sort(tlc_rollup_names_t *nm) {
  size_t k = 0;
  if (nm->n > 1)
    qsort(nm->v, nm->n, sizeof(*nm->v), name_cmp);
  for (size_t i = 0; i < nm->n; i++) {
    if (k > 0 && nm->v[k - 1].handle == nm->v[i].handle) {
      tlc_free(nm->v[i].name);
      continue;
    }
    nm->v[k++] = nm->v[i];
  }
  nm->n = k;
}

const char *tlc_rollup_names_area(const tlc_rollup_names_t *nm, uint32_t handle) {
  size_t a = 0, z = nm != NULL ? nm->n : 0;
  while (a < z) {
    size_t m = a + (z - a) / 2;
    if (nm->v[m].handle == handle)
      return nm->v[m].name;
    if (nm->v[m].handle < handle)
      a = m + 1;
    else
      z = m;
  }
  return NULL;
}

void tlc_rollup_names_fini(tlc_rollup_names_t *nm) {
  if (nm == NULL)
    return;
  for (size_t i = 0; i < nm->n; i++)
    tlc_free(nm->v[i].name);
  tlc_free(nm->v);
  tlc_free(nm->context_name);
  memset(nm, 0, sizeof(*nm));
}

/* ---- figures ---- */

int tlc_rollup_area_cell(const tlc_rollup_blk_t *blk, uint32_t handle, uint8_t kind,
                         int has_context, uint32_t context, tlc_rollup_cell_t *out) {
  tlc_rollup_key_t k0 = { handle, 0, 0, 0, 0 };
  size_t a = 0, z = blk != NULL ? blk->n : 0;
  memset(out, 0, sizeof(*out));
  out->key.handle = handle;
  out->key.kind = kind;
  /* first cell of the handle */
  while (a < z) {
    size_t m = a + (z - a) / 2;
    if (tlc_rollup_key_cmp(&blk->cells[m].key, &k0) < 0)
      a = m + 1;
    else
      z = m;
  }
  for (; blk != NULL && a < blk->n && blk->cells[a].key.handle == handle; a++) {
    const tlc_rollup_cell_t *c = &blk->cells[a];
    if (has_context && c->key.context != context)
      continue;
    if (c->key.kind != kind) { /* the area's violations, whatever statistic they broke */
      out->violations += c->violations;
      continue;
    }
    out->key.row_kind = c->key.row_kind;
    if (tlc_rollup_cell_merge(out, c) != 0)
      return TLC_ENOMEM;
  }
  return 0;
}

void tlc_rollup_fig(const tlc_rollup_cell_t *c, tlc_rollup_fig_t *f) {
  memset(f, 0, sizeof(*f));
  f->n = c->d.n;
  if (c->d.n == 0)
    return;
  f->mean = (double)c->d.sum / (double)c->d.n;
  f->sigma = tlc_dist_stddev(&c->d);
  f->min = c->d.min;
  f->max = c->d.max;
  f->p50 = tlc_rollup_quantile(c, 500);
  f->p99 = tlc_rollup_quantile(c, 990);
}

/* Sorted handles of the cells of kind in blk, appended to *v. */
static int handles(const tlc_rollup_blk_t *blk, uint8_t kind, uint32_t **v, size_t *n,
                   size_t *cap) {
  for (size_t i = 0; blk != NULL && i < blk->n; i++) {
    uint32_t h = blk->cells[i].key.handle;
    if (blk->cells[i].key.kind != kind || (*n > 0 && (*v)[*n - 1] == h))
      continue;
    if (*n == *cap) {
      size_t nc = *cap ? *cap * 2 : 64;
      uint32_t *nv = tlc_realloc(*v, nc * sizeof(*nv));
      if (nv == NULL)
        return TLC_ENOMEM;
      *v = nv;
      *cap = nc;
    }
    (*v)[(*n)++] = h;
  }
  return 0;
}

static int u32_cmp(const void *pa, const void *pb) {
  uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
  return a < b ? -1 : a > b;
}

static int row_cmp(const void *pa, const void *pb) {
  const tlc_rollup_diffrow_t *a = pa, *b = pb;
  double ta = fabs(a->t), tb = fabs(b->t);
  if (a->one_sided != b->one_sided)
    return b->one_sided - a->one_sided;
  if (ta != tb)
    return ta > tb ? -1 : 1;
  return a->handle < b->handle ? -1 : a->handle > b->handle;
}

int tlc_rollup_diff(const tlc_rollup_blk_t *a, const tlc_rollup_blk_t *b, uint8_t kind,
                    int has_context, uint32_t context, tlc_rollup_diffrow_t **rows, size_t *n) {
  uint32_t *hv = NULL;
  size_t nh = 0, caph = 0, k = 0;
  tlc_rollup_diffrow_t *out;
  *rows = NULL;
  *n = 0;
  if (handles(a, kind, &hv, &nh, &caph) != 0 || handles(b, kind, &hv, &nh, &caph) != 0) {
    tlc_free(hv);
    return TLC_ENOMEM;
  }
  if (nh > 1)
    qsort(hv, nh, sizeof(*hv), u32_cmp);
  out = tlc_calloc(nh ? nh : 1, sizeof(*out));
  if (out == NULL) {
    tlc_free(hv);
    return TLC_ENOMEM;
  }
  for (size_t i = 0; i < nh; i++) {
    tlc_rollup_cell_t ca, cb;
    tlc_rollup_diffrow_t *r;
    int rc;
    if (i > 0 && hv[i] == hv[i - 1])
      continue;
    rc = tlc_rollup_area_cell(a, hv[i], kind, has_context, context, &ca);
    if (rc == 0)
      rc = tlc_rollup_area_cell(b, hv[i], kind, has_context, context, &cb);
    else
      memset(&cb, 0, sizeof cb);
    if (rc != 0) {
      tlc_free(ca.bins);
      tlc_free(cb.bins);
      tlc_free(out);
      tlc_free(hv);
      return rc;
    }
    if (ca.d.n == 0 && cb.d.n == 0) {
      tlc_free(ca.bins);
      tlc_free(cb.bins);
      continue;
    }
    r = &out[k++];
    r->handle = hv[i];
    tlc_rollup_fig(&ca, &r->a);
    tlc_rollup_fig(&cb, &r->b);
    r->one_sided = ca.d.n == 0 || cb.d.n == 0;
    r->t = r->one_sided ? 0.0 : tlc_rollup_welch(&ca.d, &cb.d);
    r->factor = r->a.n > 0 && r->b.n > 0 && r->a.mean != 0 ? r->b.mean / r->a.mean : 0;
    r->p99_factor =
        r->a.n > 0 && r->b.n > 0 && r->a.p99 != 0 ? (double)r->b.p99 / (double)r->a.p99 : 0;
    r->significant = r->one_sided || fabs(r->t) >= TLC_DIFF_T;
    if (!r->one_sided) {
      double hi = (double)(r->a.p99 > r->b.p99 ? r->a.p99 : r->b.p99);
      r->p99_beyond_error = fabs((double)r->b.p99 - (double)r->a.p99) > 0.02 * hi;
    }
    tlc_free(ca.bins);
    tlc_free(cb.bins);
  }
  tlc_free(hv);
  if (k > 1)
    qsort(out, k, sizeof(*out), row_cmp);
  *rows = out;
  *n = k;
  return 0;
}

/* A double as JSON (null when not finite), 6 significant digits at least. */
static void w_num(tlc_json_w_t *w, const char *k, double v) {
  char b[64];
  if (!isfinite(v))
    snprintf(b, sizeof b, "null");
  else
    snprintf(b, sizeof b, "%.9g", v);
  tlc_json_w_raw(w, k, b);
}

static void w_fig(tlc_json_w_t *w, const char *k, const tlc_rollup_fig_t *f) {
  tlc_json_w_open(w, k, '{');
  tlc_json_w_u64(w, "count", f->n);
  if (f->n > 0) {
    w_num(w, "mean", f->mean);
    w_num(w, "sigma", f->sigma);
    tlc_json_w_i64(w, "min", f->min);
    tlc_json_w_i64(w, "p50", f->p50);
    tlc_json_w_i64(w, "p99", f->p99);
    tlc_json_w_i64(w, "max", f->max);
  }
  tlc_json_w_close(w, '}');
}

static void w_range(tlc_json_w_t *w, const char *k, const tlc_rollup_q_t *q,
                    const tlc_rollup_res_t *r) {
  tlc_json_w_open(w, k, '{');
  tlc_json_w_str(w, "target", q->target);
  tlc_json_w_str(w, "clock", q->when == TLC_RQ_WALL ? "wall" : "target");
  if (q->when == TLC_RQ_TARGET)
    tlc_json_w_u64(w, "epoch", r->epoch);
  if (q->has_since)
    tlc_json_w_i64(w, "since", q->since);
  if (q->has_until)
    tlc_json_w_i64(w, "until", q->until);
  tlc_json_w_close(w, '}');
}

/* "area_name" and "context_name" when there are names. */
static void w_names(tlc_json_w_t *w, const tlc_rollup_names_t *names, uint32_t handle,
                    int context) {
  const char *n = tlc_rollup_names_area(names, handle);
  if (n != NULL)
    tlc_json_w_str(w, "area_name", n);
  if (context && names != NULL && names->context_name != NULL)
    tlc_json_w_str(w, "context_name", names->context_name);
}

int tlc_rollup_trend_json(tlc_out_t *o, const tlc_rollup_q_t *q, const tlc_rollup_res_t *res,
                          uint8_t kind, const tlc_rollup_names_t *names) {
  tlc_json_w_t w;
  int rc = 0;
  tlc_json_w_init(&w, o, 1);
  tlc_json_w_open(&w, NULL, '{');
  tlc_json_w_str(&w, "target", q->target);
  tlc_json_w_u64(&w, "area", q->handle);
  if (q->has_context)
    tlc_json_w_u64(&w, "context", q->context);
  w_names(&w, names, q->handle, q->has_context);
  tlc_json_w_str(&w, "kind", tlc_rollup_kind_name(kind));
  w_range(&w, "range", q, res);
  tlc_json_w_i64(&w, "step_min", q->step_min);
  tlc_json_w_open(&w, "steps", '[');
  for (size_t i = 0; i < res->nsteps && rc == 0; i++) {
    tlc_rollup_cell_t c;
    tlc_rollup_fig_t f;
    rc = tlc_rollup_area_cell(&res->steps[i], q->handle, kind, q->has_context, q->context, &c);
    if (rc == 0 && (c.d.n > 0 || c.violations > 0)) {
      tlc_rollup_fig(&c, &f);
      tlc_json_w_open(&w, NULL, '{');
      tlc_json_w_i64(&w, "start", res->steps[i].minute * TLC_ROLLUP_MINUTE_NS);
      tlc_json_w_u64(&w, "count", f.n);
      if (f.n > 0) {
        w_num(&w, "mean", f.mean);
        w_num(&w, "sigma", f.sigma);
        tlc_json_w_i64(&w, "min", f.min);
        tlc_json_w_i64(&w, "p50", f.p50);
        tlc_json_w_i64(&w, "p99", f.p99);
        tlc_json_w_i64(&w, "max", f.max);
        tlc_json_w_i64(&w, "max_time", c.tmax);
      }
      if (c.violations > 0)
        tlc_json_w_u64(&w, "violations", c.violations);
      tlc_json_w_close(&w, '}');
    }
    tlc_free(c.bins);
  }
  tlc_json_w_close(&w, ']');
  tlc_json_w_close(&w, '}');
  tlc_out_putc(o, '\n');
  return rc;
}

int tlc_rollup_diff_json(tlc_out_t *o, const tlc_rollup_q_t *qa, const tlc_rollup_res_t *ra,
                         const tlc_rollup_q_t *qb, const tlc_rollup_res_t *rb, uint8_t kind,
                         const tlc_rollup_names_t *names) {
  tlc_json_w_t w;
  tlc_rollup_diffrow_t *rows;
  size_t n;
  int rc =
      tlc_rollup_diff(ra->nsteps > 0 ? &ra->steps[0] : NULL, rb->nsteps > 0 ? &rb->steps[0] : NULL,
                      kind, qa->has_context, qa->context, &rows, &n);
  if (rc != 0)
    return rc;
  tlc_json_w_init(&w, o, 1);
  tlc_json_w_open(&w, NULL, '{');
  tlc_json_w_str(&w, "kind", tlc_rollup_kind_name(kind));
  if (qa->has_context)
    tlc_json_w_u64(&w, "context", qa->context);
  if (qa->has_context && names != NULL && names->context_name != NULL)
    tlc_json_w_str(&w, "context_name", names->context_name);
  w_range(&w, "a", qa, ra);
  w_range(&w, "b", qb, rb);
  w_num(&w, "t_threshold", TLC_DIFF_T);
  tlc_json_w_open(&w, "areas", '[');
  for (size_t i = 0; i < n; i++) {
    const tlc_rollup_diffrow_t *r = &rows[i];
    tlc_json_w_open(&w, NULL, '{');
    tlc_json_w_u64(&w, "area", r->handle);
    w_names(&w, names, r->handle, 0);
    w_fig(&w, "a", &r->a);
    w_fig(&w, "b", &r->b);
    if (r->one_sided) {
      tlc_json_w_str(&w, "only_in", r->a.n > 0 ? "a" : "b");
    } else {
      w_num(&w, "factor", r->factor);
      w_num(&w, "t", isinf(r->t) ? (r->t > 0 ? 1e300 : -1e300) : r->t);
      w_num(&w, "p99_factor", r->p99_factor);
      tlc_json_w_bool(&w, "p99_beyond_error", r->p99_beyond_error);
    }
    tlc_json_w_bool(&w, "significant", r->significant);
    tlc_json_w_close(&w, '}');
  }
  tlc_json_w_close(&w, ']');
  tlc_json_w_close(&w, '}');
  tlc_out_putc(o, '\n');
  tlc_free(rows);
  return 0;
}

/* A step's start for people: UTC for wall-clock ranges, target ns otherwise. */
static void fmt_start(char *b, size_t n, const tlc_rollup_q_t *q, int64_t minute) {
  if (q->when == TLC_RQ_WALL) {
    time_t sec = (time_t)(minute * 60);
    struct tm tm;
    if (gmtime_r(&sec, &tm) != NULL) {
      strftime(b, n, "%Y-%m-%dT%H:%MZ", &tm);
      return;
    }
  }
  snprintf(b, n, "ns:%lld", (long long)(minute * TLC_ROLLUP_MINUTE_NS));
}

/* ", context N (NAME)" for a table's title. */
static void ctx_label(char *b, size_t n, const tlc_rollup_q_t *q, const tlc_rollup_names_t *nm) {
  const char *cn = nm != NULL ? nm->context_name : NULL;
  snprintf(b, n, ", context %u%s%s%s", (unsigned)q->context, cn != NULL ? " (" : "",
           cn != NULL ? cn : "", cn != NULL ? ")" : "");
}

int tlc_rollup_trend_text(tlc_out_t *o, const tlc_rollup_q_t *q, const tlc_rollup_res_t *res,
                          uint8_t kind, const tlc_rollup_names_t *names) {
  int rc = 0, viol = 0;
  const char *an = tlc_rollup_names_area(names, q->handle);
  char ctx[300] = "";
  if (q->has_context)
    ctx_label(ctx, sizeof ctx, q, names);
  tlc_out_printf(o, "%s area 0x%08X%s%s%s %s%s, step %lld min%s\n", q->target, (unsigned)q->handle,
                 an != NULL ? " (" : "", an != NULL ? an : "", an != NULL ? ")" : "",
                 tlc_rollup_kind_name(kind), ctx, (long long)q->step_min,
                 q->when == TLC_RQ_TARGET ? "" : " (wall clock, UTC)");
  /* a VIOLATIONS column when a budget was broken in the range */
  for (size_t i = 0; i < res->nsteps && rc == 0 && !viol; i++) {
    tlc_rollup_cell_t c;
    rc = tlc_rollup_area_cell(&res->steps[i], q->handle, kind, q->has_context, q->context, &c);
    viol = c.violations > 0;
    tlc_free(c.bins);
  }
  tlc_out_printf(o, "%-24s %12s %14s %14s %14s %14s%s\n", "START", "COUNT", "MEAN_NS", "SIGMA_NS",
                 "P99_NS", "MAX_NS", viol ? "   VIOLATIONS" : "");
  for (size_t i = 0; i < res->nsteps && rc == 0; i++) {
    tlc_rollup_cell_t c;
    tlc_rollup_fig_t f;
    char st[48], vs[32] = "";
    rc = tlc_rollup_area_cell(&res->steps[i], q->handle, kind, q->has_context, q->context, &c);
    if (rc == 0 && (c.d.n > 0 || c.violations > 0)) {
      tlc_rollup_fig(&c, &f);
      fmt_start(st, sizeof st, q, res->steps[i].minute);
      if (viol)
        snprintf(vs, sizeof vs, " %12llu", (unsigned long long)c.violations);
      tlc_out_printf(o, "%-24s %12llu %14.1f %14.1f %14lld %14lld%s\n", st, (unsigned long long)f.n,
                     f.mean, f.sigma, (long long)f.p99, (long long)f.max, vs);
    }
    tlc_free(c.bins);
  }
  if (res->nsteps == 0)
    tlc_out_puts(o, "(no samples in the range)\n");
  return rc;
}

int tlc_rollup_diff_text(tlc_out_t *o, const tlc_rollup_q_t *qa, const tlc_rollup_res_t *ra,
                         const tlc_rollup_q_t *qb, const tlc_rollup_res_t *rb, uint8_t kind,
                         const tlc_rollup_names_t *names) {
  tlc_rollup_diffrow_t *rows;
  size_t n;
  char ctx[300] = "";
  int rc =
      tlc_rollup_diff(ra->nsteps > 0 ? &ra->steps[0] : NULL, rb->nsteps > 0 ? &rb->steps[0] : NULL,
                      kind, qa->has_context, qa->context, &rows, &n);
  if (rc != 0)
    return rc;
  if (qa->has_context)
    ctx_label(ctx, sizeof ctx, qa, names);
  tlc_out_printf(o, "a: %s, b: %s; %s%s; sorted by significance (|t| >= %.0f or one-sided)\n",
                 qa->target, qb->target, tlc_rollup_kind_name(kind), ctx, TLC_DIFF_T);
  tlc_out_printf(o, "%-10s %9s %9s %12s %12s %8s %9s %12s %12s %8s %-11s %-9s %s\n", "AREA",
                 "A_COUNT", "B_COUNT", "A_MEAN", "B_MEAN", "FACTOR", "T", "A_P99", "B_P99", "P99_X",
                 "SIGNIFICANT", "P99_MOVED", "NAME");
  for (size_t i = 0; i < n; i++) {
    const tlc_rollup_diffrow_t *r = &rows[i];
    char t[32];
    if (r->one_sided)
      snprintf(t, sizeof t, "only %s", r->a.n > 0 ? "a" : "b");
    else
      snprintf(t, sizeof t, "%.2f", r->t);
    const char *an = tlc_rollup_names_area(names, r->handle);
    tlc_out_printf(
        o, "0x%08X %9llu %9llu %12.1f %12.1f %8.3f %9s %12lld %12lld %8.3f %-11s %-9s %s\n",
        (unsigned)r->handle, (unsigned long long)r->a.n, (unsigned long long)r->b.n, r->a.mean,
        r->b.mean, r->factor, t, (long long)r->a.p99, (long long)r->b.p99, r->p99_factor,
        r->significant ? "yes" : "no", r->p99_beyond_error ? "yes" : "no", an != NULL ? an : "-");
  }
  if (n == 0)
    tlc_out_puts(o, "(no samples in either range)\n");
  tlc_free(rows);
  return 0;
}
