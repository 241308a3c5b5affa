/* tlcap.c - the `tlcap` command line: targets, stats, top, watch, send, rotate, mapping.
 *
 *   tlcap [--connect HOST:PORT|tls://HOST:PORT|unix:PATH] [--ca FILE] [--token-file FILE]
 *         COMMAND [ARGS]
 *
 * Every command but `send` talks to tlcapd's subscriber port through the client library
 * (tlcap_client.h; default 127.0.0.1:7400, or $TLCAP_CONNECT). `stats` rebuilds a tlc_table_t
 * from the daemon's snapshot and prints it with the same exporters `tlcapd replay` uses, so a
 * live capture and a replay of its segments can be compared byte for byte. `top` is a live
 * terminal view drawn with plain ANSI escapes (works in tmux); `watch` prints JSON lines.
 * `send` is a target simulator: it connects to the daemon's ingest port and streams a file.
 * `watch` and `top` outlive a daemon restart: the client library reconnects with backoff and
 * subscribes again; `watch` prints a {"reconnected": {...}} line, `top` a status line. The
 * one-shot commands fail at once when the daemon is not there.
 *
 * Exit status: 0 success, 1 bad input or a daemon error (including "not reachable", which names
 * the address), 2 usage. Not done here: anything the daemon does; this is a thin client.
 */
#include "cli.h"

#include "brw.h"
#include "convert.h"
#include "json.h"
#include "mapping.h"
#include "out.h"
#include "stats.h"
#include "text1.h"
#include "xml.h"
#include "tlc_alloc.h"
#include "tlc_err.h"
#include "tlc_version.h"
#include "when.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

static char g_link[256]; /* top: the link's state after a loss ("" while it never dropped) */
static int g_view_reset; /* top: the daemon restarted; drop the old view */

static void on_signal(int sig) {
  (void)sig;
  tlc_cli_stop = 1;
}

static void usage_main(FILE *to) {
  fprintf(to,
          "usage: tlcap [--connect HOST:PORT|tls://HOST:PORT|unix:PATH] [--ca FILE]\n"
          "             [--token-file FILE] COMMAND [ARGS]\n"
          "       tlcap --version\n"
          "\n"
          "commands:\n"
          "  targets [--json]              list targets with status and counters\n"
          "  stats TARGET [--export text1|xml|aprof|br|json] [--text1-format ENTRY=FORMAT]...\n"
          "       [--since T] [--until T]  print a target's current statistics, or those of a\n"
          "                                past range (T: ns:N, 2026-11-26T10:00:00Z, -2h)\n"
          "  top [TARGET]                  live view of areas (q quit, s sort, w window,\n"
          "                                / filter, t next target, j/k PgUp/PgDn scroll)\n"
          "  watch TARGET                  snapshots and events as JSON lines\n"
          "  send FILE --target NAME --format bin10|bin11|evlog [--rate EVENTS/S] [--loop]\n"
          "       [--to HOST:PORT]         stream a capture file to the ingest port (a target)\n"
          "  rotate TARGET                 close the target's segment, wait for its seal and\n"
          "                                print its path\n"
          "  segments TARGET [--json]      the target's stored segments: wall-clock and target-\n"
          "                                time spans, records, bytes, state, path\n"
          "  mapping TARGET FILE           load a mapping (Text1 or XML export) for a target\n"
          "  fleet --nats URL [--subject PREFIX] [--json]\n"
          "                                every daemon and target publishing to a NATS server\n"
          "\n"
          "--connect defaults to $TLCAP_CONNECT or %s; a token for a daemon that requires\n"
          "one comes from --token-file or $TLCAP_TOKEN. tls:// verifies the daemon's\n"
          "certificate against --ca FILE or the system's CAs. watch and top reconnect when\n"
          "the daemon restarts; the other commands fail at once. `tlcap COMMAND --help` for\n"
          "details.\n"
          "tlcap --version prints the version.\n"
          "Exit status: 0 success, 1 bad input or daemon error, 2 usage.\n",
          TLC_CLIENT_DEFAULT_ADDR);
}

static void fmt_age(char *buf, size_t len, int64_t unix_ms_) {
  struct timespec ts;
  int64_t now, d;
  if (unix_ms_ == 0) {
    snprintf(buf, len, "-");
    return;
  }
  clock_gettime(CLOCK_REALTIME, &ts);
  now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  d = (now - unix_ms_) / 1000;
  if (d < 0)
    d = 0;
  if (d < 120)
    snprintf(buf, len, "%llds ago", (long long)d);
  else if (d < 7200)
    snprintf(buf, len, "%lldm ago", (long long)(d / 60));
  else
    snprintf(buf, len, "%lldh ago", (long long)(d / 3600));
}

/* 1234 -> "1.2K", in powers of 1024 ("-" for 0: a daemon without a memory budget). */
static void fmt_bytes(char *buf, size_t len, uint64_t v) {
  static const char units[] = "BKMGTP";
  double x = (double)v;
  unsigned u = 0;
  if (v == 0) {
    snprintf(buf, len, "-");
    return;
  }
  while (x >= 1024 && u + 1 < sizeof(units) - 1) {
    x /= 1024;
    u++;
  }
  snprintf(buf, len, u ? "%.1f%c" : "%.0f%c", x, units[u]);
}

/* `tlcap targets --json`: one JSON array, an object per target (docs/json-schema.md). */
static int targets_json(const Tlcap__TargetList *tl) {
  tlc_out_t o;
  size_t i;
  tlc_out_init(&o, 0, tlc_cli_write_fd_cb, stdout);
  tlc_out_putc(&o, '[');
  for (i = 0; i < tl->n_targets; i++) {
    const Tlcap__TargetInfo *t = tl->targets[i];
    tlc_counters_t k;
    tlc_pb_counters_get(&k, t->counters);
    tlc_out_puts(&o, i ? ",\n {\"name\": " : "\n {\"name\": ");
    tlc_json_string(&o, t->name);
    tlc_out_printf(&o, ", \"format\": \"%s\", \"state\": \"%s\", \"peer\": ",
                   tlc_pb_format_name(t->format), t->connected ? "connected" : "disconnected");
    if (t->peer[0])
      tlc_json_string(&o, t->peer);
    else
      tlc_out_puts(&o, "null");
    tlc_out_printf(&o,
                   ", \"connections\": %llu, \"reconnects\": %llu, \"gaps\": %llu"
                   ", \"decode_errors\": %llu, \"last_connect_unix_ms\": %lld"
                   ", \"last_disconnect_unix_ms\": %lld, \"counters\": {\"events\": %llu"
                   ", \"anomalies\": %llu, \"dropped_area_limit\": %llu, \"gaps\": %llu"
                   ", \"bytes\": %llu, \"records\": %llu, \"bytes_skipped\": %llu"
                   ", \"resyncs\": %llu, \"records_invalid\": %llu, \"truncated\": %llu"
                   ", \"overflow_items\": %llu}}",
                   (unsigned long long)t->connections, (unsigned long long)t->reconnects,
                   (unsigned long long)t->gaps, (unsigned long long)t->decode_errors,
                   (long long)t->last_connect_unix_ms, (long long)t->last_disconnect_unix_ms,
                   (unsigned long long)k.events, (unsigned long long)k.anomalies,
                   (unsigned long long)k.dropped_area_limit, (unsigned long long)k.gaps,
                   (unsigned long long)k.bytes, (unsigned long long)k.records,
                   (unsigned long long)k.bytes_skipped, (unsigned long long)k.resyncs,
                   (unsigned long long)k.records_invalid, (unsigned long long)k.truncated,
                   (unsigned long long)k.overflow_items);
  }
  tlc_out_puts(&o, tl->n_targets ? "\n]\n" : "]\n");
  return tlc_out_fini(&o) == 0 ? 0 : EXIT_BAD;
}

int tlc_cli_targets(int argc, char **argv) {
  Tlcap__ClientMessage cm = TLCAP__CLIENT_MESSAGE__INIT;
  Tlcap__ListTargets lt = TLCAP__LIST_TARGETS__INIT;
  Tlcap__ServerMessage *m;
  tlc_client_t *c;
  int status = 0, json = 0;
  size_t i;
  int o;
  if ((o = tlc_cli_json_help(
           argc, argv, &json,
           "usage: tlcap [--connect ADDR] targets [--json]\n"
           "Lists the daemon's targets: name, format, state, peer, events, bytes, gaps,\n"
           "resyncs, bytes skipped, decode errors, events dropped for the area limit or the\n"
           "memory budget, memory held and the last connect/disconnect; then the daemon's\n"
           "memory budget (used, limit, refusals).\n"
           "--json: a JSON array, an object per target with every counter.\n")) >= 0)
    return o;
  if (tlc_cli_operands(argc, 0, 0, "tlcap targets [--json]") < 0)
    return EXIT_USAGE;
  if ((c = tlc_cli_connect("tlcap targets", &status)) == NULL)
    return status;
  cm.msg_case = TLCAP__CLIENT_MESSAGE__MSG_LIST_TARGETS;
  cm.list_targets = &lt;
  if ((m = tlc_cli_request(c, &cm, &status)) == NULL)
    goto done;
  if (m->msg_case != TLCAP__SERVER_MESSAGE__MSG_TARGETS) {
    fprintf(stderr, "tlcap: %s: unexpected reply\n", tlc_client_addr(c));
    status = EXIT_BAD;
    goto done_msg;
  }
  if (json) {
    status = targets_json(m->targets);
    goto done_msg;
  }
  printf("%-24s %-6s %-12s %-22s %12s %14s %6s %7s %10s %6s %10s %8s %s\n", "TARGET", "FORMAT",
         "STATE", "PEER", "EVENTS", "BYTES", "GAPS", "RESYNCS", "SKIPPED", "DECERR", "DROPPED",
         "MEMORY", "LAST");
  for (i = 0; i < m->targets->n_targets; i++) {
    const Tlcap__TargetInfo *t = m->targets->targets[i];
    tlc_counters_t k;
    char age[32], mem[32];
    tlc_pb_counters_get(&k, t->counters);
    fmt_age(age, sizeof(age), t->connected ? t->last_connect_unix_ms : t->last_disconnect_unix_ms);
    fmt_bytes(mem, sizeof(mem), t->memory_bytes);
    printf("%-24s %-6s %-12s %-22s %12llu %14llu %6llu %7llu %10llu %6llu %10llu %8s %s\n", t->name,
           tlc_pb_format_name(t->format), t->connected ? "connected" : "disconnected",
           t->peer[0] ? t->peer : "-", (unsigned long long)k.events, (unsigned long long)k.bytes,
           (unsigned long long)t->gaps, (unsigned long long)k.resyncs,
           (unsigned long long)k.bytes_skipped, (unsigned long long)t->decode_errors,
           (unsigned long long)k.dropped_area_limit, mem, age);
  }
  if (m->targets->memory_limit != 0) {
    char used[32], lim[32];
    fmt_bytes(used, sizeof(used), m->targets->memory_used);
    fmt_bytes(lim, sizeof(lim), m->targets->memory_limit);
    printf("memory: %s of %s in use (--memory-limit), %llu charges refused\n", used, lim,
           (unsigned long long)m->targets->memory_refused);
  }
  if (m->targets->n_targets == 0)
    printf("(no targets yet)\n");
  if (m->targets->nats != NULL) {
    const Tlcap__NatsStatus *n = m->targets->nats;
    printf("nats %s: %s, stream %s, published %llu, dropped %llu, reconnects %llu\n", n->url,
           n->connected ? "connected" : "disconnected", n->stream_ready ? "ready" : "not ready",
           (unsigned long long)n->published, (unsigned long long)n->dropped,
           (unsigned long long)n->reconnects);
  }
done_msg:
  tlc_client_msg_free(m);
done:
  tlc_client_free(c);
  return status;
}

#define STATS_PART_ROWS  8192    /* rows per part of a GetStats reply */
#define STATS_RANGE_WAIT 3600000 /* ms a range query may take (the daemon reads segments) */

int tlc_cli_stats(int argc, char **argv) {
  static const char *const exports[] = { "text1", "xml", "aprof", "br", "json" };
  Tlcap__ClientMessage cm = TLCAP__CLIENT_MESSAGE__INIT;
  Tlcap__GetStats gs = TLCAP__GET_STATS__INIT;
  Tlcap__TimeRange tr = TLCAP__TIME_RANGE__INIT;
  Tlcap__ServerMessage *m = NULL;
  tlc_text1_opts_t *t1 = NULL;
  const char *target = NULL, *export_ = "text1", *since = NULL, *until = NULL;
  tlc_client_t *c = NULL;
  tlc_table_t t;
  tlc_mapping_t map;
  int status = 0, r, have_map = 0;
  char err[512];
  size_t k;
  tlc_out_t o;
  static const struct option lo[] = {
    { "export", required_argument, NULL, 'e' }, { "text1-format", required_argument, NULL, 't' },
    { "since", required_argument, NULL, 's' },  { "until", required_argument, NULL, 'u' },
    { "help", no_argument, NULL, 'h' },         { NULL, 0, NULL, 0 }
  };
  int opt;
  t1 = tlc_malloc(sizeof(*t1));
  if (t1 == NULL)
    return EXIT_BAD;
  tlc_text1_opts_default(t1);
  tlc_cli_opt_reset();
  while ((opt = tlc_cli_next_opt(argc, argv, ":he:t:", lo)) != -1) {
    if (opt == '?') {
      status = EXIT_USAGE;
      goto done;
    }
    if (opt == 'h') {
      printf("usage: tlcap [--connect ADDR] stats TARGET [--export text1|xml|aprof|br|json]\n"
             "                                  [--text1-format ENTRY=FORMAT]...\n"
             "                                  [--since T] [--until T]\n"
             "Prints the daemon's current statistics of TARGET with the exporters of\n"
             "`tlcapd replay` (default text1). ENTRY is InfoEntry, ContextEntry, MappingEntry,\n"
             "StatisticsEntry or TimelineEntry. br writes the BR profiler file (binary) from the\n"
             "line areas. aprof needs the event timeline, which a live snapshot does not carry:\n"
             "use `tlcapd replay --export aprof` on the target's segments.\n"
             "--since/--until: the statistics of a past range instead, computed by the daemon\n"
             "from TARGET's stored segments (as `tlcapd replay --state-dir --target`). T is\n"
             "ns:N (target time: events with since <= t < until), an RFC 3339 UTC time\n"
             "(2026-11-26T10:00:00Z) or a time relative to now (-2h; s, m, h, d, ms): the\n"
             "segments that arrived in the range.\n");
      goto done;
    }
    {
      if (opt == 's' || opt == 'u') {
        *(opt == 's' ? &since : &until) = optarg;
      } else if (opt == 'e') {
        export_ = optarg;
        for (k = 0; k < sizeof(exports) / sizeof(exports[0]); k++)
          if (strcmp(export_, exports[k]) == 0)
            break;
        if (k == sizeof(exports) / sizeof(exports[0])) {
          fprintf(stderr, "tlcap stats: unknown --export %s (text1, xml, aprof, br or json)\n",
                  export_);
          status = EXIT_USAGE;
          goto done;
        }
      } else if (tlc_text1_set_format(t1, optarg, err, sizeof(err)) < 0) {
        fprintf(stderr, "tlcap stats: --text1-format %s: %s\n", optarg, err);
        status = EXIT_USAGE;
        goto done;
      }
    }
  }
  if (tlc_cli_operands(argc, 1, 1,
                       "tlcap stats TARGET [--export text1|xml|aprof|br|json] "
                       "[--text1-format ENTRY=FORMAT]... [--since T] [--until T]") < 0) {
    status = EXIT_USAGE;
    goto done;
  }
  target = argv[optind];
  if ((since != NULL || until != NULL) && tlc_cli_range_get("stats", since, until, &tr) < 0) {
    status = EXIT_USAGE;
    goto done;
  }
  if (strcmp(export_, "aprof") == 0) {
    fprintf(stderr,
            "tlcap stats: --export %s needs the event timeline, which live statistics do not "
            "carry; run `tlcapd replay --export %s` on the target's segment files\n",
            export_, export_);
    status = EXIT_BAD;
    goto done;
  }
  if ((c = tlc_cli_connect("tlcap stats", &status)) == NULL)
    goto done;
  cm.msg_case = TLCAP__CLIENT_MESSAGE__MSG_GET_STATS;
  cm.get_stats = &gs;
  gs.target = (char *)target;
  gs.windows = 1;
  gs.quantiles = 1;
  gs.neutral = 1;
  gs.names = 1;
  gs.max_rows = STATS_PART_ROWS;      /* in parts; a daemon without them answers in one message */
  if (since != NULL || until != NULL) /* a past range: one message, when the daemon has it */
    gs.range = &tr;
  m = gs.range != NULL ? tlc_cli_request_wait(c, &cm, STATS_RANGE_WAIT, &status)
                       : tlc_cli_request(c, &cm, &status);
  if (m == NULL)
    goto done;
  if (m->msg_case != TLCAP__SERVER_MESSAGE__MSG_STATS || m->stats->snapshot == NULL) {
    fprintf(stderr, "tlcap: %s: unexpected reply\n", tlc_client_addr(c));
    status = EXIT_BAD;
    goto done;
  }
  if (gs.range != NULL && m->stats->snapshot->range == NULL) {
    fprintf(stderr,
            "tlcap: %s: this daemon does not compute range statistics (GetStats.range); "
            "use tlcapd replay --state-dir DIR --target %s on its host\n",
            tlc_client_addr(c), target);
    status = EXIT_BAD;
    goto done;
  }
  tlc_table_init(&t);
  tlc_mapping_init(&map);
  r = tlc_pb_snapshot_apply(&t, m->stats->snapshot);
  if (r == 0 && m->stats->snapshot->mapping != NULL &&
      (m->stats->snapshot->mapping->n_areas > 0 || m->stats->snapshot->mapping->n_contexts > 0)) {
    r = tlc_pb_mapping_get(&map, m->stats->snapshot->mapping);
    have_map = r == 0;
  }
  /* the further parts (docs/protocol.md "Statistics in parts"): deltas, in order */
  while (r == 0 && m->stats->snapshot->more) {
    uint32_t id = m->request_id;
    int rr;
    do { /* the next message of this reply (unrelated ones are skipped) */
      tlc_client_msg_free(m);
      m = NULL;
      rr = tlc_client_recv(c, 30000, &m);
    } while (rr > 0 && m->request_id != id);
    if (rr <= 0) {
      r = rr < 0 ? rr : TLC_EIO;
      if (rr == 0)
        fprintf(stderr, "tlcap: %s: no further part of the statistics within 30 s\n",
                tlc_client_addr(c));
      break;
    }
    if (m->msg_case == TLCAP__SERVER_MESSAGE__MSG_ERROR && m->error != NULL) {
      fprintf(stderr, "tlcap: %s: %s\n", tlc_client_addr(c),
              m->error->message ? m->error->message : "error");
      r = TLC_EIO;
      break;
    }
    if (m->msg_case != TLCAP__SERVER_MESSAGE__MSG_STATS || m->stats->snapshot == NULL) {
      r = TLC_EFRAME;
      break;
    }
    r = tlc_pb_snapshot_apply(&t, m->stats->snapshot);
  }
  if (r < 0) {
    fprintf(stderr, "tlcap: %s: bad statistics from the daemon: %s\n", tlc_client_addr(c),
            tlc_strerror(r));
    status = EXIT_BAD;
  } else {
    tlc_out_init(&o, 0, tlc_cli_write_fd_cb, stdout);
    if (strcmp(export_, "json") == 0)
      r = tlc_json_write(&o, &t, have_map ? &map : NULL, target, 0);
    else if (strcmp(export_, "br") == 0)
      r = tlc_br_export(&o, &t, have_map ? &map : NULL);
    else if (strcmp(export_, "xml") == 0) {
      tlc_xml_opts_t xo;
      tlc_xml_opts_default(&xo);
      xo.timeline = TLC_XML_TL_NONE; /* live statistics carry no timeline */
      xo.target = target;
      r = tlc_xml_write(&o, &xo, &t, have_map ? &map : NULL, NULL, NULL);
    } else
      r = tlc_text1_write(&o, t1, &t, have_map ? &map : NULL, NULL);
    if (r == 0)
      r = tlc_out_fini(&o);
    else
      tlc_out_fini(&o);
    if (r < 0) {
      fprintf(stderr, "tlcap stats: export: %s\n", tlc_strerror(r));
      status = EXIT_BAD;
    }
  }
  tlc_mapping_fini(&map);
  tlc_table_fini(&t);
done:
  tlc_client_msg_free(m);
  tlc_client_free(c);
  tlc_free(t1);
  return status;
}

/* The target's stored segments, or NULL (no storage, or a daemon without ListSegments). */
static Tlcap__ServerMessage *list_segments(tlc_client_t *c, const char *target) {
  Tlcap__ClientMessage cm = TLCAP__CLIENT_MESSAGE__INIT;
  Tlcap__ListSegments ls = TLCAP__LIST_SEGMENTS__INIT;
  Tlcap__ServerMessage *m = NULL;
  char err[512];
  cm.msg_case = TLCAP__CLIENT_MESSAGE__MSG_LIST_SEGMENTS;
  cm.list_segments = &ls;
  ls.target = (char *)(uintptr_t)target;
  if (tlc_client_request(c, &cm, &m, err, sizeof(err)) < 0)
    return NULL;
  if (m->msg_case != TLCAP__SERVER_MESSAGE__MSG_SEGMENTS) {
    tlc_client_msg_free(m);
    return NULL;
  }
  return m;
}

#define ROTATE_MAX_OPEN 16
#define ROTATE_WAIT_MS  60000

int tlc_cli_rotate(int argc, char **argv) {
  Tlcap__ClientMessage cm = TLCAP__CLIENT_MESSAGE__INIT;
  Tlcap__RotateTarget rt = TLCAP__ROTATE_TARGET__INIT;
  Tlcap__ServerMessage *m, *before;
  tlc_client_t *c;
  int status = 0, o;
  uint64_t open[ROTATE_MAX_OPEN];
  size_t nopen = 0;
  tlc_cli_opt_reset();
  while ((o = tlc_cli_next_opt(argc, argv, ":h", tlc_cli_help_only)) != -1) {
    if (o != 'h')
      return EXIT_USAGE;
    printf("usage: tlcap [--connect ADDR] rotate TARGET\n"
           "Closes TARGET's current segment file and starts a new one; waits until the closed\n"
           "segment is sealed and prints its path (nothing when no segment was open).\n");
    return 0;
  }
  if (tlc_cli_operands(argc, 1, 1, "tlcap rotate TARGET") < 0)
    return EXIT_USAGE;
  argv += optind - 1;
  if ((c = tlc_cli_connect("tlcap rotate", &status)) == NULL)
    return status;
  /* the open segment(s) now: what the rotation closes */
  if ((before = list_segments(c, argv[1])) != NULL) {
    for (size_t i = 0; i < before->segments->n_segments && nopen < ROTATE_MAX_OPEN; i++)
      if (before->segments->segments[i]->state == TLCAP__SEGMENT_INFO__STATE__OPEN)
        open[nopen++] = before->segments->segments[i]->seq;
    tlc_client_msg_free(before);
  }
  cm.msg_case = TLCAP__CLIENT_MESSAGE__MSG_ROTATE;
  cm.rotate = &rt;
  rt.target = argv[1];
  if ((m = tlc_cli_request(c, &cm, &status)) == NULL)
    goto done;
  tlc_client_msg_free(m);
  if (nopen == 0) {
    printf("rotated %s (no open segment)\n", argv[1]);
    goto done;
  }
  /* wait for the seal: the closed segments' data files lose their .part */
  for (int waited = 0;; waited += 50) {
    Tlcap__ServerMessage *after = list_segments(c, argv[1]);
    size_t done_n = 0;
    if (after == NULL) {
      fprintf(stderr, "tlcap: %s: segments of %s no longer listed\n", tlc_client_addr(c), argv[1]);
      status = EXIT_BAD;
      goto done;
    }
    for (size_t k = 0; k < nopen; k++) {
      int found = 0, sealed = 0;
      for (size_t i = 0; i < after->segments->n_segments; i++) {
        const Tlcap__SegmentInfo *x = after->segments->segments[i];
        if (x->seq == open[k]) {
          found = 1;
          sealed = x->state != TLCAP__SEGMENT_INFO__STATE__OPEN;
        }
      }
      done_n += !found || sealed; /* gone: deleted by retention meanwhile */
    }
    if (done_n == nopen) {
      for (size_t k = 0; k < nopen; k++)
        for (size_t i = 0; i < after->segments->n_segments; i++)
          if (after->segments->segments[i]->seq == open[k])
            printf("%s\n", after->segments->segments[i]->path);
      tlc_client_msg_free(after);
      break;
    }
    tlc_client_msg_free(after);
    if (waited >= ROTATE_WAIT_MS) {
      fprintf(stderr, "tlcap: %s: %s: the closed segment was not sealed within %d s\n",
              tlc_client_addr(c), argv[1], ROTATE_WAIT_MS / 1000);
      status = EXIT_BAD;
      goto done;
    }
    {
      struct timespec ts = { 0, 50 * 1000000L };
      nanosleep(&ts, NULL);
    }
  }
done:
  tlc_client_free(c);
  return status;
}

static const char *const seg_states[] = { "?", "open", "sealed", "compressed" };
static const char *const seg_reasons[] = { "-",       "size",     "age",      "reconnect", "sighup",
                                           "command", "shutdown", "io_error", "recovered", "idle" };

static void fmt_utc(char *buf, size_t len, int64_t ns) {
  time_t sec = (time_t)(ns / 1000000000);
  struct tm tm;
  if (ns <= 0 || gmtime_r(&sec, &tm) == NULL) {
    snprintf(buf, len, "-");
    return;
  }
  strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int tlc_cli_segments(int argc, char **argv) {
  Tlcap__ClientMessage cm = TLCAP__CLIENT_MESSAGE__INIT;
  Tlcap__ListSegments ls = TLCAP__LIST_SEGMENTS__INIT;
  Tlcap__ServerMessage *m;
  tlc_client_t *c;
  const char *target = NULL;
  int status = 0, json = 0, o;
  if ((o = tlc_cli_json_help(
           argc, argv, &json,
           "usage: tlcap [--connect ADDR] segments TARGET [--json]\n"
           "Lists TARGET's stored segments in sequence order: sequence, state (open, sealed,\n"
           "compressed), wall-clock span (UTC: first record's arrival, seal), target-time span\n"
           "(ns), records, bytes, why it was closed, and the data file's path on the daemon's\n"
           "host. --json: one JSON array of objects with the same fields.\n")) >= 0)
    return o;
  if (tlc_cli_operands(argc, 1, 1, "tlcap segments TARGET [--json]") < 0)
    return EXIT_USAGE;
  target = argv[optind];
  if ((c = tlc_cli_connect("tlcap segments", &status)) == NULL)
    return status;
  cm.msg_case = TLCAP__CLIENT_MESSAGE__MSG_LIST_SEGMENTS;
  cm.list_segments = &ls;
  ls.target = (char *)(uintptr_t)target;
  if ((m = tlc_cli_request(c, &cm, &status)) == NULL)
    goto done;
  if (m->msg_case != TLCAP__SERVER_MESSAGE__MSG_SEGMENTS) {
    fprintf(stderr, "tlcap: %s: unexpected reply\n", tlc_client_addr(c));
    status = EXIT_BAD;
    goto done_msg;
  }
  if (json)
    putchar('[');
  else
    printf("%-10s %-10s %-20s %-20s %20s %20s %10s %12s %-9s %s\n", "SEQ", "STATE", "OPENED",
           "CLOSED", "FIRST_NS", "LAST_NS", "RECORDS", "BYTES", "REASON", "PATH");
  for (size_t i = 0; i < m->segments->n_segments; i++) {
    const Tlcap__SegmentInfo *x = m->segments->segments[i];
    const char *st = x->state < 4 ? seg_states[x->state] : "?";
    const char *rs = x->reason < 10 ? seg_reasons[x->reason] : "?";
    char op[32], cl[32];
    fmt_utc(op, sizeof(op), x->opened_unix_ns);
    fmt_utc(cl, sizeof(cl), x->closed_unix_ns);
    if (json) {
      printf("%s\n{\"seq\": %llu, \"state\": \"%s\", \"opened\": \"%s\", \"closed\": \"%s\", "
             "\"opened_unix_ns\": %lld, \"closed_unix_ns\": %lld, ",
             i ? "," : "", (unsigned long long)x->seq, st, op, cl, (long long)x->opened_unix_ns,
             (long long)x->closed_unix_ns);
      if (x->records > 0)
        printf("\"first_time\": %lld, \"last_time\": %lld, \"min_time\": %lld, "
               "\"max_time\": %lld, ",
               (long long)x->first_time, (long long)x->last_time, (long long)x->min_time,
               (long long)x->max_time);
      printf("\"records\": %llu, \"items\": %llu, \"bytes\": %llu, \"gaps\": %llu, "
             "\"reason\": \"%s\", \"recovered\": %s, \"path\": ",
             (unsigned long long)x->records, (unsigned long long)x->items,
             (unsigned long long)x->bytes, (unsigned long long)x->gaps,
             x->state == TLCAP__SEGMENT_INFO__STATE__OPEN ? "" : rs,
             x->recovered ? "true" : "false");
      tlc_cli_json_str(x->path);
      putchar('}');
      continue;
    }
    if (x->records > 0)
      printf("%-10llu %-10s %-20s %-20s %20lld %20lld %10llu %12llu %-9s %s\n",
             (unsigned long long)x->seq, st, op, cl, (long long)x->first_time,
             (long long)x->last_time, (unsigned long long)x->records, (unsigned long long)x->bytes,
             x->state == TLCAP__SEGMENT_INFO__STATE__OPEN ? "-" : rs, x->path);
    else
      printf("%-10llu %-10s %-20s %-20s %20s %20s %10llu %12llu %-9s %s\n",
             (unsigned long long)x->seq, st, op, cl, "-", "-", (unsigned long long)x->records,
             (unsigned long long)x->bytes, x->state == TLCAP__SEGMENT_INFO__STATE__OPEN ? "-" : rs,
             x->path);
  }
  if (json)
    printf("%s]\n", m->segments->n_segments ? "\n" : "");
  else if (m->segments->n_segments == 0)
    printf("(no segments)\n");
  if (m->segments->truncated)
    fprintf(stderr, "tlcap: more segments than one reply holds: the oldest are not listed\n");
done_msg:
  tlc_client_msg_free(m);
done:
  tlc_client_free(c);
  return status;
}

int tlc_cli_mapping(int argc, char **argv) {
  Tlcap__ClientMessage cm = TLCAP__CLIENT_MESSAGE__INIT;
  Tlcap__LoadMapping lm = TLCAP__LOAD_MAPPING__INIT;
  Tlcap__ServerMessage *m;
  tlc_client_t *c;
  char *data = NULL;
  size_t len = 0;
  int status = 0, r, o;
  tlc_cli_opt_reset();
  while ((o = tlc_cli_next_opt(argc, argv, ":h", tlc_cli_help_only)) != -1) {
    if (o != 'h')
      return EXIT_USAGE;
    printf("usage: tlcap [--connect ADDR] mapping TARGET FILE\n"
           "Loads area names from FILE (a Text1 or XML export with a mapping section) for\n"
           "TARGET.\n");
    return 0;
  }
  if (tlc_cli_operands(argc, 2, 2, "tlcap mapping TARGET FILE") < 0)
    return EXIT_USAGE;
  argv += optind - 1;
  if ((r = tlc_cli_read_file(argv[2], &data, &len, 64u << 20)) < 0) {
    fprintf(stderr, "tlcap mapping: %s: %s\n", argv[2], tlc_strerror(r));
    return EXIT_BAD;
  }
  if ((c = tlc_cli_connect("tlcap mapping", &status)) == NULL) {
    tlc_free(data);
    return status;
  }
  if (tlc_client_welcome(c) != NULL && len + 1024 > tlc_client_welcome(c)->max_request_bytes) {
    fprintf(stderr, "tlcap mapping: %s: %zu bytes is above the daemon's request limit (%llu)\n",
            argv[2], len, (unsigned long long)tlc_client_welcome(c)->max_request_bytes);
    status = EXIT_BAD;
  } else {
    cm.msg_case = TLCAP__CLIENT_MESSAGE__MSG_LOAD_MAPPING;
    cm.load_mapping = &lm;
    lm.target = argv[1];
    lm.mapping.data = (uint8_t *)data;
    lm.mapping.len = len;
    if ((m = tlc_cli_request(c, &cm, &status)) != NULL) {
      printf("mapping loaded for %s\n", argv[1]);
      tlc_client_msg_free(m);
    }
  }
  tlc_client_free(c);
  tlc_free(data);
  return status;
}

/* watch: a loss and each failed attempt on stderr; the reconnection as a JSON line on stdout
 * (between snapshots, so a consumer knows the next snapshot starts a new stream). */
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
    printf("{\"reconnected\":{\"address\":");
    tlc_cli_json_str(tlc_cli_daemon_addr);
    printf(",\"restarted\":%s,\"previous_instance_id\":\"%016llx\",\"instance_id\":\"%016llx\","
           "\"attempts\":%u,\"down_ms\":%llu}}\n",
           ev->restarted ? "true" : "false", (unsigned long long)ev->old_instance_id,
           (unsigned long long)ev->instance_id, ev->attempts, (unsigned long long)ev->down_ms);
    fflush(stdout);
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
  tlc_out_t o;
  char *doc;
  size_t len;
  tlc_table_init(&t);
  tlc_mapping_init(&map);
  if (tlc_pb_snapshot_apply(&t, s) == 0) {
    if (s->mapping != NULL && (s->mapping->n_areas > 0 || s->mapping->n_contexts > 0))
      have_map = tlc_pb_mapping_get(&map, s->mapping) == 0;
    printf("{\"type\":\"history\",\"target\":");
    tlc_cli_json_str(s->target);
    printf(",\"clock\":\"%s\"",
           s->range->clock == TLCAP__TIME_RANGE__CLOCK__WALL ? "wall" : "target");
    if (s->range->has_since)
      printf(",\"since\":%lld", (long long)s->range->since);
    if (s->range->has_until)
      printf(",\"until\":%lld", (long long)s->range->until);
    printf(",\"segments\":%u,\"stats\":", s->segments);
    tlc_out_init(&o, 0, NULL, NULL); /* in memory: the document ends with a newline */
    if (tlc_json_write(&o, &t, have_map ? &map : NULL, s->target, 1) == 0 &&
        (doc = tlc_out_take(&o, &len)) != NULL) {
      while (len > 0 && doc[len - 1] == '\n')
        len--;
      fwrite(doc, 1, len, stdout);
      tlc_free(doc);
    } else {
      printf("null");
    }
    tlc_out_fini(&o);
    printf("}\n");
  }
  fflush(stdout);
  tlc_mapping_fini(&map);
  tlc_table_fini(&t);
}

int tlc_cli_watch(int argc, char **argv) {
  Tlcap__Subscribe sub = TLCAP__SUBSCRIBE__INIT;
  Tlcap__TimeRange hist = TLCAP__TIME_RANGE__INIT;
  char *targets[1];
  const char *target = NULL, *since = NULL;
  tlc_client_t *c;
  tlc_cli_view_t w;
  long interval = 1000, count = -1;
  int status = 0, events = 0, snapshots = 0, oc;
  static const struct option lo[] = {
    { "interval", required_argument, NULL, 'i' }, { "count", required_argument, NULL, 'n' },
    { "events", no_argument, NULL, 'E' },         { "since", required_argument, NULL, 's' },
    { "help", no_argument, NULL, 'h' },           { NULL, 0, NULL, 0 }
  };
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
    else if (oc == '?')
      return EXIT_USAGE;
    else if (oc != 'h')
      continue;
    else {
      printf("usage: tlcap [--connect ADDR] watch TARGET [--interval MS] [--events] [--count N]\n"
             "                                  [--since T]\n"
             "Prints TARGET's statistics as one JSON document per line (the `tlcapd replay\n"
             "--export json` schema) each time they change, and target events as JSON lines\n"
             "{\"type\":\"target_event\",...}; with --events also live event batches\n"
             "{\"type\":\"events\",...}. TARGET may be a pattern (*, ?). --count stops after N\n"
             "snapshots. Reconnects when the daemon restarts.\n"
             "--since T joins mid-stream: first, per target, the statistics of its stored\n"
             "records since T (as `tlcap stats --since T`) as one line {\"type\":\"history\",\n"
             "\"target\":...,\"since\":...,\"until\":...,\"stats\":{...}}, then the live ones.\n"
             "T: ns:N, 2026-11-26T10:00:00Z or -2h.\n");
      return 0;
    }
  }
  if (tlc_cli_operands(argc, 1, 1,
                       "tlcap watch TARGET [--interval MS] [--events] [--count N] [--since T]") <
          0 ||
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
      printf("{\"type\":\"target_event\",\"target\":");
      tlc_cli_json_str(m->target_event->target);
      printf(",\"kind\":\"%s\",\"detail\":", tlc_pb_event_kind_name(m->target_event->kind));
      tlc_cli_json_str(m->target_event->detail);
      printf(",\"unix_ms\":%lld,\"seq\":%llu}\n", (long long)m->target_event->unix_ms,
             (unsigned long long)m->target_event->seq);
      break;
    case TLCAP__SERVER_MESSAGE__MSG_EVENTS: {
      size_t k;
      printf("{\"type\":\"events\",\"target\":");
      tlc_cli_json_str(m->events->target);
      printf(",\"seq\":%llu,\"events\":[", (unsigned long long)m->events->seq);
      for (k = 0; k < m->events->n_events; k++) {
        const Tlcap__Event *e = m->events->events[k];
        printf("%s{\"time\":%lld,\"handle\":\"%08X\",\"type\":\"%c\",\"core\":%u,\"data\":%llu",
               k ? "," : "", (long long)e->time_ns, e->handle,
               e->type <= 4 ? "XSREW"[e->type] : '?', e->core, (unsigned long long)e->data);
        if (e->thread != 0)
          printf(",\"thread\":%llu", (unsigned long long)e->thread);
        printf("}");
      }
      printf("]}\n");
      break;
    }
    case TLCAP__SERVER_MESSAGE__MSG_DROPPED:
      printf("{\"type\":\"dropped\",\"batches\":%llu,\"events\":%llu,\"total_batches\":%llu,"
             "\"total_events\":%llu}\n",
             (unsigned long long)m->dropped->batches, (unsigned long long)m->dropped->events,
             (unsigned long long)m->dropped->total_batches,
             (unsigned long long)m->dropped->total_events);
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

enum { SORT_NET, SORT_COUNT, SORT_CALL, SORT_MAX, SORT_AVG, SORT_NAME, NSORT };
static const char *const sort_names[NSORT] = { "net", "count", "call", "max", "avg", "name" };

typedef struct top_row {
  const tlc_stat_t *r;
  char name[96];
  int64_t net, call, max, avg;
  uint64_t count;
} top_row_t;

static int g_sort;

static int cmp_top(const void *a, const void *b) {
  const top_row_t *x = a, *y = b;
  int64_t vx = 0, vy = 0;
  switch (g_sort) {
  case SORT_NAME:
    return strcmp(x->name, y->name);
  case SORT_COUNT:
    vx = (int64_t)x->count;
    vy = (int64_t)y->count;
    break;
  case SORT_CALL:
    vx = x->call;
    vy = y->call;
    break;
  case SORT_MAX:
    vx = x->max;
    vy = y->max;
    break;
  case SORT_AVG:
    vx = x->avg;
    vy = y->avg;
    break;
  default:
    vx = x->net;
    vy = y->net;
  }
  if (vx != vy)
    return vx < vy ? 1 : -1;
  return strcmp(x->name, y->name);
}

static void fmt_ns(char *buf, size_t len, int64_t ns) {
  double v = (double)ns;
  if (ns < 0)
    snprintf(buf, len, "-");
  else if (v < 1e3)
    snprintf(buf, len, "%dns", (int)ns); /* < 1000: fits; keeps -Wformat-truncation quiet at -O2 */
  else if (v < 1e6)
    snprintf(buf, len, "%.1fus", v / 1e3);
  else if (v < 1e9)
    snprintf(buf, len, "%.1fms", v / 1e6);
  else
    snprintf(buf, len, "%.2fs", v / 1e9);
}

typedef struct top_state {
  int window; /* 0 cumulative, 1.. window index + 1 */
  char filter[64];
  int editing;
  size_t cur; /* target index in view */
  const char *only;
  size_t first; /* scrolling: the first area row shown */
  size_t page;  /* area rows the last draw had room for (PgUp/PgDn step) */
  int esc;      /* escape sequence state: 1 after ESC, 2 after ESC [, 3 after ESC [ 5/6 */
  int esc_pg;   /* ESC [ 5 (page up) or 6 (page down) awaiting its '~' */
} top_state_t;

static void top_draw(tlc_cli_view_t *w, top_state_t *ts, const char *addr) {
  struct winsize ws;
  int rows = 24, cols = 100, line = 0;
  tlc_cli_view_target_t *vt = w->n > 0 ? &w->v[ts->cur % w->n] : NULL;
  top_row_t *tr = NULL;
  size_t n = 0, i;
  char wname[32], b1[16], b2[16], b3[16], b4[16];
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0) {
    rows = ws.ws_row;
    cols = ws.ws_col;
  }
  printf("\x1b[H");
  if (vt == NULL) {
    printf("tlcap top - %s - waiting for statistics%s\x1b[K\r\n", addr,
           ts->only != NULL ? " of the target" : "");
    if (g_link[0])
      printf("link: %s\x1b[K\r\n", g_link);
    printf("\x1b[J");
    fflush(stdout);
    return;
  }
  if (ts->window == 0 || (uint32_t)ts->window > vt->t.nwindows)
    snprintf(wname, sizeof(wname), "cumulative");
  else
    snprintf(wname, sizeof(wname), "last %.0fs", (double)vt->t.window_ns[ts->window - 1] / 1e9);
  printf("tlcap top - %s - target %s (%zu/%zu) %s - %s - sort %s%s%s\x1b[K\r\n", addr, vt->name,
         ts->cur % w->n + 1, w->n, vt->connected ? "connected" : "DISCONNECTED", wname,
         sort_names[g_sort], ts->filter[0] ? " - filter " : "", ts->filter);
  printf("events %llu  bytes %llu  gaps %llu  resyncs %llu  skipped %llu  invalid %llu  "
         "anomalies %llu  area-limit drops %llu  my drops %llu  seq gaps %llu\x1b[K\r\n",
         (unsigned long long)vt->t.counters.events, (unsigned long long)vt->t.counters.bytes,
         (unsigned long long)vt->t.counters.gaps, (unsigned long long)vt->t.counters.resyncs,
         (unsigned long long)vt->t.counters.bytes_skipped,
         (unsigned long long)vt->t.counters.records_invalid,
         (unsigned long long)vt->t.counters.anomalies,
         (unsigned long long)vt->t.counters.dropped_area_limit,
         (unsigned long long)w->dropped_events, (unsigned long long)vt->gaps_seen);
  line = 3;
  if (g_link[0]) {
    printf("link: %s\x1b[K\r\n", g_link);
    line++;
  }
  printf("\x1b[7m%-40s %-12s %10s %10s %10s %10s %10s\x1b[0m\x1b[K\r\n", "AREA", "CONTEXT", "COUNT",
         "T.NET", "T.CALL", "NET.MAX", "NET.AVG");
  tr = vt->t.nrows > 0 ? tlc_malloc(vt->t.nrows * sizeof(*tr)) : NULL;
  for (i = 0; tr != NULL && i < vt->t.nrows; i++) {
    const tlc_stat_t *r = &vt->t.rows[i];
    const tlc_map_area_t *ma = vt->have_map ? tlc_mapping_find(&vt->map, r->handle) : NULL;
    top_row_t *x = &tr[n];
    if (vt->t.ncontexts > 1 && r->kind == TLC_ROW_CODE && r->context != TLC_CTX_NEUTRAL)
      continue; /* with several contexts, one line per area: its Neutral row */
    x->r = r;
    if (ma != NULL && ma->name[0] != 0)
      snprintf(x->name, sizeof(x->name), "%s", ma->name);
    else
      snprintf(x->name, sizeof(x->name), "%08X", r->handle);
    if (r->kind == TLC_ROW_STATE) {
      size_t l = strlen(x->name);
      snprintf(x->name + l, sizeof(x->name) - l, "=%llX", (unsigned long long)r->state);
    }
    if (ts->filter[0] != 0 && strstr(x->name, ts->filter) == NULL)
      continue;
    if (ts->window > 0 && (uint32_t)(ts->window - 1) < r->nwin) {
      const tlc_wstat_t *wsx = &r->win[ts->window - 1];
      x->count = wsx->count;
      /* what does not apply prints "-", as in the cumulative view (it printed 0ns here) */
      x->net = r->kind == TLC_ROW_DATA ? -1 : wsx->k[TLC_NET].sum;
      x->call = r->kind == TLC_ROW_CODE ? wsx->k[TLC_CALL].sum : -1;
      x->max = wsx->k[TLC_NET].n > 0 ? wsx->k[TLC_NET].max : -1;
      x->avg = wsx->k[TLC_NET].n > 0 ? wsx->k[TLC_NET].sum / (int64_t)wsx->k[TLC_NET].n : -1;
    } else {
      x->count = r->count;
      x->net = r->kind == TLC_ROW_DATA ? -1 : r->total[TLC_NET];
      x->call = r->kind == TLC_ROW_CODE ? r->total[TLC_CALL] : -1;
      x->max = r->dist[TLC_NET].n > 0 ? r->dist[TLC_NET].max : -1;
      x->avg = r->dist[TLC_NET].n > 0 ? tlc_dist_avg(&r->dist[TLC_NET]) : -1;
    }
    n++;
  }
  if (n > 0)
    qsort(tr, n, sizeof(*tr), cmp_top);
  /* scrolling (j/k, arrows, PgUp/PgDn, g/G): the rows that fit below the header */
  ts->page = rows - 1 > line ? (size_t)(rows - 1 - line) : 1;
  if (ts->first + ts->page > n)
    ts->first = n > ts->page ? n - ts->page : 0;
  for (i = ts->first; i < n && line < rows - 1; i++, line++) {
    char ctx[32];
    tlc_ctx_name(&vt->t, tr[i].r->context, ctx, sizeof(ctx));
    if (tr[i].r->context == TLC_CTX_NONE)
      snprintf(ctx, sizeof(ctx), "-");
    fmt_ns(b1, sizeof(b1), tr[i].net);
    fmt_ns(b2, sizeof(b2), tr[i].call);
    fmt_ns(b3, sizeof(b3), tr[i].max);
    fmt_ns(b4, sizeof(b4), tr[i].avg);
    printf("%-40.40s %-12.12s %10llu %10s %10s %10s %10s\x1b[K\r\n", tr[i].name, ctx,
           (unsigned long long)tr[i].count, b1, b2, b3, b4);
  }
  tlc_free(tr);
  if (ts->editing)
    printf("\x1b[%d;1Hfilter: %s\x1b[K", rows, ts->filter);
  else
    printf("\x1b[J\x1b[%d;1H\x1b[7mq quit  s sort  w window  / filter  t target  j/k PgUp/PgDn "
           "scroll - areas %zu-%zu of %zu\x1b[0m\x1b[K",
           rows, n > 0 ? ts->first + 1 : 0, i, n);
  (void)cols;
  fflush(stdout);
}

/* Handles one key; returns 1 to quit. */
static int top_key(top_state_t *ts, int ch) {
  if (ts->editing) {
    size_t l = strlen(ts->filter);
    if (ch == '\r' || ch == '\n' || ch == 27)
      ts->editing = 0;
    else if ((ch == 127 || ch == 8) && l > 0)
      ts->filter[l - 1] = 0;
    else if (isprint(ch) && l + 1 < sizeof(ts->filter)) {
      ts->filter[l] = (char)ch;
      ts->filter[l + 1] = 0;
    }
    return 0;
  }
  /* arrows and page keys arrive as ESC [ A / B / 5~ / 6~ */
  if (ts->esc == 1) {
    ts->esc = ch == '[' ? 2 : 0;
    return 0;
  }
  if (ts->esc == 2) {
    ts->esc = 0;
    if (ch == 'A')
      ch = 'k';
    else if (ch == 'B')
      ch = 'j';
    else if (ch == '5' || ch == '6') {
      ts->esc = 3;
      ts->esc_pg = ch;
      return 0;
    } else
      return 0;
  } else if (ts->esc == 3) {
    ts->esc = 0;
    if (ch != '~')
      return 0;
    ch = ts->esc_pg == '5' ? 'b' : ' ';
  }
  switch (ch) {
  case 27:
    ts->esc = 1;
    break;
  case 'j':
    ts->first++;
    break;
  case 'k':
    if (ts->first > 0)
      ts->first--;
    break;
  case ' ':
    ts->first += ts->page > 1 ? ts->page - 1 : 1;
    break;
  case 'b':
    ts->first = ts->first > ts->page ? ts->first - (ts->page > 1 ? ts->page - 1 : 1) : 0;
    break;
  case 'g':
    ts->first = 0;
    break;
  case 'G':
    ts->first = (size_t)-1 / 2; /* clamped to the last page by the next draw */
    break;
  case 'q':
  case 'Q':
  case 3:
    return 1;
  case 's':
    g_sort = (g_sort + 1) % NSORT;
    break;
  case 'w':
    ts->window = (ts->window + 1) % (TLC_MAX_WINDOWS + 1);
    break;
  case '/':
    ts->editing = 1;
    ts->filter[0] = 0;
    break;
  case 't':
    ts->cur++;
    break;
  default:
    break;
  }
  return 0;
}

static struct termios g_saved_tio;
static int g_tio_saved;

static void term_restore(void) {
  if (g_tio_saved)
    tcsetattr(STDIN_FILENO, TCSANOW, &g_saved_tio);
  g_tio_saved = 0;
}

/* The columns `tlcap top` subscribes to: those top_draw reads. */
static size_t top_columns(uint32_t *c) {
  size_t n = 0;
  unsigned w;
  c[n++] = TLC_COL_COUNT;
  c[n++] = TLC_COL_DIST(TLC_NET, TLC_COLF_TOTAL);
  c[n++] = TLC_COL_DIST(TLC_NET, TLC_COLF_N);
  c[n++] = TLC_COL_DIST(TLC_NET, TLC_COLF_SUM);
  c[n++] = TLC_COL_DIST(TLC_NET, TLC_COLF_MAX);
  c[n++] = TLC_COL_DIST(TLC_CALL, TLC_COLF_TOTAL);
  for (w = 0; w < TLC_MAX_WINDOWS; w++) {
    c[n++] = TLC_COL_WCOUNT(w);
    c[n++] = TLC_COL_WIN(w, TLC_NET, TLC_COLW_N);
    c[n++] = TLC_COL_WIN(w, TLC_NET, TLC_COLW_SUM);
    c[n++] = TLC_COL_WIN(w, TLC_NET, TLC_COLW_MAX);
    c[n++] = TLC_COL_WIN(w, TLC_CALL, TLC_COLW_SUM);
  }
  return n;
}

/* top: the link's state goes in a status line under the header (top_draw). */
static void top_event_cb(void *ud, const tlc_client_event_t *ev) {
  time_t now = time(NULL);
  struct tm tm;
  char at[16];
  (void)ud;
  localtime_r(&now, &tm);
  strftime(at, sizeof(at), "%H:%M:%S", &tm);
  switch (ev->kind) {
  case TLC_CLIENT_EV_LOST:
    snprintf(g_link, sizeof(g_link), "DISCONNECTED at %s (%s): reconnecting", at, ev->reason);
    break;
  case TLC_CLIENT_EV_RETRY:
    snprintf(g_link, sizeof(g_link), "DISCONNECTED: reconnecting, attempt %u failed (%.120s)",
             ev->attempts, ev->reason);
    break;
  case TLC_CLIENT_EV_RECONNECTED:
    snprintf(g_link, sizeof(g_link), "reconnected at %s after %.1f s%s", at,
             (double)ev->down_ms / 1000.0,
             ev->restarted ? ": the daemon restarted, statistics start again" : "");
    if (ev->restarted)
      g_view_reset = 1;
    break;
  default:
    break;
  }
}

int tlc_cli_top(int argc, char **argv) {
  Tlcap__Subscribe sub = TLCAP__SUBSCRIBE__INIT;
  uint32_t top_cols[6 + 5 * TLC_MAX_WINDOWS];
  char *targets[1];
  tlc_client_t *c;
  tlc_cli_view_t w;
  top_state_t ts;
  long interval = 1000;
  int status = 0, tty = isatty(STDIN_FILENO), quit = 0, stdin_eof = 0, o;
  static const struct option lo[] = { { "interval", required_argument, NULL, 'i' },
                                      { "help", no_argument, NULL, 'h' },
                                      { NULL, 0, NULL, 0 } };
  memset(&ts, 0, sizeof(ts));
  tlc_cli_opt_reset();
  while ((o = tlc_cli_next_opt(argc, argv, ":hi:", lo)) != -1) {
    if (o == 'i') {
      interval = strtol(optarg, NULL, 10);
      continue;
    }
    if (o != 'h')
      return EXIT_USAGE;
    printf("usage: tlcap [--connect ADDR] top [TARGET] [--interval MS]\n"
           "A live view of a target's areas, sorted by net time, redrawn in place.\n"
           "Keys: q quit, s next sort key (net, count, call, max, avg, name), w next window\n"
           "(cumulative, then each rolling window), / filter by name (Enter ends), t next\n"
           "target, j/k or the arrows scroll a row, PgDn/PgUp (space/b) a page, g/G to the\n"
           "first/last rows. The header shows the target's counters, area-limit drops, this\n"
           "view's dropped events and detected sequence gaps.\n");
    return 0;
  }
  if (tlc_cli_operands(argc, 0, 1, "tlcap top [TARGET] [--interval MS]") < 0)
    return EXIT_USAGE;
  if (interval <= 0) {
    fprintf(stderr, "tlcap top: --interval must be a positive number of ms\n");
    return EXIT_USAGE;
  }
  if (optind < argc)
    ts.only = argv[optind];
  if ((c = tlc_cli_connect_ev("tlcap top", &status, top_event_cb)) == NULL)
    return status;
  memset(&w, 0, sizeof(w));
  if (ts.only != NULL) {
    targets[0] = (char *)ts.only;
    sub.targets = targets;
    sub.n_targets = 1;
  }
  sub.interval_ms = (uint32_t)interval;
  /* Only what the view shows (docs/protocol.md "Columnar rows"): one line per area (Neutral
   * rows when there are several contexts), COUNT, T.NET, T.CALL, NET max and avg, for the
   * cumulative statistics and each rolling window. windows and neutral are set too, for a
   * daemon older than columnar rows (it ignores the columns and sends every field). */
  sub.columns = top_cols;
  sub.n_columns = top_columns(top_cols);
  sub.neutral_only = 1;
  sub.windows = 1;
  sub.neutral = 1;
  sub.names = 1;
  if (tlc_client_subscribe(c, &sub) < 0) {
    fprintf(stderr, "tlcap: %s: subscribe failed\n", tlc_client_addr(c));
    tlc_client_free(c);
    return EXIT_BAD;
  }
  if (tty && tcgetattr(STDIN_FILENO, &g_saved_tio) == 0) {
    struct termios raw = g_saved_tio;
    raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO | ISIG);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    g_tio_saved = 1;
    atexit(term_restore);
    tcsetattr(STDIN_FILENO, TCSANOW, &raw);
  }
  printf("\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J");
  top_draw(&w, &ts, tlc_client_addr(c));
  while (!tlc_cli_stop && !quit) {
    struct pollfd pf[2];
    int np = 1;
    pf[0].fd = tlc_client_fd(c);
    pf[0].events = POLLIN;
    pf[0].revents = 0;
    if (!stdin_eof) {
      pf[1].fd = STDIN_FILENO;
      pf[1].events = POLLIN;
      pf[1].revents = 0;
      np = 2;
    }
    if (poll(pf, (nfds_t)np, 1000) < 0 && errno != EINTR)
      break;
    if (np == 2 && (pf[1].revents & (POLLIN | POLLHUP))) {
      char kb[64];
      ssize_t k = read(STDIN_FILENO, kb, sizeof(kb)), j;
      for (j = 0; j < k && !quit; j++)
        quit = top_key(&ts, (unsigned char)kb[j]);
      if (k <= 0 && !tty)
        stdin_eof = 1; /* stdin closed (not a terminal): keep running on the socket only */
      top_draw(&w, &ts, tlc_client_addr(c));
    }
    for (;;) {
      Tlcap__ServerMessage *m;
      int r = tlc_client_recv(c, 0, &m);
      if (r == 0)
        break;
      if (g_view_reset) {
        tlc_cli_view_fini(&w); /* a restarted daemon: the old targets and rows are gone */
        g_view_reset = 0;
      }
      if (r < 0) {
        /* the library reconnects by itself: what comes here cannot be cured by waiting */
        term_restore();
        printf("\x1b[?25h\x1b[?1049l");
        fprintf(stderr, "tlcap top: %s: %s\n", tlc_client_addr(c),
                tlc_client_last_error(c)[0] ? tlc_client_last_error(c) : tlc_strerror(r));
        status = EXIT_BAD;
        quit = 1;
        break;
      }
      if (m->msg_case == TLCAP__SERVER_MESSAGE__MSG_SNAPSHOT)
        tlc_cli_view_apply(&w, m->snapshot);
      else if (m->msg_case == TLCAP__SERVER_MESSAGE__MSG_DROPPED) {
        w.dropped_batches = m->dropped->total_batches;
        w.dropped_events = m->dropped->total_events;
      }
      tlc_client_msg_free(m);
    }
    if (!quit)
      top_draw(&w, &ts, tlc_client_addr(c));
  }
  if (status == 0) {
    term_restore();
    printf("\x1b[?25h\x1b[?1049l");
    fflush(stdout);
  }
  tlc_cli_view_fini(&w);
  tlc_client_free(c);
  return status;
}

/* A blocking socket to a target listener, through the client's one dialer. */
static int dial_tcp(const char *addr, int *fd_out, char *err, size_t errlen) {
  int fd;
  if (tlc_client_dial(addr, -1, "listening for targets", &fd, err, errlen) < 0)
    return -1;
  if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
    snprintf(err, errlen, "%s: %s", addr, strerror(errno));
    close(fd);
    return -1;
  }
  *fd_out = fd;
  return 0;
}

static int send_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n > 0) {
    ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return -1;
    c += w;
    n -= (size_t)w;
  }
  return 0;
}

int tlc_cli_send(int argc, char **argv) {
  const char *file = NULL, *target = NULL, *format = NULL, *to = "127.0.0.1:7411";
  double rate = 0;
  int loop = 0, i, fd = -1, status = 0;
  char *data = NULL, err[512], pre[300];
  size_t len = 0;
  uint64_t sent = 0, events = 0;
  int r, o;
  static const struct option lo[] = { { "target", required_argument, NULL, 't' },
                                      { "format", required_argument, NULL, 'f' },
                                      { "rate", required_argument, NULL, 'r' },
                                      { "to", required_argument, NULL, 'T' },
                                      { "loop", no_argument, NULL, 'l' },
                                      { "help", no_argument, NULL, 'h' },
                                      { NULL, 0, NULL, 0 } };
  tlc_cli_opt_reset();
  while ((o = tlc_cli_next_opt(argc, argv, ":ht:f:", lo)) != -1) {
    if (o == 't') {
      target = optarg;
    } else if (o == 'f') {
      format = optarg;
    } else if (o == 'T') {
      to = optarg;
    } else if (o == 'r') {
      char *end;
      rate = strtod(optarg, &end);
      if (*end != 0 || rate <= 0) {
        fprintf(stderr, "tlcap send: --rate wants a positive number of events per second\n");
        return EXIT_USAGE;
      }
    } else if (o == 'l') {
      loop = 1;
    } else if (o == '?') {
      return EXIT_USAGE;
    } else {
      printf("usage: tlcap send FILE --target NAME --format bin10|bin11|evlog\n"
             "                  [--rate EVENTS/S] [--loop] [--to HOST:PORT]\n"
             "A target simulator: connects to tlcapd's ingest port (default 127.0.0.1:7411),\n"
             "sends the preamble `TLCAP/1 target=NAME format=F` and then FILE's bytes.\n"
             "--rate limits bin10/bin11 records per second; --loop repeats the file until\n"
             "interrupted. Without --loop it half-closes and waits for the daemon to close.\n");
      return 0;
    }
  }
  for (i = optind; i < argc; i++) {
    const char *a = argv[i];
    if (file == NULL)
      file = a;
    else {
      fprintf(stderr, "tlcap send: unexpected argument %s\n", a);
      return EXIT_USAGE;
    }
  }
  if (file == NULL || target == NULL || format == NULL) {
    fprintf(stderr, "usage: tlcap send FILE --target NAME --format bin10|bin11|evlog "
                    "[--rate EVENTS/S] [--loop] [--to HOST:PORT]\n");
    return EXIT_USAGE;
  }
  if (strcmp(format, "bin10") != 0 && strcmp(format, "bin11") != 0 &&
      strcmp(format, "evlog") != 0) {
    fprintf(stderr, "tlcap send: unknown --format %s (bin10, bin11 or evlog)\n", format);
    return EXIT_USAGE;
  }
  if (rate > 0 && strcmp(format, "evlog") == 0) {
    fprintf(stderr, "tlcap send: --rate applies to bin10/bin11 records only\n");
    return EXIT_USAGE;
  }
  if (strlen(target) == 0 || strlen(target) > 128 || strpbrk(target, " \t\r\n") != NULL) {
    fprintf(stderr, "tlcap send: bad --target name\n");
    return EXIT_USAGE;
  }
  if ((r = tlc_cli_read_file(file, &data, &len, (size_t)1 << 31)) < 0) {
    fprintf(stderr, "tlcap send: %s: %s\n", file, tlc_strerror(r));
    return EXIT_BAD;
  }
  if (dial_tcp(to, &fd, err, sizeof(err)) < 0) {
    fprintf(stderr, "tlcap send: %s\n", err);
    tlc_free(data);
    return EXIT_BAD;
  }
  snprintf(pre, sizeof(pre), "TLCAP/1 target=%s format=%s\n", target, format);
  if (send_all(fd, pre, strlen(pre)) < 0)
    goto write_failed;
  do {
    if (rate <= 0 || len < 24) {
      if (send_all(fd, data, len) < 0)
        goto write_failed;
      sent += len;
      events += strcmp(format, "evlog") == 0 ? 0 : len / 24;
    } else {
      /* Pace in slices of ~10 ms worth of records against a monotonic schedule. */
      struct timespec t0, now;
      size_t nrec = len / 24, done = 0, slice = (size_t)(rate / 100) + 1;
      clock_gettime(CLOCK_MONOTONIC, &t0);
      while (done < nrec && !tlc_cli_stop) {
        size_t k = nrec - done < slice ? nrec - done : slice;
        double due, el;
        if (send_all(fd, data + done * 24, k * 24) < 0)
          goto write_failed;
        done += k;
        sent += k * 24;
        events += k;
        due = (double)done / rate;
        clock_gettime(CLOCK_MONOTONIC, &now);
        el = (double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) / 1e9;
        if (due > el) {
          double d = due - el;
          struct timespec ts = { (time_t)d, (long)((d - (double)(time_t)d) * 1e9) };
          nanosleep(&ts, NULL); /* rate limiting */
        }
      }
      if (len % 24 != 0 && !loop && send_all(fd, data + nrec * 24, len % 24) < 0)
        goto write_failed;
    }
  } while (loop && !tlc_cli_stop);
  fprintf(stderr, "tlcap send: %llu bytes (%llu records) sent to %s as %s\n",
          (unsigned long long)sent, (unsigned long long)events, to, target);
  /* Half-close and wait (bounded) for the daemon to close once it has taken everything. */
  shutdown(fd, SHUT_WR);
  {
    struct pollfd pf = { fd, POLLIN, 0 };
    char sink[256];
    int waited = 0;
    while (waited < 100 && poll(&pf, 1, 100) >= 0) {
      ssize_t k;
      if (!(pf.revents & (POLLIN | POLLHUP))) {
        waited++;
        continue;
      }
      k = recv(fd, sink, sizeof(sink), 0);
      if (k <= 0)
        break;
    }
  }
  close(fd);
  tlc_free(data);
  return status;
write_failed:
  fprintf(stderr, "tlcap send: %s: connection closed by the daemon after %llu bytes (%s)\n", to,
          (unsigned long long)sent, strerror(errno));
  close(fd);
  tlc_free(data);
  return EXIT_BAD;
}

static int load_token(const char *path) {
  FILE *f = fopen(path, "r");
  char buf[512];
  size_t n;
  if (f == NULL) {
    fprintf(stderr, "tlcap: --token-file %s: %s\n", path, strerror(errno));
    return -1;
  }
  n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
    n--;
  buf[n] = 0;
  tlc_cli_token = tlc_strndup(buf, n);
  return tlc_cli_token != NULL ? 0 : -1;
}

int main(int argc, char **argv) {
  int i = 1, r;
  const char *env;
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  if ((env = getenv("TLCAP_CONNECT")) != NULL && env[0] != 0)
    tlc_cli_daemon_addr = env;
  if ((env = getenv("TLCAP_TOKEN")) != NULL && env[0] != 0)
    tlc_cli_token = tlc_strndup(env, strlen(env));
  {
    static const struct option lo[] = {
      { "connect", required_argument, NULL, 'C' }, { "token-file", required_argument, NULL, 'k' },
      { "ca", required_argument, NULL, 'A' },      { "help", no_argument, NULL, 'h' },
      { "version", no_argument, NULL, 'V' },       { NULL, 0, NULL, 0 }
    };
    int o;
    tlc_cli_opt_reset();
    /* '+': the options before COMMAND are tlcap's; the command parses the rest. */
    while ((o = getopt_long(argc, argv, "+:hV", lo, NULL)) != -1) {
      if (o == 'h') {
        usage_main(stdout);
        return 0;
      } else if (o == 'V') {
        printf("tlcap %s\n", TLC_VERSION);
        return 0;
      } else if (o == 'C') {
        tlc_cli_daemon_addr = optarg;
      } else if (o == 'A') {
        tlc_cli_ca_file = optarg;
      } else if (o == 'k') {
        tlc_free(tlc_cli_token);
        if (load_token(optarg) < 0)
          return EXIT_BAD;
      } else {
        fprintf(stderr, "tlcap: %s %s\n", o == ':' ? "missing value for" : "unknown option",
                argv[optind - 1]);
        usage_main(stderr);
        return EXIT_USAGE;
      }
    }
    i = optind;
  }
  if (i >= argc) {
    usage_main(stderr);
    return EXIT_USAGE;
  }
  argc -= i;
  argv += i;
  if (strcmp(argv[0], "targets") == 0)
    r = tlc_cli_targets(argc, argv);
  else if (strcmp(argv[0], "stats") == 0)
    r = tlc_cli_stats(argc, argv);
  else if (strcmp(argv[0], "top") == 0)
    r = tlc_cli_top(argc, argv);
  else if (strcmp(argv[0], "watch") == 0)
    r = tlc_cli_watch(argc, argv);
  else if (strcmp(argv[0], "send") == 0)
    r = tlc_cli_send(argc, argv);
  else if (strcmp(argv[0], "rotate") == 0)
    r = tlc_cli_rotate(argc, argv);
  else if (strcmp(argv[0], "mapping") == 0)
    r = tlc_cli_mapping(argc, argv);
  else if (strcmp(argv[0], "segments") == 0)
    r = tlc_cli_segments(argc, argv);
  else if (strcmp(argv[0], "fleet") == 0)
    r = tlc_cli_fleet(argc, argv);
  else if (strcmp(argv[0], "help") == 0) {
    usage_main(stdout);
    r = 0;
  } else {
    fprintf(stderr, "tlcap: unknown command %s\n", argv[0]);
    usage_main(stderr);
    r = EXIT_USAGE;
  }
  tlc_free(tlc_cli_token);
  return r;
}
