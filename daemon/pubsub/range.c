/* range.c - range statistics (GetStats.range, Subscribe.history; see the design note in
 * server.c and docs/protocol.md "History").
 *
 * The statistics of a target's stored records in a range are computed off the loop by the
 * view's history hook (daemon/history/histq.h: libuv's threadpool, a few at once
 * daemon-wide). Per connection one query runs at a time (s->hq); another request meanwhile gets
 * ERR_BUSY, as does one that finds the daemon's queries all busy. The answer is one control
 * message (never dropped): a Stats reply, or for a Subscribe.history a Snapshot with `range`
 * set, target after target; then the subscription is attached to its feed, so its live
 * snapshots (full, then deltas) come after the history. A subscriber that closes cancels its
 * query (tlc__ps_hist_stop).
 *
 * The message is built and encoded on the pool thread that computed the range (hist_encode, a
 * tlc_hist_answer_t, from a copy of what the request asked: hist_ans_t), so the loop's share of
 * a query (hist_done) is to queue a finished message, whatever the range or its answer holds.
 */
#include "pubsub/pubsub-int.h"

#include "base/alloc.h"
#include "base/err.h"
#include "view/view.h"
#include "formats/xref.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define HIST_MAX_TARGETS 16 /* targets a Subscribe.history computes (its matching ones) */

static void hist_done(void *ud, tlc_hist_result_t *r);

/* A query's answer: what the request asked (copied on the loop before the query starts), and
 * the message the pool thread built from the result. Owned by the query while it runs. */
typedef struct hist_ans {
  size_t max_message;
  uint64_t instance_id;
  uint32_t req;
  uint8_t windows, quantiles, names, sub; /* sub: a Subscribe.history's Snapshot */
  int around;                             /* an AroundRequest: an AroundReply of r->moment */
  tlc_when_range_t range;
  char target[129];
  msg_t *m; /* the encoded message, or NULL with err */
  int err;
} hist_ans_t;

static void hist_range_get(const Tlcap__TimeRange *tr, tlc_when_range_t *r) {
  memset(r, 0, sizeof(*r));
  r->kind = tr->clock == TLCAP__TIME_RANGE__CLOCK__WALL ? TLC_WHEN_WALL : TLC_WHEN_TARGET;
  r->has_since = tr->has_since;
  r->since = tr->since;
  r->has_until = tr->has_until;
  r->until = tr->until;
  r->epoch = tr->has_epoch && tr->epoch <= (uint64_t)INT64_MAX ? (int64_t)tr->epoch : -1;
}

static void hist_range_set(const tlc_when_range_t *r, Tlcap__TimeRange *tr) {
  tlcap__time_range__init(tr);
  tr->clock =
      r->kind == TLC_WHEN_WALL ? TLCAP__TIME_RANGE__CLOCK__WALL : TLCAP__TIME_RANGE__CLOCK__TARGET;
  tr->has_since = r->has_since != 0;
  tr->since = r->since;
  tr->has_until = r->has_until != 0;
  tr->until = r->until;
  tr->has_epoch = r->kind == TLC_WHEN_TARGET && r->epoch >= 0;
  tr->epoch = tr->has_epoch ? (uint64_t)r->epoch : 0;
}

static void hist_ans_free(void *ctx) {
  hist_ans_t *a = ctx;
  if (a != NULL)
    tlc__ps_msg_unref(a->m);
  tlc_free(a);
}

static void hist_names_free(tlc__ps_sub_t *s) {
  for (size_t i = 0; i < s->hq.nleft; i++)
    tlc_free(s->hq.names_left[i]);
  tlc_free(s->hq.names_left);
  s->hq.names_left = NULL;
  s->hq.nleft = s->hq.next = 0;
}

/* The subscriber goes away: its query is cancelled, what waited for it dropped. */
void tlc__ps_hist_stop(tlc__ps_sub_t *s) {
  tlc_pubsub_t *ps = s->ps;
  if (s->hq.job == NULL)
    hist_ans_free(s->hq.ans);
  else if (ps->p.history_cancel != NULL)
    ps->p.history_cancel(ps->p.history_ud, s->hq.job); /* the query frees its answer */
  s->hq.job = NULL;
  s->hq.ans = NULL;
  hist_names_free(s);
  tlc__ps_spec_free(s->hq.fspec);
  s->hq.fspec = NULL;
  s->hq.sn = NULL;
}

static size_t hist_encode(void *ctx, tlc_hist_result_t *r);

/* Starts the query of s->hq.target; 0, or the hook's error (nothing started). */
static int hist_start(tlc__ps_sub_t *s) {
  tlc_pubsub_t *ps = s->ps;
  tlc_snap_opts_t so;
  tlc_hist_answer_t ans;
  hist_ans_t *a = tlc_calloc(1, sizeof(*a));
  int e;
  if (a == NULL)
    return TLC_ENOMEM;
  memset(&so, 0, sizeof(so));
  so.windows = s->hq.windows;
  so.quantiles = s->hq.quantiles;
  so.neutral = s->hq.neutral;
  so.neutral_only = s->hq.neutral_only;
  a->max_message = ps->o.max_message;
  a->instance_id = ps->instance_id;
  a->req = s->hq.req;
  a->windows = s->hq.windows;
  a->quantiles = s->hq.quantiles;
  a->names = s->hq.names;
  a->sub = s->hq.nleft > 0;
  a->range = s->hq.range;
  snprintf(a->target, sizeof(a->target), "%s", s->hq.target);
  ans.encode = hist_encode;
  ans.free = hist_ans_free;
  ans.ctx = a;
  e = ps->p.history(ps->p.history_ud, s->hq.target, &s->hq.range, &so, &ans, hist_done, s,
                    &s->hq.job);
  if (e != 0)
    hist_ans_free(a);
  else
    s->hq.ans = a;
  return e;
}

/* Error for a query that could not start or failed. */
static void hist_error(tlc__ps_sub_t *s, uint32_t req, const char *target, int e,
                       const char *detail) {
  char why[400];
  int code = e == TLC_ELIMIT   ? TLCAP__ERROR_CODE__ERR_BUSY
             : e == -ENOENT    ? TLCAP__ERROR_CODE__ERR_NO_SUCH_TARGET
             : e == TLC_EINVAL ? TLCAP__ERROR_CODE__ERR_BAD_REQUEST
                               : TLCAP__ERROR_CODE__ERR_FAILED;
  if (e == TLC_ELIMIT)
    snprintf(why, sizeof(why),
             "range statistics of %.128s: the daemon is computing as many "
             "ranges as it runs at once: try again later",
             target);
  else
    snprintf(why, sizeof(why), "range statistics of %.128s: %s", target,
             detail != NULL && detail[0] ? detail : tlc_strerror(e));
  tlc__ps_send_error(s, req, code, why, 0, e);
}

/* Is a range query possible on this connection now? Else the error is sent (-1). */
static int hist_can_start(tlc__ps_sub_t *s, uint32_t req, const Tlcap__TimeRange *tr) {
  tlc_pubsub_t *ps = s->ps;
  if (ps->p.history == NULL) {
    tlc__ps_send_error(
        s, req, TLCAP__ERROR_CODE__ERR_FAILED,
        "range statistics are computed from stored segments: this daemon does not store", 0,
        TLC_EINVAL);
    return -1;
  }
  if (s->hq.job != NULL || s->hq.nleft > 0) {
    tlc__ps_send_error(s, req, TLCAP__ERROR_CODE__ERR_BUSY,
                       "a range query is already running on this connection: one at a time", 0,
                       TLC_ELIMIT);
    return -1;
  }
  if (tr->has_since && tr->has_until && tr->since > tr->until) {
    tlc__ps_send_error(s, req, TLCAP__ERROR_CODE__ERR_BAD_REQUEST,
                       "the range's since is after until", 0, TLC_EINVAL);
    return -1;
  }
  return 0;
}

void tlc__ps_hist_get_stats(tlc__ps_sub_t *s, uint32_t req, const Tlcap__GetStats *g) {
  int e;
  if (hist_can_start(s, req, g->range) < 0)
    return;
  if (g->target == NULL || g->target[0] == '\0' || strlen(g->target) >= sizeof(s->hq.target)) {
    tlc__ps_send_error(s, req, TLCAP__ERROR_CODE__ERR_NO_SUCH_TARGET, "no such target", 0,
                       TLC_EINVAL);
    return;
  }
  s->hq.req = req;
  s->hq.windows = g->windows ? 1 : 0;
  s->hq.quantiles = g->quantiles ? 1 : 0;
  s->hq.neutral = g->neutral ? 1 : 0;
  s->hq.names = g->names ? 1 : 0;
  s->hq.neutral_only = 0;
  hist_range_get(g->range, &s->hq.range);
  snprintf(s->hq.target, sizeof(s->hq.target), "%s", g->target);
  if ((e = hist_start(s)) < 0)
    hist_error(s, req, g->target, e, NULL);
}

/* Subscribe.history: possible now? (-1: the error is sent.) */
int tlc__ps_hist_subscribe_check(tlc__ps_sub_t *s, uint32_t req, const Tlcap__Subscribe *r) {
  if (hist_can_start(s, req, r->history) < 0)
    return -1;
  return 0;
}

/* Attaches the waiting subscription to its feed: its live snapshots start. */
static void hist_attach(tlc__ps_sub_t *s) {
  tlc_pubsub_t *ps = s->ps;
  subn_t *sn = s->hq.sn;
  spec_t *fspec = s->hq.fspec;
  feed_t *tick;
  s->hq.sn = NULL;
  s->hq.fspec = NULL;
  if (sn == NULL || s->closing) {
    tlc__ps_spec_free(fspec);
    return;
  }
  if (tlc__ps_feed_get(ps, fspec, &sn->feed) < 0) {
    tlc__ps_send_error(s, 0, TLCAP__ERROR_CODE__ERR_FAILED, "out of memory: no live snapshots", 0,
                       TLC_ENOMEM);
    return;
  }
  tick = tlc__ps_subn_attach(s, sn);
  if (tick != NULL && !ps->fd.ticking) {
    ps->fd.ticking = 1;
    tlc__ps_feed_tick(tick);
    tlc__ps_pass_end(ps);
  }
}

/* The next target of a Subscribe.history, or, none left, the live part. */
static void hist_subscribe_next(tlc__ps_sub_t *s) {
  while (s->hq.next < s->hq.nleft && !s->closing) {
    char *name = s->hq.names_left[s->hq.next++];
    int e;
    snprintf(s->hq.target, sizeof(s->hq.target), "%s", name);
    if ((e = hist_start(s)) == 0)
      return;
    hist_error(s, s->hq.req, name, e, NULL);
  }
  hist_names_free(s);
  hist_attach(s);
}

void tlc__ps_hist_subscribe_start(tlc__ps_sub_t *s, uint32_t req, const Tlcap__Subscribe *r,
                                  subn_t *sn, spec_t *fspec) {
  tlc_pubsub_t *ps = s->ps;
  size_t i, n = ps->p.count(ps->p.ud), k = 0;
  s->hq.req = req;
  s->hq.sn = sn;
  s->hq.fspec = fspec;
  s->hq.windows = r->windows ? 1 : 0;
  s->hq.quantiles = r->quantiles ? 1 : 0;
  s->hq.neutral = r->neutral || r->neutral_only ? 1 : 0;
  s->hq.neutral_only = r->neutral_only ? 1 : 0;
  s->hq.names = r->names ? 1 : 0;
  hist_range_get(r->history, &s->hq.range);
  s->hq.range.has_until = 0; /* up to now */
  s->hq.names_left = tlc_calloc(HIST_MAX_TARGETS, sizeof(char *));
  for (i = 0; i < n && s->hq.names_left != NULL && k < HIST_MAX_TARGETS; i++) {
    tlc_view_target_t info;
    memset(&info, 0, sizeof(info));
    if (ps->p.info(ps->p.ud, i, &info) == 0 && info.name != NULL &&
        tlc__ps_spec_target(sn->spec, info.name) &&
        (s->hq.names_left[k] = tlc_strndup(info.name, strlen(info.name))) != NULL)
      k++;
  }
  s->hq.nleft = k;
  if (k == HIST_MAX_TARGETS && i < n)
    tlc__ps_send_error(s, req, TLCAP__ERROR_CODE__ERR_FAILED,
                       "history for the first 16 matching targets only: name fewer", 0, TLC_ELIMIT);
  hist_subscribe_next(s);
}

/* tlc_hist_answer_t.encode, on the pool thread: the snapshot of a result as a Stats reply
 * (GetStats) or a Snapshot (Subscribe) into a->m, or a->err. Returns its size. */
static size_t around_encode(hist_ans_t *an, tlc_hist_result_t *r);

static size_t hist_encode(void *ctx, tlc_hist_result_t *r) {
  hist_ans_t *an = ctx;
  if (an->around)
    return around_encode(an, r);
  tlc_pb_arena_t a;
  tlc_pb_snap_sel_t sel;
  Tlcap__Snapshot snap;
  Tlcap__ServerMessage sm;
  Tlcap__Stats stats;
  Tlcap__TimeRange tr;
  tlc_when_range_t range = an->range;
  int too_big = 0;
  if ((an->err = r->status) != 0)
    return 0;
  memset(&sel, 0, sizeof(sel));
  sel.windows = an->windows;
  sel.quantiles = an->quantiles;
  tlc_pb_arena_init(&a, an->max_message * 4);
  an->err = tlc_pb_snapshot_build(&a, &snap, &r->t, an->target, &sel,
                                  an->names && r->has_names ? &r->names : NULL);
  if (an->err < 0)
    goto done;
  if (an->sub) { /* Subscribe.history: up to now */
    range.has_until = 1;
    range.until =
        range.kind == TLC_WHEN_WALL ? (int64_t)tlc_now_unix_ms() * 1000000 : r->t.last_time + 1;
  }
  hist_range_set(&range, &tr);
  snap.range = &tr;
  snap.segments = (uint32_t)r->segments;
  snap.instance_id = an->instance_id;
  snap.full = 1;
  snap.unix_ms = tlc_now_unix_ms();
  tlcap__server_message__init(&sm);
  if (an->sub) {
    sm.msg_case = TLCAP__SERVER_MESSAGE__MSG_SNAPSHOT;
    sm.snapshot = &snap;
  } else {
    tlcap__stats__init(&stats);
    stats.snapshot = &snap;
    sm.request_id = an->req;
    sm.msg_case = TLCAP__SERVER_MESSAGE__MSG_STATS;
    sm.stats = &stats;
  }
  an->m = tlc__ps_msg_pack(an->max_message, &sm, PSM_CONTROL, &too_big);
  if (an->m == NULL)
    an->err = too_big ? TLC_ELIMIT : TLC_ENOMEM;
done:
  tlc_pb_arena_fini(&a);
  return an->m != NULL ? an->m->len : 0;
}

/* The moment's AroundReply (pool thread). */
static size_t around_encode(hist_ans_t *an, tlc_hist_result_t *r) {
  Tlcap__ServerMessage sm;
  Tlcap__AroundReply ar;
  Tlcap__TimeRange tr;
  int too_big = 0;
  if ((an->err = r->status) != 0)
    return 0;
  tlcap__around_reply__init(&ar);
  ar.target = an->target;
  ar.export = (char *)tlc_moment_export_name(an->around);
  ar.data.data = (uint8_t *)r->moment;
  ar.data.len = r->moment_len;
  hist_range_set(&an->range, &tr);
  ar.range = &tr;
  ar.segments = (uint32_t)r->segments;
  tlcap__server_message__init(&sm);
  sm.request_id = an->req;
  sm.msg_case = TLCAP__SERVER_MESSAGE__MSG_AROUND;
  sm.around = &ar;
  an->m = tlc__ps_msg_pack(an->max_message, &sm, PSM_CONTROL, &too_big);
  if (an->m == NULL)
    an->err = too_big ? TLC_ELIMIT : TLC_ENOMEM;
  return an->m != NULL ? an->m->len : 0;
}

/* An extreme's REF `max|min:KIND:AREA[@CONTEXT]` (formats/xref.h), on the loop: the live
 * statistics of that one area (a snapshot of its rows, no windows nor quantiles) give the
 * sample and its stretch. 0 with *at, or an error with a message in why (tlc_xref_find's;
 * -ENOENT also for an unknown target). */
static int around_extreme(tlc_pubsub_t *ps, const char *target, const tlc_xref_t *x, tlc_at_t *at,
                          char *why, size_t whylen) {
  const tlc_mapping_t *m;
  tlc_snap_opts_t so;
  tlc_table_t t;
  uint32_t h;
  size_t idx;
  int64_t value;
  int e;
  if (ps->p.find == NULL || (ps->p.snapshot_part == NULL && ps->p.snapshot == NULL) ||
      ps->p.find(ps->p.ud, target, &idx) != 0) {
    snprintf(why, whylen, "no such target %.128s", target);
    return -ENOENT;
  }
  m = ps->p.mapping != NULL ? ps->p.mapping(ps->p.ud, idx) : NULL;
  if ((e = tlc_xref_handle(x, m, &h, why, whylen)) < 0)
    return e;
  memset(&so, 0, sizeof(so));
  tlc_table_init(&t);
  e = ps->p.snapshot_part != NULL ? ps->p.snapshot_part(ps->p.ud, idx, &t, &so, h, (uint64_t)h + 1)
                                  : ps->p.snapshot(ps->p.ud, idx, &t, &so);
  if (e < 0)
    snprintf(why, whylen, "the statistics of %.128s: %s", target, tlc_strerror(e));
  else
    e = tlc_xref_find(x, &t, m, h, at, &value, why, whylen);
  tlc_table_fini(&t);
  return e;
}

/* The moment an AroundRequest names, on the loop: a time (formats/moment.h), a violation's
 * REF `v:BUDGET:N` resolved at once through the view's budgets hook to that violation's
 * stretch, or an extreme's REF `max|min:KIND:AREA[@CONTEXT]` resolved against the target's
 * live statistics (around_extreme) to its sample's stretch (start - span .. end + span in its
 * epoch: the same target-time path as epoch:K:N). 0, or an error with a message in why:
 * TLC_EINVAL (a bad spelling or span, an ambiguous area), -ENOENT (no budget, area or context
 * of that name on the target), TLC_ERANGE (that violation is no longer kept, no such sample
 * yet, its time not known). */
static int around_moment(tlc_pubsub_t *ps, const Tlcap__AroundRequest *g, tlc_moment_t *mo,
                         char *why, size_t whylen) {
  const char *span = g->span != NULL && g->span[0] ? g->span : NULL;
  const struct tlc_bwatch *w = NULL;
  char name[TLC_BUDGET_NAME_MAX + 1];
  tlc_violation_t v;
  tlc_xref_t x;
  tlc_at_t at;
  uint64_t n;
  int k, e;
  if ((k = tlc_xref_parse(g->ref, &x, why, whylen)) < 0)
    return TLC_EINVAL;
  if (k == 1) {
    if ((e = around_extreme(ps, g->target, &x, &at, why, whylen)) < 0)
      return e;
    return tlc_moment_of_stretch(at.start, at.end, (int64_t)at.epoch, span, mo, why, whylen) < 0
               ? TLC_EINVAL
               : 0;
  }
  if ((k = tlc_moment_parse_vref(g->ref, name, sizeof(name), &n, why, whylen)) == 0)
    return tlc_moment_parse(g->ref, span, (int64_t)tlc_now_unix_ms() * 1000000, mo, why, whylen) < 0
               ? TLC_EINVAL
               : 0;
  if (k < 0)
    return TLC_EINVAL;
  if (ps->p.budgets != NULL)
    w = ps->p.budgets(ps->p.budgets_ud, g->target);
  if (w == NULL) {
    snprintf(why, whylen, "v:%s:%" PRIu64 ": no timing budget applies to %.128s", name, n,
             g->target);
    return -ENOENT;
  }
  if ((e = tlc_bwatch_find(w, name, n, &v, why, whylen)) < 0)
    return e;
  if (v.epoch > (uint64_t)INT64_MAX)
    v.epoch = 0;
  return tlc_moment_of_stretch(v.start, v.end, (int64_t)v.epoch, span, mo, why, whylen) < 0
             ? TLC_EINVAL
             : 0;
}

void tlc__ps_hist_around(tlc__ps_sub_t *s, uint32_t req, const Tlcap__AroundRequest *g) {
  tlc_pubsub_t *ps = s->ps;
  Tlcap__TimeRange none = TLCAP__TIME_RANGE__INIT;
  tlc_moment_t mo;
  tlc_hist_answer_t ans;
  hist_ans_t *a;
  char why[600]; /* an extreme's error lists contexts */
  int ex, e;
  if (ps->p.around == NULL) {
    tlc__ps_send_error(s, req, TLCAP__ERROR_CODE__ERR_FAILED,
                       "the moment is read from stored segments: this daemon does not store", 0,
                       TLC_EINVAL);
    return;
  }
  if (hist_can_start(s, req, &none) < 0)
    return;
  if (g->target == NULL || g->target[0] == '\0' || strlen(g->target) >= sizeof(s->hq.target)) {
    tlc__ps_send_error(s, req, TLCAP__ERROR_CODE__ERR_NO_SUCH_TARGET, "no such target", 0,
                       TLC_EINVAL);
    return;
  }
  ex = g->export == NULL || g->export[0] == '\0' ? TLC_MOMENT_TEXT1
                                                 : tlc_moment_export_of(g->export);
  if (ex == 0) {
    tlc__ps_send_error(s, req, TLCAP__ERROR_CODE__ERR_BAD_REQUEST,
                       "around: export is text1, json, bin11, bin10 or evlog", 0, TLC_EINVAL);
    return;
  }
  if ((e = around_moment(ps, g, &mo, why, sizeof(why))) < 0) {
    tlc__ps_send_error(s, req,
                       e == TLC_ERANGE ? TLCAP__ERROR_CODE__ERR_FAILED
                                       : TLCAP__ERROR_CODE__ERR_BAD_REQUEST,
                       why, 0, e);
    return;
  }
  if ((a = tlc_calloc(1, sizeof(*a))) == NULL) {
    hist_error(s, req, g->target, TLC_ENOMEM, NULL);
    return;
  }
  a->max_message = ps->o.max_message;
  a->instance_id = ps->instance_id;
  a->req = req;
  a->around = ex;
  a->range = mo.range;
  snprintf(a->target, sizeof(a->target), "%s", g->target);
  s->hq.req = req;
  s->hq.range = mo.range;
  snprintf(s->hq.target, sizeof(s->hq.target), "%s", g->target);
  ans.encode = hist_encode;
  ans.free = hist_ans_free;
  ans.ctx = a;
  /* the export and its message both fit the daemon's message cap */
  e = ps->p.around(ps->p.history_ud, g->target, &mo, ex, ps->o.max_message, &ans, hist_done, s,
                   &s->hq.job);
  if (e != 0) {
    hist_ans_free(a);
    hist_error(s, req, g->target, e, NULL);
  } else {
    s->hq.ans = a;
  }
}

static void hist_done(void *ud, tlc_hist_result_t *r) {
  tlc__ps_sub_t *s = ud;
  hist_ans_t *a = s->hq.ans; /* ours again */
  int e = a->err;
  s->hq.job = NULL;
  s->hq.ans = NULL;
  if (s->closing) {
    hist_ans_free(a);
    tlc__ps_hist_stop(s);
    return;
  }
  if (e == 0) {
    s->ps->st.snapshots_built++;
    tlc__ps_sub_ctl(s, a->m);
  } else {
    hist_error(s, s->hq.req, s->hq.target, e,
               e == TLC_ELIMIT && r->status == 0 ? "larger than the daemon's message cap" : r->err);
  }
  hist_ans_free(a);
  if (s->hq.nleft > 0)
    hist_subscribe_next(s);
}
