/* route.c - one HTTP request to one response: paths, methods, the JSON API, errors.
 *
 * Paths (docs/http.md):
 *   /, /index.html, /app.js, /style.css, /vendor/dygraph.min.js, /vendor/dygraph.min.css
 *                                   embedded files (assets.c)
 *   /metrics                        metrics.c (OpenMetrics when Accept names it)
 *   /api/v1/targets                 JSON array of targets
 *   /api/v1/targets/NAME/stats      the `tlcap stats --export json` document of NAME
 *   /api/v1/targets/NAME/stats?since=T&until=T
 *                                   the same of a past range (SPEC 10), computed off the loop
 *                                   by the view's history hook: the response is pending
 *                                   (tlc__http_pending_t) until the query is done
 *   /api/v1/targets/NAME/trend?area=H&since=T[&until=T][&step=1m|1h|1d][&context=C][&kind=K]
 *   /api/v1/targets/NAME/diff?a=T1..T2&b=T3..T4[&b_target=NAME2][&context=C][&kind=K]
 *                                   SPEC 14 from the rollups, by the view's rollup hook (built
 *                                   off the loop: pending as a range, docs/rollups.md)
 *   /api/v1/targets/NAME/histogram?area=H&context=C&kind=K
 *                                   one area's histogram, the engine's own buckets (1 %)
 *                                   with samples (api_histogram below)
 *   /api/v1/targets/NAME/violations[?budget=B]
 *                                   its timing budgets' violations (SPEC 13): the document
 *                                   `tlcapd replay --budgets --export json` writes
 *                                   (budget/report.h), with "target"; zero budgets when none
 *                                   applies to it (api_violations below)
 *   /-/healthy, /-/ready            health and readiness, one line (health() below)
 *   /api/v1/live                    the live WebSocket (server.c; a plain GET is a 400 here)
 * NAME may hold '/' (an efl target's SOURCE/APP-PID). The path is the one tlc__http_path
 * gives (libwebsockets decoded it once; nothing is decoded again: a '%' left is a 400), the
 * same the token rule reads (tlc__http_public). Only GET (and HEAD, answered by the server as
 * GET without a body) is served; anything else is 405 with Allow. Every error is a JSON
 * document {"error": {"status": N, "message": "..."}}.
 *
 * Pure: reads the daemon only through the read side (view/view.h); no I/O, no libwebsockets
 * (tests/fuzz/fuzz_http.c calls it directly). Every body goes into one capped tlc_out_t.
 */
#include "http/http-int.h"

#include "base/query.h"

#include "auth/auth.h"
#include "auth/peers.h"
#include "base/alloc.h"
#include "base/err.h"
#include "budget/report.h"
#include "formats/dec.h"
#include "formats/json.h"
#include "view/view.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define TLC_HTTP_NAME_MAX 128 /* target.h TLC_TARGET_NAME_MAX */
#define CT_JSON           "application/json; charset=utf-8"
#define CT_PROM           "text/plain; version=0.0.4; charset=utf-8"
#define CT_OM             "application/openmetrics-text; version=1.0.0; charset=utf-8"
#define CT_TEXT           "text/plain; charset=utf-8"

static const tlc__http_asset_t *asset(const char *path);

void tlc__http_resp_init(tlc__http_resp_t *rs, size_t max_response) {
  memset(rs, 0, sizeof(*rs));
  rs->status = 200;
  tlc_out_init(&rs->body, max_response, NULL, NULL);
}

void tlc__http_resp_fini(tlc__http_resp_t *rs) {
  tlc_out_fini(&rs->body);
  tlc__http_scrape_free(rs->scrape);
  rs->scrape = NULL;
}

char *tlc__http_resp_take(tlc__http_resp_t *rs, size_t *len) {
  size_t n = rs->body.len, sl;
  char *b;
  if (rs->scrape == NULL)
    return tlc_out_take(&rs->body, len);
  sl = tlc__http_scrape_len(rs->scrape);
  if (rs->body.err != 0 || (b = tlc_malloc(n + sl + 1)) == NULL)
    return NULL;
  if (n > 0)
    memcpy(b, rs->body.buf, n);
  n += tlc__http_scrape_read(rs->scrape, b + n, sl);
  b[n] = '\0';
  *len = n;
  tlc__http_resp_fini(rs);
  return b;
}

static void body_reset(tlc__http_resp_t *rs) {
  /* an error document always fits: its message is at most 300 bytes, 6 each once escaped
   * (\ufffd for a byte that is not UTF-8) */
  size_t max = rs->body.max < 4096 ? 4096 : rs->body.max;
  tlc_out_fini(&rs->body);
  tlc_out_init(&rs->body, max, NULL, NULL);
  tlc__http_scrape_free(rs->scrape);
  rs->scrape = NULL;
  rs->static_body = NULL;
  rs->static_len = 0;
}

void tlc__http_error(tlc__http_resp_t *rs, int status, const char *fmt, ...) {
  char msg[300];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  body_reset(rs);
  rs->status = status;
  rs->ctype = CT_JSON;
  rs->cache = 0;
  tlc_out_printf(&rs->body, "{\"error\": {\"status\": %d, \"message\": ", status);
  tlc_json_string(&rs->body, msg);
  tlc_out_puts(&rs->body, "}}\n");
}

long tlc__http_path(const char *in, char *out, size_t outlen) {
  size_t n = strlen(in);
  if (n == 0 || in[0] != '/' || n + 1 > outlen)
    return -1;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)in[i];
    if (c == '%' || c < 0x20 || c == 0x7f)
      return -1; /* an escape left after decoding (encoded twice), a control byte */
    if (c == '/') {
      const char *g = in + i + 1; /* the next segment */
      size_t gl = strcspn(g, "/");
      if ((gl == 0 && g[0] == '/') || (gl == 1 && g[0] == '.') ||
          (gl == 2 && g[0] == '.' && g[1] == '.'))
        return -1; /* "//", "." or "..": libwebsockets resolves them; none is left */
    }
  }
  memcpy(out, in, n + 1);
  return (long)n;
}

int tlc__http_public(const char *in) {
  char path[TLC_HTTP_PATH_MAX + 1];
  return tlc__http_path(in, path, sizeof(path)) >= 0 && asset(path) != NULL;
}

/* The host part of a Host header or of an origin's authority ("[::1]:7480" -> "::1",
 * "Lab1:80" -> "Lab1") into out; -1 when it is not HOST[:PORT] with a numeric port. */
static int host_part(const char *v, size_t n, char *out, size_t outlen) {
  const char *end = v + n, *h = v, *he, *port = NULL;
  if (n > 0 && v[0] == '[') {
    he = memchr(v, ']', n);
    if (he == NULL)
      return -1;
    h = v + 1;
    if (he + 1 < end) {
      if (he[1] != ':')
        return -1;
      port = he + 2;
    }
  } else {
    const char *c = memchr(v, ':', n);
    he = c != NULL ? c : end;
    if (c != NULL) {
      if (memchr(c + 1, ':', (size_t)(end - c - 1)) != NULL)
        return -1; /* an IPv6 address without brackets */
      port = c + 1;
    }
  }
  if (port != NULL) {
    if (port == end || (size_t)(end - port) > 5)
      return -1;
    for (const char *q = port; q < end; q++)
      if (*q < '0' || *q > '9')
        return -1;
  }
  if (he == h || (size_t)(he - h) >= outlen)
    return -1;
  memcpy(out, h, (size_t)(he - h));
  out[he - h] = '\0';
  return 0;
}

/* 1 when `list` (names separated by commas or blanks) holds `s` (n bytes), case aside. */
static int in_list(const char *list, const char *s, size_t n) {
  static const char sep[] = ", \t";
  while (list != NULL && *list != '\0') {
    size_t k;
    list += strspn(list, sep);
    k = strcspn(list, sep);
    if (k > 0 && k == n && strncasecmp(list, s, n) == 0)
      return 1;
    list += k;
  }
  return 0;
}

int tlc__http_host_ok(const char *host, const char *bound, const char *local, const char *names) {
  char h[256];
  size_t n;
  if (host == NULL)
    return 1; /* no Host header (HTTP/1.0): nothing a browser sends */
  if (host_part(host, strlen(host), h, sizeof(h)) != 0)
    return 0;
  n = strlen(h);
  if (n > 1 && h[n - 1] == '.') /* a fully qualified name's root dot */
    h[--n] = '\0';
  return tlc_peers_host_is_loopback(h) || strcasecmp(h, "localhost") == 0 ||
         (bound != NULL && strcasecmp(h, bound) == 0) ||
         (local != NULL && strcasecmp(h, local) == 0) || in_list(names, h, n);
}

int tlc__http_origin_ok(const char *origin, int tls, const char *host, const char *origins) {
  const char *scheme = tls ? "https://" : "http://";
  size_t sl = strlen(scheme);
  if (origin == NULL)
    return 1; /* not a browser: browsers send Origin with every WebSocket handshake */
  if (in_list(origins, origin, strlen(origin)))
    return 1;
  return host != NULL && strncasecmp(origin, scheme, sl) == 0 && strcasecmp(origin + sl, host) == 0;
}

/* The target called `name`, or an error into rs (0 / -1). */
static int find_target(tlc__http_view_t *v, const char *name, size_t *idx, tlc__http_resp_t *rs) {
  const tlc_view_t *pv = v->src;
  if (pv->find(pv->ud, name, idx) != 0) {
    tlc__http_error(rs, 404, "no target called \"%s\"", name);
    return -1;
  }
  return 0;
}

static void counters_json(tlc_out_t *o, const tlc_counters_t *c) {
  tlc_out_printf(o,
                 "{\"events\": %" PRIu64 ", \"anomalies\": %" PRIu64
                 ", \"dropped_area_limit\": %" PRIu64 ", \"engine_gaps\": %" PRIu64
                 ", \"bytes\": %" PRIu64 ", \"records\": %" PRIu64 ", \"bytes_skipped\": %" PRIu64
                 ", \"resyncs\": %" PRIu64 ", \"records_invalid\": %" PRIu64
                 ", \"truncated\": %" PRIu64 ", \"overflow_items\": %" PRIu64
                 ", \"clock_resets\": %" PRIu64 "}",
                 c->events, c->anomalies, c->dropped_area_limit, c->gaps, c->bytes, c->records,
                 c->bytes_skipped, c->resyncs, c->records_invalid, c->truncated, c->overflow_items,
                 c->clock_resets);
}

int tlc__http_api_targets(tlc__http_view_t *v, tlc_out_t *o) {
  static const char *const storage[5] = { "bytes_written", "records_written", "dropped_records",
                                          "segment_seq", "segment_bytes" };
  const tlc_view_t *pv = v->src;
  size_t n = pv->count(pv->ud), shown = 0;
  tlc_out_puts(o, "[");
  for (size_t i = 0; i < n; i++) {
    tlc_view_target_t ti;
    tlc_view_store_t st;
    if (tlc__http_target_read(v, i, &ti, &st) != 0)
      continue;
    tlc_out_puts(o, shown++ > 0 ? ",\n " : "\n ");
    tlc__http_target_head(v, i, o, &ti);
    tlc_out_printf(o,
                   ", \"connections\": %" PRIu64 ", \"reconnects\": %" PRIu64 ", \"gaps\": %" PRIu64
                   ", \"decode_errors\": %" PRIu64 ", \"last_connect_unix_ms\": %" PRId64
                   ", \"last_disconnect_unix_ms\": %" PRId64 ", \"counters\": ",
                   ti.connections, ti.reconnects, ti.gaps, ti.decode_errors,
                   ti.last_connect_unix_ms, ti.last_disconnect_unix_ms);
    counters_json(o, &ti.counters);
    tlc__http_target_storage(o, "storage", &st, storage);
    tlc_out_puts(o, "}");
  }
  tlc_out_puts(o, shown ? "\n]\n" : "]\n");
  return o->err;
}

static void api_stats(tlc__http_view_t *v, const char *name, tlc__http_resp_t *rs) {
  const tlc_view_t *pv = v->src;
  tlc_table_t t;
  size_t idx;
  int rc;
  if (find_target(v, name, &idx, rs) != 0)
    return;
  tlc_table_init(&t);
  /* as `tlcap stats` asks (GetStats: windows, quantiles, Neutral, names) */
  rc = pv->snapshot(pv->ud, idx, &t, NULL);
  if (rc == 0) {
    const tlc_mapping_t *m = pv->mapping != NULL ? pv->mapping(pv->ud, idx) : NULL;
    rs->ctype = CT_JSON;
    rc = tlc_json_write(&rs->body, &t, m, name, 0);
  }
  tlc_table_fini(&t);
  if (rc != 0)
    tlc__http_error(rs, rc == TLC_ELIMIT ? 503 : 500, "statistics of \"%s\": %s", name,
                    rc == TLC_ELIMIT ? "larger than the response limit" : tlc_strerror(rc));
}

/* ---- range statistics (?since=&until=) ----
 *
 * The JSON document of a range is written on the threadpool thread that computed the range
 * (doc_encode, a tlc_hist_answer_t): the loop gets the finished document and only sends it, in
 * the server's chunks. Its cap is the configured max_response; what is left of max_inflight is
 * checked when the answer goes out, as for any other body. */

typedef struct doc {
  size_t cap;                       /* the document's cap */
  char name[TLC_HTTP_NAME_MAX + 1]; /* the target's */
  char *body;                       /* the document (tlc_out_take), or NULL */
  size_t len;
  int rc; /* tlc_json_write's: 0, TLC_ELIMIT (over cap), TLC_ENOMEM */
} doc_t;

struct tlc__http_pending {
  const tlc_view_t *pv;
  void *job; /* the running query (which owns doc meanwhile), NULL once done */
  int done;
  int status;    /* the query's: 0 or its error */
  char err[300]; /* why */
  doc_t *doc;
  char name[TLC_HTTP_NAME_MAX + 1];
  void (*wake)(void *ud);
  void *wake_ud;
  int rollup; /* a rollup query (job: the view's rollup hook's) */
};

static void doc_free(void *ctx) {
  doc_t *d = ctx;
  if (d != NULL)
    tlc_free(d->body);
  tlc_free(d);
}

/* tlc_hist_answer_t.encode: on the pool thread. */
static size_t doc_encode(void *ctx, tlc_hist_result_t *r) {
  doc_t *d = ctx;
  tlc_out_t o;
  if (r->status != 0)
    return 0; /* the error document is small: written on the loop */
  tlc_out_init(&o, d->cap, NULL, NULL);
  d->rc = tlc_json_write(&o, &r->t, r->has_names ? &r->names : NULL, d->name, 0);
  if (d->rc == 0 && (d->body = tlc_out_take(&o, &d->len)) == NULL)
    d->rc = TLC_ENOMEM;
  tlc_out_fini(&o);
  return d->rc == 0 ? d->len : 0;
}

static void pending_done(void *ud, tlc_hist_result_t *r) {
  tlc__http_pending_t *p = ud;
  p->job = NULL;
  p->done = 1;
  p->status = r->status;
  snprintf(p->err, sizeof(p->err), "%s", r->err);
  if (p->wake != NULL)
    p->wake(p->wake_ud);
}

void tlc__http_pending_wait(tlc__http_pending_t *p, void (*wake)(void *ud), void *ud) {
  p->wake = wake;
  p->wake_ud = ud;
  if (p->done && wake != NULL)
    wake(ud);
}

int tlc__http_pending_ready(const tlc__http_pending_t *p) {
  return p->done;
}

void tlc__http_pending_free(tlc__http_pending_t *p) {
  if (p == NULL)
    return;
  if (p->job == NULL)
    doc_free(p->doc);
  else if (p->rollup) {
    if (p->pv->rollup_cancel != NULL)
      p->pv->rollup_cancel(p->pv->rollup_ud, p->job);
    doc_free(p->doc);
  } else if (p->pv->history_cancel != NULL)
    p->pv->history_cancel(p->pv->history_ud, p->job); /* the query frees doc */
  tlc_free(p);
}

void tlc__http_pending_answer(tlc__http_view_t *v, tlc__http_pending_t *p, tlc__http_resp_t *rs) {
  doc_t *d = p->doc;
  int rc;
  (void)v;
  rs->status = 200;
  if (p->status != 0) {
    int st = p->status == -ENOENT || p->status == TLC_ERANGE ? 404
             : p->status == -ECANCELED                       ? 503
                                                             : 500;
    if (p->rollup && p->status == TLC_ELIMIT)
      st = 503;
    tlc__http_error(rs, st, "%s of \"%s\": %s", p->rollup ? "rollups" : "statistics in the range",
                    p->name, p->err[0] ? p->err : tlc_strerror(p->status));
    return;
  }
  rs->ctype = CT_JSON;
  rc = d->rc;
  if (rc == 0 && d->len > rs->body.max) /* over what is left of the bytes being sent */
    rc = TLC_ELIMIT;
  if (rc == 0) { /* the document becomes the body: no copy */
    size_t max = rs->body.max;
    tlc_out_fini(&rs->body);
    tlc_out_init(&rs->body, max, NULL, NULL);
    rs->body.buf = d->body;
    rs->body.len = rs->body.total = d->len;
    rs->body.cap = d->len + 1; /* tlc_out_take made room for a NUL */
    d->body = NULL;
  }
  if (rc != 0)
    tlc__http_error(rs, rc == TLC_ELIMIT ? 503 : 500, "statistics of \"%s\": %s", p->name,
                    rc == TLC_ELIMIT ? "larger than the response limit" : tlc_strerror(rc));
}

static void api_stats_range(tlc__http_view_t *v, const char *name, const char *query,
                            tlc__http_resp_t *rs) {
  const tlc_view_t *pv = v->src;
  char since[128], until[128], err[300], bad[80];
  int hs, hu, rc;
  tlc_when_range_t range;
  tlc_snap_opts_t so;
  tlc_hist_answer_t ans;
  tlc__http_pending_t *p;
  static const char *const known[] = { "since", "until", NULL };
  if (tlc_query_unknown(query, known, bad, sizeof(bad))) {
    tlc__http_error(rs, 400, "unknown query parameter \"%s\" (since and until are known)", bad);
    return;
  }
  hs = tlc_query_param(query, "since", since, sizeof(since));
  hu = tlc_query_param(query, "until", until, sizeof(until));
  if (hs < 0 || hu < 0) {
    tlc__http_error(rs, 400, "bad %s (a '%%' left after decoding, or too long)",
                    hs < 0 ? "since" : "until");
    return;
  }
  if (tlc_when_range(hs ? since : NULL, hu ? until : NULL, tlc_when_now(), &range, err,
                     sizeof(err)) < 0) {
    tlc__http_error(rs, 400, "%s", err);
    return;
  }
  if (pv->history == NULL) {
    tlc__http_error(rs, 501,
                    "range statistics are computed from stored segments: this daemon "
                    "does not store (--no-store)");
    return;
  }
  if (strlen(name) > TLC_HTTP_NAME_MAX) {
    tlc__http_error(rs, 404, "no target called \"%s\"", name);
    return;
  }
  if ((p = tlc_calloc(1, sizeof(*p))) == NULL) {
    tlc__http_error(rs, 503, "out of memory");
    return;
  }
  p->pv = pv;
  snprintf(p->name, sizeof(p->name), "%s", name);
  if ((p->doc = tlc_calloc(1, sizeof(*p->doc))) == NULL) {
    tlc_free(p);
    tlc__http_error(rs, 503, "out of memory");
    return;
  }
  p->doc->cap = v->max_document != 0 ? v->max_document : v->max_response;
  snprintf(p->doc->name, sizeof(p->doc->name), "%s", name);
  ans.encode = doc_encode;
  ans.free = doc_free;
  ans.ctx = p->doc;
  memset(&so, 0, sizeof(so));
  so.windows = 1; /* as `tlcapd replay` and `tlcap stats --since` */
  so.neutral = 1;
  so.quantiles = 1;
  rc = pv->history(pv->history_ud, name, &range, &so, &ans, pending_done, p, &p->job);
  if (rc != 0) {
    tlc__http_pending_free(p);
    if (rc == TLC_ELIMIT)
      tlc__http_error(rs, 503,
                      "busy: as many range queries as the daemon runs at once are "
                      "running; try again later");
    else
      tlc__http_error(rs, rc == TLC_EINVAL ? 404 : 500, "statistics of \"%s\" in the range: %s",
                      name, rc == TLC_EINVAL ? "no such target" : tlc_strerror(rc));
    return;
  }
  rs->status = 0;
  rs->pending = p;
}

/* ---- trend and diff (SPEC 14), from the rollups ---- */

static void rollup_done(void *ud, int status, const char *err, char *body, size_t len) {
  tlc__http_pending_t *p = ud;
  p->job = NULL;
  p->done = 1;
  p->status = status;
  snprintf(p->err, sizeof(p->err), "%s", err != NULL ? err : "");
  p->doc->body = body;
  p->doc->len = len;
  p->doc->rc = status;
  if (p->wake != NULL)
    p->wake(p->wake_ud);
}

static void api_rollup(tlc__http_view_t *v, int what, const char *name, const char *query,
                       tlc__http_resp_t *rs) {
  const tlc_view_t *pv = v->src;
  tlc__http_pending_t *p;
  char err[300];
  int rc;
  if (pv->rollup == NULL) {
    tlc__http_error(rs, 501,
                    "trend and diff are answered from rollups, kept with storage: this daemon "
                    "does not store (--no-store)");
    return;
  }
  if (strlen(name) > TLC_HTTP_NAME_MAX) {
    tlc__http_error(rs, 404, "no target called \"%s\"", name);
    return;
  }
  if ((p = tlc_calloc(1, sizeof(*p))) == NULL ||
      (p->doc = tlc_calloc(1, sizeof(*p->doc))) == NULL) {
    tlc_free(p);
    tlc__http_error(rs, 503, "out of memory");
    return;
  }
  p->pv = pv;
  p->rollup = 1;
  snprintf(p->name, sizeof(p->name), "%s", name);
  p->doc->cap = v->max_document != 0 ? v->max_document : v->max_response;
  err[0] = '\0';
  rc = pv->rollup(pv->rollup_ud, what, name, query, p->doc->cap, rollup_done, p, &p->job, err,
                  sizeof(err));
  if (rc != 0) {
    p->job = NULL;
    tlc__http_pending_free(p);
    tlc__http_error(rs,
                    rc == TLC_EINVAL ? 400
                    : rc == -ENOENT  ? 501
                                     : 500,
                    "%s of \"%s\": %s", what == 1 ? "trend" : "diff", name,
                    err[0] ? err : tlc_strerror(rc));
    return;
  }
  rs->status = 0;
  rs->pending = p;
}

/* ---- one area's histogram (the dashboard's detail panel) ----
 *
 * ?area=HANDLE (8 hex digits, as the rows name it) &context=N (the row's context index as the
 * live rows' "ctx" gives it; "neutral" for the union of its contexts) &kind=net|gross|call.
 * The answer holds every bucket of the engine's histogram with samples, [gt, le, count]: count
 * samples v with gt < v <= le. Bucket bounds are the engine's (within 1 %, exact below 256 ns),
 * so the counts are exact; the engine's quantiles (p50 ... p999) fall in these buckets. */
#define HIST_EDGES_MAX 8192 /* 0..255 and 1 % steps to 2^63: about 3,900 */

static size_t hist_edges(int64_t *le, size_t max) {
  size_t n = 0;
  int64_t e = 0;
  le[n++] = 0;
  while (n < max && e < INT64_MAX / 4) {
    /* the next bucket's last value: tlc_engine_hist_edge gives the nearest bucket end, so
     * step into the next bucket past its middle (buckets are at most 2 % wide) */
    int64_t k = e / 100 > 1 ? e / 100 : 1, x;
    do {
      x = tlc_engine_hist_edge(e + k);
      k *= 2;
    } while (x <= e && k < INT64_MAX / 8);
    if (x <= e)
      break;
    le[n++] = e = x;
  }
  return n;
}

/* tlc_view_t.hist_cum over le[0..nle), in the steps of at most 64 edges it takes. */
static int hist_cum_all(const tlc_view_t *pv, size_t idx, uint32_t h, uint32_t c, unsigned k,
                        const int64_t *le, size_t nle, uint64_t *cum) {
  for (size_t i = 0; i < nle; i += 64) {
    int rc = pv->hist_cum(pv->ud, idx, h, c, k, le + i, nle - i < 64 ? nle - i : 64, cum + i);
    if (rc != 0)
      return rc;
  }
  return 0;
}

static void api_histogram(tlc__http_view_t *v, const char *name, const char *query,
                          tlc__http_resp_t *rs) {
  static const char *const known[] = { "area", "context", "kind", NULL };
  static const char *const kinds[3] = { "net", "gross", "call" };
  const tlc_view_t *pv = v->src;
  char area[16], ctx[16], kind[16], bad[80], *end;
  unsigned long long h, c;
  unsigned k;
  size_t idx, nle, i;
  int64_t *le;
  uint64_t *cum, prev = 0;
  int rc;
  if (tlc_query_unknown(query, known, bad, sizeof(bad))) {
    tlc__http_error(rs, 400, "unknown query parameter \"%s\" (area, context and kind are known)",
                    bad);
    return;
  }
  if (tlc_query_param(query, "area", area, sizeof(area)) != 1 || strlen(area) != 8 ||
      strspn(area, "0123456789abcdefABCDEF") != 8) {
    tlc__http_error(rs, 400, "area=HANDLE is needed: the area's 8 hex digits, as its row says");
    return;
  }
  h = strtoull(area, NULL, 16);
  rc = tlc_query_param(query, "context", ctx, sizeof(ctx));
  if (rc == 0 || (rc == 1 && strcmp(ctx, "neutral") == 0)) {
    c = TLC_CTX_NEUTRAL;
  } else {
    errno = 0;
    end = ctx;
    c = rc == 1 && ctx[0] >= '0' && ctx[0] <= '9' ? strtoull(ctx, &end, 10) : ~0ull;
    if (rc != 1 || end == ctx || errno != 0 || *end != '\0' || c >= TLC_CTX_NEUTRAL) {
      tlc__http_error(rs, 400,
                      "bad context (a context index, as the live rows' ctx, or "
                      "\"neutral\")");
      return;
    }
  }
  rc = tlc_query_param(query, "kind", kind, sizeof(kind));
  for (k = 0; rc == 1 && k < 3 && strcmp(kind, kinds[k]) != 0; k++)
    ;
  if (rc == 0)
    k = 0;
  if (rc < 0 || k == 3) {
    tlc__http_error(rs, 400, "bad kind (net, gross or call)");
    return;
  }
  if (find_target(v, name, &idx, rs) != 0)
    return;
  if (pv->hist_cum == NULL) {
    tlc__http_error(rs, 501, "this daemon keeps no histograms");
    return;
  }
  le = tlc_malloc(HIST_EDGES_MAX * sizeof(*le));
  cum = tlc_malloc(HIST_EDGES_MAX * sizeof(*cum));
  if (le == NULL || cum == NULL) {
    tlc_free(le);
    tlc_free(cum);
    tlc__http_error(rs, 503, "out of memory");
    return;
  }
  nle = hist_edges(le, HIST_EDGES_MAX);
  rc = hist_cum_all(pv, idx, (uint32_t)h, (uint32_t)c, TLC_NET + k, le, nle, cum);
  if (rc != 0) {
    tlc_free(le);
    tlc_free(cum);
    if (rc == TLC_ERANGE)
      tlc__http_error(rs, 404, "\"%s\" has no code area %s in context %s", name, area,
                      c == TLC_CTX_NEUTRAL ? "neutral" : ctx);
    else
      tlc__http_error(rs, 500, "histogram of \"%s\": %s", name,
                      rc == TLC_EINVAL ? "histograms are off" : tlc_strerror(rc));
    return;
  }
  rs->ctype = CT_JSON;
  tlc_out_puts(&rs->body, "{\"target\": ");
  tlc_json_string(&rs->body, name);
  tlc_out_printf(&rs->body, ", \"area\": \"%08llx\", \"context\": ", h);
  if (c == TLC_CTX_NEUTRAL)
    tlc_out_puts(&rs->body, "\"neutral\"");
  else
    tlc_out_u64(&rs->body, c);
  tlc_out_printf(&rs->body, ", \"kind\": \"%s\", \"samples\": %" PRIu64 ", \"buckets\": [",
                 kinds[k], nle > 0 ? cum[nle - 1] : 0);
  for (i = 0; i < nle; i++) {
    if (cum[i] == prev)
      continue;
    tlc_out_printf(&rs->body, "%s[%" PRId64 ", %" PRId64 ", %" PRIu64 "]", prev > 0 ? ", " : "",
                   i > 0 ? le[i - 1] : -1, le[i], cum[i] - prev);
    prev = cum[i];
  }
  tlc_out_puts(&rs->body, "]}\n");
  tlc_free(le);
  tlc_free(cum);
  if (rs->body.err != 0)
    tlc__http_error(rs, 503, "histogram of \"%s\": larger than the response limit", name);
}

/* ---- timing budgets' violations (SPEC 13) ---- */

static void api_violations(tlc__http_view_t *v, const char *name, const char *query,
                           tlc__http_resp_t *rs) {
  static const char *const known[] = { "budget", NULL };
  const tlc_view_t *pv = v->src;
  const struct tlc_bwatch *w;
  char bad[64], budget[TLC_BUDGET_NAME_MAX + 2];
  tlc_breport_opts_t ro;
  tlc__http_bnames_t x;
  size_t idx;
  int hb, rc;
  if (tlc_query_unknown(query, known, bad, sizeof(bad))) {
    tlc__http_error(rs, 400, "unknown query parameter \"%s\" (budget is known)", bad);
    return;
  }
  hb = tlc_query_param(query, "budget", budget, sizeof(budget));
  if (hb < 0 || (hb == 1 && budget[0] == '\0')) {
    tlc__http_error(rs, 400, "budget: a budget's name");
    return;
  }
  if (find_target(v, name, &idx, rs) != 0)
    return;
  w = pv->budgets != NULL ? pv->budgets(pv->budgets_ud, name) : NULL;
  if (hb == 1) {
    size_t i, nb = w != NULL ? tlc_bwatch_nbudgets(w) : 0;
    for (i = 0; i < nb && strcmp(tlc_bwatch_budget(w, i)->name, budget) != 0; i++)
      ;
    if (i == nb) {
      tlc__http_error(rs, 404, "no budget called \"%s\" applies to \"%s\"", budget, name);
      return;
    }
  }
  x.pv = pv;
  x.idx = idx;
  x.m = pv->mapping != NULL ? pv->mapping(pv->ud, idx) : NULL;
  memset(&ro, 0, sizeof(ro));
  ro.json = 1;
  ro.target = name;
  ro.budget = hb == 1 ? budget : NULL;
  ro.names = tlc__http_bnames;
  ro.ud = &x;
  rs->ctype = CT_JSON;
  rc = tlc_breport_write(w, &rs->body, &ro);
  if (rc == 0)
    rc = rs->body.err;
  if (rc != 0)
    tlc__http_error(rs, rc == TLC_ELIMIT ? 503 : 500, "violations of \"%s\": %s", name,
                    rc == TLC_ELIMIT ? "larger than the response limit" : tlc_strerror(rc));
}

/* Accept names OpenMetrics (any version; the server writes 1.0.0). */
/* The answer to a scrape that ended with rc. */
static void metrics_status(tlc__http_resp_t *rs, int rc, int om) {
  if (rc != 0)
    tlc__http_error(rs, rc == TLC_ELIMIT ? 503 : 500, "metrics: %s",
                    rc == TLC_ELIMIT ? "larger than the response limit" : tlc_strerror(rc));
  else
    rs->ctype = om ? CT_OM : CT_PROM;
}

void tlc__http_scrape_answer(tlc__http_scrape_t *sc, tlc__http_resp_t *rs) {
  int rc = tlc__http_scrape_error(sc), om = tlc__http_scrape_om(sc);
  tlc__http_scrape_free(rs->scrape);
  rs->scrape = sc;
  metrics_status(rs, rc, om); /* an error document frees it */
}

/* /-/healthy and /-/ready (Prometheus's spelling; docs/http.md): 200 and one line, or 503 and
 * the reasons. Healthy: every watchdog health check passes (the loop answers, the storage
 * writer turns). Ready: healthy, not shutting down, every configured source running, storage
 * not paused by a full disk. */
static void health(tlc__http_view_t *v, int ready, tlc__http_resp_t *rs) {
  tlc_view_daemon_t di;
  const char *sep = "";
  memset(&di, 0, sizeof(di));
  if (v->src->daemon_info != NULL)
    v->src->daemon_info(v->src->daemon_ud, &di);
  rs->ctype = CT_TEXT;
  if (!ready) {
    rs->status = di.unhealthy ? 503 : 200;
    if (di.unhealthy)
      tlc_out_printf(&rs->body, "tlcapd is not healthy: %s\n", di.unhealthy_why);
    else
      tlc_out_puts(&rs->body, "tlcapd is Healthy.\n");
    return;
  }
  if (!di.unhealthy && !di.stopping && di.sources_down == 0 && !di.disk_full) {
    tlc_out_puts(&rs->body, "tlcapd is Ready.\n");
    return;
  }
  rs->status = 503;
  tlc_out_puts(&rs->body, "tlcapd is not ready: ");
  if (di.unhealthy) {
    tlc_out_printf(&rs->body, "%s%s", sep, di.unhealthy_why);
    sep = "; ";
  }
  if (di.stopping) {
    tlc_out_printf(&rs->body, "%sshutting down", sep);
    sep = "; ";
  }
  if (di.sources_down > 0) {
    tlc_out_printf(&rs->body, "%s%s", sep, di.sources_why);
    sep = "; ";
  }
  if (di.disk_full)
    tlc_out_printf(&rs->body, "%sstorage paused: disk full", sep);
  tlc_out_putc(&rs->body, '\n');
}

static int wants_openmetrics(const char *accept) {
  return accept != NULL && strstr(accept, "application/openmetrics-text") != NULL;
}

static const tlc__http_asset_t *asset(const char *path) {
  if (strcmp(path, "/") == 0)
    path = "/index.html";
  for (size_t i = 0; i < tlc__http_nassets; i++)
    if (strcmp(tlc__http_assets[i].path, path) == 0)
      return &tlc__http_assets[i];
  return NULL;
}

void tlc__http_route(tlc__http_view_t *v, const tlc__http_req_t *rq, tlc__http_resp_t *rs) {
  static const char pfx[] = "/api/v1/targets/";
  char path[TLC_HTTP_PATH_MAX + 1];
  const tlc__http_asset_t *a;
  long n;
  rs->status = 200;
  if (strcmp(rq->method, "GET") != 0 && strcmp(rq->method, "HEAD") != 0) {
    tlc__http_error(rs, 405, "method %.16s not allowed (only GET and HEAD)", rq->method);
    rs->allow = "GET, HEAD";
    return;
  }
  /* the path the token rule saw (tlc__http_public): decoded once, checked by the same function */
  n = tlc__http_path(rq->path, path, sizeof(path));
  if (n < 0) {
    tlc__http_error(rs, 400,
                    "bad path (not starting with /, a '%%' left after decoding, a control byte, "
                    "\"//\", \".\" or \"..\", or longer than %zu bytes)",
                    sizeof(path) - 1);
    return;
  }
  if ((a = asset(path)) != NULL) {
    rs->ctype = a->ctype;
    rs->static_body = a->data;
    rs->static_len = a->len;
    rs->cache = 1;
    return;
  }
  if (strcmp(path, "/metrics") == 0) {
    int om = wants_openmetrics(rq->accept);
    int rc;
    if (v->metrics_stream) { /* made in steps by the server, then tlc__http_scrape_answer */
      rc = tlc__http_scrape_start(v, om, rs->body.max, &rs->scrape);
      if (rc == 0) {
        rs->ctype = om ? CT_OM : CT_PROM;
        return;
      }
      tlc__http_metrics_cache_free(v);
    } else {
      rc = tlc__http_metrics(v, om, &rs->body);
    }
    metrics_status(rs, rc, om);
    return;
  }
  if (strcmp(path, "/api/v1/targets") == 0 || strcmp(path, "/api/v1/targets/") == 0) {
    int rc = tlc__http_api_targets(v, &rs->body);
    if (rc != 0)
      tlc__http_error(rs, rc == TLC_ELIMIT ? 503 : 500, "targets: %s", tlc_strerror(rc));
    else
      rs->ctype = CT_JSON;
    return;
  }
  if (strncmp(path, pfx, sizeof(pfx) - 1) == 0) {
    char *name = path + sizeof(pfx) - 1;
    size_t nl = strlen(name);
    if (nl > 6 && strcmp(name + nl - 6, "/stats") == 0) {
      name[nl - 6] = '\0';
      if (name[0] == '\0') { /* a name may hold '/' (an efl target's SOURCE/APP-PID) */
        tlc__http_error(rs, 404, "no such path: %s", rq->path);
        return;
      }
      if (rq->query[0] != '\0') { /* SPEC 10: a past range */
        api_stats_range(v, name, rq->query, rs);
        return;
      }
      api_stats(v, name, rs);
      return;
    }
    if ((nl > 6 && strcmp(name + nl - 6, "/trend") == 0) ||
        (nl > 5 && strcmp(name + nl - 5, "/diff") == 0)) {
      int what = name[nl - 1] == 'd' ? 1 : 2;
      name[nl - (what == 1 ? 6 : 5)] = '\0';
      if (name[0] == '\0') {
        tlc__http_error(rs, 404, "no such path: %s", rq->path);
        return;
      }
      api_rollup(v, what, name, rq->query, rs);
      return;
    }
    if (nl > 11 && strcmp(name + nl - 11, "/violations") == 0) {
      name[nl - 11] = '\0';
      api_violations(v, name, rq->query, rs);
      return;
    }
    if (nl > 10 && strcmp(name + nl - 10, "/histogram") == 0) {
      name[nl - 10] = '\0';
      api_histogram(v, name, rq->query, rs);
      return;
    }
  }
  if (strcmp(path, "/-/healthy") == 0 || strcmp(path, "/-/ready") == 0) {
    health(v, strcmp(path, "/-/ready") == 0, rs);
    return;
  }
  if (strcmp(path, "/api/v1/live") == 0) {
    tlc__http_error(rs, 400, "/api/v1/live is a WebSocket: send Upgrade: websocket");
    return;
  }
  tlc__http_error(rs, 404, "no such path: %.200s", path);
}
