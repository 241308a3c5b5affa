/* live.c - the dashboard's WebSocket (/api/v1/live): what the page says, what it is sent.
 *
 * The page sends short text commands: "overview" (targets only) or "target NAME" (also that
 * target's areas). The server sends one JSON document per period (live_ms, default 1 s) when
 * the socket can take it:
 *   {"type": "live", "t": UNIX_MS, "daemon": {...}, "targets": [...], "areas": null | {...}}
 * "targets" is the whole overview each time (a few numbers per target: the page derives rates
 * from successive values). "areas" holds the rows of the chosen target that changed since the
 * previous message ("full": false), or all of them ("full": true) after a command and every
 * 10th message (rows whose rolling windows only slid are refreshed then). A message that
 * would pass max_bytes leaves the remaining rows out ("cut": true; the next one is full again).
 * docs/http.md lists every field.
 *
 * Coalescing: a message is built only when the socket is writable (ws.c), from the state
 * at that moment, so a slow page gets fewer, newer messages and nothing queues.
 */
#include "http/http-int.h"

#include "base/alloc.h"
#include "base/err.h"
#include "formats/dec.h"
#include "formats/json.h"
#include "formats/mapping.h"

#include <inttypes.h>
#include <string.h>

#define FULL_EVERY 10

int tlc__http_live_command(tlc__http_live_t *l, const char *msg, size_t len) {
  static const char tcmd[] = "target ";
  size_t i;
  while (len > 0 && (msg[len - 1] == '\n' || msg[len - 1] == '\r'))
    len--;
  if (len > 6 && memcmp(msg, "token ", 6) == 0)
    return 0; /* the socket's token (ws.c checks the first one; later ones change nothing) */
  if (len == 8 && memcmp(msg, "overview", 8) == 0) {
    l->target[0] = '\0';
    l->since_seq = 0;
    return 0;
  }
  if (len > sizeof(tcmd) - 1 && memcmp(msg, tcmd, sizeof(tcmd) - 1) == 0) {
    const char *name = msg + sizeof(tcmd) - 1;
    size_t nl = len - (sizeof(tcmd) - 1);
    if (nl >= sizeof(l->target))
      return TLC_EINVAL;
    for (i = 0; i < nl; i++)
      if ((unsigned char)name[i] < 0x21 || (unsigned char)name[i] > 0x7e)
        return TLC_EINVAL; /* target names are printable ASCII without blanks */
    memcpy(l->target, name, nl);
    l->target[nl] = '\0';
    l->since_seq = 0;
    l->ticks = 0;
    return 0;
  }
  return TLC_EINVAL;
}

static void opt_i64(tlc_out_t *o, const char *key, int has, int64_t v) {
  tlc_out_printf(o, ", \"%s\": ", key);
  if (has)
    tlc_out_i64(o, v);
  else
    tlc_out_puts(o, "null");
}

/* ", \"busy_ns\": N": the net time of target i's code areas (all contexts; open activations
 * up to the last event), from tlc_engine_code_net without a snapshot, O(its areas). The page
 * shows its load: the change over the change of target_time (100 %: one context busy). null
 * when the view cannot tell. */
static void busy(tlc__http_view_t *v, size_t i, tlc_out_t *o) {
  const tlc_view_t *pv = v->src;
  tlc_engine_code_net_t *cn = NULL;
  size_t n = 0, cap = 0;
  int64_t sum = 0;
  if (pv->code_net == NULL || pv->code_net(pv->ud, i, &cn, &n, &cap) != 0) {
    tlc_free(cn);
    tlc_out_puts(o, ", \"busy_ns\": null");
    return;
  }
  for (size_t k = 0; k < n; k++)
    sum += cn[k].net_total;
  tlc_free(cn);
  tlc_out_printf(o, ", \"busy_ns\": %" PRId64, sum);
}

static void overview(tlc__http_view_t *v, tlc_out_t *o, int64_t now) {
  const tlc_view_t *pv = v->src;
  tlc_view_daemon_t di;
  size_t n = pv->count(pv->ud);
  memset(&di, 0, sizeof(di));
  if (v->src->daemon_info != NULL)
    v->src->daemon_info(v->src->daemon_ud, &di);
  tlc_out_printf(o,
                 "{\"type\": \"live\", \"t\": %" PRId64 ", \"daemon\": {\"version\": \"%s\""
                 ", \"start_unix_ms\": %" PRId64 ", \"subscribers\": %zu, \"websockets\": %zu",
                 now, v->version != NULL ? v->version : "", v->start_unix_ms, di.subscribers,
                 v->websockets);
  if (di.has_store)
    tlc_out_printf(o,
                   ", \"store\": {\"queue_bytes\": %" PRIu64 ", \"bytes_written\": %" PRIu64
                   ", \"dropped\": %" PRIu64 ", \"stored_bytes\": %" PRIu64
                   ", \"stored_segments\": %" PRIu64 ", \"on_disk_bytes\": %" PRIu64
                   ", \"on_disk_segments\": %" PRIu64 ", \"disk_full\": %d}",
                   di.store_queue_bytes, di.store_bytes_written, di.store_dropped, di.stored_bytes,
                   di.stored_segments, di.on_disk_bytes, di.on_disk_segments, di.disk_full ? 1 : 0);
  else
    tlc_out_puts(o, ", \"store\": null");
  opt_i64(o, "disk_free", di.has_disk_free, (int64_t)di.disk_free_bytes);
  tlc_out_puts(o, "}, \"targets\": [");
  for (size_t i = 0, shown = 0; i < n; i++) {
    static const char *const storage[5] = { "bytes", "records", "dropped", "segment",
                                            "segment_bytes" };
    tlc_view_target_t ti;
    tlc_view_store_t st;
    const tlc_counters_t *c = &ti.counters;
    if (tlc__http_target_read(v, i, &ti, &st) != 0)
      continue;
    if (shown++ > 0)
      tlc_out_puts(o, ", ");
    tlc__http_target_head(v, i, o, &ti);
    tlc_out_printf(o,
                   ", \"events\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"gaps\": %" PRIu64
                   ", \"resyncs\": %" PRIu64 ", \"skipped\": %" PRIu64 ", \"invalid\": %" PRIu64
                   ", \"drops\": %" PRIu64 ", \"anomalies\": %" PRIu64 ", \"reconnects\": %" PRIu64
                   ", \"clock_resets\": %" PRIu64,
                   c->events, c->bytes, c->gaps, c->resyncs, c->bytes_skipped, c->records_invalid,
                   c->dropped_area_limit, c->anomalies, ti.reconnects, c->clock_resets);
    tlc_out_printf(o, ", \"target_time\": %" PRId64, ti.last_time);
    busy(v, i, o);
    tlc__http_target_storage(o, "storage", &st, storage);
    tlc_out_putc(o, '}');
  }
  tlc_out_puts(o, "]");
}

static const char *const kind_json[3] = { ",\"code\",", ",\"data\",", ",\"state\"," };

/* A row as an array, in the order of COLS (the names are sent once per message). */
#define COLS                                                                                       \
  "[\"handle\", \"name\", \"context\", \"kind\", \"state\", \"count\", \"net\", \"avg_net\", "     \
  "\"gross\", \"avg_gross\", \"call\", \"avg_call\", \"max_net\", \"p99_net\", \"w\", \"ctx\", "   \
  "\"value\", \"max_net_at\"]"

static void opt_v(tlc_out_t *o, int has, int64_t v) {
  tlc_out_putc(o, ',');
  if (has)
    tlc_out_i64(o, v);
  else
    tlc_out_puts(o, "null");
}

static void row(tlc_out_t *o, const tlc_table_t *t, const tlc_mapping_t *m, const tlc_stat_t *s) {
  const tlc_map_area_t *ma = tlc_mapping_row_entry(m, s);
  char cb[64], sb[600];
  const char *ctx =
      s->kind == TLC_ROW_CODE ? tlc_mapping_ctx_display(m, t, s->context, cb, sizeof(cb)) : "";
  unsigned k, w;
  int netok = tlc_stat_kind_applies(s, TLC_NET) && s->dist[TLC_NET].n > 0;
  tlc_out_puts(o, "[\"");
  tlc_out_hex(o, s->handle, 8);
  tlc_out_puts(o, "\",");
  if (s->kind == TLC_ROW_STATE) /* VARIABLE = VALUE NAME, as tlcap top shows it */
    tlc_json_string(o, tlc_mapping_state_display(m, s->handle, s->state, sb, sizeof(sb)));
  else
    tlc_json_string(o, ma != NULL ? ma->name : "");
  tlc_out_putc(o, ',');
  tlc_json_string(o, ctx);
  tlc_out_puts(o, kind_json[s->kind < 3 ? s->kind : 0]);
  tlc_out_u64(o, s->state);
  tlc_out_putc(o, ',');
  tlc_out_u64(o, s->count);
  for (k = TLC_NET; k <= TLC_CALL; k++) {
    int applies = tlc_stat_kind_applies(s, k);
    opt_v(o, applies, s->total[k]);
    opt_v(o, applies && s->dist[k].n > 0, applies ? tlc_dist_avg(&s->dist[k]) : 0);
  }
  opt_v(o, netok, s->dist[TLC_NET].max);
  opt_v(o, netok && s->dist[TLC_NET].has_q, s->dist[TLC_NET].q[2]);
  tlc_out_puts(o, ",[");
  for (w = 0; w < s->nwin; w++) {
    if (w)
      tlc_out_putc(o, ',');
    tlc_out_putc(o, '[');
    tlc_out_u64(o, s->win[w].count);
    tlc_out_putc(o, ',');
    tlc_out_i64(o, s->kind != TLC_ROW_DATA ? s->win[w].k[TLC_NET].sum : 0);
    tlc_out_putc(o, ']');
  }
  tlc_out_puts(o, "],"); /* the context's index (a histogram's context=), as the engine's */
  tlc_out_u64(o, s->context);
  tlc_out_putc(o, ','); /* a data row's last value written (null before the first) */
  if (s->kind == TLC_ROW_DATA && s->has_value)
    tlc_out_u64(o, s->value);
  else
    tlc_out_puts(o, "null");
  tlc_out_putc(o, ','); /* when max_net's sample was taken: [start, end, epoch], SPEC 13 */
  if (netok && s->dist[TLC_NET].max_at.known) {
    const tlc_at_t *a = &s->dist[TLC_NET].max_at;
    tlc_out_putc(o, '[');
    tlc_out_i64(o, a->start);
    tlc_out_putc(o, ',');
    tlc_out_i64(o, a->end);
    tlc_out_putc(o, ',');
    tlc_out_u64(o, a->epoch);
    tlc_out_putc(o, ']');
  } else {
    tlc_out_puts(o, "null");
  }
  tlc_out_putc(o, ']');
}

/* The "areas" object of `target`: rows changed since `since` (0: all, "full"). Returns the seq
 * a socket that gets it is up to (0 when cut or missing: its next one must be full). */
static uint64_t areas_frag(tlc__http_view_t *v, const char *target, uint64_t since,
                           size_t max_bytes, tlc_table_t *tab, tlc_out_t *o) {
  const tlc_view_t *pv = v->src;
  tlc_snap_opts_t so;
  tlc_table_t tl, *tp = tab != NULL ? tab : &tl;
  size_t idx, r, nw;
  uint64_t seq;
  int full = since == 0, cut = 0;
  uint64_t start = o->total;
  tlc_out_puts(o, "{\"target\": ");
  tlc_json_string(o, target);
  if (pv->find(pv->ud, target, &idx) != 0) {
    tlc_out_puts(o, ", \"missing\": true}");
    return 0;
  }
  memset(&so, 0, sizeof(so));
  so.since_seq = since;
  so.windows = TLC_SNAP_WKINDS | (1u << TLC_NET); /* the page shows count and net time */
  so.neutral = 1;
  /* one snapshot; quantiles only where the page shows one (p99 of NET: a histogram walk per
   * row), GROSS and CALL for their averages */
  so.kinds = TLC_SNAP_KINDS_SET | (1u << TLC_NET) | (1u << TLC_GROSS) | (1u << TLC_CALL);
  so.quantiles = TLC_SNAP_QKINDS | (1u << TLC_NET);
  if (tab == NULL)
    tlc_table_init(&tl);
  if (pv->snapshot(pv->ud, idx, tp, &so) != 0) {
    if (tab == NULL)
      tlc_table_fini(&tl);
    tlc_out_puts(o, ", \"missing\": true}");
    return 0;
  }
  {
    const tlc_table_t *t = tp;
    const tlc_mapping_t *m = pv->mapping != NULL ? pv->mapping(pv->ud, idx) : NULL;
    tlc_out_printf(o, ", \"full\": %s, \"last_time\": %" PRId64 ", \"windows_ns\": [",
                   full ? "true" : "false", t->last_time);
    for (nw = 0; nw < t->nwindows; nw++)
      tlc_out_printf(o, "%s%" PRId64, nw ? ", " : "", t->window_ns[nw]);
    tlc_out_puts(o, "], \"cols\": " COLS ", \"rows\": [");
    for (r = 0; r < t->nrows; r++) {
      if (o->total - start > max_bytes) {
        cut = 1;
        break;
      }
      if (r)
        tlc_out_puts(o, ", ");
      row(o, t, m, &t->rows[r]);
    }
  }
  tlc_out_printf(o, "], \"cut\": %s}", cut ? "true" : "false");
  seq = cut ? 0 : tp->seq;
  if (tab == NULL)
    tlc_table_fini(&tl);
  return seq;
}

int tlc__http_live_message(tlc__http_view_t *v, tlc__http_live_t *l, size_t max_bytes,
                           int64_t now_unix_ms, tlc_out_t *o) {
  overview(v, o, now_unix_ms);
  if (l->target[0] != '\0') {
    int full = l->since_seq == 0 || l->ticks >= FULL_EVERY;
    tlc_out_puts(o, ", \"areas\": ");
    l->since_seq = areas_frag(v, l->target, full ? 0 : l->since_seq, max_bytes, NULL, o);
    l->ticks = full ? 1 : l->ticks + 1;
  } else {
    tlc_out_puts(o, ", \"areas\": null");
  }
  tlc_out_puts(o, "}");
  return o->err;
}

/* ---- the shared messages (one snapshot and one message per watched target per tick) ---- */

static void msg_free(tlc__http_msg_t *m) {
  tlc_free(m->s);
  memset(m, 0, sizeof(*m));
}

/* An output into m's buffer, kept from the previous tick (emptied), capped at cap. */
static void msg_open(tlc__http_msg_t *m, tlc_out_t *o, size_t cap) {
  tlc_out_init(o, cap, NULL, NULL);
  o->buf = m->s;
  o->cap = m->cap;
  m->s = NULL;
  m->cap = m->n = 0;
  m->built = 0;
}

/* Takes the output back into m (built when it has no error). 0 or the output's error. */
static int msg_close(tlc__http_msg_t *m, tlc_out_t *o, size_t pre) {
  int err = o->err;
  m->s = o->buf;
  m->cap = o->cap;
  m->n = err == 0 && o->len >= pre ? o->len - pre : 0;
  m->built = err == 0;
  o->buf = NULL; /* m owns it */
  o->len = o->cap = 0;
  tlc_out_fini(o);
  return err;
}

void tlc__http_live_cache_tick(tlc__http_live_cache_t *c, int64_t now_unix_ms) {
  size_t i, k = 0;
  c->tick++;
  c->now_unix_ms = now_unix_ms;
  c->ov.built = 0;
  c->ovonly.built = 0;
  for (i = 0; i < c->nt; i++) {
    tlc__http_tcache_t *t = &c->t[i];
    t->delta.built = 0;
    t->full.built = 0;
    if (t->tick + 2 < c->tick) { /* nobody asked for it lately */
      msg_free(&t->delta);
      msg_free(&t->full);
      continue;
    }
    c->t[k++] = *t;
  }
  c->nt = k;
  if (c->nt == 0 && c->tab_init) { /* no target watched: the snapshot's rows go */
    tlc_table_fini(&c->tab);
    c->tab_init = 0;
  }
}

void tlc__http_live_cache_fini(tlc__http_live_cache_t *c) {
  size_t pre = c->pre;
  msg_free(&c->ov);
  msg_free(&c->ovonly);
  for (size_t i = 0; i < c->nt; i++) {
    msg_free(&c->t[i].delta);
    msg_free(&c->t[i].full);
  }
  tlc_free(c->t);
  if (c->tab_init)
    tlc_table_fini(&c->tab);
  memset(c, 0, sizeof(*c));
  c->pre = pre;
}

static tlc__http_tcache_t *tcache(tlc__http_live_cache_t *c, const char *target) {
  tlc__http_tcache_t *t;
  for (size_t i = 0; i < c->nt; i++)
    if (strcmp(c->t[i].target, target) == 0)
      return &c->t[i];
  if ((t = tlc_grow(c->t, &c->capt, c->nt + 1, sizeof(*t), 4)) == NULL)
    return NULL;
  c->t = t;
  t = &c->t[c->nt++];
  memset(t, 0, sizeof(*t));
  snprintf(t->target, sizeof(t->target), "%s", target);
  t->tick = c->tick;
  return t;
}

/* Headroom, the overview, then (target NULL) "areas": null, or the areas of target changed
 * since `since` into m. 0 or an error. */
static int msg_build(tlc__http_live_cache_t *c, tlc__http_msg_t *m, tlc__http_view_t *v,
                     const char *target, uint64_t since, size_t max_bytes) {
  tlc_out_t o;
  msg_open(m, &o, c->pre + c->ov.n + max_bytes + (1u << 20));
  if (c->pre > 0) {
    static const char zero[64];
    tlc_out_write(&o, zero, c->pre < sizeof(zero) ? c->pre : sizeof(zero));
    for (size_t k = sizeof(zero); k < c->pre; k++)
      tlc_out_putc(&o, 0);
  }
  tlc_out_write(&o, c->ov.s, c->ov.n);
  if (target == NULL) {
    tlc_out_puts(&o, ", \"areas\": null}");
    m->seq = 0;
  } else {
    tlc_out_puts(&o, ", \"areas\": ");
    if (!c->tab_init) {
      tlc_table_init(&c->tab);
      c->tab_init = 1;
    }
    m->seq = areas_frag(v, target, since, max_bytes, &c->tab, &o);
    tlc_out_putc(&o, '}');
  }
  return msg_close(m, &o, c->pre);
}

int tlc__http_live_shared(tlc__http_view_t *v, tlc__http_live_cache_t *c, tlc__http_live_t *l,
                          size_t max_bytes, char **msg, size_t *len) {
  tlc__http_msg_t *m;
  int rc;
  if (!c->ov.built) {
    tlc_out_t oo;
    msg_open(&c->ov, &oo, 1u << 26); /* the overview: a few hundred bytes per target */
    overview(v, &oo, c->now_unix_ms);
    if ((rc = msg_close(&c->ov, &oo, 0)) != 0)
      return rc;
  }
  if (l->target[0] == '\0') {
    m = &c->ovonly;
    if (!m->built && (rc = msg_build(c, m, v, NULL, 0, max_bytes)) != 0)
      return rc;
  } else {
    tlc__http_tcache_t *t = tcache(c, l->target);
    int full;
    if (t == NULL)
      return TLC_ENOMEM;
    if (t->tick != c->tick) { /* its first use this tick */
      t->tick = c->tick;
      t->base = t->next_base;
    }
    {
      const tlc_view_t *pv = v->src;
      tlc_view_target_t info;
      size_t idx;
      memset(&info, 0, sizeof(info));
      if (pv->find(pv->ud, l->target, &idx) == 0 && pv->info(pv->ud, idx, &info) == 0 &&
          info.gen != t->gen) {
        /* names loaded, a reset, another target in its place: what was built is stale, and
         * every socket gets the full table */
        t->gen = info.gen;
        t->base = 0;
        t->full.built = t->delta.built = 0;
      }
    }
    /* in step with the previous tick: the delta; else, and every 10th tick, the full table */
    full =
        l->since_seq == 0 || l->since_seq != t->base || t->base == 0 || c->tick % FULL_EVERY == 0;
    m = full ? &t->full : &t->delta;
    if (!m->built) {
      if ((rc = msg_build(c, m, v, l->target, full ? 0 : t->base, max_bytes)) != 0)
        return rc;
      t->next_base = m->seq;
    }
    l->since_seq = m->seq;
  }
  *msg = m->s;
  *len = m->n;
  return 0;
}
