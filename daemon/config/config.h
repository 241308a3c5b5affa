/* config.h - tlcapd's configuration: INI file (inih), command line, embedded default.
 *
 * A configuration is built in three steps, the same way at start-up and on SIGHUP:
 *   1. defaults (tlc_config_init);
 *   2. the INI file named by --config, if any (tlc_config_load_file);
 *   3. the command-line options on top (tlc_config_apply_cli): a source given on the command
 *      line replaces the file's source of the same name; scalar options override.
 * If neither the file nor the command line names any source and there is no --config, the
 * embedded default applies (tlc_config_add_defaults): listeners `bin11` on 127.0.0.1:7411
 * (bin11) and `evlog` on 127.0.0.1:7412 (evlog), subscribers on 127.0.0.1:7400, state under
 * ./tlcap-state. docs/configuration.md lists every option.
 *
 * Errors name where: "FILE:LINE: [section] option: reason" or "command line: --opt: reason".
 *
 * Pure (no libuv); file reading is blocking and done at start-up and on SIGHUP only.
 */
#ifndef TLC_CONFIG_H
#define TLC_CONFIG_H

#include "formats/stats.h"
#include "formats/budget.h"   /* timing budgets, SPEC 13 */
#include "formats/dec.h"      /* tlc_format_t */
#include "formats/preamble.h" /* TLC_TARGET_NAME_MAX, tlc_target_name_valid */
#include "formats/rtos.h"

/* Source kinds (what creates a target): a config source section, a target's src_kind. */
enum tlc_src_kind { TLC_SRC_LISTEN = 1, TLC_SRC_DIAL = 2, TLC_SRC_SERIAL = 3, TLC_SRC_EFL = 4 };

/* What a SIGHUP that changes a [daemon] key does (the settings table gives each key one). */
enum tlc_cfg_reload {
  TLC_CFG_LIVE,    /* applied at once (or by what is created from then on) */
  TLC_CFG_RESTART, /* the running value stays until a restart (logged) */
  TLC_CFG_REFUSE   /* the reload is refused as a whole ("restart required") */
};

/* memory_limit when not set: the daemon takes a quarter of physical memory. */
#define TLC_CFG_MEMORY_AUTO UINT64_MAX

#include <stddef.h>
#include <stdint.h>

#define TLC_CFG_MAX_SOURCES 256
#define TLC_CFG_MAX_TARGETS 256
#define TLC_CFG_PATH        512
#define TLC_CFG_HOST        256
#define TLC_CFG_LIST        1024 /* a listener's allow / targets list */
#define TLC_CFG_MAX_CLI     512
#define TLC_CFG_PATTERN     128

/* Defaults of the embedded configuration (ports documented in docs/configuration.md). */
#define TLC_DEFAULT_BIN11_ADDR "127.0.0.1:7411"
#define TLC_DEFAULT_EVLOG_ADDR "127.0.0.1:7412"
#define TLC_DEFAULT_SERVE_ADDR "127.0.0.1:7400"
#define TLC_DEFAULT_HTTP_ADDR  "127.0.0.1:7480" /* SPEC 9 */
#define TLC_DEFAULT_STATE_DIR  "./tlcap-state"

/* [efl NAME] defaults: efl_debugd's debugger port, efl_debug's poll interval (docs/efl.md). */
#define TLC_DEFAULT_EFL_DEBUGD  "127.0.0.1:6666"
#define TLC_DEFAULT_EFL_POLL_MS 200

enum tlc_parity { TLC_PARITY_NONE = 0, TLC_PARITY_EVEN = 1, TLC_PARITY_ODD = 2 };
enum tlc_flow { TLC_FLOW_NONE = 0, TLC_FLOW_RTSCTS = 1, TLC_FLOW_XONXOFF = 2 };

/* Per-target settings shared by sources and [target NAME] sections. The packed task variable
 * (SPEC 2): context_rtos is read when the key is set (its masks and states in rtos_pack, its
 * task names read again by the target); context_id_mask, context_state_mask, context_running
 * and context_stopped set `pack`'s fields and mark them in pack_set, and override the file's
 * (tlc_config_ctxpack). */
enum { TLC_CFG_PK_ID = 1, TLC_CFG_PK_STATE = 2, TLC_CFG_PK_RUN = 4, TLC_CFG_PK_STOP = 8 };
typedef struct tlc_cfg_tset {
  char mapping[TLC_CFG_PATH]; /* "" = none */
  uint8_t has_context_area;
  uint32_t context_area;
  char rtos[TLC_CFG_PATH]; /* context_rtos ("" = none) */
  tlc_ctxpack_t rtos_pack; /* what rtos says (valid when rtos is set) */
  tlc_ctxpack_t pack;      /* the explicit keys' values */
  uint8_t pack_set;        /* TLC_CFG_PK_* bits: which keys were given */
} tlc_cfg_tset_t;

/* The packed task variable a tset means: context_rtos's, then each explicit key over it
 * (context_stopped given: only its states stop). Masks 0: not packed. */
void tlc_config_ctxpack(const tlc_cfg_tset_t *ts, tlc_ctxpack_t *out);
/* Reads a winIDEA RTOS description file into *p (and its task names into names, when not NULL).
 * Returns 0, or a negative error with a message naming the file, line and reason in err. */
int tlc_config_read_rtos(const char *path, tlc_ctxpack_t *p, tlc_mapping_t *names, char *err,
                         size_t errlen);

/* One [listen NAME], [dial NAME], [serial NAME] or [efl NAME] section, or --listen/--dial/
 * --serial/--efl. An efl source keeps efl_debugd's address in host/port ("debugd"). */
typedef struct tlc_cfg_source {
  int kind; /* enum tlc_src_kind */
  char name[TLC_TARGET_NAME_MAX + 1];
  tlc_format_t format;
  char host[TLC_CFG_HOST]; /* listen/dial: host or IP (IPv6 without brackets) */
  uint16_t port;
  int has_address;
  char device[TLC_CFG_PATH];      /* serial */
  uint32_t baud;                  /* serial, default 115200 */
  uint8_t data_bits;              /* 5..8, default 8 */
  uint8_t parity;                 /* enum tlc_parity */
  uint8_t stop_bits;              /* 1 or 2 */
  uint8_t flow;                   /* enum tlc_flow */
  tlc_cfg_tset_t tset;            /* defaults for the targets this source creates */
  char pattern[TLC_CFG_PATTERN];  /* efl: fnmatch pattern on application name or pid */
  uint32_t poll_ms;               /* efl: evlog poll interval (default 200, as efl_debug) */
  char origin[TLC_CFG_PATH + 16]; /* "FILE:LINE" or "command line", for messages */
  char allow[TLC_CFG_LIST];       /* listen: peer addresses accepted, CIDR list ("" = any) */
  char targets[TLC_CFG_LIST];     /* listen: target names allowed, fnmatch list ("" = any) */

  size_t max_targets;               /* efl: targets it keeps (0: [daemon] efl_max_targets) */
  char debugd_socket[TLC_CFG_PATH]; /* efl: efl_debugd's Unix socket ("": eina's; "none") */
} tlc_cfg_source_t;

/* One [target NAME] section: settings for the target with exactly this name. */
typedef struct tlc_cfg_target {
  char name[TLC_TARGET_NAME_MAX + 1];
  tlc_cfg_tset_t tset;
} tlc_cfg_target_t;

typedef struct tlc_config {
  /* [daemon] */
  char state_dir[TLC_CFG_PATH];
  int store;                    /* 1: storage on */
  char serve[TLC_CFG_HOST + 8]; /* subscriber address "HOST:PORT" or "unix:PATH" ("" = off) */
  int log_level;
  char debug[128];        /* debug switches (log.h) */
  size_t max_connections; /* TCP ingest connections (0: from RLIMIT_NOFILE) */
  size_t max_targets;
  size_t max_name;                   /* longest target name accepted (<= TLC_TARGET_NAME_MAX) */
  size_t efl_max_targets;            /* targets one efl source keeps, unless its section says */
  size_t read_buffer;                /* bytes per read from a socket or tty */
  uint32_t max_block;                /* evlog: largest block accepted, bytes */
  uint64_t partial_timeout_ms;       /* close a connection this long inside one record (0 off) */
  uint64_t resync_idle_ms;           /* serial (resync): deliver held records after this silence */
  uint64_t idle_timeout_ms;          /* close a connection idle this long at all (0 off) */
  uint64_t clock_reset_threshold_ms; /* a step back this large is a clock restart (SPEC 2;
                                        default 1 s; 0: none) */
  uint64_t backoff_min_ms, backoff_max_ms; /* dial and serial reconnect backoff */
  uint64_t status_interval_ms;             /* STATUS= updates */
  uint32_t nwindows;                       /* rolling windows */
  int64_t window_ns[TLC_MAX_WINDOWS];
  size_t max_areas, max_contexts, max_depth, max_names; /* engine/evmap caps (0: defaults) */
  int histograms;
  char dump_stats[TLC_CFG_PATH]; /* --dump-stats-on-exit FILE ("" = off) */
  /* NATS publisher (daemon/fleet, docs/fleet.md) */
  char nats_url[TLC_CFG_PATH];    /* --nats URL ("" = off) */
  char nats_creds[TLC_CFG_PATH];  /* credentials (.creds) or token file */
  char nats_subject[256];         /* subject prefix ("" = tlcap.<hostname>) */
  uint64_t nats_interval_ms;      /* statistics period (default 1000) */
  uint64_t nats_full_interval_ms; /* full snapshot period (default 60 s) */
  uint64_t nats_buffer;           /* unsent bytes cap (default 8 MiB) */
  uint64_t nats_max_age_ms;       /* JetStream stream max age (default 7 days) */
  uint64_t nats_max_bytes;        /* JetStream stream max bytes (default 1 GiB) */
  /* Alerts to a Prometheus Alertmanager (daemon/alert, docs/alerts.md) */
  char alertmanager_url[TLC_CFG_PATH]; /* http(s)://HOST:PORT[/PREFIX] ("" = off) */
  char alertmanager_ca[TLC_CFG_PATH];  /* https: CA file ("" = the system's store) */
  uint64_t alert_resolve_ms;           /* resolved after this without a violation (5 min) */
  uint64_t alert_repost_ms;            /* re-posted this often while firing (60 s) */
  /* Storage (tlc_store_opts_t, docs/configuration.md "Storage"); 0 = off / no limit unless said */
  uint64_t rotate_bytes;        /* segment size limit (default 64M, >= 1) */
  uint64_t rotate_age_ms;       /* segment age limit */
  uint64_t retain_bytes;        /* retention: all targets together */
  uint64_t retain_target_bytes; /* retention: per target */
  uint64_t retain_age_ms;       /* retention: sealed segment age */
  uint32_t retain_segments;     /* retention: sealed segments per target */
  uint64_t min_free;            /* retention: free-space floor of the state directory */
  uint64_t rollup_minutes_ms;   /* rollups (daemon/rollup): minutes kept (default 14 days) */
  uint64_t rollup_hours_ms;     /* hours kept (default 400 days) */
  uint64_t rollup_bytes;        /* all rollups on disk (default 1 GiB) */
  int sync_mode;                /* enum tlc_store_sync values: 0 on_close, 1 never, 2 periodic */
  uint64_t sync_interval_ms;    /* periodic: by time */
  uint64_t sync_bytes;          /* periodic: by size */
  int compress;                 /* zstd-compress sealed segments */
  uint32_t index_interval;      /* index entry every N records (default 1024, >= 1) */
  uint64_t store_queue;         /* writer queue cap, bytes (default 64M, >= max_block) */
  int quick_start;              /* recovery checks sizes and index only, not every byte */
  int main_export;       /* beside bin1x segments: 0 text1 (<base>.txt), 1 xml (<base>.xml) */
  uint64_t keep_skipped; /* bytes a resync skipped, kept per segment in <data>.skipped (0: off) */
  uint64_t checkpoint_interval_ms; /* statistics checkpoints (default 60 s; 0: only at shutdown) */
  uint64_t checkpoint_slice_us;    /* longest loop slice encoding a checkpoint (default 1000) */
  uint64_t idle_seal_ms; /* seal a disconnected target's open segment after this (60 s; 0 off) */
  /* Memory budget (docs/configuration.md "Memory"): every target's areas, histograms, windows
   * and mappings together; past it new areas are refused (dropped_area_limit) */
  uint64_t memory_limit;  /* bytes, >= 1M; TLC_CFG_MEMORY_AUTO: a quarter of physical memory */
  uint64_t mapping_limit; /* a target's parsed mapping, bytes (default 64M; >= 1) */
  /* HTTP: dashboard, /metrics, JSON API (daemon/http, docs/http.md) */
  char http[TLC_CFG_HOST + 8]; /* "HOST:PORT" ("" = off; default TLC_DEFAULT_HTTP_ADDR) */
  uint32_t metrics_areas;      /* area series per target on /metrics (default 20) */
  size_t http_max_connections; /* HTTP + WebSocket connections at once (default 64) */
  char http_hosts[1024];       /* names the HTTP port answers to besides loopback and its address */
  char http_origins[1024];     /* origins whose pages may open the live WebSocket besides its own */
  size_t max_per_address;      /* connections at once from one peer address, per port (HTTP, the
                                  subscriber port; default 16; 0: no cap) */
  /* Remote access (SPEC 8, daemon/auth): "" = off */
  char token_file[TLC_CFG_PATH]; /* the shared secret's file */
  char tls_cert[TLC_CFG_PATH];   /* PEM certificate chain */
  char tls_key[TLC_CFG_PATH];    /* PEM private key */
  /* timing budgets (SPEC 13, docs/budgets.md): the [budget NAME] sections, then those of
   * `budgets` (--budgets FILE), each checked complete; owned (tlc_config_fini) */
  char budgets[TLC_CFG_PATH]; /* "" = none */
  size_t budget_keep;         /* violations kept per budget */
  tlc_tbudget_set_t bset;

  tlc_cfg_source_t *src;
  size_t nsrc;
  tlc_cfg_target_t *tgt;
  size_t ntgt;
} tlc_config_t;

/* Command line as given (kept for SIGHUP: the file is re-read and these re-applied). */
typedef struct tlc_cli {
  const char *config;               /* --config FILE or NULL */
  int check_only;                   /* --check-config */
  const char *opt[TLC_CFG_MAX_CLI]; /* option names (without "--") in order */
  const char *val[TLC_CFG_MAX_CLI]; /* their values (NULL for flags) */
  size_t n;
  int nsources; /* --listen/--dial/--serial given */
} tlc_cli_t;

struct tlc_out;

/* The man pages' list of [daemon] keys, generated from the settings table so that they cannot
 * drift: mdoc ".It" entries (the caller writes .Bl and .El) into o, as INI keys (options 0,
 * tlcapd.ini(5)) or as tlcapd's long options (1, tlcapd(8)), each with what it does, its
 * default (from tlc_config_init) and what a reload does with a change. Returns 0 or o's error. */
int tlc_config_man(struct tlc_out *o, int options);

/* Initialises `c` with the defaults and no sources. Returns 0 or TLC_ENOMEM. */
int tlc_config_init(tlc_config_t *c);
void tlc_config_fini(tlc_config_t *c);

/* Parses argv (argv[0] is the program) into `cli` (pointers into argv). Returns 0, 1 for
 * --help/--version (text written to stdout), or TLC_EINVAL with err ("command line: ..."). */
int tlc_cli_parse(tlc_cli_t *cli, int argc, char **argv, char *err, size_t errlen);

/* Reads an INI file into `c`. Returns 0, a negative errno-style code if it cannot be read, or
 * TLC_ESYNTAX/TLC_EINVAL with err "FILE:LINE: [section] option: reason". */
int tlc_config_load_file(tlc_config_t *c, const char *path, char *err, size_t errlen);
/* Same, from a NUL-terminated string; `origin` names it in messages. */
int tlc_config_load_string(tlc_config_t *c, const char *text, const char *origin, char *err,
                           size_t errlen);

/* Applies the command-line options of `cli` to `c`. Returns 0 or TLC_EINVAL with err. */
int tlc_config_apply_cli(tlc_config_t *c, const tlc_cli_t *cli, char *err, size_t errlen);

/* Adds the embedded default listeners (bin11 on 7411, evlog on 7412). Returns 0. */
int tlc_config_add_defaults(tlc_config_t *c);

/* The whole build: init, file, CLI, defaults, validation. On error `c` is finalised. */
int tlc_config_build(tlc_config_t *c, const tlc_cli_t *cli, char *err, size_t errlen);

/* Calls cb(ud, key, how) for every [daemon] key whose value differs between `a` and `b`, in
 * the settings table's order (an alias of another key is reported once, under its first name).
 * Returns the number of keys reported. */
typedef void (*tlc_config_diff_cb)(void *ud, const char *key, enum tlc_cfg_reload how);
size_t tlc_config_diff(const tlc_config_t *a, const tlc_config_t *b, tlc_config_diff_cb cb,
                       void *ud);

/* The reload rule, from the settings table: `next` is the configuration a SIGHUP read, `running`
 * the one in force. A changed TLC_CFG_REFUSE key refuses the reload: TLC_EINVAL with "key:
 * "old" -> "new"" in `why`. Otherwise each changed TLC_CFG_RESTART key gets its running value
 * back in `next` and its name listed in `restart` (comma-separated; "" when none), and 0 is
 * returned: `next` is then what the daemon runs with. */
int tlc_config_reload_merge(const tlc_config_t *running, tlc_config_t *next, char *why,
                            size_t whylen, char *restart, size_t restartlen);

/* Checks cross-field rules (names unique per kind, required keys present). */
int tlc_config_validate(const tlc_config_t *c, char *err, size_t errlen);
/* Adds the [budget NAME] sections of c->budgets (--budgets FILE, [daemon] budgets) to c->bset
 * (tlc_config_build does it after the file and the command line). 0, or TLC_EINVAL with
 * "FILE:LINE: [budget NAME] key: why" (a bad file, a name the INI file has too). */
int tlc_config_load_budgets(tlc_config_t *c, char *err, size_t errlen);

/* Parses "NAME=FORMAT@HOST:PORT" (listen/dial) or "NAME=FORMAT@DEVICE[:BAUD]" (serial) into
 * `s` (kind preset by the caller). Returns 0 or TLC_EINVAL with err (without a location). */
int tlc_config_parse_spec(tlc_cfg_source_t *s, const char *spec, char *err, size_t errlen);

/* Parses "HOST:PORT" / "[V6]:PORT". Returns 0 or TLC_EINVAL. */
int tlc_config_parse_hostport(const char *s, char *host, size_t hostlen, uint16_t *port);

/* A listener's `allow` list: addresses and CIDR blocks separated by commas or spaces
 * ("127.0.0.1, 10.0.0.0/8, ::1, fd00::/8"; an IPv4 entry also matches the IPv4-mapped IPv6
 * form). Returns 0 or TLC_EINVAL naming the bad entry in err. */
int tlc_config_allow_check(const char *list, char *err, size_t errlen);
/* Whether `sa` (struct sockaddr of AF_INET / AF_INET6) is in `list` (empty: every address).
 * Any other family (a local socketpair) is allowed only by an empty list. */
int tlc_config_allow_match(const char *list, const void *sa);
/* A listener's `targets` list: fnmatch patterns separated by commas or spaces ("lab-*,
 * board[0-9]"). Whether `name` matches one (empty list: every name). */
int tlc_config_targets_match(const char *list, const char *name);

/* Parses a duration: "250ms", "2s", "1m", "1h", or a bare number of milliseconds. */
int tlc_config_parse_duration_ms(const char *s, uint64_t *ms);

/* The settings for target `name` created by source `src` (may be NULL): the [target NAME]
 * section when there is one, else the source's own. */
const tlc_cfg_tset_t *tlc_config_tset(const tlc_config_t *c, const tlc_cfg_source_t *src,
                                      const char *name);

/* 1 if `baud` is a rate termios knows. */
int tlc_config_baud_ok(uint32_t baud);

/* Finds the source of `kind` called `name`, or NULL. */
const tlc_cfg_source_t *tlc_config_find_source(const tlc_config_t *c, int kind, const char *name);

#endif
