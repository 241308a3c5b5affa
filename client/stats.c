/* stats.c - `tlcap stats TARGET [--export text1|xml|br|json] [--since T] [--until T]
 * [--extremes]`: rebuilds
 * a tlc_table_t from the daemon's snapshot of TARGET and prints it with the exporters `tlcapd
 * replay` uses, so that a live capture and a replay of its segments can be compared byte for
 * byte. A large table comes in parts of at most STATS_PART_ROWS rows (docs/protocol.md
 * "Statistics in parts"), applied in order. --since/--until ask instead for the statistics of a
 * past range, which the daemon computes from TARGET's stored segments (SPEC 10); that reply may
 * take up to STATS_RANGE_WAIT. Not done here: aprof, which needs the event timeline that a
 * snapshot does not carry (`tlcapd replay --export aprof` has it).
 */
#include "client/cli.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/out.h"
#include "formats/brw.h"
#include "formats/json.h"
#include "formats/mapping.h"
#include "formats/stats.h"
#include "formats/text1.h"
#include "formats/xml.h"
#include "proto/convert.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#define STATS_PART_ROWS  8192    /* rows per part of a GetStats reply */
#define STATS_RANGE_WAIT 3600000 /* ms a range query may take (the daemon reads segments) */

/* AREA of `--extremes`: the mapping's name of r's area. */
static const char *area_name(void *ud, const tlc_stat_t *r) {
  const tlc_map_area_t *a = tlc_mapping_row_entry(ud, r);
  return a != NULL ? a->name : NULL;
}

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
  int status = 0, r, have_map = 0, extremes = 0;
  char err[512];
  size_t k;
  tlc_out_t o;
  static const struct option lo[] = { { "export", required_argument, NULL, 'e' },
                                      { "text1-format", required_argument, NULL, 't' },
                                      { "since", required_argument, NULL, 's' },
                                      { "until", required_argument, NULL, 'u' },
                                      { "extremes", no_argument, NULL, 'x' },
                                      { "help", no_argument, NULL, 'h' },
                                      { NULL, 0, NULL, 0 } };
  int opt;
  t1 = tlc_malloc(sizeof(*t1));
  if (t1 == NULL)
    return EXIT_BAD;
  tlc_text1_opts_default(t1);
  tlc_cli_opt_reset();
  while ((opt = tlc_cli_next_opt(argc, argv, ":he:t:x", lo)) != -1) {
    if (opt == '?') {
      status = EXIT_USAGE;
      goto done;
    }
    if (opt == 'h') {
      printf("usage: tlcap [--connect ADDR] stats TARGET [--export text1|xml|aprof|br|json]\n"
             "                                  [--text1-format ENTRY=FORMAT]...\n"
             "                                  [--since T] [--until T] [--extremes]\n"
             "Prints the daemon's current statistics of TARGET with the exporters of\n"
             "`tlcapd replay` (default text1). ENTRY is InfoEntry, ContextEntry, MappingEntry,\n"
             "StatisticsEntry or TimelineEntry. br writes the BR profiler file (binary) from the\n"
             "line areas. aprof needs the event timeline, which a live snapshot does not carry:\n"
             "use `tlcapd replay --export aprof` on the target's segments.\n"
             "--since/--until: the statistics of a past range instead, computed by the daemon\n"
             "from TARGET's stored segments (as `tlcapd replay --state-dir --target`). T is\n"
             "ns:N (target time in the latest clock epoch: events with since <= t < until),\n"
             "epoch:K:N (target time in clock epoch K, as `tlcap segments` numbers them),\n"
             "an RFC 3339 UTC time\n"
             "(2026-11-26T10:00:00Z) or a time relative to now (-2h; s, m, h, d, ms): the\n"
             "segments that arrived in the range.\n"
             "--extremes: instead of an export, a line per area, context and kind with its MAX\n"
             "and MIN and when their samples were taken (\"max at\": first..closing event,\n"
             "target ns, eN the clock epoch; - when not known).\n");
      goto done;
    }
    {
      if (opt == 'x') {
        extremes = 1;
      } else if (opt == 's' || opt == 'u') {
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
                       "[--text1-format ENTRY=FORMAT]... [--since T] [--until T] "
                       "[--extremes]") < 0) {
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
    if (extremes)
      r = tlc_extremes_write(&o, &t, have_map ? area_name : NULL, &map);
    else if (strcmp(export_, "json") == 0)
      r = tlc_json_write(&o, &t, have_map ? &map : NULL, target, 0);
    else if (strcmp(export_, "br") == 0) {
      r = tlc_br_export(&o, &t, have_map ? &map : NULL);
      if (r == 0 && tlc_br_line_areas(&t) == 0)
        fprintf(stderr,
                "tlcap: %s has no line areas (handles 1xxxxxxx): a BR profile "
                "holds line entries only, so the export is empty\n",
                target);
    } else if (strcmp(export_, "xml") == 0) {
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
