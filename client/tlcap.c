/* tlcap.c - the `tlcap` command line: the options before COMMAND, the dispatch to the command
 * and the usage. Nothing else: each command lives in a file of its own.
 *
 *   tlcap [--connect HOST:PORT|tls://HOST:PORT|unix:PATH] [--ca FILE] [--token-file FILE]
 *         COMMAND [ARGS]
 *
 * main parses the options before COMMAND into cli.c's globals and hands argc/argv from the
 * command word on to tlc_cli_<command>() (cli.h): targets.c, stats.c, top.c, watch.c (these two
 * share live.c's view), segments.c, rotate.c, mapping.c, send.c and fleet.c; what they share is
 * in cli.c. Every command but `send` (the ingest port) and `fleet` (a NATS server) talks to
 * tlcapd's subscriber port through the client library (tlcap_client.h; default 127.0.0.1:7400,
 * or $TLCAP_CONNECT). `watch` and `top` outlive a daemon restart; the one-shot commands fail at
 * once when the daemon is not there.
 *
 * Exit status: 0 success, 1 bad input or a daemon error (including "not reachable", which names
 * the address), 2 usage. Not done here: anything the daemon does; this is a thin client.
 */
#include "client/cli.h"

#include "base/alloc.h"
#include "tlc_version.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void on_signal(int sig) {
  (void)sig;
  tlc_cli_stop = 1;
}

static void usage_main(FILE *to) {
  fprintf(
      to,
      "usage: tlcap [--connect HOST:PORT|tls://HOST:PORT|unix:PATH] [--ca FILE]\n"
      "             [--token-file FILE] COMMAND [ARGS]\n"
      "       tlcap --version\n"
      "\n"
      "commands:\n"
      "  targets [--json]              list targets with status and counters\n"
      "  stats TARGET [--export text1|xml|aprof|br|json] [--text1-format ENTRY=FORMAT]...\n"
      "       [--since T] [--until T]  print a target's current statistics, or those of a\n"
      "                                past range (T: ns:N, epoch:K:N, 2026-11-26T10:00:00Z, -2h)\n"
      "  top [TARGET] [--wait]         live view of areas (q quit, s sort, w window,\n"
      "                                c context, / filter, t next target, j/k scroll)\n"
      "  watch TARGET [--wait]         snapshots and events as JSON lines\n"
      "  send FILE --target NAME --format bin10|bin11|evlog [--rate EVENTS/S] [--loop[=N]]\n"
      "       [--to HOST:PORT]         stream a capture file to the ingest port (a target)\n"
      "  rotate TARGET                 close the target's segment, wait for its seal and\n"
      "                                print its path\n"
      "  segments TARGET [--json]      the target's stored segments: wall-clock and target-\n"
      "                                time spans, records, bytes, state, path\n"
      "  around TARGET REF [--span DUR] [--export text1|json|bin11|bin10|evlog] [-o FILE]\n"
      "                                the stored events within DUR (10ms) of REF, every\n"
      "                                core and context (ns:N, epoch:K:N, RFC 3339, -2h)\n"
      "  trend TARGET AREA --since T [--until T] [--step 1m|1h|1d] [--json]\n"
      "                                one area's count, mean, p99, max per step, from rollups\n"
      "  diff TARGET --a T1..T2 --b T3..T4 [--b-target NAME] [--json]\n"
      "                                every area's two ranges compared, most significant first\n"
      "  violations TARGET [--budget NAME] [--json]\n"
      "                                timing budgets broken: counts, worst and last, REF\n"
      "  mapping TARGET FILE           load a mapping (Text1 or XML export) for a target;\n"
      "                                kept in the state directory across restarts\n"
      "  reset TARGET                  start a target's statistics afresh (a gap)\n"
      "  forget TARGET                 remove a disconnected target from every view\n"
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
  else if (strcmp(argv[0], "reset") == 0)
    r = tlc_cli_reset(argc, argv);
  else if (strcmp(argv[0], "forget") == 0)
    r = tlc_cli_forget(argc, argv);
  else if (strcmp(argv[0], "segments") == 0)
    r = tlc_cli_segments(argc, argv);
  else if (strcmp(argv[0], "around") == 0)
    r = tlc_cli_around(argc, argv);
  else if (strcmp(argv[0], "trend") == 0)
    r = tlc_cli_trend(argc, argv);
  else if (strcmp(argv[0], "diff") == 0)
    r = tlc_cli_diff(argc, argv);
  else if (strcmp(argv[0], "violations") == 0)
    r = tlc_cli_violations(argc, argv);
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
