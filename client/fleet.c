/* fleet.c - `tlcap fleet --nats URL [--subject PREFIX] [--json] [--exit-after SECONDS]`: every
 * daemon and target that publishes to a NATS server (docs/fleet.md), from the broker alone.
 *
 * It reads PREFIX.> (default "tlcap.>") through a JetStream consumer that starts with the last
 * message of every subject, so the table is whole at once, then goes on live; without
 * JetStream on the server it subscribes live only. Subjects are PREFIX.HOST.TARGET.KIND; HOST
 * and TARGET are decoded from their %XX form. Statistics messages (Snapshot) give the state,
 * the events and gaps counters and, from two of them, the event rate; target events update the
 * state between them.
 *
 * Output: a table redrawn every second on a terminal (printed once a second otherwise), or with
 * --json one line per update: {"host","target","connected","events","events_per_s","gaps",
 * "last_seen_unix_ms"}. Runs until SIGINT/SIGTERM or --exit-after. Exit 0, 1 when the broker
 * cannot be reached, 2 usage. libnats's threads are the client's own; this is a CLI, not the
 * daemon.
 */
#include "client/cli.h"

#include "base/alloc.h"
#include "base/out.h"
#include "formats/json.h"
#include "tlcap.pb-c.h"

#include <nats/nats.h>

#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_ROWS 4096

typedef struct row {
  char host[128], target[160];
  int connected;
  uint64_t events, gaps;
  double rate;
  int64_t last_ms, prev_ms;
  uint64_t prev_events;
} row_t;

static row_t *rows;
static size_t nrows;
static volatile sig_atomic_t stop_flag;

static void on_sig(int s) {
  (void)s;
  stop_flag = 1;
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* %XX -> byte (tlc_fleet_subject_token's inverse) */
static void unescape(const char *in, size_t n, char *out, size_t cap) {
  size_t i, k = 0;
  for (i = 0; i < n && k + 1 < cap; i++) {
    unsigned v;
    if (in[i] == '%' && i + 2 < n && sscanf(in + i + 1, "%2x", &v) == 1) {
      out[k++] = (char)v;
      i += 2;
    } else {
      out[k++] = in[i];
    }
  }
  out[k] = '\0';
}

/* PREFIX.HOST.TARGET.KIND -> host, target, kind; 0 or -1. */
static int split_subject(const char *subj, const char *prefix, char *host, size_t hl, char *tgt,
                         size_t tl, const char **kind) {
  size_t pl = strlen(prefix);
  const char *rest, *k, *t;
  if (strncmp(subj, prefix, pl) != 0 || subj[pl] != '.')
    return -1;
  rest = subj + pl + 1;
  k = strrchr(rest, '.');
  if (k == NULL || k == rest)
    return -1;
  t = k - 1;
  while (t > rest && *t != '.')
    t--;
  if (*t != '.')
    return -1; /* no host token */
  unescape(rest, (size_t)(t - rest), host, hl);
  unescape(t + 1, (size_t)(k - t - 1), tgt, tl);
  *kind = k + 1;
  return 0;
}

static row_t *find_row(const char *host, const char *tgt) {
  size_t i;
  for (i = 0; i < nrows; i++)
    if (strcmp(rows[i].host, host) == 0 && strcmp(rows[i].target, tgt) == 0)
      return &rows[i];
  if (nrows >= MAX_ROWS)
    return NULL;
  memset(&rows[nrows], 0, sizeof(rows[nrows]));
  snprintf(rows[nrows].host, sizeof(rows[nrows].host), "%s", host);
  snprintf(rows[nrows].target, sizeof(rows[nrows].target), "%s", tgt);
  return &rows[nrows++];
}

static void print_json(const row_t *r) {
  tlc_cli_json_t j;
  char rate[32];
  tlc_json_w_t *w = tlc_cli_json_begin(&j, 1);
  snprintf(rate, sizeof(rate), "%.1f", r->rate);
  tlc_json_w_open(w, NULL, '{');
  tlc_json_w_str(w, "host", r->host);
  tlc_json_w_str(w, "target", r->target);
  tlc_json_w_bool(w, "connected", r->connected);
  tlc_json_w_u64(w, "events", r->events);
  tlc_json_w_raw(w, "events_per_s", rate);
  tlc_json_w_u64(w, "gaps", r->gaps);
  tlc_json_w_i64(w, "last_seen_unix_ms", r->last_ms);
  tlc_json_w_close(w, '}');
  tlc_cli_json_end(&j);
}

static void print_table(int tty) {
  size_t i;
  int64_t now = now_ms();
  if (tty)
    printf("\033[H\033[2J");
  printf("%-24s %-28s %-12s %12s %14s %8s %10s\n", "HOST", "TARGET", "STATE", "EVENTS/S", "EVENTS",
         "GAPS", "LAST SEEN");
  for (i = 0; i < nrows; i++) {
    const row_t *r = &rows[i];
    printf("%-24.24s %-28.28s %-12s %12.1f %14llu %8llu %9.1fs\n", r->host, r->target,
           r->connected ? "connected" : "disconnected", r->rate, (unsigned long long)r->events,
           (unsigned long long)r->gaps, (double)(now - r->last_ms) / 1000.0);
  }
  if (nrows == 0)
    printf("(nothing published yet)\n");
  fflush(stdout);
}

static void on_msg(natsMsg *m, const char *prefix, int json) {
  char host[128], tgt[160];
  const char *kind;
  Tlcap__ServerMessage *sm;
  row_t *r;
  if (split_subject(natsMsg_GetSubject(m), prefix, host, sizeof(host), tgt, sizeof(tgt), &kind) < 0)
    return;
  sm = tlcap__server_message__unpack(NULL, (size_t)natsMsg_GetDataLength(m),
                                     (const uint8_t *)natsMsg_GetData(m));
  if (sm == NULL)
    return;
  r = find_row(host, tgt);
  if (r != NULL && sm->msg_case == TLCAP__SERVER_MESSAGE__MSG_SNAPSHOT && sm->snapshot != NULL) {
    const Tlcap__Snapshot *s = sm->snapshot;
    uint64_t ev = s->counters != NULL ? s->counters->events : 0;
    if (r->prev_ms != 0 && s->unix_ms > r->prev_ms && ev >= r->prev_events)
      r->rate = (double)(ev - r->prev_events) * 1000.0 / (double)(s->unix_ms - r->prev_ms);
    r->prev_ms = s->unix_ms;
    r->prev_events = ev;
    r->events = ev;
    r->gaps = s->counters != NULL ? s->counters->gaps : 0;
    r->connected = s->connected;
    r->last_ms = s->unix_ms;
    if (json)
      print_json(r);
  } else if (r != NULL && sm->msg_case == TLCAP__SERVER_MESSAGE__MSG_TARGET_EVENT &&
             sm->target_event != NULL) {
    if (sm->target_event->kind == TLCAP__TARGET_EVENT_KIND__TE_CONNECTED)
      r->connected = 1;
    else if (sm->target_event->kind == TLCAP__TARGET_EVENT_KIND__TE_DISCONNECTED)
      r->connected = 0;
    if (sm->target_event->unix_ms > r->last_ms)
      r->last_ms = sm->target_event->unix_ms;
    if (json)
      print_json(r);
  }
  tlcap__server_message__free_unpacked(sm, NULL);
}

static void usage(FILE *f) {
  fprintf(f, "usage: tlcap fleet --nats URL [--subject PREFIX] [--json] [--exit-after SECONDS]\n"
             "Shows every daemon and target that publishes to the NATS server at URL\n"
             "(nats://HOST:PORT or tls://HOST:PORT), from the broker alone: host, target,\n"
             "state, events/s, events, gaps, last seen. PREFIX is the part before the host\n"
             "in the daemons' subjects (default \"tlcap\", as their default tlcap.<hostname>).\n"
             "--json prints one JSON line per update instead of the table.\n");
}

int tlc_cli_fleet(int argc, char **argv) {
  const char *url = NULL, *prefix = "tlcap";
  int json = 0, i, tty = isatty(1);
  double exit_after = 0;
  natsConnection *nc = NULL;
  natsSubscription *sub = NULL;
  jsCtx *js = NULL;
  natsStatus s;
  char subj[300];
  int64_t start, last_draw = 0;
  static const struct option lo[] = {
    { "nats", required_argument, NULL, 'N' }, { "subject", required_argument, NULL, 's' },
    { "json", no_argument, NULL, 'j' },       { "exit-after", required_argument, NULL, 'x' },
    { "help", no_argument, NULL, 'h' },       { NULL, 0, NULL, 0 }
  };
  optind = 0; /* GNU: a full re-initialisation of getopt_long */
  opterr = 0;
  while ((i = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
    if (i == 'h') {
      usage(stdout);
      return 0;
    } else if (i == 'N') {
      url = optarg;
    } else if (i == 's') {
      prefix = optarg;
    } else if (i == 'j') {
      json = 1;
    } else if (i == 'x') {
      exit_after = atof(optarg);
    } else {
      fprintf(stderr, "tlcap fleet: %s %s\n", i == ':' ? "missing value for" : "unknown option",
              argv[optind - 1]);
      usage(stderr);
      return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "tlcap fleet: unexpected argument %s\n", argv[optind]);
    usage(stderr);
    return 2;
  }
  if (url == NULL) {
    fprintf(stderr, "tlcap fleet: --nats URL is required\n");
    usage(stderr);
    return 2;
  }
  if (strlen(prefix) == 0 || strlen(prefix) > 200 || strpbrk(prefix, " *>") != NULL) {
    fprintf(stderr, "tlcap fleet: bad --subject %s\n", prefix);
    return 2;
  }
  rows = calloc(MAX_ROWS, sizeof(*rows));
  if (rows == NULL)
    return 1;
  snprintf(subj, sizeof(subj), "%s.>", prefix);
  s = natsConnection_ConnectTo(&nc, url);
  if (s != NATS_OK) {
    fprintf(stderr, "tlcap fleet: cannot connect to %s: %s\n", url, natsStatus_GetText(s));
    free(rows);
    return 1;
  }
  if (natsConnection_JetStream(&js, nc, NULL) == NATS_OK) {
    jsSubOptions so;
    jsErrCode jerr = 0;
    jsSubOptions_Init(&so);
    so.Config.DeliverPolicy = js_DeliverLastPerSubject;
    so.Config.AckPolicy = js_AckNone;
    if (js_SubscribeSync(&sub, js, subj, NULL, &so, &jerr) != NATS_OK)
      sub = NULL; /* no stream covers it: live only */
  }
  if (sub == NULL && (s = natsConnection_SubscribeSync(&sub, nc, subj)) != NATS_OK) {
    fprintf(stderr, "tlcap fleet: cannot subscribe to %s: %s\n", subj, natsStatus_GetText(s));
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    free(rows);
    return 1;
  }
  signal(SIGINT, on_sig);
  signal(SIGTERM, on_sig);
  start = now_ms();
  while (!stop_flag) {
    natsMsg *m = NULL;
    int64_t now;
    s = natsSubscription_NextMsg(&m, sub, 200);
    if (s == NATS_OK) {
      on_msg(m, prefix, json);
      natsMsg_Destroy(m);
    } else if (s != NATS_TIMEOUT) {
      fprintf(stderr, "tlcap fleet: %s\n", natsStatus_GetText(s));
      break;
    }
    now = now_ms();
    if (!json && now - last_draw >= 1000) {
      print_table(tty);
      last_draw = now;
    }
    if (exit_after > 0 && (double)(now - start) >= exit_after * 1000.0)
      break;
  }
  if (!json)
    print_table(tty);
  natsSubscription_Destroy(sub);
  jsCtx_Destroy(js);
  natsConnection_Destroy(nc);
  free(rows);
  return 0;
}
