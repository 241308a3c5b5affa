/* trend.c - `tlcap trend TARGET AREA --since T [--until T] [--step S] [--context C] [--kind K]
 * [--json]` and `tlcap diff TARGET --a T1..T2 --b T3..T4 [--b-target NAME] [--context C]
 * [--kind K] [--json]` (SPEC 14, docs/rollups.md): the daemon answers from its rollups, off its
 * event loop, with the document the HTTP API gives (--json) or a table; this prints it as it
 * came. The request carries the HTTP API's query string, built here from the options.
 */
#include "client/cli.h"

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Appends "&key=value" (or "key=value" first) to q; -1 when it does not fit or value holds a
 * character the query string cannot carry. */
static int qadd(char *q, size_t cap, const char *key, const char *value) {
  size_t l = strlen(q);
  int n;
  if (value == NULL)
    return 0;
  if (strpbrk(value, "&,=%") != NULL) {
    fprintf(stderr, "tlcap: --%s %s: '&', ',', '=' and '%%' cannot be in a value\n", key, value);
    return -1;
  }
  n = snprintf(q + l, cap - l, "%s%s=%s", l ? "&" : "", key, value);
  if (n < 0 || (size_t)n >= cap - l) {
    fprintf(stderr, "tlcap: --%s: too long\n", key);
    return -1;
  }
  return 0;
}

static int run(const char *cmd, int diff, const char *target, const char *query, int json) {
  Tlcap__ClientMessage cm = TLCAP__CLIENT_MESSAGE__INIT;
  Tlcap__TrendRequest tr = TLCAP__TREND_REQUEST__INIT;
  Tlcap__DiffRequest dr = TLCAP__DIFF_REQUEST__INIT;
  Tlcap__ServerMessage *m;
  tlc_client_t *c;
  int status = 0;
  if ((c = tlc_cli_connect(cmd, &status)) == NULL)
    return status;
  if (diff) {
    cm.msg_case = TLCAP__CLIENT_MESSAGE__MSG_DIFF;
    cm.diff = &dr;
    dr.target = (char *)(uintptr_t)target;
    dr.query = (char *)(uintptr_t)query;
    dr.text = !json;
  } else {
    cm.msg_case = TLCAP__CLIENT_MESSAGE__MSG_TREND;
    cm.trend = &tr;
    tr.target = (char *)(uintptr_t)target;
    tr.query = (char *)(uintptr_t)query;
    tr.text = !json;
  }
  if ((m = tlc_cli_request(c, &cm, &status)) != NULL) {
    if (m->msg_case != TLCAP__SERVER_MESSAGE__MSG_TREND_DOCUMENT) {
      fprintf(stderr, "%s: %s: unexpected reply\n", cmd, tlc_client_addr(c));
      status = EXIT_BAD;
    } else if (fwrite(m->trend_document->document.data, 1, m->trend_document->document.len,
                      stdout) != m->trend_document->document.len) {
      status = EXIT_BAD;
    }
    tlc_client_msg_free(m);
  }
  tlc_client_free(c);
  return status;
}

/* One option of trend or diff: each but --json and --help is one query parameter. */
typedef struct qopt {
  const char *name; /* --name */
  const char *key;  /* its query parameter */
  int required;
} qopt_t;

static const qopt_t trend_opts[] = { { "since", "since", 1 }, { "until", "until", 0 },
                                     { "step", "step", 0 },   { "context", "context", 0 },
                                     { "kind", "kind", 0 },   { NULL, NULL, 0 } };
static const qopt_t diff_opts[] = { { "a", "a", 1 },
                                    { "b", "b", 1 },
                                    { "b-target", "b_target", 0 },
                                    { "context", "context", 0 },
                                    { "kind", "kind", 0 },
                                    { NULL, NULL, 0 } };

#define QOPT_MAX 8 /* options of one table at most */

/* Parses `opts` (plus --json and --help) into the query string q, after `first` (the
 * operands' parameters, or ""). 0 and *json; 1 when --help was printed; EXIT_USAGE after a
 * message. */
static int query_opts(int argc, char **argv, const char *cmd, const qopt_t *opts, const char *help,
                      char *q, size_t cap, int *json) {
  struct option lo[QOPT_MAX + 3];
  const char *val[QOPT_MAX] = { NULL };
  size_t n, i;
  int opt;
  for (n = 0; opts[n].name != NULL && n < QOPT_MAX; n++)
    lo[n] = (struct option){ opts[n].name, required_argument, NULL, 256 + (int)n };
  lo[n] = (struct option){ "json", no_argument, NULL, 'j' };
  lo[n + 1] = (struct option){ "help", no_argument, NULL, 'h' };
  lo[n + 2] = (struct option){ NULL, 0, NULL, 0 };
  *json = 0;
  tlc_cli_opt_reset();
  while ((opt = tlc_cli_next_opt(argc, argv, ":h", lo)) != -1) {
    if (opt == '?')
      return EXIT_USAGE;
    if (opt == 'h') {
      fputs(help, stdout);
      return 1;
    }
    if (opt == 'j')
      *json = 1;
    else if (opt >= 256 && (size_t)(opt - 256) < n)
      val[opt - 256] = optarg;
  }
  for (i = 0; i < n; i++) {
    if (opts[i].required && val[i] == NULL) {
      fprintf(stderr, "%s: --%s is required\n", cmd, opts[i].name);
      return EXIT_USAGE;
    }
    if (qadd(q, cap, opts[i].key, val[i]) < 0)
      return EXIT_USAGE;
  }
  return 0;
}

static const char trend_help[] =
    "usage: tlcap [--connect ADDR] trend TARGET AREA --since T [--until T]\n"
    "                                  [--step 1m|1h|1d] [--context C] [--kind K] [--json]\n"
    "One area's statistics per step (count, mean, sigma, p99, max), from the daemon's\n"
    "per-minute rollups (docs/rollups.md): days or months answer at once, whatever the\n"
    "raw segments' retention kept. AREA is the handle (decimal or 0x hex). T as for\n"
    "`tlcap stats --since`: -1h, an RFC 3339 UTC time, ns:N or epoch:K:N. --step\n"
    "default 1m. --context: one context number (default: all merged); --kind: net\n"
    "(default), gross, call, period or outside. --json: the HTTP API's document.\n";

static const char diff_help[] =
    "usage: tlcap [--connect ADDR] diff TARGET --a T1..T2 --b T3..T4 [--b-target NAME]\n"
    "                                  [--context C] [--kind K] [--json]\n"
    "Every area's statistics in two ranges compared (counts, mean, sigma, p50, p99,\n"
    "max, the factor of the means, Welch's t, whether p99 moved beyond the histograms'\n"
    "1%), most significant first, from the daemon's rollups (docs/rollups.md).\n"
    "--b-target: the second range of another target. Either end of a range may be\n"
    "empty (-1d.. is the last day). T as for `tlcap stats --since`.\n";

int tlc_cli_trend(int argc, char **argv) {
  char q[1024] = "";
  int json, r;
  if ((r = query_opts(argc, argv, "tlcap trend", trend_opts, trend_help, q, sizeof q, &json)) != 0)
    return r == 1 ? 0 : r;
  if (tlc_cli_operands(argc, 2, 2, "tlcap trend TARGET AREA --since T [options]") < 0)
    return EXIT_USAGE;
  /* the area first, as the HTTP API's own links write it */
  {
    char full[1100] = "";
    if (qadd(full, sizeof full, "area", argv[optind + 1]) < 0)
      return EXIT_USAGE;
    snprintf(full + strlen(full), sizeof full - strlen(full), "&%s", q);
    return run("tlcap trend", 0, argv[optind], full, json);
  }
}

int tlc_cli_diff(int argc, char **argv) {
  char q[1024] = "";
  int json, r;
  if ((r = query_opts(argc, argv, "tlcap diff", diff_opts, diff_help, q, sizeof q, &json)) != 0)
    return r == 1 ? 0 : r;
  if (tlc_cli_operands(argc, 1, 1, "tlcap diff TARGET --a T1..T2 --b T3..T4 [options]") < 0)
    return EXIT_USAGE;
  return run("tlcap diff", 1, argv[optind], q, json);
}
