/* segments.c - `tlcap segments TARGET [--json]`: TARGET's stored segments in sequence order
 * (ListSegments): state, wall-clock and target-time spans, records, bytes, why each was closed
 * and its data file's path on the daemon's host, as a table or one JSON array. A reply holds a
 * bounded number of segments; when the daemon had to leave the oldest out, a line on stderr
 * says so.
 */
#include "client/cli.h"

#include <stdint.h>
#include <stdio.h>
#include <time.h>

static const char *const seg_states[] = { "?", "open", "sealed", "compressed", "sealing" };
static const char *const seg_reasons[] = { "-",         "size",    "age",         "reconnect",
                                           "sighup",    "command", "shutdown",    "io_error",
                                           "recovered", "idle",    "clock-reset", "reset" };

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
           "Lists TARGET's stored segments in sequence order: sequence, state (open, sealing,\n"
           "sealed, compressed), wall-clock span (UTC: first record's arrival, seal), target-time\n"
           "span (ns), records, bytes, why it was closed, and the data file's path on the\n"
           "daemon's host. --json: one JSON array of objects with the same fields.\n")) >= 0)
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
  tlc_cli_json_t j;
  tlc_json_w_t *w = json ? tlc_cli_json_begin(&j, 0) : NULL;
  if (w)
    tlc_json_w_open(w, NULL, '[');
  else
    printf("%-10s %-10s %-20s %-20s %20s %20s %5s %10s %12s %-9s %s\n", "SEQ", "STATE", "OPENED",
           "CLOSED", "FIRST_NS", "LAST_NS", "EPOCH", "RECORDS", "BYTES", "REASON", "PATH");
  for (size_t i = 0; i < m->segments->n_segments; i++) {
    const Tlcap__SegmentInfo *x = m->segments->segments[i];
    const char *st = x->state < 5 ? seg_states[x->state] : "?";
    const char *rs =
        x->reason < sizeof(seg_reasons) / sizeof(seg_reasons[0]) ? seg_reasons[x->reason] : "?";
    /* open or waiting for its seal: no manifest yet, so no reason */
    int unsealed = x->state == TLCAP__SEGMENT_INFO__STATE__OPEN ||
                   x->state == TLCAP__SEGMENT_INFO__STATE__SEALING;
    char op[32], cl[32];
    fmt_utc(op, sizeof(op), x->opened_unix_ns);
    fmt_utc(cl, sizeof(cl), x->closed_unix_ns);
    if (w) {
      tlc_json_w_open(w, NULL, '{');
      tlc_json_w_u64(w, "seq", x->seq);
      tlc_json_w_str(w, "state", st);
      tlc_json_w_str(w, "opened", op);
      tlc_json_w_str(w, "closed", cl);
      tlc_json_w_i64(w, "opened_unix_ns", x->opened_unix_ns);
      tlc_json_w_i64(w, "closed_unix_ns", x->closed_unix_ns);
      if (x->records > 0) {
        tlc_json_w_i64(w, "first_time", x->first_time);
        tlc_json_w_i64(w, "last_time", x->last_time);
        tlc_json_w_i64(w, "min_time", x->min_time);
        tlc_json_w_i64(w, "max_time", x->max_time);
      }
      tlc_json_w_u64(w, "epoch", x->epoch);
      tlc_json_w_u64(w, "records", x->records);
      tlc_json_w_u64(w, "items", x->items);
      tlc_json_w_u64(w, "bytes", x->bytes);
      tlc_json_w_u64(w, "gaps", x->gaps);
      tlc_json_w_str(w, "reason", unsealed ? "" : rs);
      tlc_json_w_bool(w, "recovered", x->recovered);
      tlc_json_w_str(w, "path", x->path);
      tlc_json_w_close(w, '}');
      continue;
    }
    if (x->records > 0)
      printf("%-10llu %-10s %-20s %-20s %20lld %20lld %5llu %10llu %12llu %-9s %s\n",
             (unsigned long long)x->seq, st, op, cl, (long long)x->first_time,
             (long long)x->last_time, (unsigned long long)x->epoch, (unsigned long long)x->records,
             (unsigned long long)x->bytes, unsealed ? "-" : rs, x->path);
    else
      printf("%-10llu %-10s %-20s %-20s %20s %20s %5llu %10llu %12llu %-9s %s\n",
             (unsigned long long)x->seq, st, op, cl, "-", "-", (unsigned long long)x->epoch,
             (unsigned long long)x->records, (unsigned long long)x->bytes, unsealed ? "-" : rs,
             x->path);
  }
  if (w) {
    tlc_json_w_close(w, ']');
    tlc_cli_json_end(&j);
  } else if (m->segments->n_segments == 0)
    printf("(no segments)\n");
  if (m->segments->truncated)
    fprintf(stderr, "tlcap: more segments than one reply holds: the oldest are not listed\n");
done_msg:
  tlc_client_msg_free(m);
done:
  tlc_client_free(c);
  return status;
}
