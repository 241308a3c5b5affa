/* http-int.h - what the files of daemon/http share (private to the library).
 *
 * The request side is split so that everything that looks at request bytes is plain C over a
 * tlc__http_view_t, without libwebsockets: route.c (paths, query, methods, errors, /api/v1),
 * metrics.c (/metrics; its daemon-wide families in families.c), live.c (the dashboard's WebSocket
 * messages both ways), targets.c (a target as both JSON documents show it). The libwebsockets glue
 * is server.c and the files it calls (server-int.h: answer.c, send.c, ws.c, tlsreload.c);
 * tests/fuzz/fuzz_http.c drives the same functions directly.
 */
#ifndef TLC_HTTP_INT_H
#define TLC_HTTP_INT_H

#include "base/out.h"
#include "formats/stats.h"
#include "http/http.h"

#include <stddef.h>
#include <stdint.h>

/* What the request handlers read (no libwebsockets state). */
typedef struct tlc__http_view {
  const tlc_view_t *src; /* borrowed: outlives the server */
  uint32_t metrics_areas;
  int64_t start_unix_ms;
  const char *version;
  size_t max_response;
  size_t max_document; /* a range's document, built off the loop, holds at most this (the
                          configured max_response; 0: max_response) */
  size_t websockets;   /* live WebSockets open (for /metrics) */
  size_t connections;
  const tlc_http_stats_t *st;      /* the server's counters (NULL: none, as in the fuzzer) */
  size_t metrics_hint;             /* size of the last /metrics body (its buffer is sized once) */
  struct tlc__http_mcache *mcache; /* /metrics: targets' area series kept (metrics.c) */
  int metrics_stream; /* 1: the route answers /metrics with a scrape to make in steps (send.c);
                         0: made whole into the body */
} tlc__http_view_t;

/* A /metrics scrape made in steps (metrics.c), so that the loop never holds one for long: the
 * targets are read a slice at a time (their area series rendered, or taken from the cache when
 * a target's engine did not change since), then the other families are written; once made,
 * its length is known and its bytes are read out in pieces (the targets' rendered lines are
 * shared with the cache and the other scrapes, not copied). Loop thread only. */
typedef struct tlc__http_scrape tlc__http_scrape_t;
/* A new scrape (openmetrics 1: OpenMetrics 1.0, else text 0.0.4) of at most `cap` bytes.
 * 0, TLC_ENOMEM or TLC_ELIMIT. */
int tlc__http_scrape_start(tlc__http_view_t *v, int openmetrics, size_t cap,
                           tlc__http_scrape_t **out);
/* One step: targets are read until slice_ns have passed or slice_bytes have been rendered
 * (at least one target a step), then the other families about as much at a time. Returns 1
 * once the scrape is made (or failed: tlc__http_scrape_error), else 0. */
int tlc__http_scrape_step(tlc__http_view_t *v, tlc__http_scrape_t *sc, uint64_t slice_ns,
                          size_t slice_bytes);
/* 0, or why the scrape failed (TLC_ELIMIT: over its cap; TLC_ENOMEM; the source's error). */
int tlc__http_scrape_error(const tlc__http_scrape_t *sc);
int tlc__http_scrape_om(const tlc__http_scrape_t *sc);
/* Bytes of a made scrape's answer. */
size_t tlc__http_scrape_len(const tlc__http_scrape_t *sc);
/* Up to cap of the answer's next bytes into dst; their number (0 at the end). */
size_t tlc__http_scrape_read(tlc__http_scrape_t *sc, void *dst, size_t cap);
/* Targets in the scrape, those rendered (not taken from the cache) and the bytes of those. */
void tlc__http_scrape_figures(const tlc__http_scrape_t *sc, size_t *targets, size_t *rendered,
                              size_t *rendered_bytes);
void tlc__http_scrape_free(tlc__http_scrape_t *sc); /* NULL: nothing */

typedef struct tlc__http_req {
  const char *method; /* "GET", "POST", ... */
  const char *path;   /* as libwebsockets gives it, without the query (tlc__http_path) */
  const char *query;  /* after '?', or "" */
  const char *accept; /* Accept header or "" */
} tlc__http_req_t;

typedef struct tlc__http_pending tlc__http_pending_t; /* route.c */

typedef struct tlc__http_resp {
  int status;
  const char *ctype;
  const char *allow;       /* 405: the Allow header's value, else NULL */
  const void *static_body; /* an embedded asset (no copy), or NULL: the body is `body` */
  size_t static_len;
  tlc_out_t body;             /* memory mode, capped at view->max_response */
  tlc__http_scrape_t *scrape; /* owned: /metrics (view->metrics_stream), sent after body */
  int cache;                  /* 1: assets may be cached (Cache-Control: max-age) */
  /* Set by the route (status 0, no body) for a response computed off the loop: range
   * statistics (?since=&until=). The server owns it: it waits (tlc__http_pending_wait), then
   * answers with tlc__http_pending_answer, and frees it (also when the peer goes away). */
  tlc__http_pending_t *pending;
} tlc__http_resp_t;

/* Initialises rs (empty body capped at max_response). tlc__http_resp_fini frees it. */
void tlc__http_resp_init(tlc__http_resp_t *rs, size_t max_response);
void tlc__http_resp_fini(tlc__http_resp_t *rs);
/* The whole body (body, then a made scrape's bytes) in one allocation (for tests and the
 * fuzzer; the server sends the parts as they are); NULL when there is none or on failure. */
char *tlc__http_resp_take(tlc__http_resp_t *rs, size_t *len);

/* Answers one request into rs: status, content type, body. Never fails: errors are JSON
 * documents {"error": {"status": N, "message": "..."}} with their status; a body over the cap
 * becomes a 503 error. */
void tlc__http_route(tlc__http_view_t *v, const tlc__http_req_t *rq, tlc__http_resp_t *rs);

/* A pending response (range statistics): wake(ud) runs on the loop once it can be answered
 * (at once when it already can). */
void tlc__http_pending_wait(tlc__http_pending_t *p, void (*wake)(void *ud), void *ud);
/* 1 once the answer is there. */
int tlc__http_pending_ready(const tlc__http_pending_t *p);
/* The answer into rs: the `--export json` document of the range, or an error document. */
void tlc__http_pending_answer(tlc__http_view_t *v, tlc__http_pending_t *p, tlc__http_resp_t *rs);
/* Frees p; a query still running is cancelled (wake is not called). NULL: nothing. */
void tlc__http_pending_free(tlc__http_pending_t *p);

/* Error document with status into rs (body replaced). */
void tlc__http_error(tlc__http_resp_t *rs, int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#define TLC_HTTP_PATH_MAX 511 /* bytes of a path the router reads (longer: 400) */

/* THE path of a request, as the token rule (tlc__http_public) and the router
 * (tlc__http_route) both read it; neither looks at a path any other way. `in` is the path
 * libwebsockets gives: percent-decoded once, its "." and ".." segments resolved and "//"
 * collapsed (on the decoded bytes: "%2F" is a '/', so "lab%2Fapp-42" is "lab/app-42").
 * Nothing is decoded again: a '%' left (a path encoded twice, "/%2561pi"), a byte below 0x20
 * or 0x7f, a path not starting with '/', or a "//", "." or ".." segment (what libwebsockets
 * resolved cannot be there) make it -1 (the router's 400). Else the path is copied into out
 * (outlen bytes with its NUL; longer: -1) and its length returned. */
long tlc__http_path(const char *in, char *out, size_t outlen);

/* 1 when the request path `in` (as tlc__http_path takes it) is one of the page's embedded
 * files, the only answers given without a token; 0 for everything else (the API, /metrics,
 * the live WebSocket, unknown and bad paths: with a token file, all need the token). */
int tlc__http_public(const char *in);

/* DNS rebinding: 1 when `host` (a Host header, HOST[:PORT] or [IPv6][:PORT]; NULL: none was
 * sent) names this daemon: a loopback name or address (tlc_peers_host_is_loopback), `bound`
 * (the address the port is bound to), `local` (the address the connection reached, for a
 * port bound to a wildcard address), or one of `names` (http_hosts: names separated by commas
 * or blanks), case aside; a name's final root dot is ignored. Else 0 (421). */
int tlc__http_host_ok(const char *host, const char *bound, const char *local, const char *names);

/* A WebSocket handshake's Origin (NULL: none, not a browser): 1 when it is the daemon's own
 * scheme://HOST (scheme http, or https with `tls`; HOST the request's Host header, which
 * tlc__http_host_ok accepted), or one of `origins` (http_origins, exact origins separated by
 * commas or blanks, case aside). Else 0: a page of another origin may not read the live
 * data. */
int tlc__http_origin_ok(const char *origin, int tls, const char *host, const char *origins);

/* /metrics made whole into o (a scrape run to its end at once), within o's cap;
 * `openmetrics` 1: OpenMetrics 1.0, else text 0.0.4. Returns 0 or the output's error
 * (TLC_ELIMIT: over the cap). */
int tlc__http_metrics(tlc__http_view_t *v, int openmetrics, tlc_out_t *o);
/* rs answers with the made scrape sc (owned by rs from now on): its bytes and content type, or
 * the error document of its failure (503 over the cap, 500 otherwise). */
void tlc__http_scrape_answer(tlc__http_scrape_t *sc, tlc__http_resp_t *rs);
/* Frees what /metrics keeps between scrapes (the view's mcache; a source without `stamp`
 * keeps nothing). Safe when there is none. */
void tlc__http_metrics_cache_free(tlc__http_view_t *v);
/* The histogram edges (ns) of tlcap_area_net_duration_seconds, and their number. */
const int64_t *tlc__http_metrics_edges(size_t *n);
/* /metrics' pieces shared by metrics.c and families.c: a family's HELP and TYPE lines
 * (OpenMetrics when om: a counter's family name without _total), a label (first: no comma
 * before it; the value escaped, invalid UTF-8 as U+FFFD), and the daemon-wide families. */
void tlc__http_family(tlc_out_t *o, int om, const char *name, const char *type, const char *help);
void tlc__http_label(tlc_out_t *o, const char *name, const char *v, int first);
void tlc__http_head(tlc__http_view_t *v, int om, tlc_out_t *o);

/* ---- a target in the JSON documents (targets.c) ---- */

/* Names of a budget violation's area and context in target `idx` (budget/report.h's
 * tlc_breport_names_fn, ud a tlc__http_bnames_t): the area as the mapping names it ("VARIABLE =
 * VALUE" for a state row; left as it is without a name), the context as the exports name it
 * (a task's CONTEXTS name, else core<N>, task<HEX>, thread<HEX>; left as it is when unknown). */
typedef struct tlc__http_bnames {
  const tlc_view_t *pv;
  size_t idx;
  const tlc_mapping_t *m; /* the target's names (evlog: its items'), or NULL */
} tlc__http_bnames_t;
void tlc__http_bnames(void *ud, uint32_t handle, uint8_t row_kind, uint64_t state, uint32_t context,
                      char *area, size_t alen, char *ctx, size_t clen);

/* Target i's info and storage figures (st->has 0: not stored). 0 or the view's error. */
int tlc__http_target_read(tlc__http_view_t *v, size_t i, tlc_view_target_t *ti,
                          tlc_view_store_t *st);
/* Opens target i's object: {"name": .., "format": .., "state": .., "peer": .., "subscribers":
 * N (protobuf subscribers whose subscriptions include it), "rollups": (below); no closing
 * brace. */
void tlc__http_target_head(tlc__http_view_t *v, size_t i, tlc_out_t *o,
                           const tlc_view_target_t *ti);
/* , "rollups": null (no rollups: pv has no rebuild hook), or , "rollups": {"rebuild": "none" |
 * "rebuilding" | "done", "segments_read", "segments", "samples", "done_unix_ms"}: the rebuild
 * of target `name`'s rollups from its segments (tlc_view_rebuild_t). Loop thread. */
void tlc__http_target_rollups(const tlc_view_t *pv, tlc_out_t *o, const char *name);
/* , "KEY": null, or , "KEY": {names[0]: bytes written, [1]: records written, [2]: records
 * dropped, [3]: the open segment's sequence, [4]: its bytes}. */
void tlc__http_target_storage(tlc_out_t *o, const char *key, const tlc_view_store_t *st,
                              const char *const names[5]);

/* /api/v1/targets into o. */
int tlc__http_api_targets(tlc__http_view_t *v, tlc_out_t *o);

/* ---- live WebSocket (live.c) ---- */

#define TLC_HTTP_LIVE_MSG_MAX 1024 /* bytes of a message from the page */

/* Per-socket live state. */
typedef struct tlc__http_live {
  char target[128 + 1];           /* areas of this target ("" none); target.h TLC_TARGET_NAME_MAX */
  uint64_t since_seq;             /* last sent areas seq (0: next is full) */
  unsigned ticks;                 /* messages sent since the last full areas message */
  char rx[TLC_HTTP_LIVE_MSG_MAX]; /* a message being received in fragments */
  size_t rxlen;
} tlc__http_live_t;

/* A message from the page: "target NAME" (areas of NAME from now on, a full table first) or
 * "overview" (no areas). Returns 0, or TLC_EINVAL for anything else (the socket is closed). */
int tlc__http_live_command(tlc__http_live_t *l, const char *msg, size_t len);

/* The next live message into o (one JSON document: the overview, and the areas of l->target
 * that changed since l->since_seq, or all of them every 10th message or after a command),
 * at most max_bytes (areas beyond it are left out, "cut": true). Updates l. Returns 0 or
 * the output's error. */
int tlc__http_live_message(tlc__http_view_t *v, tlc__http_live_t *l, size_t max_bytes,
                           int64_t now_unix_ms, tlc_out_t *o);

/* Shared live messages, so that D dashboards cost one snapshot and one message per tick, not
 * D: per tick the overview once, the overview-only message once, and per watched target a
 * message with its rows changed since the previous tick (for the sockets that have that
 * tick's state) and one with its full table (for the others: new sockets, slow ones that
 * skipped a tick, and everyone every 10th tick), each built at most once per tick, when a
 * socket first needs it, and written to every socket that needs it from the same bytes.
 * Buffers are kept from tick to tick (no allocation per message once warm). */
typedef struct tlc__http_msg {
  char *s;  /* `pre` bytes of headroom (the WebSocket header goes there), then the message */
  size_t n; /* the message's length (after the headroom) */
  size_t cap;
  int built;    /* built this tick */
  uint64_t seq; /* engine seq the areas in it are up to (0: nothing to resume from) */
} tlc__http_msg_t;

typedef struct tlc__http_tcache {
  char target[128 + 1];
  uint64_t tick;      /* the last tick a socket asked for it */
  uint64_t base;      /* seq the delta starts from: what sockets in step have */
  uint64_t next_base; /* seq of the last message built this tick: the next tick's base */
  tlc__http_msg_t delta, full;
  uint64_t gen; /* the target's view gen at that tick: a new one (names loaded, a reset,
                   another target in its place) makes the tick's message full */
} tlc__http_tcache_t;

typedef struct tlc__http_live_cache {
  size_t pre; /* headroom before every message (server.c: LWS_PRE; 0 elsewhere) */
  uint64_t tick;
  int64_t now_unix_ms;
  tlc__http_msg_t ov;     /* the overview's text (no headroom; seq unused) */
  tlc__http_msg_t ovonly; /* the message of the sockets that watch no target */
  tlc__http_tcache_t *t;
  size_t nt, capt;
  tlc_table_t tab; /* the snapshot, its rows reused from message to message */
  int tab_init;
} tlc__http_live_cache_t;

/* A new period: the previous tick's messages are stale, targets no socket asked for in the
 * last two ticks forgotten (their buffers freed). */
void tlc__http_live_cache_tick(tlc__http_live_cache_t *c, int64_t now_unix_ms);
void tlc__http_live_cache_fini(tlc__http_live_cache_t *c);

/* The socket's next message, from the cache (built when missing): the same document as
 * tlc__http_live_message. *msg points at the buffer (c->pre bytes of headroom the caller may
 * write into, then *len bytes of message); it belongs to the cache and stays valid until the
 * next tlc__http_live_cache_tick or _fini. Updates l. Returns 0 or an error (TLC_ELIMIT,
 * TLC_ENOMEM). */
int tlc__http_live_shared(tlc__http_view_t *v, tlc__http_live_cache_t *c, tlc__http_live_t *l,
                          size_t max_bytes, char **msg, size_t *len);

/* ---- embedded files (assets.c, generated at build time from daemon/http/www and Debian's
 * libjs-dygraphs) ---- */
typedef struct tlc__http_asset {
  const char *path; /* "/index.html" */
  const char *ctype;
  const unsigned char *data;
  size_t len;
} tlc__http_asset_t;
extern const tlc__http_asset_t tlc__http_assets[];
extern const size_t tlc__http_nassets;

/* Shared JSON/number helpers. */
void tlc__http_out_seconds(tlc_out_t *o, int64_t ns); /* exact decimal seconds */

#endif
