/* around.c - `tlcap around TARGET REF [--span DUR] [--export FORMAT] [--output FILE]`: the
 * stored events around a moment (docs/continuity.md "The moment"), asked of the daemon
 * (AroundRequest): every event within DUR of REF, whatever its core or context, as Text1 with
 * its TIMELINE, JSON, or a native capture (bin11, bin10, evlog) that `tlcapd replay` reads.
 * A relative REF (-2h) is resolved on this machine's clock, as `tlcap stats --since` does.
 */
#include "client/cli.h"

#include "formats/budget.h"
#include "formats/moment.h"
#include "formats/when.h"
#include "formats/xref.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const char around_usage[] =
    "usage: tlcap [--connect ADDR] around TARGET REF [--span DUR]\n"
    "                   [--export text1|json|bin11|bin10|evlog] [--output FILE]\n"
    "Writes TARGET's stored events whose time lies within DUR (default 10ms; units ns, us,\n"
    "ms, s, m, h) of REF, every core and context: Text1 with its TIMELINE (the default),\n"
    "JSON (the events and their statistics), or a capture tlcapd replay reads again.\n"
    "REF is ns:N or epoch:K:N (target time), RFC 3339 UTC or -2h (arrival time), or a\n"
    "violation's v:BUDGET:N (its \"ref\" in `tlcap violations`): the events from its start\n"
    "- DUR to its end + DUR, while the daemon still keeps that violation; or an extreme,\n"
    "max:KIND:AREA[@CONTEXT] or min:KIND:AREA[@CONTEXT] (KIND net, gross, call, period or\n"
    "outside; AREA a mapped name or a handle; CONTEXT core0, task1A, a task's name, an id,\n"
    "state=N): the events from the start of the sample that made it - DUR to its end + DUR.\n";

int tlc_cli_around(int argc, char **argv) {
  Tlcap__ClientMessage cm = TLCAP__CLIENT_MESSAGE__INIT;
  Tlcap__AroundRequest ar = TLCAP__AROUND_REQUEST__INIT;
  Tlcap__ServerMessage *m;
  tlc_client_t *c;
  const char *ops[2] = { NULL, NULL }, *span = NULL, *ex = NULL, *output = NULL;
  char ref[512], name[TLC_BUDGET_NAME_MAX + 1], why[600];
  int nops = 0, status = 0, kind, isv, isx;
  tlc_xref_t x;
  uint64_t n;
  int64_t v;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      fputs(around_usage, stdout);
      return 0;
    }
    if ((strcmp(a, "--span") == 0 || strcmp(a, "--export") == 0 || strcmp(a, "--output") == 0 ||
         strcmp(a, "-o") == 0)) {
      if (i + 1 >= argc) {
        fprintf(stderr, "tlcap around: %s needs a value\n", a);
        return EXIT_USAGE;
      }
      if (a[2] == 's')
        span = argv[++i];
      else if (a[2] == 'e')
        ex = argv[++i];
      else
        output = argv[++i];
      continue;
    }
    if (nops == 2 || (a[0] == '-' && a[1] == '-')) {
      fprintf(stderr, "tlcap around: unexpected %s\n%s", a, around_usage);
      return EXIT_USAGE;
    }
    ops[nops++] = a;
  }
  if (nops != 2) {
    fputs(around_usage, stderr);
    return EXIT_USAGE;
  }
  if ((isx = tlc_xref_parse(ops[1], &x, why, sizeof(why))) < 0 ||
      (isv = tlc_moment_parse_vref(ops[1], name, sizeof(name), &n, why, sizeof(why))) < 0) {
    fprintf(stderr, "tlcap %s\n", why);
    return EXIT_USAGE;
  }
  isv |= isx;
  if (!isv && tlc_when_parse(ops[1], tlc_when_now(), &kind, &v) < 0) {
    fprintf(stderr,
            "tlcap around: '%s' is not a time (ns:N, epoch:K:N, RFC 3339 UTC, or -2h), a "
            "violation (v:BUDGET:N) nor an extreme (max:KIND:AREA[@CONTEXT], min:...)\n",
            ops[1]);
    return EXIT_USAGE;
  }
  snprintf(ref, sizeof(ref), "%s", ops[1]);
  if (!isv && ops[1][0] == '-') { /* relative: on this machine's clock */
    time_t secs = (time_t)(v / 1000000000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    snprintf(ref, sizeof(ref), "%04d-%02d-%02dT%02d:%02d:%02d.%09lldZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
             (long long)(v % 1000000000));
  }
  if ((c = tlc_cli_connect("tlcap around", &status)) == NULL)
    return status;
  cm.msg_case = TLCAP__CLIENT_MESSAGE__MSG_AROUND;
  cm.around = &ar;
  ar.target = (char *)ops[0];
  ar.ref = ref;
  ar.span = (char *)(span != NULL ? span : "");
  ar.export = (char *)(ex != NULL ? ex : "");
  if ((m = tlc_cli_request_wait(c, &cm, 600000, &status)) != NULL) {
    if (m->msg_case != TLCAP__SERVER_MESSAGE__MSG_AROUND) {
      fprintf(stderr, "tlcap around: %s: unexpected reply\n", tlc_client_addr(c));
      status = EXIT_BAD;
    } else {
      FILE *f = output != NULL ? fopen(output, "wb") : stdout;
      if (f == NULL) {
        perror(output);
        status = EXIT_BAD;
      } else {
        if (fwrite(m->around->data.data, 1, m->around->data.len, f) != m->around->data.len)
          status = EXIT_BAD;
        if ((f != stdout ? fclose(f) : fflush(f)) != 0)
          status = EXIT_BAD;
        if (status != 0)
          fprintf(stderr, "tlcap around: %s: write error\n", output ? output : "stdout");
      }
    }
    tlc_client_msg_free(m);
  }
  tlc_client_free(c);
  return status;
}
