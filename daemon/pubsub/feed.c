/* feed.c - feeds, their ticks and mirrors: what subscriptions are served from (feed.h; see the
 * design note in server.c).
 */
#define _GNU_SOURCE /* struct ucred (SO_PEERCRED) */
#include "pubsub/pubsub-int.h"

#include "base/alloc.h"
#include "base/err.h"
#include "proto/convert.h"
#include "proto/frame.h"
#include "tlc_version.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* ---- snapshots --------------------------------------------------------------------------- */

/* The engine snapshot of target idx with options so: in a tick pass (shared) one from the
 * pass's cache when another feed asked for the same, else taken now; outside a pass, or with
 * no cache entry free, into the scratch table. NULL with *err on failure. */
static tlc_table_t *snap_get(tlc_pubsub_t *ps, size_t idx, const tlc_snap_opts_t *so, int shared,
                             int *err) {
  snap_cache_t *c = NULL;
  tlc_table_t *t = &ps->fd.scratch;
  size_t i;
  if (shared) {
    for (i = 0; i < SNAP_CACHE; i++) {
      snap_cache_t *e = &ps->fd.cache[i];
      if (!e->used) {
        if (c == NULL)
          c = e;
        continue;
      }
      if (e->idx == idx && e->since == so->since_seq && e->windows == so->windows &&
          e->neutral == so->neutral && e->quantiles == so->quantiles &&
          e->neutral_only == so->neutral_only && e->kinds == so->kinds)
        return &e->t;
    }
    if (c != NULL)
      t = &c->t;
  }
  tlc_table_clear(t);
  if ((*err = ps->p.snapshot(ps->p.ud, idx, t, so)) < 0)
    return NULL;
  if (c != NULL) {
    c->used = 1;
    c->idx = idx;
    c->since = so->since_seq;
    c->windows = so->windows;
    c->neutral = so->neutral;
    c->neutral_only = so->neutral_only;
    c->kinds = so->kinds;
    c->quantiles = so->quantiles;
  }
  return t;
}

/* Builds the full statistics of target `idx` with the options of `spec` as a reply to GetStats
 * (a Stats envelope with request id `req`), or with `pt` (NULL: whole) one part of them.
 * Returns 0 and *out (refs 1), TLC_ELIMIT (above max_message), or another negative error.
 * (Subscriptions are served from their feeds' mirrors, not from here.) */
int tlc__ps_stats_build(tlc_pubsub_t *ps, const spec_t *spec, size_t idx, uint32_t req,
                        stats_part_t *pt, msg_t **out) {
  tlc_view_target_t info;
  tlc_snap_opts_t so;
  tlc_table_t *t;
  tlc_pb_arena_t a;
  Tlcap__Snapshot s;
  Tlcap__ServerMessage sm;
  Tlcap__Stats stats;
  tlc_pb_snap_sel_t sel;
  const tlc_mapping_t *m;
  int r, too_big;
  *out = NULL;
  memset(&info, 0, sizeof(info));
  if ((r = ps->p.info(ps->p.ud, idx, &info)) < 0)
    return r;
  tlc__ps_snap_opts(spec, 0, &so);
  if (pt != NULL) {
    t = &ps->fd.scratch;
    tlc_table_clear(t);
    if ((r = ps->p.snapshot_part(ps->p.ud, idx, t, &so, pt->lo, pt->hi)) < 0)
      return r;
    pt->seq = t->seq;
  } else if ((t = snap_get(ps, idx, &so, 0, &r)) == NULL) {
    return r;
  }
  m = ps->p.mapping != NULL ? ps->p.mapping(ps->p.ud, idx) : NULL;
  memset(&sel, 0, sizeof(sel));
  sel.windows = spec->windows;
  sel.quantiles = spec->quantiles;
  tlc_pb_arena_init(&a, ps->o.max_message * 4);
  r = tlc_pb_snapshot_build(&a, &s, t, info.name != NULL ? info.name : "", &sel,
                            spec->names && (pt == NULL || pt->no == 0) ? m : NULL);
  if (r < 0)
    goto done;
  s.instance_id = ps->instance_id;
  s.full = pt == NULL || pt->no == 0;
  if (pt != NULL) {
    s.part = pt->no;
    s.more = pt->more != 0;
    s.base_seq = pt->no > 0 ? pt->base : 0;
  }
  s.connected = info.connected != 0;
  s.unix_ms = tlc_now_unix_ms();
  tlcap__server_message__init(&sm);
  tlcap__stats__init(&stats);
  stats.snapshot = &s;
  sm.request_id = req;
  sm.msg_case = TLCAP__SERVER_MESSAGE__MSG_STATS;
  sm.stats = &stats;
  *out = tlc__ps_msg_encode(ps, &sm, PSM_CONTROL, &too_big);
  if (*out == NULL) {
    r = too_big ? TLC_ELIMIT : TLC_ENOMEM;
    goto done;
  }
  ps->st.snapshots_built++;
done:
  tlc_pb_arena_fini(&a);
  return r;
}

/* ---- feeds and subscriptions ------------------------------------------------------------- */

static void sched_arm(tlc_pubsub_t *ps);

void tlc__ps_feed_free(feed_t *f) {
  size_t i;
  for (i = 0; i < f->nt; i++) {
    feed_target_t *ft = &f->t[i];
    tlc__ps_msg_unref(ft->full);
    tlc__ps_msg_unref(ft->catchup);
    tlc_free(ft->rows);
    tlc_free(ft->rows2);
    tlc_free(ft->buf);
    tlc_free(ft->buf2);
    tlc_table_fini(&ft->hdr);
  }
  tlc_free(f->t);
  tlc__ps_spec_free(f->spec);
  tlc_free(f);
}

void tlc__ps_feed_unlink(feed_t *f) {
  tlc_pubsub_t *ps = f->ps;
  LIST_REMOVE(f, link);
  ps->fd.nfeeds--;
  ps->st.feeds = ps->fd.nfeeds;
}

/* The last subscription of a feed went: the feed goes too (at the end of a tick pass when one
 * is running, since the pass walks the feed list). */
static void feed_release(feed_t *f) {
  tlc_pubsub_t *ps = f->ps;
  if (f->nsubs > 0 || f->dead)
    return;
  if (ps->fd.ticking) {
    f->dead = 1;
    return;
  }
  tlc__ps_feed_unlink(f);
  tlc__ps_feed_free(f);
}

/* The next point strictly after `now` of the grid epoch + k * interval. */
static uint64_t grid_next(const tlc_pubsub_t *ps, uint64_t interval_ns, uint64_t now) {
  if (now < ps->fd.epoch_ns)
    return ps->fd.epoch_ns;
  return ps->fd.epoch_ns + ((now - ps->fd.epoch_ns) / interval_ns + 1) * interval_ns;
}

/* Finds or creates the feed of `spec` (taking ownership of spec either way). */
int tlc__ps_feed_get(tlc_pubsub_t *ps, spec_t *spec, feed_t **out) {
  feed_t *f;
  LIST_FOREACH(f, &ps->fd.feeds, link)
  if (!f->dead && strcmp(f->spec->key, spec->key) == 0) {
    tlc__ps_spec_free(spec);
    *out = f;
    return 0;
  }
  f = tlc_calloc(1, sizeof(*f));
  if (f == NULL) {
    tlc__ps_spec_free(spec);
    return TLC_ENOMEM;
  }
  f->ps = ps;
  f->id = ++ps->fd.next_feed_id;
  f->spec = spec;
  f->due_ns = grid_next(ps, (uint64_t)spec->interval_ms * 1000000u, uv_hrtime());
  LIST_INSERT_HEAD(&ps->fd.feeds, f, link);
  ps->fd.nfeeds++;
  ps->st.feeds = ps->fd.nfeeds;
  if (f->due_ns < ps->fd.next_due_ns)
    sched_arm(ps);
  *out = f;
  return 0;
}

static uint64_t stream_id(const feed_t *f, size_t idx) {
  return (f->id << 24) | (uint64_t)(idx & 0xFFFFFF);
}

/* Grows a subscription's slots to cover `n` targets. */
int tlc__ps_subn_slots(subn_t *sn, size_t n) {
  slot_t *v;
  if (n <= sn->nslots)
    return 0;
  v = tlc_realloc(sn->slots, n * sizeof(*v));
  if (v == NULL)
    return TLC_ENOMEM;
  memset(v + sn->nslots, 0, (n - sn->nslots) * sizeof(*v));
  sn->slots = v;
  sn->nslots = n;
  return 0;
}

static int feed_targets(feed_t *f, size_t n) {
  feed_target_t *v;
  if (n <= f->nt)
    return 0;
  v = tlc_realloc(f->t, n * sizeof(*v));
  if (v == NULL)
    return TLC_ENOMEM;
  memset(v + f->nt, 0, (n - f->nt) * sizeof(*v));
  for (; f->nt < n; f->nt++)
    tlc_table_init(&v[f->nt].hdr);
  f->t = v;
  return 0;
}

/* Offers message m (a delta or full snapshot of target idx) to one subscription's slot. */
static void slot_offer(subn_t *sn, size_t idx, msg_t *m) {
  tlc__ps_sub_t *s = sn->sub;
  slot_t *sl;
  if (s->closing || tlc__ps_subn_slots(sn, idx + 1) < 0)
    return;
  sl = &sn->slots[idx];
  if (sl->pending == NULL && !sl->catchup &&
      ((m->base == 0 && !sl->sent_any) || (sl->sent_any && m->base == sl->sent_seq))) {
    sl->pending = tlc__ps_msg_ref(m);
    tlc__ps_queued_add(s, m->len);
  } else {
    /* The subscriber still has an unsent state of this target: the newer one replaces it. */
    if (sl->pending != NULL || (sl->catchup && sl->sent_any))
      s->ps->st.snapshots_coalesced++;
    if (sl->pending != NULL) {
      tlc__ps_queued_sub(s, sl->pending->len);
      tlc__ps_msg_unref(sl->pending);
      sl->pending = NULL;
    }
    sl->catchup = 1;
  }
  if (!tlc__ps_limits_check(s))
    tlc__ps_sub_kick(s);
}

/* ---- mirrors ----------------------------------------------------------------------------- */

static int key_cmp(uint32_t ha, uint32_t ca, uint64_t sa, const mrow_t *b) {
  if (ha != b->handle)
    return ha < b->handle ? -1 : 1;
  if (ca != b->context) /* Neutral (0xFFFFFFFE) and none (0xFFFFFFFF) after the contexts */
    return ca < b->context ? -1 : 1;
  if (sa != b->state)
    return sa < b->state ? -1 : 1;
  return 0;
}

static int stat_before(const tlc_stat_t *a, const tlc_stat_t *b) {
  mrow_t k;
  k.handle = b->handle;
  k.context = b->context;
  k.state = b->state;
  return key_cmp(a->handle, a->context, a->state, &k) < 0;
}

/* Copies the header fields of table t (contexts included, no rows) into h. */
int tlc__ps_hdr_copy(tlc_table_t *h, const tlc_table_t *t) {
  size_t i;
  tlc_table_clear(h);
  h->format = t->format;
  h->first_time = t->first_time;
  h->last_time = t->last_time;
  h->context_area = t->context_area;
  h->has_context_area = t->has_context_area;
  h->nwindows = t->nwindows;
  memcpy(h->window_ns, t->window_ns, sizeof(h->window_ns));
  h->counters = t->counters;
  h->seq = t->seq;
  for (i = 0; i < t->ncontexts; i++)
    if (tlc_table_add_ctx(h, &t->contexts[i]) < 0)
      return TLC_ENOMEM;
  return 0;
}

/* ft->buf2 grown to hold at least `need` bytes. 0 or TLC_ENOMEM. */
static int buf2_reserve(feed_target_t *ft, size_t need) {
  uint8_t *nb = tlc_grow(ft->buf2, &ft->bcap2, need, 1, 64);
  if (nb == NULL)
    return TLC_ENOMEM;
  ft->buf2 = nb;
  return 0;
}

/* Encodes row r for spec into ft->buf2 at ft->len2 (grown as needed). */
static int row_encode(tlc_pubsub_t *ps, const spec_t *spec, const tlc_stat_t *r, uint32_t nwin,
                      int64_t qmask, feed_target_t *ft, size_t *len2, size_t *out_len) {
  if (spec->ncolumns > 0) {
    if (buf2_reserve(ft, *len2 + spec->ncolumns * 10) < 0)
      return TLC_ENOMEM;
    *out_len = tlc_pb_cells_encode(r, spec->columns, spec->ncolumns, qmask, ft->buf2 + *len2);
  } else {
    tlc_pb_snap_sel_t sel;
    Tlcap__Row pr;
    size_t packed, n;
    memset(&sel, 0, sizeof(sel));
    sel.windows = spec->windows;
    sel.quantiles = spec->quantiles;
    if (ps->fd.enc.used > 32 * 1024)
      tlc_pb_arena_reset(&ps->fd.enc);
    if (tlc_pb_row_build(&ps->fd.enc, &pr, r, spec->windows ? nwin : 0, &sel) < 0)
      return TLC_ENOMEM;
    n = tlc_pb_row_field_size(&pr, &packed);
    if (buf2_reserve(ft, *len2 + n) < 0)
      return TLC_ENOMEM;
    *out_len = tlc_pb_row_field_pack(&pr, packed, ft->buf2 + *len2);
  }
  *len2 += *out_len;
  return 0;
}

static int row_kept(const spec_t *spec, const tlc_table_t *t, const tlc_stat_t *r, keep_ctx_t *kc) {
  if (spec->neutral_only && t->ncontexts > 1 && r->kind == TLC_ROW_CODE &&
      r->context != TLC_CTX_NEUTRAL)
    return 0;
  return tlc__ps_keep_row(kc, r);
}

/* A merge of a tick's changed rows into the mirror, possibly fed in parts (handle ranges in
 * order): j the next old row, n2/len2 what the spare buffers hold, prev the last row taken. */
typedef struct merge_st {
  size_t j, n2, len2;
  const tlc_stat_t *prev;
} merge_st_t;

/* Merges changed rows (table t, in key order, every handle below `hi`) into the mirror being
 * built in the spare buffers: changed rows are encoded, the old rows with a handle below hi that
 * t does not replace are copied. Rows keep their order; a row the engine no longer reports stays
 * as it was. */
static int mirror_merge_part(tlc_pubsub_t *ps, feed_t *f, feed_target_t *ft, const tlc_table_t *t,
                             keep_ctx_t *kc, merge_st_t *m, uint64_t hi) {
  const spec_t *spec = f->spec;
  uint32_t nwin = t->nwindows <= TLC_MAX_WINDOWS ? t->nwindows : TLC_MAX_WINDOWS;
  int64_t qmask = spec->ncolumns > 0 ? tlc_pb_cells_qmask(spec->columns, spec->ncolumns) : 0;
  size_t i = 0;
  for (;;) {
    const tlc_stat_t *r = NULL;
    mrow_t *o = m->j < ft->n && ft->rows[m->j].handle < hi ? &ft->rows[m->j] : NULL, *d, *nr;
    int c;
    while (i < t->nrows && !row_kept(spec, t, &t->rows[i], kc))
      i++;
    if (i < t->nrows) {
      r = &t->rows[i];
      if ((m->prev != NULL && !stat_before(m->prev, r)) || r->handle >= hi)
        return TLC_EFRAME; /* not in key order (engine.h promises it is) */
    }
    if (r == NULL && o == NULL)
      break;
    c = r == NULL ? 1 : o == NULL ? -1 : key_cmp(r->handle, r->context, r->state, o);
    nr = tlc_grow(ft->rows2, &ft->cap2, m->n2 + 1, sizeof(*nr), 64);
    if (nr == NULL)
      return TLC_ENOMEM;
    ft->rows2 = nr;
    d = &ft->rows2[m->n2++];
    if (c <= 0) { /* changed (or new): encode */
      d->handle = r->handle;
      d->context = r->context;
      d->state = r->state;
      d->changed = t->seq;
      d->tick = f->tickno;
      d->off = m->len2;
      if (row_encode(ps, spec, r, nwin, qmask, ft, &m->len2, &d->len) < 0)
        return TLC_ENOMEM;
      m->prev = r;
      i++;
      if (c == 0)
        m->j++;
    } else { /* unchanged: copy */
      *d = *o;
      d->off = m->len2;
      if (buf2_reserve(ft, m->len2 + o->len) < 0)
        return TLC_ENOMEM;
      memcpy(ft->buf2 + m->len2, ft->buf + o->off, o->len);
      m->len2 += o->len;
      m->j++;
    }
    if (m->len2 > ps->o.max_message)
      return TLC_ELIMIT;
  }
  m->prev = NULL; /* the next part's table is another one (its keys are above hi) */
  return 0;
}

/* The merged mirror replaces the old one (buffers swapped). */
static void mirror_swap(feed_target_t *ft, const merge_st_t *m) {
  mrow_t *rv = ft->rows;
  uint8_t *bv = ft->buf;
  size_t rc = ft->cap, bc = ft->bcap;
  ft->rows = ft->rows2;
  ft->cap = ft->cap2;
  ft->n = m->n2;
  ft->buf = ft->buf2;
  ft->bcap = ft->bcap2;
  ft->len = m->len2;
  ft->rows2 = rv;
  ft->cap2 = rc;
  ft->buf2 = bv;
  ft->bcap2 = bc;
}

static int mrow_in(const feed_t *f, const mrow_t *r, int mode, uint64_t base) {
  return mode == MM_FULL || (mode == MM_TICK ? r->tick == f->tickno : r->changed > base);
}

/* Assembles a snapshot of target idx from its mirror: the rows of this tick (MM_TICK, a delta
 * from `base`), the rows changed after `base` (MM_SINCE), or all (MM_FULL). Returns 0 with *out
 * (refs 1), TLC_ELIMIT (above max_message) or TLC_ENOMEM. */
int tlc__ps_mirror_msg(feed_t *f, size_t idx, int mode, uint64_t base, msg_t **out) {
  tlc_pubsub_t *ps = f->ps;
  feed_target_t *ft = &f->t[idx];
  const spec_t *spec = f->spec;
  tlc_view_target_t info;
  tlc_pb_snap_sel_t sel;
  tlc_pb_arena_t a;
  Tlcap__Snapshot s;
  size_t i, row_bytes = 0, hdr_len, n;
  const tlc_mapping_t *m = NULL;
  uint8_t *p;
  msg_t *msg;
  int r;
  *out = NULL;
  memset(&info, 0, sizeof(info));
  if ((r = ps->p.info(ps->p.ud, idx, &info)) < 0)
    return r;
  if ((mode == MM_FULL || base == 0) && spec->names && ps->p.mapping != NULL)
    m = ps->p.mapping(ps->p.ud, idx); /* full snapshots carry the names */
  for (i = 0; i < ft->n; i++)
    if (mrow_in(f, &ft->rows[i], mode, base))
      row_bytes += ft->rows[i].len;
  memset(&sel, 0, sizeof(sel));
  sel.windows = spec->windows;
  sel.columns = spec->columns;
  sel.ncolumns = spec->ncolumns;
  tlc_pb_arena_init(&a, ps->o.max_message * 4);
  r = tlc_pb_snapshot_build(&a, &s, &ft->hdr, info.name != NULL ? info.name : "", &sel, m);
  if (r < 0)
    goto done;
  s.instance_id = ps->instance_id;
  s.stream = stream_id(f, idx);
  s.base_seq = mode == MM_FULL ? 0 : base;
  s.full = mode == MM_FULL || base == 0;
  s.connected = ft->connected;
  s.unix_ms = ft->unix_ms;
  n = tlc_pb_snapshot_frame_size(&s, row_bytes, &hdr_len);
  if (n > ps->o.max_message) {
    r = TLC_ELIMIT;
    goto done;
  }
  msg = tlc_malloc(sizeof(*msg) + n);
  if (msg == NULL) {
    r = TLC_ENOMEM;
    goto done;
  }
  memset(msg, 0, sizeof(*msg));
  msg->refs = 1;
  msg->kind = PSM_SNAP;
  msg->seq = ft->cur.seq;
  msg->base = s.base_seq;
  p = tlc_pb_snapshot_frame_begin(&s, hdr_len, row_bytes, msg->data);
  for (i = 0; i < ft->n; i++)
    if (mrow_in(f, &ft->rows[i], mode, base)) {
      memcpy(p, ft->buf + ft->rows[i].off, ft->rows[i].len);
      p += ft->rows[i].len;
    }
  msg->len = (size_t)(p - msg->data);
  ps->st.snapshots_built++;
  *out = msg;
done:
  tlc_pb_arena_fini(&a);
  return r;
}

/* One tick of feed f for target idx: the engine's rows changed since the last tick go into the
 * mirror, and their delta is returned (refs 1; the first tick's is full). Returns 1 when
 * nothing changed (no message), or a negative error. */
static int mirror_tick(feed_t *f, size_t idx, const tlc_view_target_t *info, msg_t **out) {
  tlc_pubsub_t *ps = f->ps;
  feed_target_t *ft = &f->t[idx];
  const spec_t *spec = f->spec;
  tlc_view_at_t at = { &ps->p, idx };
  tlc_cursor_split_fn split = NULL;
  tlc_cursor_part_t pt;
  uint64_t base;
  tlc_snap_opts_t so;
  tlc_table_t *t;
  keep_ctx_t kc;
  merge_st_t m;
  int r;
  *out = NULL;
  base = tlc_cursor_begin(&ft->cur, 0, TLC_CURSOR_NEVER) ? 0 : ft->cur.seq;
  tlc__ps_snap_opts(spec, base, &so);
  /* A large target's snapshot is taken and merged in handle ranges of at most MIRROR_PART_ROWS
   * rows, all in this call (the engine does not change meanwhile: the parts are one consistent
   * snapshot), so that the table held at a time is one part's, never one of every area. */
  if (info->areas > MIRROR_PART_ROWS)
    split = tlc_view_cursor_split(&ps->p);
  if ((r = tlc_cursor_next(&ft->cur, split, &at, MIRROR_PART_ROWS, &pt)) < 0)
    return r;
  if (pt.whole) {
    if ((t = snap_get(ps, idx, &so, 1, &r)) == NULL)
      return r;
  } else {
    t = &ps->fd.scratch;
    tlc_table_clear(t);
    if ((r = tlc_view_cursor_take(&at, &pt, t, &so)) < 0)
      return r;
  }
  if (ft->cur.have && t->seq == ft->cur.seq && ft->connected == (info->connected != 0) &&
      memcmp(&ft->hdr.counters, &t->counters, sizeof(t->counters)) == 0)
    return 1;
  tlc_cursor_took(&ft->cur, t->seq);
  if ((r = tlc__ps_keep_init(&kc, spec,
                             ps->p.mapping != NULL ? ps->p.mapping(ps->p.ud, idx) : NULL)) < 0)
    return r;
  memset(&m, 0, sizeof(m));
  r = mirror_merge_part(ps, f, ft, t, &kc, &m, pt.hi);
  while (r == 0 && pt.more) {
    tlc_table_clear(t);
    if ((r = tlc_cursor_next(&ft->cur, split, &at, MIRROR_PART_ROWS, &pt)) < 0 ||
        (r = tlc_view_cursor_take(&at, &pt, t, &so)) < 0)
      break;
    tlc_cursor_took(&ft->cur, t->seq);
    r = mirror_merge_part(ps, f, ft, t, &kc, &m, pt.hi);
  }
  if (r == 0)
    mirror_swap(ft, &m);
  tlc_free(kc.named);
  if (r < 0 || (r = tlc__ps_hdr_copy(&ft->hdr, t)) < 0) {
    /* the mirror may be half merged: start again with a full snapshot next tick */
    tlc_cursor_end(&ft->cur, 0, 0);
    ft->n = 0;
    ft->len = 0;
    return r;
  }
  tlc_cursor_end(&ft->cur, 1, 0);
  ft->connected = info->connected != 0;
  ft->unix_ms = tlc_now_unix_ms();
  tlc__ps_msg_unref(ft->full);
  tlc__ps_msg_unref(ft->catchup);
  ft->full = ft->catchup = NULL;
  r = tlc__ps_mirror_msg(f, idx, MM_TICK, base, out);
  if (r == 0 && base == 0)
    ft->full =
        tlc__ps_msg_ref(*out); /* the first tick's message is the full snapshot joiners get */
  return r;
}

/* Another target took index idx (a full registry evicted the one there): its mirror and every
 * subscription's slot start again, so the next message is the new target's full snapshot and no
 * delta is built against the old target's state. */
void tlc__ps_feed_target_renew(feed_t *f, size_t idx, uint64_t gen) {
  feed_target_t *ft = &f->t[idx];
  subn_t *sn;
  (void)tlc_cursor_renew(&ft->cur, gen);
  ft->n = 0;
  ft->len = 0;
  tlc__ps_msg_unref(ft->full);
  tlc__ps_msg_unref(ft->catchup);
  ft->full = ft->catchup = NULL;
  LIST_FOREACH(sn, &f->subs, flink) {
    slot_t *sl;
    if (idx >= sn->nslots)
      continue;
    sl = &sn->slots[idx];
    if (sl->pending != NULL) {
      tlc__ps_queued_sub(sn->sub, sl->pending->len);
      tlc__ps_msg_unref(sl->pending);
      sl->pending = NULL;
    }
    sl->sent_any = 0;
    sl->sent_seq = 0;
    sl->catchup = 0;
  }
}

/* The catch-up snapshot of a slot, from the feed's mirror: the full snapshot for a slot that
 * was never sent one, else the delta from what it was last sent to the last tick. Shared with
 * every other slot in the same position until the next tick. Returns a message (refs 1), or
 * NULL (nothing to send yet: the next tick delivers). */
msg_t *tlc__ps_slot_catchup(tlc__ps_sub_t *s, subn_t *sn, size_t idx) {
  slot_t *sl = &sn->slots[idx];
  feed_t *f = sn->feed;
  feed_target_t *ft;
  msg_t **cache;
  int r = 0;
  sl->catchup = 0;
  if (f == NULL || idx >= f->nt || !f->t[idx].cur.have)
    return NULL;
  {
    tlc_view_target_t info;
    memset(&info, 0, sizeof(info));
    if (f->ps->p.info(f->ps->p.ud, idx, &info) < 0 || info.gen != f->t[idx].cur.gen) {
      /* another target took this index since the last tick: the next tick sends its full */
      tlc__ps_feed_target_renew(f, idx, info.gen);
      return NULL;
    }
  }
  ft = &f->t[idx];
  if (!sl->sent_any) {
    cache = &ft->full;
    if (*cache == NULL)
      r = tlc__ps_mirror_msg(f, idx, MM_FULL, 0, cache);
  } else {
    cache = &ft->catchup;
    if (*cache == NULL || ft->catchup_base != sl->sent_seq) {
      tlc__ps_msg_unref(*cache);
      *cache = NULL;
      ft->catchup_base = sl->sent_seq;
      r = tlc__ps_mirror_msg(f, idx, MM_SINCE, sl->sent_seq, cache);
    }
  }
  if (r < 0) {
    if (r == TLC_ELIMIT)
      tlc__ps_send_error(s, 0, TLCAP__ERROR_CODE__ERR_FAILED,
                         "snapshot larger than the daemon's message cap: narrow the subscription",
                         0, r);
    return NULL;
  }
  return tlc__ps_msg_ref(*cache);
}

/* One tick of feed f for target idx: snapshot, mirror, and the delta offered to every slot. */
static void feed_tick_target(feed_t *f, size_t idx) {
  tlc_pubsub_t *ps = f->ps;
  tlc_view_target_t info;
  msg_t *m = NULL;
  subn_t *sn;
  int r;
  memset(&info, 0, sizeof(info));
  if (f->dead || ps->p.info(ps->p.ud, idx, &info) < 0 || info.name == NULL ||
      !tlc__ps_spec_target(f->spec, info.name))
    return;
  if (idx < f->nt && f->t[idx].cur.gen != info.gen)
    tlc__ps_feed_target_renew(f, idx, info.gen);
  r = mirror_tick(f, idx, &info, &m);
  if (r == 1)
    return;
  if (r < 0) {
    tlc__ps_logf_(ps, TLC_PS_LOG_WARN, "snapshot of target %s failed: %s", info.name,
                  tlc_strerror(r));
    if (r == TLC_ELIMIT)
      LIST_FOREACH(sn, &f->subs, flink)
    tlc__ps_send_error(sn->sub, 0, TLCAP__ERROR_CODE__ERR_FAILED,
                       "snapshot larger than the daemon's message cap: narrow the subscription", 0,
                       r);
    return;
  }
  /* Subscriptions are not freed during a pass (closing is deferred), so the list holds. */
  LIST_FOREACH(sn, &f->subs, flink)
  slot_offer(sn, idx, m);
  tlc__ps_msg_unref(m);
}

typedef struct tick_job {
  feed_t *f;
  size_t idx;
  size_t cost; /* rows in the mirror at the last tick */
} tick_job_t;

static int cmp_job(const void *a, const void *b) {
  const tick_job_t *x = a, *y = b;
  if (x->cost != y->cost)
    return x->cost < y->cost ? -1 : 1;
  if (x->f->id != y->f->id)
    return x->f->id < y->f->id ? -1 : 1;
  return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Ticks the feeds fs[0..nf) (in a pass). Targets go cheapest first (fewest rows at the last
 * tick): an event that arrives while a pass runs waits for the next tick of its target, so
 * small targets, whose snapshots take microseconds, are taken before large ones
 * take milliseconds. Without memory for the order, feed by feed in target order. */
static void feeds_tick(tlc_pubsub_t *ps, feed_t **fs, size_t nf) {
  size_t n = ps->p.count(ps->p.ud), i, idx, nj = 0;
  tick_job_t *jobs;
  for (i = 0; i < nf; i++) {
    if (feed_targets(fs[i], n) < 0) {
      fs[i] = NULL;
      continue;
    }
    fs[i]->tickno++;
    fs[i]->tick_ns = uv_hrtime();
  }
  jobs = n > 0 && nf > 0 && nf <= SIZE_MAX / n / sizeof(*jobs) ? tlc_malloc(nf * n * sizeof(*jobs))
                                                               : NULL;
  for (i = 0; i < nf; i++)
    for (idx = 0; fs[i] != NULL && idx < n; idx++) {
      if (jobs == NULL) {
        feed_tick_target(fs[i], idx);
        continue;
      }
      jobs[nj].f = fs[i];
      jobs[nj].idx = idx;
      jobs[nj].cost = fs[i]->t[idx].n;
      nj++;
    }
  if (jobs == NULL)
    return;
  qsort(jobs, nj, sizeof(*jobs), cmp_job);
  for (i = 0; i < nj; i++)
    feed_tick_target(jobs[i].f, jobs[i].idx);
  tlc_free(jobs);
}

void tlc__ps_feed_tick(feed_t *f) {
  feeds_tick(f->ps, &f, 1);
}

static void cache_reset(tlc_pubsub_t *ps) {
  size_t i;
  for (i = 0; i < SNAP_CACHE; i++) {
    ps->fd.cache[i].used = 0;
    tlc_table_clear(&ps->fd.cache[i].t);
  }
}

/* Ends a tick pass: shared snapshots dropped, released feeds freed, subscribers that closed
 * during it closed. */
void tlc__ps_pass_end(tlc_pubsub_t *ps) {
  feed_t *f, *next;
  tlc__ps_sub_t *s, *sn;
  cache_reset(ps);
  ps->fd.ticking = 0;
  LIST_FOREACH_SAFE(f, &ps->fd.feeds, link, next) {
    if (f->dead) {
      tlc__ps_feed_unlink(f);
      tlc__ps_feed_free(f);
    }
  }
  LIST_FOREACH_SAFE(s, &ps->sb.subs, link, sn) {
    if (s->detached && s->closing && !s->closed)
      tlc__ps_sub_close_now(s);
  }
}

/* Runs every feed that is due (within TICK_EARLY_NS) in one pass, so that feeds of the same
 * interval share their engine snapshots and all their subscribers are written together, then
 * arms the timer for the next one. A feed that fell behind skips to its next grid point rather
 * than ticking in a burst. */
static void run_due(tlc_pubsub_t *ps) {
  uint64_t now = uv_hrtime();
  feed_t *f, *fs[16];
  size_t nf = 0;
  if (ps->fd.ticking || ps->closing)
    return;
  ps->fd.ticking = 1;
  LIST_FOREACH(f, &ps->fd.feeds, link) {
    uint64_t iv = (uint64_t)f->spec->interval_ms * 1000000u;
    if (f->dead || f->due_ns > now + TICK_EARLY_NS)
      continue;
    if (nf == sizeof(fs) / sizeof(fs[0])) { /* more feeds due at once: batches of 16 */
      feeds_tick(ps, fs, nf);
      nf = 0;
    }
    fs[nf++] = f;
    f->due_ns += iv;
    if (f->due_ns <= now)
      f->due_ns = grid_next(ps, iv, now);
  }
  if (nf > 0)
    feeds_tick(ps, fs, nf);
  tlc__ps_pass_end(ps);
  sched_arm(ps);
}

static void tick_timer_cb(uv_timer_t *t) {
  run_due(t->data);
}

/* Arms the tick timer for the earliest due feed. The timer's clock is the loop's (ms, read at
 * the start of a loop turn), so the time left is measured on uv_hrtime and the loop time is
 * refreshed first; it may fire up to about 1 ms early, which run_due accepts. */
static void sched_arm(tlc_pubsub_t *ps) {
  uint64_t min = UINT64_MAX, now;
  feed_t *f;
  if (ps->closing)
    return;
  LIST_FOREACH(f, &ps->fd.feeds, link)
  if (!f->dead && f->due_ns < min)
    min = f->due_ns;
  ps->fd.next_due_ns = min;
  if (min == UINT64_MAX) {
    uv_timer_stop(&ps->fd.tick_timer);
    return;
  }
  uv_update_time(ps->loop);
  now = uv_hrtime();
  uv_timer_start(&ps->fd.tick_timer, tick_timer_cb, min > now ? (min - now) / 1000000u : 0, 0);
}

void tlc_pubsub_poll(tlc_pubsub_t *ps) {
  if (ps->fd.next_due_ns <= uv_hrtime() + TICK_EARLY_NS)
    run_due(ps);
}

void tlc__ps_tick_all(tlc_pubsub_t *ps) {
  feed_t *f;
  if (ps->fd.ticking || ps->closing)
    return;
  ps->fd.ticking = 1;
  LIST_FOREACH(f, &ps->fd.feeds, link)
  if (!f->dead)
    tlc__ps_feed_tick(f);
  tlc__ps_pass_end(ps); /* (tests and fuzzers: feed by feed) */
}

void tlc__ps_subn_free(tlc__ps_sub_t *s, subn_t *sn) {
  size_t j;
  tlc_pubsub_t *ps = s->ps;
  if (s->hq.sn == sn)
    s->hq.sn = NULL; /* its history still comes; nothing is attached after it */
  for (j = 0; j < sn->nslots; j++)
    if (sn->slots[j].pending != NULL) {
      tlc__ps_queued_sub(s, sn->slots[j].pending->len);
      tlc__ps_msg_unref(sn->slots[j].pending);
    }
  tlc_free(sn->slots);
  if (sn->events) {
    ps->sb.n_event_subns--;
    ps->sb.evsubs_dirty = 1;
  }
  if (sn->feed != NULL) {
    feed_t *f = sn->feed;
    LIST_REMOVE(sn, flink);
    f->nsubs--;
    feed_release(f);
  }
  tlc__ps_spec_free(sn->spec);
  tlc_free(sn);
}

void tlc__ps_sub_unsubscribe_all(tlc__ps_sub_t *s) {
  while (s->nsubs > 0)
    tlc__ps_subn_free(s, s->subs[--s->nsubs]);
}

feed_t *tlc__ps_subn_attach(tlc__ps_sub_t *s, subn_t *sn) {
  tlc_pubsub_t *ps = s->ps;
  feed_t *tick = NULL;
  size_t i, n = sn->nslots;
  if (sn->feed != NULL) {
    feed_t *f = sn->feed;
    LIST_INSERT_HEAD(&f->subs, sn, flink);
    f->nsubs++;
    /* First a full snapshot of every matching target, as soon as the socket takes it: from
     * the feed's first tick, run now; or, joining a feed that has ticked, from its mirror,
     * after a tick run now unless the last one is fresh (JOIN_FRESH_NS). */
    if (f->tickno == 0 || uv_hrtime() - f->tick_ns > JOIN_FRESH_NS)
      tick = f;
    for (i = 0; i < n && f->tickno > 0; i++) {
      tlc_view_target_t info;
      memset(&info, 0, sizeof(info));
      if (ps->p.info(ps->p.ud, i, &info) == 0 && info.name != NULL &&
          tlc__ps_spec_target(sn->spec, info.name))
        sn->slots[i].catchup = 1;
    }
  }
  return tick;
}
