/* fuzz_http.c - libFuzzer harness for the HTTP port's request handling (daemon/http): the
 * router (method, path with percent-escapes, query, Accept), /metrics in both formats, the
 * JSON API, and the live WebSocket's commands and messages, over two real statistics engines
 * (several cores, so Neutral rows and the histogram union are reached) and a mapping whose
 * names need escaping (quotes, backslashes, a newline, invalid UTF-8).
 *
 * Input: byte 0 = metrics_areas, byte 1 = response cap selector (small caps reach the 503
 * path), then lines: METHOD, PATH, QUERY, ACCEPT, and every further line a live command
 * followed by one live message. PATH is what libwebsockets hands over (decoded once): the
 * corpus holds percent-encodings of every path (a second encoding, "%2561pi", "%2F"), "//",
 * "." and ".." segments. Checks: a status the router documents, a non-empty body, error
 * bodies that are JSON error documents; the token rule and the router agree (a path the rule
 * leaves open, tlc__http_public, is answered with an embedded file and nothing else; every
 * other answer with data came from a path that needs the token); the Host and Origin checks
 * (QUERY and ACCEPT as the header and the configured list) never accept a name beyond
 * loopback that is not listed; an area's histogram adds up to its samples; no crash, no UB,
 * no leak. Target lab1 has timing budgets (a real watch made from a parsed budget file, its
 * engine's tap, with violations: /api/v1/targets/NAME/violations and the budget families of
 * /metrics); the other has none. */
#include "base/alloc.h"
#include "base/err.h"
#include "budget/budget.h"
#include "formats/budget.h"
#include "engine/engine.h"
#include "history/history.h"
#include "http/http-int.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NT 2
static const char *const names[NT] = { "lab1", "evl@127.0.0.1" };
static tlc_engine_t *eng[NT];
static tlc_mapping_t map;
static tlc_tbudget_set_t bset;
static tlc_bwatch_t *watch; /* lab1's */
static int ready;

static const struct tlc_bwatch *f_budgets(void *ud, const char *name) {
  (void)ud;
  return strcmp(name, names[0]) == 0 ? watch : NULL;
}

static size_t f_count(void *ud) {
  (void)ud;
  return NT;
}

static int f_info(void *ud, size_t i, tlc_view_target_t *out) {
  (void)ud;
  if (i >= NT)
    return TLC_ERANGE;
  memset(out, 0, sizeof(*out));
  out->name = names[i];
  out->format = i == 0 ? TLC_FMT_BIN11 : TLC_FMT_EVLOG;
  out->connected = (int)i;
  out->peer = i ? "127.0.0.1:5555" : "";
  out->counters = *tlc_engine_counters(eng[i]);
  return 0;
}

static int f_find(void *ud, const char *name, size_t *index) {
  (void)ud;
  for (size_t i = 0; i < NT; i++)
    if (strcmp(names[i], name) == 0) {
      *index = i;
      return 0;
    }
  return TLC_ERANGE;
}

static int f_snapshot(void *ud, size_t i, tlc_table_t *t, const tlc_snap_opts_t *so) {
  (void)ud;
  if (i >= NT)
    return TLC_ERANGE;
  return tlc_engine_snapshot(eng[i], t, so);
}

static const tlc_mapping_t *f_mapping(void *ud, size_t i) {
  (void)ud;
  return i == 0 ? &map : NULL;
}

static void f_daemon(void *ud, tlc_view_daemon_t *out) {
  (void)ud;
  memset(out, 0, sizeof(*out));
  out->subscribers = 3;
  out->has_store = 1;
  out->store_queue_bytes = 12345;
  out->has_disk_free = 1;
  out->disk_free_bytes = 1ull << 40;
}

static void f_store(void *ud, size_t i, tlc_view_store_t *out) {
  (void)ud;
  memset(out, 0, sizeof(*out));
  out->has = i == 0;
  out->bytes_written = 4096;
  out->segment_seq = 2;
}

static int f_hist(void *ud, size_t i, uint32_t handle, uint32_t context, unsigned kind,
                  const int64_t *le, size_t nle, uint64_t *cum) {
  (void)ud;
  if (i >= NT)
    return TLC_ERANGE;
  return tlc_engine_hist_cum(eng[i], handle, context, kind, le, nle, cum);
}

static int f_code_hist(void *ud, size_t i, const tlc_engine_code_net_t *x, const int64_t *le,
                       size_t nle, uint64_t *cum) {
  (void)ud;
  if (i >= NT)
    return TLC_ERANGE;
  return tlc_engine_code_hist(eng[i], x, TLC_NET, le, nle, cum);
}

static int f_code_hists(void *ud, size_t i, const tlc_engine_code_net_t *xs, size_t nx,
                        const int64_t *le, size_t nle, uint64_t *cum, int *ok) {
  (void)ud;
  if (i >= NT)
    return TLC_ERANGE;
  return tlc_engine_code_hists(eng[i], xs, nx, TLC_NET, le, nle, cum, ok);
}

static int f_code_net(void *ud, size_t i, tlc_engine_code_net_t **out, size_t *n, size_t *cap) {
  (void)ud;
  if (i >= NT)
    return TLC_ERANGE;
  return tlc_engine_code_net(eng[i], out, n, cap);
}

/* The engines' state: the same for every scrape, so a second scrape reuses the first's lines. */
static int f_stamp(void *ud, size_t i, uint64_t st[3]) {
  (void)ud;
  if (i >= NT)
    return TLC_ERANGE;
  st[0] = 1;
  st[1] = i;
  st[2] = 0;
  return 0;
}

static int f_context(void *ud, size_t i, uint32_t context, tlc_ctx_t *c) {
  (void)ud;
  if (i >= NT)
    return TLC_ERANGE;
  return tlc_engine_context(eng[i], context, c);
}

/* The history hook (?since=&until=): remembers the query; the harness completes it after the
 * route (the daemon's threadpool in real life), from target 0's engine or with an error. */
static struct {
  int active;
  void (*done)(void *ud, tlc_hist_result_t *r);
  void *ud;
  tlc_snap_opts_t so;
  tlc_hist_answer_t ans; /* encoded before done, as the daemon's pool does; freed if cancelled */
  int busy;              /* the next query is refused as the daemon's full queue refuses it */
} hq;

static int f_history(void *ud, const char *name, const tlc_when_range_t *range,
                     const tlc_snap_opts_t *so, const tlc_hist_answer_t *ans,
                     void (*done)(void *, tlc_hist_result_t *), void *done_ud, void **job) {
  (void)ud;
  (void)name;
  (void)range;
  if (hq.busy)
    return TLC_ELIMIT;
  hq.active = 1;
  hq.done = done;
  hq.ans = *ans;
  hq.ud = done_ud;
  hq.so = *so;
  *job = &hq;
  return 0;
}

static void f_history_cancel(void *ud, void *job) {
  (void)ud;
  (void)job;
  hq.active = 0;
  hq.ans.free(hq.ans.ctx);
}

/* The rollups' rebuild hook: lab1's ended (its figures in the JSON), the others had none. */
static void f_rebuild(void *ud, const char *name, tlc_view_rebuild_t *out) {
  (void)ud;
  memset(out, 0, sizeof(*out));
  if (strcmp(name, "lab1") != 0)
    return;
  *out = (tlc_view_rebuild_t){ TLC_VIEW_REBUILD_DONE, 7, 8, 12345, 1700000000000 };
}

static tlc_view_t pv = { .count = f_count,
                         .info = f_info,
                         .find = f_find,
                         .snapshot = f_snapshot,
                         .mapping = f_mapping,
                         .history = f_history,
                         .history_cancel = f_history_cancel,
                         .budgets = f_budgets,
                         .rebuild = f_rebuild };

static void ev(tlc_event_t *e, uint32_t h, unsigned type, unsigned core, uint64_t thread,
               int64_t t) {
  memset(e, 0, sizeof(*e));
  e->handle = h;
  e->type = (uint8_t)type;
  e->core = (uint8_t)core;
  e->thread = thread;
  e->time_ns = t;
}

static void setup(void) {
  tlc_event_t e[64];
  size_t n = 0;
  int64_t t = 1000;
  tlc_map_area_t a;
  static const char btext[] = "[budget net0]\narea = 00000000\nstat = net\nmax = 1us\n"
                              "[budget call_core1]\narea = 0000000?\ncontext = core1\n"
                              "stat = call\nmax = 2us\nmin = 100ns\n"
                              "[budget period_any]\narea = 00000002\nstat = period\n"
                              "min = 5ms\n"
                              "[budget writes]\narea = 20000000\nstat = rate\nwindow = 1us\n"
                              "min = 2\nmax = 3\n"
                              "[budget never]\ntarget = other-*\narea = 00000000\n"
                              "stat = net\nmax = 1ns\n";
  char err[300];
  tlc_engine_new(&eng[0], TLC_FMT_BIN11, NULL);
  tlc_engine_new(&eng[1], TLC_FMT_EVLOG, NULL);
  tlc_tbudget_set_init(&bset);
  if (tlc_tbudget_parse(&bset, btext, sizeof(btext) - 1, "fuzz.ini", err, sizeof(err)) != 0 ||
      tlc_bwatch_new(&watch, names[0], &bset, NULL) != 0)
    abort();
  tlc_bwatch_attach(watch, eng[0]);
  for (unsigned k = 0; k < 12; k++) { /* calls on 3 cores, 3 functions, one left open */
    ev(&e[n++], k % 3, 3, k % 3, 0, t);
    t += 100 + 997 * k;
    ev(&e[n++], k % 3, 1, k % 3, 0, t);
    t += 50;
    ev(&e[n++], k % 3, 2, k % 3, 0, t);
    t += 1000 * k;
    if (k != 11)
      ev(&e[n++], k % 3, 0, k % 3, 0, t);
    t += 10;
  }
  ev(&e[n++], 0x20000000, 4, 0, 0, t); /* a data write */
  tlc_engine_push(eng[0], e, n);
  if (tlc_bwatch_all(watch) == 0) /* the budgets above are broken by these calls */
    abort();
  n = 0;
  for (unsigned k = 0; k < 8; k++) {
    ev(&e[n++], 0x00000000, 3, 0xFF, 0x7f00 + k % 2, t);
    t += 300;
    ev(&e[n++], 0x00000000, 0, 0xFF, 0x7f00 + k % 2, t);
  }
  tlc_engine_push(eng[1], e, n);
  tlc_mapping_init(&map);
  memset(&a, 0, sizeof(a));
  a.parent = a.state_handle = TLC_NO_HANDLE;
  a.handle = 0;
  a.name = "main \"quoted\" \\ back\nslash";
  tlc_mapping_add(&map, &a);
  a.handle = 1;
  a.name = "bad\xff\xfeutf8";
  tlc_mapping_add(&map, &a);
  tlc_mapping_add_ctx(&map, 1, "task \"one\"");
  tlc_mapping_finish(&map);
  ready = 1;
}

/* The next line of data[*off..size) into buf (NUL-terminated, truncated); returns 0 at the
 * end of the input. */
static int line(const uint8_t *data, size_t size, size_t *off, char *buf, size_t cap) {
  size_t k = 0;
  if (*off >= size)
    return 0;
  while (*off < size && data[*off] != '\n') {
    if (k + 1 < cap)
      buf[k++] = (char)data[*off];
    (*off)++;
  }
  if (*off < size)
    (*off)++;
  buf[k] = '\0';
  return 1;
}

static void check_resp(const tlc__http_resp_t *rs, size_t len, const char *body) {
  switch (rs->status) {
  case 200:
  case 400:
  case 404:
  case 405:
  case 500:
  case 501:
  case 503:
    break;
  default:
    abort();
  }
  if (rs->static_body == NULL && (len == 0 || body == NULL))
    abort(); /* every answer has a body */
  if (rs->status >= 400 && strncmp(body, "{\"error\": {\"status\": ", 21) != 0)
    abort();
}

/* An area's histogram (/api/v1/targets/NAME/histogram): buckets ascending, none empty, their
 * counts adding up to "samples". */
static void check_histogram(const char *body) {
  const char *p = strstr(body, "\"samples\": ");
  unsigned long long samples, sum = 0, n;
  long long gt, le, last = -2;
  int k;
  if (p == NULL || sscanf(p, "\"samples\": %llu", &samples) != 1 ||
      (p = strstr(p, "\"buckets\": [")) == NULL)
    abort();
  p += 12;
  while ((p = strchr(p, '[')) != NULL && sscanf(p, "[%lld, %lld, %llu]%n", &gt, &le, &n, &k) == 3) {
    if (gt < last || le <= gt || n == 0)
      abort();
    last = le;
    sum += n;
    p += k;
  }
  if (sum != samples)
    abort();
}

/* Whether the router took PATH (as libwebsockets hands it over) for an area's histogram: its
 * decoded form ends in "/histogram". A name may hold '/' and any word, so
 * ".../la/histogramb1/stats" is the stats of target "la/histogramb1", not a histogram. */
static int ends_with_histogram(const char *path) {
  char dec[TLC_HTTP_PATH_MAX + 1];
  long n = tlc__http_path(path, dec, sizeof(dec));
  return n >= 10 && strcmp(dec + strlen(dec) - 10, "/histogram") == 0;
}

/* A scrape the route started (metrics_stream): made in the smallest steps (a target, or 64
 * lines, each), then answered, as the server does over loop turns. */
static void made(tlc__http_view_t *v, tlc__http_resp_t *rs) {
  tlc__http_scrape_t *sc = rs->scrape;
  if (sc == NULL)
    return;
  rs->scrape = NULL;
  while (!tlc__http_scrape_step(v, sc, 0, 1))
    ;
  tlc__http_scrape_answer(sc, rs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const size_t caps[4] = { 64, 2048, 1u << 16, 1u << 24 };
  char method[32], path[700], query[300], accept[300], cmd[2000];
  tlc__http_view_t v;
  tlc_view_t fv = pv;
  tlc__http_req_t rq;
  tlc__http_resp_t rs;
  tlc__http_live_t live, live2;
  tlc__http_live_cache_t cache;
  size_t off = 2, len = 0;
  char *body;
  int pub;
  if (!ready)
    setup();
  if (size < 2)
    return 0;
  memset(&v, 0, sizeof(v));
  fv.daemon_info = f_daemon;
  fv.target_store = f_store;
  fv.hist_cum = f_hist;
  fv.code_net = f_code_net;
  fv.context = f_context;
  fv.stamp = (data[1] & 4) ? f_stamp : NULL;
  fv.code_hist = (data[1] & 16) ? f_code_hist : NULL;
  fv.code_hists = (data[1] & 32) ? f_code_hists : NULL;
  v.src = &fv;
  v.metrics_areas = data[0];
  v.max_response = caps[data[1] & 3];
  v.version = "fuzz";
  v.metrics_stream = (data[1] & 8) != 0; /* /metrics made in steps, as the server does */
  method[0] = path[0] = query[0] = accept[0] = '\0';
  line(data, size, &off, method, sizeof(method));
  line(data, size, &off, path, sizeof(path));
  line(data, size, &off, query, sizeof(query));
  line(data, size, &off, accept, sizeof(accept));
  rq.method = method;
  rq.path = path;
  rq.query = query;
  rq.accept = accept;
  tlc__http_resp_init(&rs, v.max_response);
  hq.busy = (data[0] & 0x80) != 0;
  hq.active = 0;
  pub = tlc__http_public(path);
  tlc__http_route(&v, &rq, &rs);
  made(&v, &rs);
  /* one path for both: the token rule's open paths are the embedded files, nothing else */
  if ((rs.static_body != NULL) != (pub && rs.status == 200))
    abort();
  if (pub && strcmp(method, "GET") == 0 && rs.static_body == NULL)
    abort();
  {
    char dec[TLC_HTTP_PATH_MAX + 1];
    long n = tlc__http_path(path, dec, sizeof(dec));
    if (n >= 0 && (dec[0] != '/' || strchr(dec, '%') != NULL || strstr(dec, "//") != NULL ||
                   strstr(dec, "/../") != NULL || (size_t)n != strlen(path)))
      abort();
  }
  /* Host (ACCEPT) against the configured names (QUERY): without a list, no name beyond
   * loopback passes; an Origin passes without a list only as the daemon's own scheme://Host */
  {
    char low[sizeof(accept)];
    size_t i;
    for (i = 0; accept[i] != '\0'; i++)
      low[i] = (char)((accept[i] >= 'A' && accept[i] <= 'Z') ? accept[i] + 32 : accept[i]);
    low[i] = '\0';
    if (tlc__http_host_ok(accept, NULL, NULL, NULL) && strstr(low, "evil") != NULL)
      abort();
  }
  (void)tlc__http_host_ok(accept, "::", "2001:db8::1", query);
  {
    char own[400];
    snprintf(own, sizeof(own), "%s://%s", (data[1] & 1) ? "https" : "http", accept);
    if (tlc__http_origin_ok(query, data[1] & 1, accept, NULL) && strcasecmp(query, own) != 0)
      abort();
  }
  if (rs.pending != NULL) { /* a range query: completed here, answered, freed */
    tlc__http_pending_t *pd = rs.pending;
    if (rs.status != 0 || tlc__http_pending_ready(pd) || !hq.active)
      abort();
    if (data[1] & 4) { /* the peer left before the answer: cancelled */
      tlc__http_pending_free(pd);
      if (hq.active)
        abort();
    } else {
      tlc_hist_result_t r;
      tlc_hist_result_init(&r);
      if (data[1] & 8) {
        r.status = (data[1] & 16) ? TLC_ERANGE : -ENOENT;
        snprintf(r.err, sizeof(r.err), "no segment in the range");
      } else if (tlc_engine_snapshot(eng[0], &r.t, &hq.so) < 0) {
        r.status = TLC_ENOMEM;
      }
      hq.active = 0;
      (void)hq.ans.encode(hq.ans.ctx, &r); /* then the table goes, as on the pool */
      tlc_table_fini(&r.t);
      tlc_mapping_fini(&r.names);
      hq.done(hq.ud, &r);
      tlc_hist_result_fini(&r);
      if (!tlc__http_pending_ready(pd))
        abort();
      tlc__http_resp_fini(&rs);
      tlc__http_resp_init(&rs, v.max_response);
      tlc__http_pending_answer(&v, pd, &rs);
      tlc__http_pending_free(pd);
    }
    if (rs.status == 0) {
      tlc__http_resp_fini(&rs);
      return 0;
    }
  }
  if (v.src->stamp != NULL && strcmp(path, "/metrics") == 0) {
    /* again, from what the first scrape kept, while the first answer (its runs) is still
     * held as if being sent: the same area series */
    char *body2;
    const char *a1, *a2;
    size_t len2 = 0;
    tlc__http_resp_t rs2;
    tlc__http_resp_init(&rs2, v.max_response);
    tlc__http_route(&v, &rq, &rs2);
    made(&v, &rs2);
    body2 = tlc__http_resp_take(&rs2, &len2);
    if (body2 == NULL)
      abort();
    check_resp(&rs2, len2, body2);
    body = tlc__http_resp_take(&rs, &len);
    if (body == NULL)
      abort();
    check_resp(&rs, len, body);
    a1 = strstr(body, "# HELP tlcap_area_calls");
    a2 = strstr(body2, "# HELP tlcap_area_calls");
    if (rs.status == 200 && rs2.status == 200 &&
        ((a1 == NULL) != (a2 == NULL) || (a1 != NULL && strcmp(a1, a2) != 0)))
      abort();
    tlc_free(body);
    tlc_free(body2);
    tlc__http_resp_fini(&rs2);
  } else {
    body = rs.static_body != NULL ? NULL : tlc__http_resp_take(&rs, &len);
    if (rs.static_body == NULL && body == NULL)
      abort();
    check_resp(&rs, len, body);
    if (rs.status == 200 && body != NULL && ends_with_histogram(path))
      check_histogram(body);
    tlc_free(body);
  }
  tlc__http_resp_fini(&rs);
  tlc__http_metrics_cache_free(&v);
  memset(&live, 0, sizeof(live));
  memset(&live2, 0, sizeof(live2));
  memset(&cache, 0, sizeof(cache));
  cache.pre = (data[1] & 8) ? 16 : 0; /* the server's LWS_PRE headroom, or none */
  while (line(data, size, &off, cmd, sizeof(cmd))) {
    tlc_out_t o;
    (void)tlc__http_live_command(&live, cmd, strlen(cmd));
    tlc_out_init(&o, 1u << 22, NULL, NULL);
    (void)tlc__http_live_message(&v, &live, v.max_response, 1, &o);
    tlc_out_fini(&o);
    /* the shared path: two sockets, one in step, one changing its mind */
    if (cmd[0] & 1)
      tlc__http_live_cache_tick(&cache, 2);
    (void)tlc__http_live_command(&live2, cmd, strlen(cmd));
    {
      char *msg = NULL;
      size_t mlen = 0;
      if (tlc__http_live_shared(&v, &cache, &live2, v.max_response, &msg, &mlen) == 0 &&
          (msg == NULL || msg[cache.pre] != '{' || msg[cache.pre + mlen - 1] != '}'))
        abort(); /* one JSON object after the headroom */
    }
  }
  tlc__http_live_cache_fini(&cache);
  return 0;
}
