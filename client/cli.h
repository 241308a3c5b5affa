/* cli.h - private to the `tlcap` executable (as libuv's uv-common.h is to libuv): what its files
 * share. Not a contract: programs use the client library, tlcap_client.h.
 *
 * tlcap.c parses the options before COMMAND and calls the command's tlc_cli_<command>() below;
 * each command is a file of its own (targets.c, stats.c, top.c, watch.c, segments.c, rotate.c,
 * mapping.c, send.c, fleet.c). The helpers are in cli.c, the live view of watch and top in
 * live.c. Everything runs on the CLI's main thread (fleet.c's libnats threads are the library's).
 */
#ifndef TLC_CLI_H
#define TLC_CLI_H

#include "client/tlcap_client.h"

#include "base/out.h"
#include "formats/json.h"
#include "formats/mapping.h"
#include "formats/stats.h"

#include <getopt.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

/* Exit statuses besides 0 (success). */
#define EXIT_BAD   1 /* bad input or a daemon error, including "not reachable" */
#define EXIT_USAGE 2

/* ---- the commands (argc/argv from the command word on; return the exit status) ---- */

int tlc_cli_targets(int argc, char **argv);    /* targets.c */
int tlc_cli_stats(int argc, char **argv);      /* stats.c */
int tlc_cli_top(int argc, char **argv);        /* top.c */
int tlc_cli_watch(int argc, char **argv);      /* watch.c */
int tlc_cli_send(int argc, char **argv);       /* send.c */
int tlc_cli_rotate(int argc, char **argv);     /* rotate.c */
int tlc_cli_reset(int argc, char **argv);      /* reset.c */
int tlc_cli_forget(int argc, char **argv);     /* reset.c */
int tlc_cli_mapping(int argc, char **argv);    /* mapping.c */
int tlc_cli_segments(int argc, char **argv);   /* segments.c */
int tlc_cli_around(int argc, char **argv);     /* around.c */
int tlc_cli_fleet(int argc, char **argv);      /* fleet.c */
int tlc_cli_trend(int argc, char **argv);      /* trend.c */
int tlc_cli_diff(int argc, char **argv);       /* trend.c */
int tlc_cli_violations(int argc, char **argv); /* violations.c */

/* ---- cli.c: the options before COMMAND (set by main, read by the commands) ---- */

extern const char *tlc_cli_daemon_addr; /* --connect, $TLCAP_CONNECT or the default */
extern const char *tlc_cli_ca_file;     /* --ca FILE, or NULL: the system's CAs */
extern char *tlc_cli_token;             /* --token-file or $TLCAP_TOKEN (tlc_malloc'd), or NULL */
extern volatile sig_atomic_t tlc_cli_stop; /* set by SIGINT/SIGTERM: a running command ends */

/* ---- cli.c: a command's own options ---- */

/* { "help" }: the options of a command that has none but --help. */
extern const struct option tlc_cli_help_only[];
/* The options of a command whose only option is --help: prints `help` for it. Returns 0 to go
 * on, or the exit status (0 after the help, EXIT_USAGE on another option). */
int tlc_cli_help_only_opts(int argc, char **argv, const char *help, int *status);

/* Resets getopt for a new command line (GNU: optind 0 is a full re-initialisation). */
void tlc_cli_opt_reset(void);

/* Every command parses its arguments with getopt_long (argv[0] is the command's name):
 * operands may come before or after options, `--` ends the options, and a usage error is
 * reported here as "tlcap CMD: ...". Returns the option, -1 at the end, or '?' after a usage
 * error (already printed). */
int tlc_cli_next_opt(int argc, char **argv, const char *shortopts, const struct option *lo);

/* The operands left after the options: between min and max of them, else `usage_line` on
 * stderr. Returns their count, or -1 after a usage error. */
int tlc_cli_operands(int argc, int min, int max, const char *usage_line);

/* The options of a command that has only --json and --help: sets *json; returns -1 to go on,
 * 0 after printing `usage` for --help, EXIT_USAGE for anything else. */
int tlc_cli_json_help(int argc, char **argv, int *json, const char *usage);

/* A history range for the protocol (SPEC 10): T as when.h spells it, relative times against
 * this host's clock. 0, or -1 after a usage error naming the command `cmd`. */
int tlc_cli_range_get(const char *cmd, const char *since, const char *until, Tlcap__TimeRange *tr);

/* ---- cli.c: the daemon ---- */

/* Connects to tlc_cli_daemon_addr as client `name` (one-shot commands: no reconnection).
 * Returns the client (the caller frees it with tlc_client_free), or NULL with the error printed
 * and *status set to EXIT_BAD. */
tlc_client_t *tlc_cli_connect(const char *name, int *status);

/* As tlc_cli_connect; with `cb`, the client reconnects by itself and tells cb (watch, top). */
tlc_client_t *tlc_cli_connect_ev(const char *name, int *status,
                                 void (*cb)(void *, const tlc_client_event_t *));

/* Sends a request and returns its reply (the caller frees it with tlc_client_msg_free); prints
 * the error, an error reply included, and sets *status to EXIT_BAD on failure (NULL). */
Tlcap__ServerMessage *tlc_cli_request(tlc_client_t *c, Tlcap__ClientMessage *cm, int *status);

/* Sends a request and waits up to timeout_ms for its reply (unsolicited messages are
 * skipped): for requests that take long (range statistics). As tlc_cli_request otherwise. */
Tlcap__ServerMessage *tlc_cli_request_wait(tlc_client_t *c, Tlcap__ClientMessage *cm,
                                           int timeout_ms, int *status);

/* For watch and top, which would otherwise wait silently for a target that may never come:
 * 0 when the daemon knows a target named `pattern` (or, for a pattern with * or ?, one that it
 * matches, as a subscription matches), else EXIT_BAD with "tlcap CMD: no such target" (or the
 * request's error) printed. */
int tlc_cli_not_known(const char *cmd, tlc_client_t *c, const char *pattern);

/* ---- cli.c: output and files ---- */

/* tlc_out_t's write callback for a FILE * (ud): 0, or TLC_EIO. */
int tlc_cli_write_fd_cb(void *ud, const void *buf, size_t len);

/* A JSON document written to stdout with formats/json.c's writer: tlc_cli_json_begin returns
 * the writer (compact: on one line), tlc_cli_json_end ends the line and flushes stdout. */
typedef struct tlc_cli_json {
  tlc_out_t o;
  tlc_json_w_t w;
} tlc_cli_json_t;
tlc_json_w_t *tlc_cli_json_begin(tlc_cli_json_t *j, int compact);
void tlc_cli_json_end(tlc_cli_json_t *j);

/* Reads a whole file of at most `max` bytes into *data (tlc_malloc'd, one spare byte; the
 * caller frees it with tlc_free) and its length into *len. 0, -errno, TLC_ELIMIT or
 * TLC_ENOMEM. */
int tlc_cli_read_file(const char *path, char **data, size_t *len, size_t max);

/* ---- live.c: the live view of watch and top ---- */

/* Per-target state of a live view: the table rebuilt from snapshots, names, last seq. */
typedef struct tlc_cli_view_target {
  char *name;
  tlc_table_t t;
  tlc_mapping_t map;
  int have_map, connected, have;
  uint64_t stream, seq, gaps_seen;
} tlc_cli_view_target_t;

/* The targets of a live view (zeroed to start). dropped_* are the daemon's Dropped totals for
 * this subscriber, instance_id the daemon's of the last snapshot. */
typedef struct tlc_cli_view {
  tlc_cli_view_target_t *v;
  size_t n;
  uint64_t dropped_batches, dropped_events, instance_id;
} tlc_cli_view_t;

/* Applies a Snapshot; returns the target or NULL (out of memory, more than 4096 targets, or a
 * snapshot the table refuses). Detects gaps (a delta whose base is not the stream's last seq)
 * and counts them. */
tlc_cli_view_target_t *tlc_cli_view_apply(tlc_cli_view_t *w, const Tlcap__Snapshot *s);

/* A target event: a forgotten target (`tlcap forget`) leaves the view. */
void tlc_cli_view_event(tlc_cli_view_t *w, const Tlcap__TargetEvent *te);

/* Frees every target and zeroes the view (it can be used again). */
void tlc_cli_view_fini(tlc_cli_view_t *w);

#endif
