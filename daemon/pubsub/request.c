/* request.c - the requests of subscribers (Hello and the token, Subscribe, GetStats whole and in
 * parts, ...) (request.h; see the design note in server.c).
 */
#define _GNU_SOURCE /* struct ucred (SO_PEERCRED) */
#include "pubsub/pubsub-int.h"

#include "base/alloc.h"
#include "base/err.h"
#include "proto/convert.h"
#include "proto/frame.h"
#include "tlc_version.h"
#include "vserve/vserve.h"

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

/* ---- specs ------------------------------------------------------------------------------- */

/* ---- requests ---------------------------------------------------------------------------- */

int tlc_pubsub_token_equal(const uint8_t *given, size_t given_len, const uint8_t *secret,
                           size_t secret_len) {
  volatile uint8_t d = (uint8_t)(given_len != secret_len);
  size_t i;
  for (i = 0; i < secret_len; i++) {
    /* Read a byte of `given` at every position whatever its length (index clamped to 0 when
     * past its end, a dummy when it is empty), so timing does not depend on where it differs. */
    uint8_t g = given_len > 0 ? given[i < given_len ? i : 0] : 0;
    d |= (uint8_t)(g ^ secret[i]);
  }
  return d == 0;
}

static void reply_ack(tlc__ps_sub_t *s, uint32_t req, uint32_t subid) {
  Tlcap__ServerMessage sm;
  Tlcap__Ack a;
  tlcap__server_message__init(&sm);
  tlcap__ack__init(&a);
  sm.request_id = req;
  sm.msg_case = TLCAP__SERVER_MESSAGE__MSG_ACK;
  sm.ack = &a;
  a.subscription_id = subid;
  tlc__ps_sub_send(s, &sm);
}

static void auth_failed_cb(uv_timer_t *t) {
  tlc__ps_sub_t *s = t->data;
  s->closing = 0; /* was set only to stop input; now fail for real */
  tlc__ps_sub_fail(s, TLCAP__ERROR_CODE__ERR_AUTH_FAILED, "authentication failed",
                   &s->ps->st.closed_auth);
}

static void on_hello(tlc__ps_sub_t *s, uint32_t req, const Tlcap__Hello *h) {
  tlc_pubsub_t *ps = s->ps;
  uint32_t cmax = h->protocol_version != 0 ? h->protocol_version : 1;
  uint32_t cmin = h->min_protocol_version != 0 ? h->min_protocol_version : cmax;
  Tlcap__ServerMessage sm;
  Tlcap__Welcome w;
  if (cmin > cmax)
    cmin = cmax;
  if (cmax < TLC_PROTO_MIN_VERSION || cmin > TLC_PROTO_VERSION) {
    char why[128];
    snprintf(why, sizeof(why), "no common protocol version (client %u..%u, daemon %u..%u)", cmin,
             cmax, TLC_PROTO_MIN_VERSION, TLC_PROTO_VERSION);
    tlc__ps_sub_fail(s, TLCAP__ERROR_CODE__ERR_VERSION, why, &ps->st.closed_frame);
    return;
  }
  if (!s->authed) {
    uint64_t delay = ps->o.auth_fail_delay_ms;
    int ok = 1;
    if (ps->o.auth != NULL)
      ok = tlc_auth_check(ps->o.auth, s->detached ? NULL : s->peer_ip, h->token.data, h->token.len,
                          tlc__ps_now_ms(ps), &delay);
    else if (ps->token_len > 0)
      ok = tlc_pubsub_token_equal(h->token.data, h->token.len, ps->token, ps->token_len);
    if (!ok) {
      /* Never log the token presented. The answer comes after auth_fail_delay_ms, and the
       * connection reads nothing meanwhile: with max_subscribers, that bounds guessing. */
      s->closing = 1;
      if (s->detached) {
        s->closing = 0;
        tlc__ps_sub_fail(s, TLCAP__ERROR_CODE__ERR_AUTH_FAILED, "authentication failed",
                         &ps->st.closed_auth);
        return;
      }
      uv_read_stop(&s->h.stream);
      uv_timer_stop(&s->timer);
      uv_timer_start(&s->timer, auth_failed_cb, delay, 0);
      return;
    }
    s->authed = 1;
    tlc_frame_dec_set_max(&s->dec, ps->o.max_request);
    if (!s->detached)
      uv_timer_stop(&s->timer);
    tlc__ps_logf_(ps, TLC_PS_LOG_INFO, "sub#%llu %s: hello from \"%.64s\"",
                  (unsigned long long)s->id, s->peer, h->client_name != NULL ? h->client_name : "");
  }
  s->version = cmax < TLC_PROTO_VERSION ? cmax : TLC_PROTO_VERSION;
  tlcap__server_message__init(&sm);
  tlcap__welcome__init(&w);
  sm.request_id = req;
  sm.msg_case = TLCAP__SERVER_MESSAGE__MSG_WELCOME;
  sm.welcome = &w;
  w.protocol_version = s->version;
  w.min_protocol_version = TLC_PROTO_MIN_VERSION;
  w.daemon_version = (char *)ps->o.daemon_version;
  w.instance_id = ps->instance_id;
  w.max_request_bytes = ps->o.max_request;
  w.max_message_bytes = ps->o.max_message;
  w.max_subscriptions = (uint32_t)ps->o.max_subscriptions;
  w.min_interval_ms = ps->o.min_interval_ms;
  tlc__ps_sub_send(s, &sm);
}

static void on_subscribe(tlc__ps_sub_t *s, uint32_t req, const Tlcap__Subscribe *r) {
  tlc_pubsub_t *ps = s->ps;
  feed_t *tick = NULL;
  spec_t *spec = NULL, *fspec = NULL, *hist_fspec = NULL;
  subn_t *sn;
  const char *why = "invalid subscription";
  size_t i, n;
  int e;
  for (i = 0; i < s->nsubs; i++)
    if (s->subs[i]->id == r->subscription_id) {
      tlc__ps_send_error(s, req, TLCAP__ERROR_CODE__ERR_BAD_REQUEST,
                         "subscription_id already in use on this connection", 0, TLC_EINVAL);
      return;
    }
  if (s->nsubs >= ps->o.max_subscriptions) {
    tlc__ps_send_error(s, req, TLCAP__ERROR_CODE__ERR_TOO_MANY_SUBSCRIPTIONS,
                       "too many subscriptions on this connection", 0, TLC_ELIMIT);
    return;
  }
  if ((e = tlc__ps_spec_new(ps, r, &spec, &why)) < 0 ||
      (!r->no_snapshots && (e = tlc__ps_spec_new(ps, r, &fspec, &why)) < 0)) {
    tlc__ps_spec_free(spec);
    tlc__ps_send_error(s, req,
                       e == TLC_EINVAL ? TLCAP__ERROR_CODE__ERR_BAD_REQUEST
                                       : TLCAP__ERROR_CODE__ERR_FAILED,
                       e == TLC_EINVAL ? why : "out of memory", 0, e);
    return;
  }
  sn = tlc_calloc(1, sizeof(*sn));
  if (sn == NULL) {
    tlc__ps_spec_free(spec);
    tlc__ps_spec_free(fspec);
    tlc__ps_send_error(s, req, TLCAP__ERROR_CODE__ERR_FAILED, "out of memory", 0, TLC_ENOMEM);
    return;
  }
  sn->id = r->subscription_id;
  sn->sub = s;
  sn->spec = spec;
  n = ps->p.count(ps->p.ud);
  if (tlc__ps_subn_slots(sn, n) < 0) {
    tlc__ps_spec_free(fspec);
    fspec = NULL;
    sn->feed = NULL;
  }
  if (r->history != NULL && fspec != NULL) { /* join mid-stream: the history first */
    if (tlc__ps_hist_subscribe_check(s, req, r) < 0) {
      tlc_free(sn->slots);
      tlc__ps_spec_free(spec);
      tlc__ps_spec_free(fspec);
      tlc_free(sn);
      return;
    }
    hist_fspec = fspec;
    fspec = NULL;
  }
  if (sn->nslots < n || (fspec != NULL && tlc__ps_feed_get(ps, fspec, &sn->feed) < 0)) {
    tlc_free(sn->slots);
    tlc__ps_spec_free(spec);
    tlc__ps_spec_free(hist_fspec);
    tlc_free(sn);
    tlc__ps_send_error(s, req, TLCAP__ERROR_CODE__ERR_FAILED, "out of memory", 0, TLC_ENOMEM);
    return;
  }
  tick = tlc__ps_subn_attach(s, sn);
  if (r->events) {
    if (s->ev_stalled)
      tlc__ps_ev_settle(s); /* drops so far by the subscriptions it had */
    sn->events = 1;
    ps->sb.n_event_subns++;
    ps->sb.evsubs_dirty = 1;
  }
  s->subs[s->nsubs++] = sn;
  reply_ack(s, req, sn->id);
  if (hist_fspec != NULL) { /* the live snapshots follow the history (range.c) */
    tlc__ps_hist_subscribe_start(s, req, r, sn, hist_fspec);
    return;
  }
  /* After the Ack: the snapshot follows it. (A subscriber closing now - it could not even be
   * sent the Ack - may have taken the feed with it.) */
  if (tick != NULL && !s->closing && !ps->fd.ticking) {
    ps->fd.ticking = 1;
    tlc__ps_feed_tick(tick);
    tlc__ps_pass_end(ps); /* may free the feed if the subscriber closed meanwhile */
  }
}

static void on_unsubscribe(tlc__ps_sub_t *s, uint32_t req, const Tlcap__Unsubscribe *r) {
  size_t i;
  for (i = 0; i < s->nsubs; i++)
    if (s->subs[i]->id == r->subscription_id) {
      subn_t *sn = s->subs[i];
      if (sn->events && s->ev_stalled)
        tlc__ps_ev_settle(s); /* drops so far by the subscriptions it had */
      s->subs[i] = s->subs[--s->nsubs];
      tlc__ps_subn_free(s, sn);
      reply_ack(s, req, r->subscription_id);
      return;
    }
  tlc__ps_send_error(s, req, TLCAP__ERROR_CODE__ERR_BAD_REQUEST, "no such subscription", 0,
                     TLC_EINVAL);
}

static void on_list(tlc__ps_sub_t *s, uint32_t req) {
  tlc_pubsub_t *ps = s->ps;
  size_t i, n = ps->p.count(ps->p.ud), k = 0;
  tlc_pb_arena_t a;
  Tlcap__ServerMessage sm;
  Tlcap__TargetList tl;
  Tlcap__TargetInfo *ti;
  Tlcap__Counters *c;
  Tlcap__RollupRebuild *rr;
  tlc_pb_arena_init(&a, ps->o.max_message * 4);
  tlcap__server_message__init(&sm);
  tlcap__target_list__init(&tl);
  sm.request_id = req;
  sm.msg_case = TLCAP__SERVER_MESSAGE__MSG_TARGETS;
  sm.targets = &tl;
  tl.instance_id = ps->instance_id;
  if (ps->p.memory != NULL)
    ps->p.memory(ps->p.ud, &tl.memory_limit, &tl.memory_used, &tl.memory_refused);
  ti = tlc_pb_arena_alloc(&a, sizeof(*ti) * (n + 1));
  c = tlc_pb_arena_alloc(&a, sizeof(*c) * (n + 1));
  rr = tlc_pb_arena_alloc(&a, sizeof(*rr) * (n + 1));
  tl.targets = tlc_pb_arena_alloc(&a, sizeof(*tl.targets) * (n + 1));
  if (ti == NULL || c == NULL || rr == NULL || tl.targets == NULL) {
    tlc_pb_arena_fini(&a);
    tlc__ps_send_error(s, req, TLCAP__ERROR_CODE__ERR_FAILED, "out of memory", 0, TLC_ENOMEM);
    return;
  }
  for (i = 0; i < n; i++) {
    tlc_view_target_t in;
    memset(&in, 0, sizeof(in));
    if (ps->p.info(ps->p.ud, i, &in) < 0)
      continue;
    tlcap__target_info__init(&ti[k]);
    ti[k].name = tlc_pb_arena_strdup(&a, in.name != NULL ? in.name : "");
    ti[k].peer = tlc_pb_arena_strdup(&a, in.peer != NULL ? in.peer : "");
    if (ti[k].name == NULL || ti[k].peer == NULL)
      break;
    ti[k].format = (Tlcap__Format)in.format;
    ti[k].connected = in.connected != 0;
    tlc_pb_counters_set(&c[k], &in.counters);
    ti[k].counters = &c[k];
    ti[k].connections = in.connections;
    ti[k].reconnects = in.reconnects;
    ti[k].gaps = in.gaps;
    ti[k].decode_errors = in.decode_errors;
    ti[k].last_connect_unix_ms = in.last_connect_unix_ms;
    ti[k].last_disconnect_unix_ms = in.last_disconnect_unix_ms;
    ti[k].memory_bytes = in.memory_bytes;
    ti[k].memory_refused = in.memory_refused;
    if (ps->p.rebuild != NULL) { /* rollups kept: their rebuild from segments */
      tlc_view_rebuild_t rb;
      ps->p.rebuild(ps->p.rollup_ud, ti[k].name, &rb);
      tlcap__rollup_rebuild__init(&rr[k]);
      rr[k].state = rb.state == TLC_VIEW_REBUILD_RUNNING ? TLCAP__ROLLUP_REBUILD__STATE__REBUILDING
                    : rb.state == TLC_VIEW_REBUILD_DONE  ? TLCAP__ROLLUP_REBUILD__STATE__DONE
                                                         : TLCAP__ROLLUP_REBUILD__STATE__NONE;
      rr[k].segments_read = rb.segments_read;
      rr[k].segments = rb.segments;
      rr[k].samples = rb.samples;
      rr[k].done_unix_ms = rb.done_unix_ms;
      ti[k].rollups = &rr[k];
    }
    tl.targets[k] = &ti[k];
    k++;
  }
  tl.n_targets = k;
  tlc_view_nats_t nst;
  Tlcap__NatsStatus ns;
  memset(&nst, 0, sizeof(nst));
  if (ps->p.nats != NULL && ps->p.nats(ps->p.nats_ud, &nst) == 0) {
    tlcap__nats_status__init(&ns);
    ns.url = (char *)(nst.url != NULL ? nst.url : "");
    ns.connected = nst.connected != 0;
    ns.published = nst.published;
    ns.dropped = nst.dropped;
    ns.reconnects = nst.reconnects;
    ns.stream_ready = nst.stream_ready != 0;
    tl.nats = &ns;
  }
  tlc_view_daemon_t di;
  Tlcap__HttpStatus hs;
  memset(&di, 0, sizeof(di));
  if (ps->p.daemon_info != NULL)
    ps->p.daemon_info(ps->p.daemon_ud, &di);
  if (di.http_url[0] != '\0' || di.http_off[0] != '\0') {
    tlcap__http_status__init(&hs);
    hs.url = di.http_url;
    hs.off = di.http_off;
    tl.http = &hs;
  }
  tlc__ps_sub_send(s, &sm);
  tlc_pb_arena_fini(&a);
}

static int find_target(tlc__ps_sub_t *s, uint32_t req, const char *name, size_t *idx) {
  tlc_pubsub_t *ps = s->ps;
  char why[200];
  if (name == NULL || ps->p.find(ps->p.ud, name, idx) < 0) {
    snprintf(why, sizeof(why), "no such target: %.128s", name != NULL ? name : "");
    tlc__ps_send_error(s, req, TLCAP__ERROR_CODE__ERR_NO_SUCH_TARGET, why, 0, TLC_ERANGE);
    return -1;
  }
  return 0;
}

static size_t put_varint(uint8_t *p, uint64_t v) {
  size_t n = 0;
  do {
    p[n++] = (uint8_t)((v & 0x7Fu) | (v > 0x7Fu ? 0x80u : 0));
    v >>= 7;
  } while (v != 0);
  return n;
}

static size_t varint_len(uint64_t v) {
  uint8_t b[10];
  return put_varint(b, v);
}

/* GetStats answered in one message (older clients) for a target with more than
 * MIRROR_PART_ROWS areas: its rows are taken from the engine in parts of that many (all now:
 * one consistent snapshot) and encoded one after the other, so the memory is one part's table
 * plus the encoded rows, which max_message caps (TLC_ELIMIT past it), never a table of every
 * area. Returns 0 and *out (refs 1) or a negative error. */
static int stats_build_parts(tlc_pubsub_t *ps, const spec_t *spec, size_t idx, uint32_t req,
                             msg_t **out) {
  tlc_view_target_t info;
  tlc_snap_opts_t so;
  tlc_table_t *t = &ps->fd.scratch, hdr;
  tlc_pb_snap_sel_t sel;
  tlc_pb_arena_t a;
  Tlcap__Snapshot s;
  uint8_t *rows = NULL, *p;
  size_t nrows_b = 0, caprows = 0, snap_hdr, snap_len, stats_len, msg_len, n, k;
  tlc_view_at_t at = { &ps->p, idx };
  tlc_cursor_t cur;
  tlc_cursor_part_t pt;
  const tlc_mapping_t *m;
  msg_t *msg;
  int r = 0;
  *out = NULL;
  memset(&info, 0, sizeof(info));
  if ((r = ps->p.info(ps->p.ud, idx, &info)) < 0)
    return r;
  tlc__ps_snap_opts(spec, 0, &so);
  memset(&sel, 0, sizeof(sel));
  sel.windows = spec->windows;
  sel.quantiles = spec->quantiles;
  tlc_table_init(&hdr);
  tlc_pb_arena_init(&a, ps->o.max_message * 4);
  tlc_cursor_init(&cur);
  tlc_cursor_begin(&cur, 0, TLC_CURSOR_NEVER); /* full */
  while ((r = tlc_cursor_next(&cur, tlc_view_cursor_split(&ps->p), &at, MIRROR_PART_ROWS, &pt)) ==
         1) {
    tlc_table_clear(t);
    if ((r = tlc_view_cursor_take(&at, &pt, t, &so)) < 0)
      goto done;
    if (pt.no == 0 &&
        (r = tlc__ps_hdr_copy(&hdr, t)) < 0) /* the header: contexts, counters, times */
      goto done;
    for (k = 0; k < t->nrows; k++) {
      Tlcap__Row pr;
      size_t packed, len;
      if (a.used > 32 * 1024)
        tlc_pb_arena_reset(&a);
      if ((r = tlc_pb_row_build(&a, &pr, &t->rows[k], spec->windows ? t->nwindows : 0, &sel)) < 0)
        goto done;
      len = tlc_pb_row_field_size(&pr, &packed);
      if (nrows_b + len > ps->o.max_message) {
        r = TLC_ELIMIT;
        goto done;
      }
      if (nrows_b + len > caprows) {
        uint8_t *nb = tlc_grow(rows, &caprows, nrows_b + len, 1, 1u << 16);
        if (nb == NULL) {
          r = TLC_ENOMEM;
          goto done;
        }
        rows = nb;
      }
      nrows_b += tlc_pb_row_field_pack(&pr, packed, rows + nrows_b);
    }
    tlc_cursor_took(&cur, t->seq);
  }
  if (r < 0)
    goto done;
  tlc_pb_arena_reset(&a);
  m = ps->p.mapping != NULL && spec->names ? ps->p.mapping(ps->p.ud, idx) : NULL;
  if ((r = tlc_pb_snapshot_build(&a, &s, &hdr, info.name != NULL ? info.name : "", &sel, m)) < 0)
    goto done;
  s.n_rows = 0; /* the header only: the rows are the bytes encoded above */
  s.instance_id = ps->instance_id;
  s.full = 1;
  s.connected = info.connected != 0;
  s.unix_ms = tlc_now_unix_ms();
  /* ServerMessage{request_id, stats: Stats{snapshot: header + rows}}, framed */
  snap_hdr = tlcap__snapshot__get_packed_size(&s);
  snap_len = snap_hdr + nrows_b;
  stats_len = 1 + varint_len(snap_len) + snap_len;
  msg_len = (req ? 1 + varint_len(req) : 0) + 2 + varint_len(stats_len) + stats_len;
  n = varint_len(msg_len) + msg_len;
  if (n > ps->o.max_message) {
    r = TLC_ELIMIT;
    goto done;
  }
  if ((msg = tlc_malloc(sizeof(*msg) + n)) == NULL) {
    r = TLC_ENOMEM;
    goto done;
  }
  memset(msg, 0, sizeof(*msg));
  msg->refs = 1;
  msg->kind = PSM_CONTROL;
  p = msg->data;
  p += put_varint(p, msg_len);
  if (req) {
    *p++ = 0x08; /* field 1 (request_id), varint */
    p += put_varint(p, req);
  }
  *p++ = 0x8A; /* field 17 (stats), length-delimited: two-byte tag */
  *p++ = 0x01;
  p += put_varint(p, stats_len);
  *p++ = 0x0A; /* Stats field 1 (snapshot), length-delimited */
  p += put_varint(p, snap_len);
  p += tlcap__snapshot__pack(&s, p);
  if (nrows_b > 0)
    memcpy(p, rows, nrows_b);
  p += nrows_b;
  msg->len = (size_t)(p - msg->data);
  ps->st.snapshots_built++;
  *out = msg;
done:
  tlc_pb_arena_fini(&a);
  tlc_table_fini(&hdr);
  tlc_free(rows);
  return r;
}

#define GS_MIN_ROWS 64
#define GS_MAX_ROWS 65536
#define GS_ROW_MIN  16 /* bytes: no encoded row is smaller (handle, context, kind, tags) */

/* Queues the next part of the subscriber's GetStats in parts (s->gs), and ends it after the
 * last. Runs when the previous part has been written (tlc__ps_sub_kick_once). */
void tlc__ps_gs_next(tlc__ps_sub_t *s) {
  tlc_pubsub_t *ps = s->ps;
  stats_part_t pt;
  tlc_cursor_part_t cp;
  tlc_view_at_t at = { &ps->p, 0 };
  msg_t *m = NULL;
  int r;
  char why[200];
  memset(&pt, 0, sizeof(pt));
  s->gs.active = 0; /* set again below while parts remain */
  if (ps->p.find(ps->p.ud, s->gs.target, &at.index) < 0) {
    snprintf(why, sizeof(why), "no such target any more: %.128s", s->gs.target);
    tlc__ps_send_error(s, s->gs.req, TLCAP__ERROR_CODE__ERR_NO_SUCH_TARGET, why, 0, TLC_ERANGE);
    return;
  }
  if ((r = tlc_cursor_next(&s->gs.cur, tlc_view_cursor_split(&ps->p), &at, s->gs.max_rows, &cp)) ==
      1) {
    pt.lo = cp.lo;
    pt.hi = cp.hi;
    pt.no = cp.no;
    pt.base = cp.base;
    pt.more = cp.more;
    r = tlc__ps_stats_build(ps, &s->gs.spec, at.index, s->gs.req, &pt, &m);
  }
  if (r == 0 && m == NULL)
    return; /* no part left */
  if (r < 0) {
    tlc__ps_send_error(s, s->gs.req, TLCAP__ERROR_CODE__ERR_FAILED,
                       r == TLC_ELIMIT
                           ? "a part of the statistics is larger than the daemon's message cap"
                           : tlc_strerror(r),
                       0, r);
    return;
  }
  tlc_cursor_took(&s->gs.cur, pt.seq);
  s->gs.active = pt.more != 0;
  tlc__ps_sub_ctl(s, m);
  tlc__ps_msg_unref(m);
}

static void on_get_stats(tlc__ps_sub_t *s, uint32_t req, const Tlcap__GetStats *g) {
  tlc_pubsub_t *ps = s->ps;
  tlc_view_target_t info;
  spec_t spec;
  size_t idx;
  msg_t *m = NULL;
  int r;
  if (g->range != NULL) { /* a past range: off the loop (range.c, docs/protocol.md "History") */
    tlc__ps_hist_get_stats(s, req, g);
    return;
  }
  if (find_target(s, req, g->target, &idx) < 0)
    return;
  memset(&spec, 0, sizeof(spec));
  spec.windows = g->windows ? 1 : 0;
  spec.quantiles = g->quantiles ? 1 : 0;
  spec.neutral = g->neutral ? 1 : 0;
  spec.names = g->names ? 1 : 0;
  if (g->max_rows > 0 && ps->p.split != NULL && ps->p.snapshot_part != NULL) {
    /* in parts: one part at a time, each built when the socket has taken the previous one */
    if (s->gs.active) {
      tlc__ps_send_error(s, req, TLCAP__ERROR_CODE__ERR_BAD_REQUEST,
                         "a GetStats in parts is already being answered on this connection", 0,
                         TLC_EINVAL);
      return;
    }
    tlc_free(s->gs.target);
    memset(&s->gs, 0, sizeof(s->gs));
    if ((s->gs.target = tlc_strndup(g->target, strlen(g->target))) == NULL) {
      tlc__ps_send_error(s, req, TLCAP__ERROR_CODE__ERR_FAILED, "out of memory", 0, TLC_ENOMEM);
      return;
    }
    s->gs.req = req;
    s->gs.spec = spec;
    tlc_cursor_init(&s->gs.cur);
    tlc_cursor_begin(&s->gs.cur, 0, TLC_CURSOR_NEVER); /* full, in parts of max_rows */
    s->gs.max_rows = g->max_rows < GS_MIN_ROWS   ? GS_MIN_ROWS
                     : g->max_rows > GS_MAX_ROWS ? GS_MAX_ROWS
                                                 : g->max_rows;
    tlc__ps_gs_next(s);
    return;
  }
  /* whole: refused before anything is built when it cannot fit in one message */
  memset(&info, 0, sizeof(info));
  if (ps->p.info(ps->p.ud, idx, &info) == 0 && info.areas > ps->o.max_message / GS_ROW_MIN) {
    char why[240];
    snprintf(why, sizeof(why),
             "statistics of %llu areas are larger than the daemon's message cap (%zu bytes): "
             "ask for them in parts (GetStats.max_rows)",
             (unsigned long long)info.areas, ps->o.max_message);
    tlc__ps_send_error(s, req, TLCAP__ERROR_CODE__ERR_FAILED, why, 0, TLC_ELIMIT);
    return;
  }
  if (info.areas > MIRROR_PART_ROWS && ps->p.split != NULL && ps->p.snapshot_part != NULL)
    r = stats_build_parts(ps, &spec, idx, req, &m); /* memory: one part and the message */
  else
    r = tlc__ps_stats_build(ps, &spec, idx, req, NULL, &m);
  if (r < 0) {
    tlc__ps_send_error(s, req, TLCAP__ERROR_CODE__ERR_FAILED,
                       r == TLC_ELIMIT
                           ? "statistics larger than the daemon's message cap: ask for them "
                             "in parts (GetStats.max_rows)"
                           : tlc_strerror(r),
                       0, r);
    return;
  }
  tlc__ps_sub_ctl(s, m);
  tlc__ps_msg_unref(m);
}

static void on_rotate(tlc__ps_sub_t *s, uint32_t req, const Tlcap__RotateTarget *r) {
  tlc_pubsub_t *ps = s->ps;
  size_t idx;
  int e;
  if (find_target(s, req, r->target, &idx) < 0)
    return;
  e = ps->p.rotate != NULL ? ps->p.rotate(ps->p.ud, idx) : TLC_EINVAL;
  if (e < 0) {
    char why[200];
    snprintf(why, sizeof(why), "rotate %.128s: %s", r->target, tlc_strerror(e));
    tlc__ps_send_error(s, req, TLCAP__ERROR_CODE__ERR_FAILED, why, 0, e);
    return;
  }
  reply_ack(s, req, 0);
}

static void on_load_mapping(tlc__ps_sub_t *s, uint32_t req, const Tlcap__LoadMapping *r) {
  tlc_pubsub_t *ps = s->ps;
  char err[256], why[400];
  size_t idx;
  int e;
  if (find_target(s, req, r->target, &idx) < 0)
    return;
  err[0] = 0;
  e = ps->p.load_mapping != NULL ? ps->p.load_mapping(ps->p.ud, idx, (const char *)r->mapping.data,
                                                      r->mapping.len, err, sizeof(err))
                                 : TLC_EINVAL;
  if (e < 0) {
    snprintf(why, sizeof(why), "mapping for %.128s: %s", r->target,
             err[0] != 0 ? err : tlc_strerror(e));
    tlc__ps_send_error(s, req, TLCAP__ERROR_CODE__ERR_FAILED, why, 0, e);
    return;
  }
  reply_ack(s, req, 0);
  tlc_pubsub_target_event(ps, r->target, TLC_PS_EV_MAPPING_LOADED, NULL);
}

/* ResetTarget: the target's statistics start afresh (its subscribers' feeds start over). */
static void on_reset(tlc__ps_sub_t *s, uint32_t req, const Tlcap__ResetTarget *r) {
  tlc_pubsub_t *ps = s->ps;
  char why[300];
  size_t idx;
  int e;
  if (find_target(s, req, r->target, &idx) < 0)
    return;
  e = ps->p.reset != NULL ? ps->p.reset(ps->p.ud, idx) : TLC_EINVAL;
  if (e < 0) {
    snprintf(why, sizeof(why), "reset %.128s: %s", r->target,
             e == TLC_EAGAIN ? "a checkpoint holds it: try again" : tlc_strerror(e));
    tlc__ps_send_error(s, req, TLCAP__ERROR_CODE__ERR_FAILED, why, 0, e);
    return;
  }
  reply_ack(s, req, 0);
  tlc_pubsub_target_event(ps, r->target, TLC_PS_EV_RESET, NULL);
}

/* ForgetTarget: a disconnected target leaves the table and every view. */
static void on_forget(tlc__ps_sub_t *s, uint32_t req, const Tlcap__ForgetTarget *r) {
  tlc_pubsub_t *ps = s->ps;
  char err[200], why[400];
  size_t idx;
  int e;
  if (find_target(s, req, r->target, &idx) < 0)
    return;
  err[0] = 0;
  e = ps->p.forget != NULL ? ps->p.forget(ps->p.ud, idx, err, sizeof(err)) : TLC_EINVAL;
  if (e < 0) {
    snprintf(why, sizeof(why), "forget %.128s: %s", r->target, err[0] != 0 ? err : tlc_strerror(e));
    tlc__ps_send_error(s, req, TLCAP__ERROR_CODE__ERR_FAILED, why, 0, e);
    return;
  }
  reply_ack(s, req, 0);
  tlc_pubsub_target_event(ps, r->target, TLC_PS_EV_FORGOTTEN, NULL);
}

/* ListSegments: the target's stored segments (storage's hook reads the state directory). */
#define MAX_LIST_SEGMENTS 5000
static void on_list_segments(tlc__ps_sub_t *s, uint32_t req, const Tlcap__ListSegments *r) {
  tlc_pubsub_t *ps = s->ps;
  tlc_view_segment_t *v = NULL;
  size_t n = 0, i;
  int trunc = 0, e;
  char why[200];
  Tlcap__ServerMessage sm;
  Tlcap__SegmentList sl;
  Tlcap__SegmentInfo *si = NULL, **sp = NULL;
  if (ps->p.segments == NULL) {
    tlc__ps_send_error(s, req, TLCAP__ERROR_CODE__ERR_FAILED,
                       "no storage (tlcapd runs with --no-store)", 0, TLC_EINVAL);
    return;
  }
  e = ps->p.segments(ps->p.segments_ud, r->target != NULL ? r->target : "", MAX_LIST_SEGMENTS, &v,
                     &n, &trunc);
  if (e < 0) {
    snprintf(why, sizeof(why), "segments of %.128s: %s", r->target != NULL ? r->target : "",
             tlc_strerror(e));
    tlc__ps_send_error(s, req,
                       e == TLC_EINVAL ? TLCAP__ERROR_CODE__ERR_NO_SUCH_TARGET
                                       : TLCAP__ERROR_CODE__ERR_FAILED,
                       why, 0, e);
    return;
  }
  if (n > 0) {
    si = tlc_calloc(n, sizeof(*si));
    sp = tlc_calloc(n, sizeof(*sp));
    if (si == NULL || sp == NULL) {
      tlc_free(si);
      tlc_free(sp);
      tlc_free(v);
      tlc__ps_send_error(s, req, TLCAP__ERROR_CODE__ERR_FAILED, "out of memory", 0, TLC_ENOMEM);
      return;
    }
  }
  tlcap__server_message__init(&sm);
  tlcap__segment_list__init(&sl);
  sm.request_id = req;
  sm.msg_case = TLCAP__SERVER_MESSAGE__MSG_SEGMENTS;
  sm.segments = &sl;
  sl.target = r->target;
  sl.truncated = trunc != 0;
  sl.n_segments = n;
  sl.segments = sp;
  for (i = 0; i < n; i++) {
    Tlcap__SegmentInfo *x = &si[i];
    tlcap__segment_info__init(x);
    x->seq = v[i].seq;
    x->state = (Tlcap__SegmentInfo__State)v[i].state;
    x->path = v[i].path;
    x->bytes = v[i].bytes;
    x->records = v[i].records;
    x->items = v[i].items;
    x->first_time = v[i].first_time;
    x->last_time = v[i].last_time;
    x->min_time = v[i].min_time;
    x->max_time = v[i].max_time;
    x->opened_unix_ns = v[i].opened_wall_ns;
    x->closed_unix_ns = v[i].closed_wall_ns;
    x->reason = (uint32_t)v[i].reason;
    x->recovered = v[i].recovered != 0;
    x->gaps = v[i].gaps;
    x->epoch = v[i].epoch;
    sp[i] = x;
  }
  tlc__ps_sub_send(s, &sm);
  tlc_free(si);
  tlc_free(sp);
  tlc_free(v);
}

/* ViolationsRequest (SPEC 13, docs/budgets.md "Served"): the target's watch read at once
 * through the view's budgets hook; no hook or no watch: a reply with no budgets. */
static void on_violations(tlc__ps_sub_t *s, uint32_t req, const Tlcap__ViolationsRequest *r) {
  tlc_pubsub_t *ps = s->ps;
  const struct tlc_bwatch *w = NULL;
  Tlcap__ServerMessage sm;
  Tlcap__ViolationsReply *vr;
  size_t idx;
  if (find_target(s, req, r->target, &idx) < 0)
    return;
  if (ps->p.budgets != NULL)
    w = ps->p.budgets(ps->p.budgets_ud, r->target);
  if (tlc_vserve_reply(&vr, &ps->p, r->target, w, r->budget, r->max_recent) < 0) {
    tlc__ps_send_error(s, req, TLCAP__ERROR_CODE__ERR_FAILED, "out of memory", 0, TLC_ENOMEM);
    return;
  }
  tlcap__server_message__init(&sm);
  sm.request_id = req;
  sm.msg_case = TLCAP__SERVER_MESSAGE__MSG_VIOLATIONS;
  sm.violations = vr;
  tlc__ps_sub_send(s, &sm);
  tlc_vserve_reply_free(vr);
}

/* TrendRequest and DiffRequest (docs/rollups.md): the view's rollup hook builds the document
 * off the loop; the reply carries it as it came. */
static void rollup_done(void *ud, int status, const char *err, char *body, size_t len) {
  tlc__ps_sub_t *s = ud;
  uint32_t req = s->rq.req;
  s->rq.job = NULL;
  if (status != 0) {
    char why[400];
    snprintf(why, sizeof(why), "rollups of %.128s: %s", s->rq.target,
             err != NULL && err[0] ? err : tlc_strerror(status));
    tlc__ps_send_error(s, req, TLCAP__ERROR_CODE__ERR_FAILED, why, 0, status);
  } else {
    Tlcap__ServerMessage sm;
    Tlcap__TrendDocument td;
    tlcap__server_message__init(&sm);
    tlcap__trend_document__init(&td);
    sm.request_id = req;
    sm.msg_case = TLCAP__SERVER_MESSAGE__MSG_TREND_DOCUMENT;
    sm.trend_document = &td;
    td.target = s->rq.target;
    td.document.data = (uint8_t *)body;
    td.document.len = len;
    tlc__ps_sub_send(s, &sm);
  }
  tlc_free(body);
}

static void on_rollup(tlc__ps_sub_t *s, uint32_t req, int what, const char *target,
                      const char *query, int text) {
  tlc_pubsub_t *ps = s->ps;
  char err[300];
  int e;
  if (ps->p.rollup == NULL) {
    tlc__ps_send_error(s, req, TLCAP__ERROR_CODE__ERR_FAILED,
                       "trend and diff are answered from rollups, kept with storage: this daemon "
                       "does not store",
                       0, TLC_EINVAL);
    return;
  }
  if (s->rq.job != NULL) {
    tlc__ps_send_error(s, req, TLCAP__ERROR_CODE__ERR_BUSY,
                       "a trend or diff is already running on this connection: one at a time", 0,
                       TLC_ELIMIT);
    return;
  }
  if (target == NULL || target[0] == '\0' || strlen(target) >= sizeof(s->rq.target)) {
    tlc__ps_send_error(s, req, TLCAP__ERROR_CODE__ERR_NO_SUCH_TARGET, "no such target", 0,
                       TLC_EINVAL);
    return;
  }
  s->rq.req = req;
  snprintf(s->rq.target, sizeof(s->rq.target), "%s", target);
  err[0] = '\0';
  e = ps->p.rollup(ps->p.rollup_ud, what | (text ? TLC_VIEW_ROLLUP_TEXT : 0), target,
                   query != NULL ? query : "",
                   ps->o.max_message > 4096 ? ps->o.max_message - 4096 : ps->o.max_message,
                   rollup_done, s, &s->rq.job, err, sizeof(err));
  if (e != 0) {
    s->rq.job = NULL;
    tlc__ps_send_error(s, req,
                       e == TLC_EINVAL ? TLCAP__ERROR_CODE__ERR_BAD_REQUEST
                                       : TLCAP__ERROR_CODE__ERR_FAILED,
                       err[0] ? err : tlc_strerror(e), 0, e);
  }
}

static void on_ping(tlc__ps_sub_t *s, uint32_t req, const Tlcap__Ping *p) {
  Tlcap__ServerMessage sm;
  Tlcap__Pong pg;
  tlcap__server_message__init(&sm);
  tlcap__pong__init(&pg);
  sm.request_id = req;
  sm.msg_case = TLCAP__SERVER_MESSAGE__MSG_PONG;
  sm.pong = &pg;
  pg.cookie = p->cookie;
  tlc__ps_sub_send(s, &sm);
}

/* Whether a string field of message `d` in the encoded bytes p[0..n) (sub-messages included, at
 * most 16 deep) holds a NUL byte. protobuf-c hands strings over NUL-terminated, so such a string
 * would reach the handlers cut at the NUL: "t1\0x" acting on target t1. Only walks
 * what unpack accepted; anything it cannot follow is left to unpack (returns 0). */
static int pb_string_has_nul(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t n,
                             int depth) {
  size_t i = 0;
  if (depth > 16)
    return 0;
  while (i < n) {
    uint64_t key, len;
    int k = tlc_frame_varint(p + i, n - i, &key);
    const ProtobufCFieldDescriptor *f;
    if (k <= 0)
      return 0;
    i += (size_t)k;
    switch (key & 7) {
    case 0:
      if ((k = tlc_frame_varint(p + i, n - i, &len)) <= 0)
        return 0;
      i += (size_t)k;
      break;
    case 1:
      i += 8;
      break;
    case 5:
      i += 4;
      break;
    case 2:
      if ((k = tlc_frame_varint(p + i, n - i, &len)) <= 0 || len > n - i - (size_t)k)
        return 0;
      i += (size_t)k;
      f = key >> 3 <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(d, (unsigned)(key >> 3))
                                 : NULL;
      if (f != NULL && f->type == PROTOBUF_C_TYPE_STRING && memchr(p + i, 0, (size_t)len) != NULL)
        return 1;
      if (f != NULL && f->type == PROTOBUF_C_TYPE_MESSAGE &&
          pb_string_has_nul(f->descriptor, p + i, (size_t)len, depth + 1))
        return 1;
      i += (size_t)len;
      break;
    default:
      return 0;
    }
  }
  return 0;
}

/* Decodes and dispatches one request frame. */
static void dispatch(tlc__ps_sub_t *s, const uint8_t *frame, size_t len) {
  tlc_pubsub_t *ps = s->ps;
  Tlcap__ClientMessage *cm = tlcap__client_message__unpack(&tlc_pb_allocator, len, frame);
  uint32_t req;
  if (cm == NULL) {
    tlc__ps_sub_fail(s, TLCAP__ERROR_CODE__ERR_BAD_FRAME, "malformed request (not a ClientMessage)",
                     &ps->st.closed_frame);
    return;
  }
  ps->st.requests++;
  req = cm->request_id;
  if (pb_string_has_nul(&tlcap__client_message__descriptor, frame, len, 0)) {
    ps->st.bad_strings++;
    tlc__ps_send_error(s, req, TLCAP__ERROR_CODE__ERR_BAD_REQUEST,
                       "a string field holds a NUL byte (names and text never do)", 0, 0);
    goto done;
  }
  if (!s->authed && cm->msg_case != TLCAP__CLIENT_MESSAGE__MSG_HELLO) {
    tlc__ps_sub_fail(s, TLCAP__ERROR_CODE__ERR_HELLO_REQUIRED, "the first request must be Hello",
                     &ps->st.closed_auth);
    goto done;
  }
  switch (cm->msg_case) {
  case TLCAP__CLIENT_MESSAGE__MSG_HELLO:
    on_hello(s, req, cm->hello);
    break;
  case TLCAP__CLIENT_MESSAGE__MSG_SUBSCRIBE:
    on_subscribe(s, req, cm->subscribe);
    break;
  case TLCAP__CLIENT_MESSAGE__MSG_UNSUBSCRIBE:
    on_unsubscribe(s, req, cm->unsubscribe);
    break;
  case TLCAP__CLIENT_MESSAGE__MSG_LIST_TARGETS:
    on_list(s, req);
    break;
  case TLCAP__CLIENT_MESSAGE__MSG_GET_STATS:
    on_get_stats(s, req, cm->get_stats);
    break;
  case TLCAP__CLIENT_MESSAGE__MSG_ROTATE:
    on_rotate(s, req, cm->rotate);
    break;
  case TLCAP__CLIENT_MESSAGE__MSG_LOAD_MAPPING:
    on_load_mapping(s, req, cm->load_mapping);
    break;
  case TLCAP__CLIENT_MESSAGE__MSG_PING:
    on_ping(s, req, cm->ping);
    break;
  case TLCAP__CLIENT_MESSAGE__MSG_LIST_SEGMENTS:
    on_list_segments(s, req, cm->list_segments);
    break;
  case TLCAP__CLIENT_MESSAGE__MSG_RESET:
    on_reset(s, req, cm->reset);
    break;
  case TLCAP__CLIENT_MESSAGE__MSG_FORGET:
    on_forget(s, req, cm->forget);
    break;
  case TLCAP__CLIENT_MESSAGE__MSG_AROUND:
    tlc__ps_hist_around(s, req, cm->around);
    break;
  case TLCAP__CLIENT_MESSAGE__MSG_TREND:
    on_rollup(s, req, 1, cm->trend->target, cm->trend->query, cm->trend->text);
    break;
  case TLCAP__CLIENT_MESSAGE__MSG_DIFF:
    on_rollup(s, req, 2, cm->diff->target, cm->diff->query, cm->diff->text);
    break;
  case TLCAP__CLIENT_MESSAGE__MSG_VIOLATIONS:
    on_violations(s, req, cm->violations);
    break;
  default:
    /* A newer client's request type: say so and carry on (docs/protocol.md). */
    ps->st.unknown_requests++;
    tlc__ps_send_error(s, req, TLCAP__ERROR_CODE__ERR_UNKNOWN_REQUEST,
                       "unknown request type (newer client?)", 0, 0);
    break;
  }
done:
  tlcap__client_message__free_unpacked(cm, &tlc_pb_allocator);
}

static void request_timeout_cb(uv_timer_t *t) {
  tlc__ps_sub_t *s = t->data;
  char why[96];
  snprintf(why, sizeof(why), "request incomplete after %llu ms",
           (unsigned long long)s->ps->o.request_timeout_ms);
  tlc__ps_sub_fail(s, TLCAP__ERROR_CODE__ERR_TIMEOUT, why, &s->ps->st.closed_timeout);
}

/* Feeds received bytes through the frame decoder into dispatch. */
void tlc__ps_sub_input(tlc__ps_sub_t *s, const uint8_t *p, size_t n) {
  tlc_pubsub_t *ps = s->ps;
  while (n > 0 && !s->closing) {
    const uint8_t *frame;
    size_t used, flen;
    int r = tlc_frame_dec_feed(&s->dec, p, n, &used, &frame, &flen);
    if (r == TLC_ELIMIT) {
      char why[128];
      snprintf(why, sizeof(why), "frame above the %s limit of %zu bytes",
               s->authed ? "request" : "pre-authentication", s->dec.max);
      tlc__ps_sub_fail(s, TLCAP__ERROR_CODE__ERR_TOO_LARGE, why, &ps->st.closed_oversize);
      return;
    }
    if (r < 0) {
      tlc__ps_sub_fail(s, TLCAP__ERROR_CODE__ERR_BAD_FRAME,
                       r == TLC_ENOMEM ? "out of memory for the frame" : "malformed frame header",
                       &ps->st.closed_frame);
      return;
    }
    p += used;
    n -= used;
    if (r == 1)
      dispatch(s, frame, flen);
  }
  /* After Hello the timer is free: it bounds how long a started request may stay incomplete
   * (a length prefix followed by silence). Before Hello the Hello deadline covers it. */
  if (s->authed && !s->closing && !s->detached) {
    int partial = s->dec.nhdr > 0 || s->dec.in_payload;
    if (partial && !uv_is_active((uv_handle_t *)&s->timer))
      uv_timer_start(&s->timer, request_timeout_cb, ps->o.request_timeout_ms, 0);
    else if (!partial)
      uv_timer_stop(&s->timer);
  }
}

/* A connection closes (sub's release hook): its range query stops and its subscriptions go. */
void tlc__ps_request_release(tlc__ps_sub_t *s) {
  tlc__ps_hist_stop(s);
  if (s->rq.job != NULL && s->ps->p.rollup_cancel != NULL)
    s->ps->p.rollup_cancel(s->ps->p.rollup_ud, s->rq.job);
  s->rq.job = NULL;
  tlc__ps_sub_unsubscribe_all(s);
}

/* ---- detached subscribers (fuzzing) ------------------------------------------------------ */

tlc__ps_sub_t *tlc__ps_detached_new(tlc_pubsub_t *ps, int authed) {
  tlc__ps_sub_t *s = tlc__ps_sub_alloc(ps);
  if (s == NULL)
    return NULL;
  s->detached = 1;
  snprintf(s->peer, sizeof(s->peer), "detached");
  if (authed) {
    s->authed = 1;
    tlc_frame_dec_set_max(&s->dec, ps->o.max_request);
  }
  tlc__ps_sub_link(ps, s);
  return s;
}

int tlc__ps_detached_feed(tlc__ps_sub_t *s, const uint8_t *data, size_t len) {
  if (!s->closing)
    tlc__ps_sub_input(s, data, len);
  return s->closing ? 1 : 0;
}

uint64_t tlc__ps_detached_bytes(const tlc__ps_sub_t *s) {
  return s->detached_bytes;
}

void tlc__ps_detached_free(tlc__ps_sub_t *s) {
  if (!s->closed) {
    s->closed = 1;
    tlc__ps_sub_unlink(s);
  }
  tlc__ps_sub_free(s);
}
