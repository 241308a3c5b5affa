/* watch.c - `tlcap watch TARGET [--interval MS] [--events] [--count N] [--since T]`: TARGET's
 * statistics as one JSON document per line (the `tlcapd replay --export json` schema) each time
 * they change, and target events, event batches (--events) and drop notices as JSON lines; with
 * --since, first one {"type":"history",...} line per target for its stored records since T. The
 * tables are live.c's. It outlives a daemon restart: the client library reconnects with backoff
 * and subscribes again, a loss goes to stderr, and a {"reconnected": {...}} line on stdout tells
 * a consumer that the next snapshot starts a new stream.
 */
#include "client/cli.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/out.h"
#include "formats/json.h"
#include "formats/mapping.h"
#include "formats/stats.h"
#include "formats/tlc_event.h"
#include "proto/convert.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One JSON line {"type": TYPE, ...} on stdout: its writer, then line_end. */
static tlc_json_w_t *line_begin(tlc_cli_json_t *j, const char *type) {
  tlc_json_w_t *w = tlc_cli_json_begin(j, 1);
  tlc_json_w_open(w, NULL, '{');
  tlc_json_w_str(w, "type", type);
  return w;
}

static void line_end(tlc_cli_json_t *j) {
  tlc_json_w_close(&j->w, '}');
  tlc_cli_json_end(j);
}

/* watch: a loss and each failed attempt on stderr; the reconnection as a JSON line on stdout
 * (between snapshots, so a consumer knows the next snapshot starts a new stream). */
static void reconnected_json(const tlc_client_event_t *ev) {
  tlc_cli_json_t j;
  char old[24], cur[24];
  tlc_json_w_t *w = tlc_cli_json_begin(&j, 1);
  snprintf(old, sizeof(old), "%016llx", (unsigned long long)ev->old_instance_id);
  snprintf(cur, sizeof(cur), "%016llx", (unsigned long long)ev->instance_id);
  tlc_json_w_open(w, NULL, '{');
  tlc_json_w_open(w, "reconnected", '{');
  tlc_json_w_str(w, "address", tlc_cli_daemon_addr);
  tlc_json_w_bool(w, "restarted", ev->restarted);
  tlc_json_w_str(w, "previous_instance_id", old);
  tlc_json_w_str(w, "instance_id", cur);
  tlc_json_w_u64(w, "attempts", ev->attempts);
  tlc_json_w_u64(w, "down_ms", ev->down_ms);
  tlc_json_w_close(w, '}');
  tlc_json_w_close(w, '}');
  tlc_cli_json_end(&j);
}

static void watch_event_cb(void *ud, const tlc_client_event_t *ev) {
  (void)ud;
  switch (ev->kind) {
  case TLC_CLIENT_EV_LOST:
    fprintf(stderr, "tlcap watch: %s: connection lost (%s); reconnecting\n", tlc_cli_daemon_addr,
            ev->reason);
    break;
  case TLC_CLIENT_EV_RETRY:
    if (ev->attempts == 1 || ev->attempts % 10 == 0)
      fprintf(stderr, "tlcap watch: %s (attempt %u; retrying in %llu ms)\n", ev->reason,
              ev->attempts, (unsigned long long)ev->backoff_ms);
    break;
  case TLC_CLIENT_EV_RECONNECTED:
    reconnected_json(ev);
    fprintf(stderr, "tlcap watch: %s: reconnected after %llu ms%s\n", tlc_cli_daemon_addr,
            (unsigned long long)ev->down_ms, ev->restarted ? " (the daemon restarted)" : "");
    break;
  default:
    break;
  }
}

/* A history snapshot of a mid-stream join as one JSON line (its own table: the live view
 * starts with the live full snapshot that follows). */
static void watch_history(const Tlcap__Snapshot *s) {
  tlc_table_t t;
  tlc_mapping_t map;
  int have_map = 0;
  tlc_table_init(&t);
  tlc_mapping_init(&map);
  if (tlc_pb_snapshot_apply(&t, s) == 0) {
    tlc_cli_json_t j;
    tlc_json_w_t *w = line_begin(&j, "history");
    const tlc_mapping_t *m;
    if (s->mapping != NULL && (s->mapping->n_areas > 0 || s->mapping->n_contexts > 0))
      have_map = tlc_pb_mapping_get(&map, s->mapping) == 0;
    m = have_map ? &map : NULL;
    tlc_json_w_str(w, "target", s->target);
    tlc_json_w_str(w, "clock",
                   s->range->clock == TLCAP__TIME_RANGE__CLOCK__WALL ? "wall" : "target");
    if (s->range->has_since)
      tlc_json_w_i64(w, "since", s->range->since);
    if (s->range->has_until)
      tlc_json_w_i64(w, "until", s->range->until);
    tlc_json_w_u64(w, "segments", s->segments);
    tlc_json_begin_member(w, &j.o, "stats", &t, m, s->target);
    tlc_json_rows(w, &j.o, &t, m);
    tlc_json_end_member(w, &j.o);
    line_end(&j);
  }
  tlc_mapping_fini(&map);
  tlc_table_fini(&t);
}

/* --events: a target's events (SPEC 5), a lifecycle event, a drop notice: one JSON line each */
static void target_event_json(const Tlcap__TargetEvent *te) {
  tlc_cli_json_t j;
  tlc_json_w_t *w = line_begin(&j, "target_event");
  tlc_json_w_str(w, "target", te->target);
  tlc_json_w_str(w, "kind", tlc_pb_event_kind_name(te->kind));
  tlc_json_w_str(w, "detail", te->detail);
  tlc_json_w_i64(w, "unix_ms", te->unix_ms);
  tlc_json_w_u64(w, "seq", te->seq);
  line_end(&j);
}

static void events_json(const Tlcap__EventBatch *ev) {
  tlc_cli_json_t j;
  tlc_json_w_t *w = line_begin(&j, "events");
  tlc_json_w_str(w, "target", ev->target);
  tlc_json_w_u64(w, "seq", ev->seq);
  tlc_json_w_open(w, "events", '[');
  for (size_t k = 0; k < ev->n_events; k++) {
    const Tlcap__Event *e = ev->events[k];
    char type[2] = { tlc_ev_char(e->type), 0 };
    tlc_json_w_open(w, NULL, '{');
    tlc_json_w_i64(w, "time", e->time_ns);
    tlc_json_w_hex8(w, "handle", e->handle);
    tlc_json_w_str(w, "type", type);
    tlc_json_w_u64(w, "core", e->core);
    tlc_json_w_u64(w, "data", e->data);
    if (e->thread != 0)
      tlc_json_w_u64(w, "thread", e->thread);
    tlc_json_w_close(w, '}');
  }
  tlc_json_w_close(w, ']');
  line_end(&j);
}

static void dropped_json(const Tlcap__Dropped *d) {
  tlc_cli_json_t j;
  tlc_json_w_t *w = line_begin(&j, "dropped");
  tlc_json_w_u64(w, "batches", d->batches);
  tlc_json_w_u64(w, "events", d->events);
  tlc_json_w_u64(w, "total_batches", d->total_batches);
  tlc_json_w_u64(w, "total_events", d->total_events);
  line_end(&j);
}

int tlc_cli_watch(int argc, char **argv) {
  Tlcap__Subscribe sub = TLCAP__SUBSCRIBE__INIT;
  Tlcap__TimeRange hist = TLCAP__TIME_RANGE__INIT;
  char *targets[1];
  const char *target = NULL, *since = NULL;
  tlc_client_t *c;
  tlc_cli_view_t w;
  long interval = 1000, count = -1;
  int status = 0, events = 0, snapshots = 0, wait = 0, oc;
  static const struct option lo[] = { { "interval", required_argument, NULL, 'i' },
                                      { "count", required_argument, NULL, 'n' },
                                      { "events", no_argument, NULL, 'E' },
                                      { "since", required_argument, NULL, 's' },
                                      { "wait", no_argument, NULL, 'W' },
                                      { "help", no_argument, NULL, 'h' },
                                      { NULL, 0, NULL, 0 } };
  tlc_cli_opt_reset();
  while ((oc = tlc_cli_next_opt(argc, argv, ":hi:n:", lo)) != -1) {
    if (oc == 'i')
      interval = strtol(optarg, NULL, 10);
    else if (oc == 'n')
      count = strtol(optarg, NULL, 10);
    else if (oc == 'E')
      events = 1;
    else if (oc == 's')
      since = optarg;
    else if (oc == 'W')
      wait = 1;
    else if (oc == '?')
      return EXIT_USAGE;
    else if (oc != 'h')
      continue;
    else {
      printf("usage: tlcap [--connect ADDR] watch TARGET [--interval MS] [--events] [--count N]\n"
             "                                  [--since T] [--wait]\n"
             "Prints TARGET's statistics as one JSON document per line (the `tlcapd replay\n"
             "--export json` schema) each time they change, and target events as JSON lines\n"
             "{\"type\":\"target_event\",...}; with --events also live event batches\n"
             "{\"type\":\"events\",...}. TARGET may be a pattern (*, ?). --count stops after N\n"
             "snapshots. Reconnects when the daemon restarts.\n"
             "--since T joins mid-stream: first, per target, the statistics of its stored\n"
             "records since T (as `tlcap stats --since T`) as one line {\"type\":\"history\",\n"
             "\"target\":...,\"since\":...,\"until\":...,\"stats\":{...}}, then the live ones.\n"
             "T: ns:N, epoch:K:N, 2026-11-26T10:00:00Z or -2h.\n"
             "A TARGET the daemon does not know (no target matches it) is an error; with\n"
             "--wait, watch waits for it to appear.\n");
      return 0;
    }
  }
  if (tlc_cli_operands(argc, 1, 1,
                       "tlcap watch TARGET [--interval MS] [--events] [--count N] [--since T] "
                       "[--wait]") < 0 ||
      interval <= 0) {
    if (interval <= 0)
      fprintf(stderr, "tlcap watch: --interval must be a positive number of ms\n");
    return EXIT_USAGE;
  }
  target = argv[optind];
  if (since != NULL && tlc_cli_range_get("watch", since, NULL, &hist) < 0)
    return EXIT_USAGE;
  if ((c = tlc_cli_connect_ev("tlcap watch", &status, watch_event_cb)) == NULL)
    return status;
  if (!wait && (status = tlc_cli_not_known("watch", c, target)) != 0) {
    tlc_client_free(c);
    return status;
  }
  memset(&w, 0, sizeof(w));
  targets[0] = (char *)target;
  sub.targets = targets;
  sub.n_targets = 1;
  sub.interval_ms = (uint32_t)interval;
  sub.windows = 1;
  sub.quantiles = 1;
  sub.neutral = 1;
  sub.names = 1;
  sub.events = events;
  if (since != NULL)
    sub.history = &hist; /* join mid-stream: the range since T first (Snapshot.range) */
  if (tlc_client_subscribe(c, &sub) < 0) {
    fprintf(stderr, "tlcap: %s: subscribe failed\n", tlc_client_addr(c));
    status = EXIT_BAD;
    goto done;
  }
  while (!tlc_cli_stop && (count < 0 || snapshots < count)) {
    Tlcap__ServerMessage *m;
    int r = tlc_client_recv(c, 500, &m);
    if (r == 0)
      continue;
    if (r < 0) {
      /* the library reconnects by itself: what comes here cannot be cured by waiting */
      fprintf(stderr, "tlcap watch: %s: %s\n", tlc_client_addr(c),
              tlc_client_last_error(c)[0] ? tlc_client_last_error(c) : tlc_strerror(r));
      status = EXIT_BAD;
      break;
    }
    switch (m->msg_case) {
    case TLCAP__SERVER_MESSAGE__MSG_SNAPSHOT: {
      tlc_cli_view_target_t *vt;
      if (m->snapshot->range != NULL) { /* history (Subscribe.history): not the live view's */
        watch_history(m->snapshot);
        snapshots++;
        break;
      }
      vt = tlc_cli_view_apply(&w, m->snapshot);
      if (vt != NULL) {
        tlc_out_t o;
        tlc_out_init(&o, 0, tlc_cli_write_fd_cb, stdout);
        tlc_json_write(&o, &vt->t, vt->have_map ? &vt->map : NULL, vt->name, 1);
        tlc_out_fini(&o);
        snapshots++;
      }
      break;
    }
    case TLCAP__SERVER_MESSAGE__MSG_TARGET_EVENT:
      target_event_json(m->target_event);
      break;
    case TLCAP__SERVER_MESSAGE__MSG_EVENTS:
      events_json(m->events);
      break;
    case TLCAP__SERVER_MESSAGE__MSG_DROPPED:
      dropped_json(m->dropped);
      break;
    case TLCAP__SERVER_MESSAGE__MSG_ERROR: {
      char err[400];
      fprintf(stderr, "tlcap watch: %s: %s\n", tlc_client_addr(c),
              tlc_client_error_text(m->error, err, sizeof(err)));
      if (m->error->fatal || m->request_id != 0)
        status = EXIT_BAD;
      break;
    }
    default:
      break;
    }
    fflush(stdout);
    tlc_client_msg_free(m);
    if (status != 0)
      break;
  }
done:
  tlc_cli_view_fini(&w);
  tlc_client_free(c);
  return status;
}
