/* alert.h - budget violations to a Prometheus Alertmanager (SPEC section 13, docs/alerts.md).
 *
 * With `alertmanager_url` set, every budget violation the daemon sees is handed to
 * tlc_alert_violation(). Violations are folded into alerts, one per (budget, target, area,
 * context): the alert's labels name those four (plus alertname, stat and host), its annotations
 * the latest violation's value and limit, its times (target time with epoch, wall clock), the
 * count since it started, the worst value, and the commands that show the moment (`tlcap around
 * TARGET REF`, `tlcapd replay --state-dir DIR --target TARGET --around REF`). They go to the
 * Alertmanager's API v2, `POST /api/v2/alerts`, a JSON array of up to TLC_ALERT_BATCH alerts per
 * request:
 *  - a new alert goes out at the next tick (every second);
 *  - while violations continue it is re-posted every `repost_ms` (with the latest values), so
 *    its endsAt (last violation + resolve_ms) keeps moving and the Alertmanager keeps it firing;
 *  - `resolve_ms` after its last violation it is resolved: posted once more with endsAt set to
 *    that moment, and forgotten once the Alertmanager has taken it.
 *
 * A slow or absent Alertmanager never slows ingest: tlc_alert_violation() only updates the
 * alert table on the loop thread (a hash lookup, no I/O, no allocation past the alert's first
 * violation). The table is the bounded queue: at most `max_alerts` alerts; a violation that
 * would need one more is dropped and counted (an alert already resolved but not yet delivered
 * gives its place first, counted as evicted). Requests run on a thread of this module with a
 * deadline (connect, TLS handshake, request and answer: `timeout_ms` in all), one at a time;
 * a failed request is retried with backoff (1 s doubling to 60 s) and the alerts it carried stay
 * pending, unless the Alertmanager refused them for good (a 4xx status other than 408 and 429:
 * counted as refused, sent again at their next re-post). Closing cancels a request in flight
 * at once (a host name lookup in progress is waited for).
 *
 * Everything but the request itself runs on the loop thread.
 */
#ifndef TLC_ALERT_H
#define TLC_ALERT_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define TLC_ALERT_BATCH 256 /* alerts in one request at most */

typedef struct tlc_alert tlc_alert_t;

typedef struct tlc_alert_opts {
  const char *url;       /* http://HOST[:PORT][/PREFIX] or https://... (required) */
  const char *ca_file;   /* https: "" or NULL = the system's CA store, else a PEM file */
  const char *state_dir; /* for the replay command in the annotations ("" or NULL: none) */
  const char *host;      /* the "host" label ("" or NULL: this host's name) */
  const char *generator; /* generatorURL (the dashboard's URL; "" or NULL: none) */
  uint64_t resolve_ms;   /* resolved this long after the last violation (0: 300000) */
  uint64_t repost_ms;    /* re-posted this often while violations continue (0: 60000) */
  uint64_t timeout_ms;   /* one request's deadline (0: 10000) */
  size_t max_alerts;     /* alerts held at once (0: 4096) */
  /* Log sink (level as log.h); loop thread. */
  void (*log)(void *ud, int level, const char *msg);
  void *log_ud;
} tlc_alert_opts_t;

/* One budget violation (as daemon/budget records it). Strings are copied. */
typedef struct tlc_alert_violation {
  const char *budget, *target, *area, *context; /* names; context "" = not per context */
  const char *stat;     /* "net", "gross", "call", "period", "outside", "rate" */
  int64_t value, limit; /* the sample and the limit it broke: ns, or events for "rate" */
  int over;             /* 1: value > max; 0: value < min */
  int64_t start, end;   /* the sample's start and end, target time (ns) */
  uint64_t epoch;       /* the target clock's epoch of start and end */
  int64_t wall_ns;      /* wall clock (ns since the Unix epoch) of the end */
} tlc_alert_violation_t;

/* Why a violation did not become (part of) an alert, or an alert was given up. */
enum tlc_alert_drop {
  TLC_ALERT_DROP_TABLE_FULL, /* max_alerts firing alerts: a new one has no place */
  TLC_ALERT_DROP_EVICTED,    /* a resolved alert not yet delivered gave its place */
  TLC_ALERT_DROP_BAD_INPUT,  /* a name missing or longer than TLC_ALERT_NAME_MAX */
  TLC_ALERT_DROP_REFUSED,    /* in a request the Alertmanager refused for good (a 4xx status
                                other than 408 and 429): not retried before its next re-post */
  TLC_ALERT_DROP_N
};
/* Why a request failed (each is retried with backoff). */
enum tlc_alert_fail {
  TLC_ALERT_FAIL_RESOLVE, /* the host name did not resolve */
  TLC_ALERT_FAIL_CONNECT, /* refused, unreachable */
  TLC_ALERT_FAIL_TLS,     /* handshake or certificate */
  TLC_ALERT_FAIL_TIMEOUT, /* no answer within timeout_ms */
  TLC_ALERT_FAIL_IO,      /* the connection broke, or the answer was not HTTP */
  TLC_ALERT_FAIL_STATUS,  /* the Alertmanager answered with a status other than 2xx */
  TLC_ALERT_FAIL_N
};
#define TLC_ALERT_NAME_MAX 256

typedef struct tlc_alert_counters {
  uint64_t violations; /* handed to tlc_alert_violation */
  uint64_t active;     /* alerts held now (firing or resolved but not yet delivered) */
  uint64_t firing;     /* of them, firing */
  uint64_t requests;   /* POST requests the Alertmanager accepted (2xx) */
  uint64_t posted;     /* alerts in them (an alert counts once per request carrying it) */
  uint64_t resolved;   /* resolutions the Alertmanager accepted */
  uint64_t dropped;    /* the sum of drops[] */
  uint64_t drops[TLC_ALERT_DROP_N];
  uint64_t failures; /* the sum of fails[] */
  uint64_t fails[TLC_ALERT_FAIL_N];
  int64_t last_ok_unix_ms; /* the last accepted request (0: none yet) */
  uint64_t backoff_ms;     /* the wait before the next attempt (0: none) */
  char last_error[200];    /* the last failure's message ("" = none) */
} tlc_alert_counters_t;

/* Starts the module on `loop`. Returns 0, or a negative error (a bad URL or option: the
 * message went to o->log). */
int tlc_alert_new(tlc_alert_t **out, uv_loop_t *loop, const tlc_alert_opts_t *o);

/* One violation (loop thread; never blocks; see above for the bound). */
void tlc_alert_violation(tlc_alert_t *a, const tlc_alert_violation_t *v);

void tlc_alert_counters(const tlc_alert_t *a, tlc_alert_counters_t *out);

/* Names of drop and failure reasons (Prometheus label values, JSON keys): "table_full",
 * "evicted", "bad_input", "refused"; "resolve", "connect", "tls", "timeout", "io", "status". NULL
 * past the last. */
const char *tlc_alert_drop_name(int r);
const char *tlc_alert_fail_name(int r);

/* The URL, as given to tlc_alert_new. */
const char *tlc_alert_url(const tlc_alert_t *a);

/* The stats dump's "alerts" object, written with the dump's writer. */
struct tlc_json_w;
void tlc_alert_dump(const tlc_alert_t *a, struct tlc_json_w *j);

/* Stops: cancels a request in flight, joins the thread, closes every handle, then calls
 * cb(ud). The loop must keep running until then. Alerts not delivered are not sent: each
 * carries an endsAt after which the Alertmanager resolves it by itself. */
void tlc_alert_close(tlc_alert_t *a, void (*cb)(void *ud), void *ud);

/* ---- parts, for the tests and the fuzzer ---- */

typedef struct tlc_alert_url {
  int tls;
  char host[256]; /* without brackets for IPv6 */
  char port[8];
  char prefix[256]; /* "" or "/path" without a trailing slash */
} tlc_alert_url_t;

/* Parses http(s)://HOST[:PORT][/PREFIX]. Returns 0, or TLC_EINVAL with why[] set. */
int tlc_alert_parse_url(const char *url, tlc_alert_url_t *u, char *why, size_t whylen);

/* Reads an HTTP answer's head from buf[0, n): 1 with *status set when the status line and every
 * header have arrived, 0 when more bytes are needed, -1 when it is not an HTTP/1.x answer. */
int tlc_alert_parse_answer(const char *buf, size_t n, int *status);

#endif
