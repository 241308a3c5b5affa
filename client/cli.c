/* cli.c - what the `tlcap` commands share (cli.h): the options main parsed before COMMAND, getopt
 * for a command's own options, connecting to the daemon, a request and its reply with an error
 * reply printed, the history range of --since/--until, and small output and file helpers.
 *
 * Every helper reports a failure on stderr ("tlcap: ..." or "tlcap CMD: ...", naming the
 * daemon's address where there is one) and leaves the exit status to its caller (EXIT_BAD,
 * EXIT_USAGE), so that a command reads as straight-line code. Main thread only. Not a library:
 * it prints; programs use tlcap_client.h.
 */
#include "client/cli.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/out.h"
#include "formats/json.h"
#include "formats/when.h"

#include <errno.h>
#include <fnmatch.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

const char *tlc_cli_daemon_addr = TLC_CLIENT_DEFAULT_ADDR;
const char *tlc_cli_ca_file; /* --ca FILE: CAs for tls:// (NULL: the system's) */
char *tlc_cli_token;
volatile sig_atomic_t tlc_cli_stop;

/* Every command parses its arguments with getopt_long (argv[0] is the command's name):
 * operands may come before or after options, `--` ends the options, and a usage error is
 * reported here as "tlcap CMD: ...". Returns the option, -1 at the end, or '?' after a usage
 * error (already printed). */
int tlc_cli_next_opt(int argc, char **argv, const char *shortopts, const struct option *lo) {
  int c = getopt_long(argc, argv, shortopts, lo, NULL);
  if (c == ':' || c == '?') {
    const char *a = optind > 0 && optind <= argc ? argv[optind - 1] : "";
    if (c == ':')
      fprintf(stderr, "tlcap %s: %s needs a value\n", argv[0], a);
    else if (optopt > 0 && optopt < 256 && strncmp(a, "--", 2) != 0)
      fprintf(stderr, "tlcap %s: unknown option -%c\n", argv[0], optopt);
    else
      fprintf(stderr, "tlcap %s: unknown option %s\n", argv[0], a);
    return '?';
  }
  return c;
}

/* Resets getopt for a new command line (GNU: optind 0 is a full re-initialisation). */
void tlc_cli_opt_reset(void) {
  optind = 0;
  opterr = 0;
}

const struct option tlc_cli_help_only[] = { { "help", no_argument, NULL, 'h' },
                                            { NULL, 0, NULL, 0 } };

int tlc_cli_help_only_opts(int argc, char **argv, const char *help, int *status) {
  tlc_cli_opt_reset();
  int o = tlc_cli_next_opt(argc, argv, ":h", tlc_cli_help_only);
  if (o == -1)
    return 0;
  *status = o == 'h' ? 0 : EXIT_USAGE;
  if (o == 'h')
    fputs(help, stdout);
  return 1;
}

tlc_client_t *tlc_cli_connect(const char *name, int *status) {
  return tlc_cli_connect_ev(name, status, NULL);
}

/* Connects; with `cb`, the client reconnects by itself and tells cb (watch, top). */
tlc_client_t *tlc_cli_connect_ev(const char *name, int *status,
                                 void (*cb)(void *, const tlc_client_event_t *)) {
  tlc_client_opts_t o;
  tlc_client_t *c = NULL;
  char err[512];
  memset(&o, 0, sizeof(o));
  o.name = name;
  o.token = tlc_cli_token;
  o.ca_file = tlc_cli_ca_file;
  o.reconnect = cb != NULL;
  o.event_cb = cb;
  if (tlc_client_connect(tlc_cli_daemon_addr, &o, &c, err, sizeof(err)) < 0) {
    fprintf(stderr, "tlcap: %s\n", err);
    *status = EXIT_BAD;
    return NULL;
  }
  return c;
}

/* m, or NULL with the server's error printed and *status set when m is an error reply. */
static Tlcap__ServerMessage *unless_error(tlc_client_t *c, Tlcap__ServerMessage *m, int *status) {
  char err[512];
  if (m->msg_case != TLCAP__SERVER_MESSAGE__MSG_ERROR)
    return m;
  fprintf(stderr, "tlcap: %s: %s\n", tlc_client_addr(c),
          tlc_client_error_text(m->error, err, sizeof(err)));
  tlc_client_msg_free(m);
  *status = EXIT_BAD;
  return NULL;
}

/* Sends a request and returns its reply; prints the error and sets *status on failure. */
Tlcap__ServerMessage *tlc_cli_request(tlc_client_t *c, Tlcap__ClientMessage *cm, int *status) {
  Tlcap__ServerMessage *m = NULL;
  char err[512];
  if (tlc_client_request(c, cm, &m, err, sizeof(err)) < 0) {
    fprintf(stderr, "tlcap: %s\n", err);
    *status = EXIT_BAD;
    return NULL;
  }
  return unless_error(c, m, status);
}

int tlc_cli_not_known(const char *cmd, tlc_client_t *c, const char *pattern) {
  Tlcap__ClientMessage cm = TLCAP__CLIENT_MESSAGE__INIT;
  Tlcap__ListTargets lt = TLCAP__LIST_TARGETS__INIT;
  Tlcap__ServerMessage *m;
  int status = 0, known = 0;
  cm.msg_case = TLCAP__CLIENT_MESSAGE__MSG_LIST_TARGETS;
  cm.list_targets = &lt;
  if ((m = tlc_cli_request(c, &cm, &status)) == NULL)
    return status;
  if (m->msg_case != TLCAP__SERVER_MESSAGE__MSG_TARGETS) {
    fprintf(stderr, "tlcap %s: %s: unexpected reply\n", cmd, tlc_client_addr(c));
    tlc_client_msg_free(m);
    return EXIT_BAD;
  }
  for (size_t i = 0; i < m->targets->n_targets && !known; i++)
    known = fnmatch(pattern, m->targets->targets[i]->name, 0) == 0;
  tlc_client_msg_free(m);
  if (known)
    return 0;
  fprintf(stderr,
          "tlcap %s: %s: no such target: %s (tlcap targets lists them; --wait waits for it)\n", cmd,
          tlc_client_addr(c), pattern);
  return EXIT_BAD;
}

/* Sends a request and waits up to timeout_ms for its reply (unsolicited messages are
 * skipped): for requests that take long (range statistics). As tlc_cli_request() otherwise. */
Tlcap__ServerMessage *tlc_cli_request_wait(tlc_client_t *c, Tlcap__ClientMessage *cm,
                                           int timeout_ms, int *status) {
  Tlcap__ServerMessage *m = NULL;
  int id = tlc_client_send(c, cm), r;
  if (id < 0) {
    fprintf(stderr, "tlcap: %s: send: %s\n", tlc_client_addr(c), tlc_strerror(id));
    *status = EXIT_BAD;
    return NULL;
  }
  for (;;) {
    r = tlc_client_recv(c, timeout_ms, &m);
    if (r <= 0) {
      if (r == 0)
        fprintf(stderr, "tlcap: %s: no reply within %d s\n", tlc_client_addr(c), timeout_ms / 1000);
      else
        fprintf(stderr, "tlcap: %s: %s\n", tlc_client_addr(c),
                r == TLC_EIO ? "the daemon closed the connection" : tlc_strerror(r));
      *status = EXIT_BAD;
      return NULL;
    }
    if (m->request_id == (uint32_t)id ||
        (m->msg_case == TLCAP__SERVER_MESSAGE__MSG_ERROR && m->error->fatal))
      break;
    tlc_client_msg_free(m);
  }
  return unless_error(c, m, status);
}

/* The operands left after the options: between min and max of them, else `usage_line` on
 * stderr. Returns their count, or -1 after a usage error. */
int tlc_cli_operands(int argc, int min, int max, const char *usage_line) {
  int n = argc - optind;
  if (n < min || n > max) {
    fprintf(stderr, "usage: %s\n", usage_line);
    return -1;
  }
  return n;
}

/* The options of a command that has only --json and --help: sets *json; returns -1 to go on,
 * 0 after printing `usage` for --help, EXIT_USAGE for anything else. */
int tlc_cli_json_help(int argc, char **argv, int *json, const char *usage) {
  static const struct option lo[] = { { "json", no_argument, NULL, 'j' },
                                      { "help", no_argument, NULL, 'h' },
                                      { NULL, 0, NULL, 0 } };
  int o;
  tlc_cli_opt_reset();
  while ((o = tlc_cli_next_opt(argc, argv, ":h", lo)) != -1) {
    if (o == 'j') {
      *json = 1;
      continue;
    }
    if (o != 'h')
      return EXIT_USAGE;
    fputs(usage, stdout);
    return 0;
  }
  return -1;
}

/* A history range for the protocol (SPEC 10): T as when.h spells it, relative times against
 * this host's clock. 0, or -1 after a usage error naming the command. */
int tlc_cli_range_get(const char *cmd, const char *since, const char *until, Tlcap__TimeRange *tr) {
  tlc_when_range_t r;
  char err[300];
  if (tlc_when_range(since, until, tlc_when_now(), &r, err, sizeof(err)) < 0) {
    fprintf(stderr, "tlcap %s: --%s\n", cmd, err);
    return -1;
  }
  tr->clock =
      r.kind == TLC_WHEN_WALL ? TLCAP__TIME_RANGE__CLOCK__WALL : TLCAP__TIME_RANGE__CLOCK__TARGET;
  tr->has_since = r.has_since;
  tr->since = r.since;
  tr->has_until = r.has_until;
  tr->until = r.until;
  tr->has_epoch = r.kind == TLC_WHEN_TARGET && r.epoch >= 0;
  tr->epoch = tr->has_epoch ? (uint64_t)r.epoch : 0;
  return 0;
}

int tlc_cli_write_fd_cb(void *ud, const void *buf, size_t len) {
  FILE *f = ud;
  return fwrite(buf, 1, len, f) == len ? 0 : TLC_EIO;
}

int tlc_cli_read_file(const char *path, char **data, size_t *len, size_t max) {
  FILE *f = fopen(path, "rb");
  struct stat st;
  if (f == NULL)
    return -errno;
  if (fstat(fileno(f), &st) != 0 || (size_t)st.st_size > max) {
    fclose(f);
    return TLC_ELIMIT;
  }
  *data = tlc_malloc((size_t)st.st_size + 1);
  if (*data == NULL) {
    fclose(f);
    return TLC_ENOMEM;
  }
  *len = fread(*data, 1, (size_t)st.st_size, f);
  fclose(f);
  return 0;
}

tlc_json_w_t *tlc_cli_json_begin(tlc_cli_json_t *j, int compact) {
  tlc_out_init(&j->o, 0, tlc_cli_write_fd_cb, stdout);
  tlc_json_w_init(&j->w, &j->o, compact);
  return &j->w;
}

void tlc_cli_json_end(tlc_cli_json_t *j) {
  tlc_out_putc(&j->o, '\n');
  tlc_out_fini(&j->o);
  fflush(stdout);
}
