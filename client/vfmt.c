/* vfmt.c - a ViolationsReply as a table and as JSON (vfmt.h), for `tlcap violations`.
 *
 * The table has a row per (budget, area, context) the daemon counted: its count is exact (the
 * daemon's), its worst and last come from the violations the reply carries (the budget's worst
 * and its kept ones), matched to the row by handle, context name and state. A row whose
 * violations are all older than the kept ones shows its count with "-" for them. Cost:
 * O(rows x kept) per budget, at most 100,000 x 10,000 in theory, a few thousand in practice.
 */
#include "client/vfmt.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

char *tlc_cli_vfmt_dur(int64_t ns, char *buf, size_t len) {
  static const struct {
    int64_t div;
    const char *unit;
  } u[] = { { 1000000000, "s" }, { 1000000, "ms" }, { 1000, "us" } };
  int64_t a = ns < 0 ? -ns : ns;
  size_t i, l;
  for (i = 0; i < sizeof(u) / sizeof(u[0]); i++)
    if (a >= u[i].div)
      break;
  if (i == sizeof(u) / sizeof(u[0])) {
    snprintf(buf, len, "%" PRId64 "ns", ns);
    return buf;
  }
  /* three decimals, then the zeros at the end dropped */
  snprintf(buf, len, "%s%" PRId64 ".%03" PRId64, ns < 0 ? "-" : "", a / u[i].div,
           (a % u[i].div) / (u[i].div / 1000));
  l = strlen(buf);
  while (l > 0 && buf[l - 1] == '0')
    buf[--l] = 0;
  if (l > 0 && buf[l - 1] == '.')
    buf[--l] = 0;
  snprintf(buf + l, len > l ? len - l : 0, "%s", u[i].unit);
  return buf;
}

static int is_rate(const char *stat) {
  return stat != NULL && strcmp(stat, "rate") == 0;
}

static char *value_str(const char *stat, int64_t v, char *buf, size_t len) {
  if (is_rate(stat)) {
    snprintf(buf, len, "%" PRId64, v);
    return buf;
  }
  return tlc_cli_vfmt_dur(v, buf, len);
}

static char *when_str(const Tlcap__Violation *v, char *buf, size_t len) {
  if (v->wall_ms > 0) {
    time_t sec = (time_t)(v->wall_ms / 1000);
    struct tm tm;
    char d[40];
    if (gmtime_r(&sec, &tm) != NULL) {
      strftime(d, sizeof(d), "%Y-%m-%dT%H:%M:%S", &tm);
      snprintf(buf, len, "%s.%03dZ", d, (int)(v->wall_ms % 1000));
      return buf;
    }
  }
  snprintf(buf, len, "ns:%" PRId64, v->start_ns);
  return buf;
}

static char *limit_str(const Tlcap__BudgetViolations *b, char *buf, size_t len) {
  char x[32], n[32];
  if (b->has_max && b->has_min)
    snprintf(buf, len, "%s..%s", value_str(b->stat, b->min, n, sizeof(n)),
             value_str(b->stat, b->max, x, sizeof(x)));
  else if (b->has_max)
    snprintf(buf, len, "<=%s", value_str(b->stat, b->max, x, sizeof(x)));
  else
    snprintf(buf, len, ">=%s", value_str(b->stat, b->min, n, sizeof(n)));
  if (is_rate(b->stat)) {
    size_t l = strlen(buf);
    snprintf(buf + l, len - l, "/%s", tlc_cli_vfmt_dur(b->window_ns, x, sizeof(x)));
  }
  return buf;
}

static int same_row(const Tlcap__Violation *v, const Tlcap__ViolationCount *c) {
  return v->handle == c->handle && v->state == c->state &&
         strcmp(v->context != NULL ? v->context : "", c->context != NULL ? c->context : "") == 0;
}

/* How far v is from its limit (what "worst" means: the daemon's measure). */
static int64_t distance(const Tlcap__Violation *v) {
  return v->over ? v->value - v->limit : v->limit - v->value;
}

static void row(tlc_out_t *o, const Tlcap__BudgetViolations *b, const char *area,
                const char *context, uint64_t total, const Tlcap__Violation *worst,
                const Tlcap__Violation *last) {
  char lim[80], wv[32], wa[48], lv[32], la[48], ref[96];
  limit_str(b, lim, sizeof(lim));
  if (worst != NULL) {
    value_str(b->stat, worst->value, wv, sizeof(wv));
    when_str(worst, wa, sizeof(wa));
    snprintf(ref, sizeof(ref), "v:%s:%" PRIu64, b->name, worst->number);
  } else {
    snprintf(wv, sizeof(wv), "-");
    snprintf(wa, sizeof(wa), "-");
    snprintf(ref, sizeof(ref), "-");
  }
  if (last != NULL) {
    value_str(b->stat, last->value, lv, sizeof(lv));
    when_str(last, la, sizeof(la));
  } else {
    snprintf(lv, sizeof(lv), "-");
    snprintf(la, sizeof(la), "-");
  }
  tlc_out_printf(o, "%-16s %-24s %-10s %-7s %-16s %8" PRIu64 " %10s %-24s %10s %-24s %s\n", b->name,
                 area, context[0] != 0 ? context : "-", b->stat, lim, total, wv, wa, lv, la, ref);
}

void tlc_cli_vfmt_table(tlc_out_t *o, const Tlcap__ViolationsReply *r) {
  size_t i, k, j;
  tlc_out_printf(o, "%-16s %-24s %-10s %-7s %-16s %8s %10s %-24s %10s %-24s %s\n", "BUDGET", "AREA",
                 "CONTEXT", "STAT", "LIMIT", "TOTAL", "WORST", "WORST_AT", "LAST", "LAST_AT",
                 "REF");
  for (i = 0; i < r->n_budgets; i++) {
    const Tlcap__BudgetViolations *b = r->budgets[i];
    if (b->n_counts == 0) {
      /* no per-row count: the budget's own line (none yet, or all past max_keys) */
      row(o, b, b->area, b->context != NULL && b->context[0] != 0 ? b->context : "any", b->total,
          b->worst, b->n_recent > 0 ? b->recent[b->n_recent - 1] : NULL);
      continue;
    }
    for (k = 0; k < b->n_counts; k++) {
      const Tlcap__ViolationCount *c = b->counts[k];
      const Tlcap__Violation *worst = NULL, *last = NULL;
      if (b->worst != NULL && same_row(b->worst, c))
        worst = b->worst;
      for (j = 0; j < b->n_recent; j++) {
        const Tlcap__Violation *v = b->recent[j];
        if (!same_row(v, c))
          continue;
        last = v; /* oldest first: the last match is the newest */
        if (worst == NULL || distance(v) > distance(worst))
          worst = v;
      }
      row(o, b, c->area, c->context, c->count, worst, last);
    }
  }
  if (r->dropped_keys != 0)
    tlc_out_printf(o,
                   "%" PRIu64 " violations not counted per area and context (too many distinct "
                   "ones; in their budget's total)\n",
                   r->dropped_keys);
}

static void json_violation(tlc_json_w_t *w, const char *k, const Tlcap__Violation *v) {
  char ref[96];
  tlc_json_w_open(w, k, '{');
  tlc_json_w_str(w, "budget", v->budget);
  tlc_json_w_str(w, "stat", v->stat);
  tlc_json_w_u64(w, "handle", v->handle);
  tlc_json_w_str(w, "area", v->area);
  tlc_json_w_str(w, "context", v->context);
  tlc_json_w_bool(w, "over", v->over);
  tlc_json_w_i64(w, "value", v->value);
  tlc_json_w_i64(w, "limit", v->limit);
  tlc_json_w_i64(w, "start_ns", v->start_ns);
  tlc_json_w_i64(w, "end_ns", v->end_ns);
  tlc_json_w_u64(w, "epoch", v->epoch);
  tlc_json_w_i64(w, "wall_ms", v->wall_ms);
  tlc_json_w_u64(w, "seq_start", v->seq_start);
  tlc_json_w_u64(w, "seq_end", v->seq_end);
  tlc_json_w_u64(w, "number", v->number);
  snprintf(ref, sizeof(ref), "v:%s:%" PRIu64, v->budget, v->number);
  tlc_json_w_str(w, "ref", ref);
  tlc_json_w_u64(w, "seg_first", v->seg_first);
  tlc_json_w_u64(w, "off_first", v->off_first);
  tlc_json_w_u64(w, "seg_last", v->seg_last);
  tlc_json_w_u64(w, "off_last", v->off_last);
  tlc_json_w_close(w, '}');
}

void tlc_cli_vfmt_json(tlc_json_w_t *w, const Tlcap__ViolationsReply *r) {
  size_t i, k;
  tlc_json_w_open(w, NULL, '{');
  tlc_json_w_str(w, "target", r->target);
  tlc_json_w_u64(w, "total", r->total);
  tlc_json_w_u64(w, "dropped_keys", r->dropped_keys);
  tlc_json_w_open(w, "budgets", '[');
  for (i = 0; i < r->n_budgets; i++) {
    const Tlcap__BudgetViolations *b = r->budgets[i];
    tlc_json_w_open(w, NULL, '{');
    tlc_json_w_str(w, "name", b->name);
    tlc_json_w_str(w, "area", b->area);
    tlc_json_w_str(w, "context", b->context);
    tlc_json_w_str(w, "stat", b->stat);
    if (b->has_max)
      tlc_json_w_i64(w, "max", b->max);
    if (b->has_min)
      tlc_json_w_i64(w, "min", b->min);
    if (is_rate(b->stat))
      tlc_json_w_i64(w, "window_ns", b->window_ns);
    tlc_json_w_str(w, "origin", b->origin);
    tlc_json_w_u64(w, "total", b->total);
    if (b->worst != NULL)
      json_violation(w, "worst", b->worst);
    else
      tlc_json_w_raw(w, "worst", "null");
    tlc_json_w_open(w, "recent", '[');
    for (k = 0; k < b->n_recent; k++)
      json_violation(w, NULL, b->recent[k]);
    tlc_json_w_close(w, ']');
    tlc_json_w_open(w, "counts", '[');
    for (k = 0; k < b->n_counts; k++) {
      const Tlcap__ViolationCount *c = b->counts[k];
      tlc_json_w_open(w, NULL, '{');
      tlc_json_w_u64(w, "handle", c->handle);
      tlc_json_w_str(w, "area", c->area);
      tlc_json_w_str(w, "context", c->context);
      tlc_json_w_u64(w, "state", c->state);
      tlc_json_w_u64(w, "count", c->count);
      tlc_json_w_close(w, '}');
    }
    tlc_json_w_close(w, ']');
    tlc_json_w_close(w, '}');
  }
  tlc_json_w_close(w, ']');
  tlc_json_w_close(w, '}');
}
