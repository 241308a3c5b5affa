/* keys.c - the [daemon] key table (one entry per key: type, field, bounds, reload class, man
 * text), and what is computed from it alone: the differences between two configurations and
 * SIGHUP's merge (tlc_config_diff, tlc_config_reload_merge). Parsing a value is config.c's
 * (set_dkey), the man pages' list man.c's.
 */
#include "config/config-int.h"

#include "base/err.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define TLC_CFG_MAX_DUR_MS (100ull * 366 * 86400 * 1000)
#define OFF(f)             offsetof(tlc_config_t, f)
#define FSZ(f)             sizeof(((tlc_config_t *)0)->f)

const dkey_t tlc_cfg_dkeys[] = {
  { "state_dir", K_STR, OFF(state_dir), FSZ(state_dir), 0, FSZ(state_dir), TLC_CFG_RESTART,
    "Ar dir",
    "Where storage writes segments, checkpoints and kept mappings (the service passes\n.Pa "
    "/var/lib/tlcapd ) ." },
  { "store", K_BOOL, OFF(store), 0, 0, FSZ(store), TLC_CFG_RESTART, NULL,
    "Write capture segments (the command line's\n.Fl \\-no\\-store\nsets no)." },
  { "serve", K_SERVE, OFF(serve), FSZ(serve), 0, FSZ(serve), TLC_CFG_REFUSE, NULL,
    "The subscriber server (protobuf; tlcap(1) and scripts), or a Unix socket (mode 0660, removed "
    "at exit); empty turns it off. An address beyond loopback needs\n.Ic token_file ." },
  { "log_level", K_LEVEL, OFF(log_level), 0, 0, FSZ(log_level), TLC_CFG_LIVE, NULL,
    "err, warn, notice, info or debug." },
  { "debug", K_DEBUG, OFF(debug), FSZ(debug), 0, FSZ(debug), TLC_CFG_LIVE, NULL,
    "Debug lines of components, separated by commas: main, config, tcp, dial, serial, target, "
    "notify, pubsub, store, engine, efl, all, none." },
  { "max_connections", K_SIZE, OFF(max_connections), FSZ(max_connections), 1000000,
    FSZ(max_connections), TLC_CFG_LIVE, NULL,
    "TCP ingest connections at once; 0: what the file descriptor limit allows, counting every "
    "descriptor a connection needs (its socket and, with storage, its segment)." },
  { "max_targets", K_SIZE, OFF(max_targets), FSZ(max_targets), 1000000, FSZ(max_targets),
    TLC_CFG_RESTART, NULL,
    "Targets kept. When full, a new name takes the place of the listener-created target "
    "disconnected the longest (its counters are logged)." },
  { "max_name", K_SIZE, OFF(max_name), FSZ(max_name), TLC_TARGET_NAME_MAX, FSZ(max_name),
    TLC_CFG_LIVE, NULL, "Longest target name (at most 128)." },
  { "read_buffer", K_SIZE, OFF(read_buffer), FSZ(read_buffer), 16u << 20, FSZ(read_buffer),
    TLC_CFG_RESTART, "Ar size", "Bytes per read from a socket or tty." },
  { "max_block", K_SIZE, OFF(max_block), FSZ(max_block), 256u << 20, FSZ(max_block),
    TLC_CFG_RESTART, "Ar size", "Largest evlog block accepted (at least 64)." },
  { "partial_timeout", K_DUR, OFF(partial_timeout_ms), 0, 0, FSZ(partial_timeout_ms), TLC_CFG_LIVE,
    NULL,
    "Close a connection that stays this long inside one record, however slowly its bytes arrive "
    "(0: off)." },
  { "idle_timeout", K_DUR, OFF(idle_timeout_ms), 0, 0, FSZ(idle_timeout_ms), TLC_CFG_LIVE, NULL,
    "Close a connection that sends nothing for this long (0: off)." },
  { "backoff_min", K_DUR, OFF(backoff_min_ms), 0, 0, FSZ(backoff_min_ms), TLC_CFG_LIVE, NULL,
    "Shortest reconnect delay of dial and serial sources; it doubles up to\n.Ic backoff_max "
    ",\nwith 25% jitter." },
  { "backoff_max", K_DUR, OFF(backoff_max_ms), 0, 0, FSZ(backoff_max_ms), TLC_CFG_LIVE, NULL,
    "Longest reconnect delay of dial and serial sources." },
  { "status_interval", K_DUR, OFF(status_interval_ms), 0, 0, FSZ(status_interval_ms), TLC_CFG_LIVE,
    NULL, "How often the systemd status line is updated." },
  { "windows", K_WINDOWS, 0, 0, 0, 0, TLC_CFG_LIVE, NULL,
    "Rolling windows, 1 to 4 durations separated by commas (default: the engine's 1s, 10s, 60s); a "
    "list without a duration is refused." },
  { "max_areas", K_SIZE, OFF(max_areas), FSZ(max_areas), 100000000, FSZ(max_areas), TLC_CFG_LIVE,
    NULL,
    "Areas per target (default: the engine's). Past it new areas are refused and counted "
    "(dropped_area_limit); 0 is refused." },
  { "max_contexts", K_SIZE, OFF(max_contexts), FSZ(max_contexts), 100000000, FSZ(max_contexts),
    TLC_CFG_LIVE, NULL, "Contexts per target (default: the engine's); 0 is refused." },
  { "max_depth", K_SIZE, OFF(max_depth), FSZ(max_depth), 100000000, FSZ(max_depth), TLC_CFG_LIVE,
    NULL, "Open activations per area and context (default: the engine's); 0 is refused." },
  { "max_names", K_SIZE, OFF(max_names), FSZ(max_names), 100000000, FSZ(max_names), TLC_CFG_LIVE,
    NULL, "Distinct evlog names per target (default: the evlog decoder's); 0 is refused." },
  { "histograms", K_BOOL, OFF(histograms), 0, 0, FSZ(histograms), TLC_CFG_LIVE, NULL,
    "Keep the quantile histograms (p50, p90, p99, p99.9 and /metrics buckets)." },
  { "budgets", K_STR, OFF(budgets), FSZ(budgets), 0, FSZ(budgets), TLC_CFG_LIVE, "Ar file",
    "Timing budgets: a file of\n.Ic [budget NAME]\nsections (besides those of this file), checked "
    "on every sample (docs/budgets.md). A reload with a bad file is refused, naming its line, "
    "and the running budgets stay." },
  { "budget_keep", K_SIZE, OFF(budget_keep), FSZ(budget_keep), 100000, FSZ(budget_keep),
    TLC_CFG_RESTART, NULL, "Violations kept per budget besides its counts and its worst." },
  { "dump_stats_on_exit", K_STR, OFF(dump_stats), FSZ(dump_stats), 0, FSZ(dump_stats), TLC_CFG_LIVE,
    "Ar file",
    "Write every target's counters and statistics as JSON to\n.Ar file\nat shutdown and on\n.Dv "
    "SIGUSR1 ." },
  /* storage (tlc_store_opts_t); durations capped at 100 years (ms * 1e6 fits an int64_t) */
  { "rotate_bytes", K_U64, OFF(rotate_bytes), 0, 1ull << 50, FSZ(rotate_bytes), TLC_CFG_LIVE, NULL,
    "Close a segment before it grows past this." },
  { "rotate_age", K_DUR, OFF(rotate_age_ms), 0, TLC_CFG_MAX_DUR_MS, FSZ(rotate_age_ms),
    TLC_CFG_LIVE, NULL, "Close a segment this long after it was opened (0: off)." },
  { "retain_bytes", K_U64, OFF(retain_bytes), 0, 1ull << 60, FSZ(retain_bytes), TLC_CFG_LIVE, NULL,
    "Sealed segments kept, all targets together (0: no limit); the oldest go first." },
  { "retain_target_bytes", K_U64, OFF(retain_target_bytes), 0, 1ull << 60, FSZ(retain_target_bytes),
    TLC_CFG_LIVE, NULL, "Sealed segments kept per target (0: no limit)." },
  { "retain_age", K_DUR, OFF(retain_age_ms), 0, TLC_CFG_MAX_DUR_MS, FSZ(retain_age_ms),
    TLC_CFG_LIVE, NULL, "Delete sealed segments older than this (0: no limit)." },
  { "retain_segments", K_SIZE, OFF(retain_segments), FSZ(retain_segments), 100000000,
    FSZ(retain_segments), TLC_CFG_LIVE, NULL, "Sealed segments kept per target (0: no limit)." },
  { "min_free", K_U64, OFF(min_free), 0, 1ull << 60, FSZ(min_free), TLC_CFG_LIVE, NULL,
    "Delete the oldest sealed segments while the state directory's file system has less free space "
    "(0: none)." },
  { "rollup_minutes", K_DUR, OFF(rollup_minutes_ms), 0, TLC_CFG_MAX_DUR_MS, FSZ(rollup_minutes_ms),
    TLC_CFG_LIVE, NULL,
    "How long the per-minute rollups of every area are kept (trend and diff; they outlive the "
    "raw segments)." },
  { "rollup_hours", K_DUR, OFF(rollup_hours_ms), 0, TLC_CFG_MAX_DUR_MS, FSZ(rollup_hours_ms),
    TLC_CFG_LIVE, NULL, "How long the per-hour rollups (merged minutes) are kept." },
  { "rollup_bytes", K_U64, OFF(rollup_bytes), 0, 1ull << 60, FSZ(rollup_bytes), TLC_CFG_LIVE, NULL,
    "Rollups on disk, all targets together; past it the least recently written days go, minutes "
    "before hours. 0 when the daemon starts: no rollups at all (no trend or diff, and none of "
    "their ingest cost, docs/rollups.md)." },
  { "sync", K_SYNC, OFF(sync_mode), 0, 0, FSZ(sync_mode), TLC_CFG_LIVE, NULL,
    "When segments are synced; periodic needs\n.Ic sync_interval\nor\n.Ic sync_bytes ." },
  { "sync_interval", K_DUR, OFF(sync_interval_ms), 0, TLC_CFG_MAX_DUR_MS, FSZ(sync_interval_ms),
    TLC_CFG_LIVE, NULL, "The periodic sync's period (0: none)." },
  { "sync_bytes", K_U64, OFF(sync_bytes), 0, 1ull << 50, FSZ(sync_bytes), TLC_CFG_LIVE, NULL,
    "The periodic sync's byte count (0: none)." },
  { "compress", K_BOOL, OFF(compress), 0, 0, FSZ(compress), TLC_CFG_RESTART, NULL,
    "zstd-compress sealed segments." },
  { "index_interval", K_SIZE, OFF(index_interval), FSZ(index_interval), 1000000,
    FSZ(index_interval), TLC_CFG_RESTART, NULL, "An index entry every\n.Ar n\nrecords." },
  { "store_queue", K_U64, OFF(store_queue), 0, 16ull << 30, FSZ(store_queue), TLC_CFG_RESTART, NULL,
    "Bytes queued to the writer thread before records are dropped and counted; a TCP target whose "
    "share is 3/4 full is not read until the writer drained it." },
  { "quick_start", K_BOOL, OFF(quick_start), 0, 0, FSZ(quick_start), TLC_CFG_RESTART, NULL,
    "Start-up recovery checks sizes and indexes only, instead of reading every sealed segment." },
  { "main_export", K_MAINEXP, OFF(main_export), 0, 0, FSZ(main_export), TLC_CFG_LIVE, NULL,
    "The export written beside each sealed bin1x segment." },
  { "keep_skipped", K_U64, OFF(keep_skipped), 0, 64ull << 20, FSZ(keep_skipped), TLC_CFG_RESTART,
    NULL, "Keep bytes a resync skipped, at most this many per segment (0: off)." },
  { "memory_limit", K_U64, OFF(memory_limit), 0, 1ull << 50, FSZ(memory_limit), TLC_CFG_LIVE, NULL,
    "The daemon-wide memory budget of the statistics, mappings and buffers (at least 1M; default: "
    "a quarter of physical memory). Past it new areas, contexts and mappings are refused and "
    "counted." },
  { "mapping_limit", K_U64, OFF(mapping_limit), 0, 1ull << 40, FSZ(mapping_limit), TLC_CFG_LIVE,
    NULL,
    "Largest parsed mapping of one target (a file or\n.Ic tlcap mapping ) ;\na larger one is "
    "refused and the old one stays." },
  { "resync_idle", K_DUR, OFF(resync_idle_ms), 0, 60000, FSZ(resync_idle_ms), TLC_CFG_LIVE, NULL,
    "Serial sources: after this long without a byte, deliver the record held back for confirmation "
    "when it is plausible and in the locked alignment (0: off)." },
  { "clock_reset_threshold", K_DUR, OFF(clock_reset_threshold_ms), 0, TLC_CFG_MAX_DUR_MS,
    FSZ(clock_reset_threshold_ms), TLC_CFG_RESTART, NULL,
    "A step back of a target's clock this large, after a gap or confirmed in a serial stream, is "
    "a clock restart (a board reset): a gap and a new epoch (0: never; docs/board-resets.md)." },
  /* HTTP (daemon/http, docs/http.md) */
  { "http", K_ADDR, OFF(http), FSZ(http), 0, FSZ(http), TLC_CFG_REFUSE, NULL,
    "The HTTP port: the live dashboard at\n.Li http:// Ns Ar host : Ns Ar port Ns / ,\nPrometheus "
    "metrics at\n.Pa /metrics ,\nthe JSON API under\n.Pa /api/v1/\nand health at\n.Pa /-/healthy "
    "and\n.Pa /-/ready ;\nempty turns it off. Beyond loopback only with\n.Ic token_file .\nThe "
    "default address "
    "already in use is a warning (the dashboard is off), any other address a start-up error." },
  { "metrics_areas", K_SIZE, OFF(metrics_areas), FSZ(metrics_areas), 1000000, FSZ(metrics_areas),
    TLC_CFG_LIVE, NULL,
    "Area series per target on\n.Pa /metrics ,\nthe areas with the largest net time (0: none)." },
  { "http_max_connections", K_SIZE, OFF(http_max_connections), FSZ(http_max_connections), 10000,
    FSZ(http_max_connections), TLC_CFG_RESTART, NULL, "HTTP and WebSocket connections at once." },
  { "http_hosts", K_STR, OFF(http_hosts), FSZ(http_hosts), 0, FSZ(http_hosts), TLC_CFG_RESTART,
    "Ar names",
    "Host names the HTTP port answers to besides loopback and its own address (a request for "
    "another gets 421)." },
  { "http_origins", K_STR, OFF(http_origins), FSZ(http_origins), 0, FSZ(http_origins),
    TLC_CFG_RESTART, "Ar origins",
    "Origins of other pages that may open the live WebSocket besides the dashboard's own." },
  { "max_per_address", K_SIZE, OFF(max_per_address), FSZ(max_per_address), 1000000,
    FSZ(max_per_address), TLC_CFG_RESTART, NULL,
    "Connections at once from one peer address, on the HTTP port and on the subscriber port." },
  /* remote access (SPEC 8; daemon/auth) */
  { "token_file", K_STR, OFF(token_file), FSZ(token_file), 0, FSZ(token_file), TLC_CFG_RESTART,
    "Ar file",
    "The shared secret of subscribers and of the HTTP port, on the file's first line; the file "
    "must not be readable by group or others nor be empty. Re-read on\n.Dv SIGHUP ." },
  { "tls_cert", K_STR, OFF(tls_cert), FSZ(tls_cert), 0, FSZ(tls_cert), TLC_CFG_RESTART, "Ar file",
    "PEM certificate chain: the subscriber server's TCP ports and the HTTP port speak TLS only "
    "(with\n.Ic tls_key ) ;\nreloaded on\n.Dv SIGHUP ." },
  { "tls_key", K_STR, OFF(tls_key), FSZ(tls_key), 0, FSZ(tls_key), TLC_CFG_RESTART, "Ar file",
    "PEM private key of\n.Ic tls_cert ." },
  /* NATS publisher (daemon/fleet) */
  { "nats_url", K_STR, OFF(nats_url), FSZ(nats_url), 0, FSZ(nats_url), TLC_CFG_RESTART, "Ar url",
    "Publish statistics to NATS JetStream:\n.Li nats:// Ns Ar host Ns Op : Ns Ar port\nor\n.Li "
    "tls:// Ns Ar host Ns Op : Ns Ar port\n(empty: off)." },
  { "nats", K_STR, OFF(nats_url), FSZ(nats_url), 0, FSZ(nats_url), TLC_CFG_RESTART, "Ar url",
    "The same as\n.Ic nats_url ." }, /* --nats URL (SPEC 5) */
  { "nats_creds", K_STR, OFF(nats_creds), FSZ(nats_creds), 0, FSZ(nats_creds), TLC_CFG_RESTART,
    "Ar file", "A .creds file, or a file with a token on its first line." },
  { "nats_subject", K_STR, OFF(nats_subject), FSZ(nats_subject), 0, FSZ(nats_subject),
    TLC_CFG_RESTART, "Ar prefix",
    "Subject prefix (default: tlcap.<hostname>): messages go to\n.Ar prefix . Ns Ar target Ns "
    ".stats, .events and .segments." },
  { "nats_interval", K_DUR, OFF(nats_interval_ms), 0, 3600000, FSZ(nats_interval_ms),
    TLC_CFG_RESTART, NULL, "Statistics deltas to NATS this often." },
  { "nats_full_interval", K_DUR, OFF(nats_full_interval_ms), 0, 86400000,
    FSZ(nats_full_interval_ms), TLC_CFG_RESTART, NULL,
    "Full statistics snapshots to NATS this often (and at every connect)." },
  { "nats_buffer", K_U64, OFF(nats_buffer), 0, 1ull << 30, FSZ(nats_buffer), TLC_CFG_RESTART, NULL,
    "Unsent bytes held by the NATS client before messages are dropped and counted." },
  { "nats_max_age", K_DUR, OFF(nats_max_age_ms), 0, TLC_CFG_MAX_DUR_MS, FSZ(nats_max_age_ms),
    TLC_CFG_RESTART, NULL, "Age limit of the JetStream stream tlcapd creates when none exists." },
  { "nats_max_bytes", K_U64, OFF(nats_max_bytes), 0, 1ull << 50, FSZ(nats_max_bytes),
    TLC_CFG_RESTART, NULL, "Size limit of the JetStream stream tlcapd creates when none exists." },
  /* Alertmanager (daemon/alert, docs/alerts.md) */
  { "alertmanager_url", K_STR, OFF(alertmanager_url), FSZ(alertmanager_url), 0,
    FSZ(alertmanager_url), TLC_CFG_RESTART, "Ar url",
    "Send budget violations to a Prometheus Alertmanager (API v2):\n.Li http:// Ns Ar host Ns : "
    "Ns Ar port\nor\n.Li https:// Ns Ar host Ns : Ns Ar port ,\nwith an optional path prefix "
    "(empty: off)." },
  { "alertmanager_ca", K_STR, OFF(alertmanager_ca), FSZ(alertmanager_ca), 0, FSZ(alertmanager_ca),
    TLC_CFG_RESTART, "Ar file",
    "PEM file of the authorities an https Alertmanager's certificate is checked against "
    "(empty: the system's store)." },
  { "alert_resolve", K_DUR, OFF(alert_resolve_ms), 0, 86400000, FSZ(alert_resolve_ms),
    TLC_CFG_RESTART, NULL, "An alert is resolved this long after its last violation." },
  { "alert_repost", K_DUR, OFF(alert_repost_ms), 0, 86400000, FSZ(alert_repost_ms), TLC_CFG_RESTART,
    NULL,
    "A firing alert with new violations is posted again this often (at most half of\n.Ic "
    "alert_resolve ) ." },
  /* continuity (daemon/continuity/) */
  { "checkpoint_interval", K_SECS, OFF(checkpoint_interval_ms), 0, TLC_CFG_MAX_DUR_MS,
    FSZ(checkpoint_interval_ms), TLC_CFG_RESTART, NULL,
    "Checkpoint every target's statistics this often and at shutdown; restored at start (0: only "
    "at shutdown)." },
  { "checkpoint_slice_us", K_U64, OFF(checkpoint_slice_us), 1, 1000000, FSZ(checkpoint_slice_us),
    TLC_CFG_RESTART, "Ar microseconds",
    "The longest the event loop spends encoding a checkpoint at a time (1 to 1000000); a larger "
    "target is encoded a slice per loop turn while its input is held." },
  { "idle_seal", K_SECS, OFF(idle_seal_ms), 0, TLC_CFG_MAX_DUR_MS, FSZ(idle_seal_ms),
    TLC_CFG_RESTART, NULL, "Seal the open segment of a target disconnected this long (0: off)." },
  /* efl sources (daemon/ingest/efl.c, docs/efl.md) */
  { "efl_max_targets", K_SIZE, OFF(efl_max_targets), FSZ(efl_max_targets), 1000000,
    FSZ(efl_max_targets), TLC_CFG_LIVE, NULL,
    "Targets one\n.Ic [efl]\nsource keeps, unless its section sets\n.Ic max_targets ." },
};

/* Smallest value of a K_SIZE key where 0 (or a tiny value) makes no sense: max_block = 0 or
 * max_areas = 0 is refused, not taken without a word. An evlog block of fewer than 64 bytes holds
 * no item (12-byte header, 40-byte item, its name). */
uint64_t tlc_cfg_dkey_min(const dkey_t *k) {
  static const struct {
    const char *name;
    uint64_t min;
  } mins[] = { { "max_block", 64 },
               { "max_areas", 1 },
               { "max_contexts", 1 },
               { "max_depth", 1 },
               { "max_names", 1 } };
  for (size_t i = 0; i < sizeof(mins) / sizeof(mins[0]); i++)
    if (strcmp(mins[i].name, k->name) == 0)
      return mins[i].min;
  return 0;
}

const size_t tlc_cfg_ndkeys = sizeof(tlc_cfg_dkeys) / sizeof(tlc_cfg_dkeys[0]);
_Static_assert(sizeof(tlc_cfg_dkeys) / sizeof(tlc_cfg_dkeys[0]) <= TLC_CFG_DKEYS_CAP,
               "TLC_CFG_DKEYS_CAP is too small for the key table");

/* 1 if key k holds the same value in a and b. */
static int dkey_same(const dkey_t *k, const tlc_config_t *a, const tlc_config_t *b) {
  const char *pa = (const char *)a + k->off, *pb = (const char *)b + k->off;
  switch (k->type) {
  case K_WINDOWS:
    return a->nwindows == b->nwindows &&
           memcmp(a->window_ns, b->window_ns, a->nwindows * sizeof(a->window_ns[0])) == 0;
  case K_STR:
  case K_SERVE:
  case K_ADDR:
  case K_DEBUG:
    return strncmp(pa, pb, k->span) == 0;
  default:
    return memcmp(pa, pb, k->span) == 0;
  }
}

/* 1 if an earlier key of the table names the same field (an alias: "nats" for nats_url). */
int tlc_cfg_dkey_alias(const dkey_t *k) {
  for (const dkey_t *e = tlc_cfg_dkeys; e < k; e++)
    if (e->type == k->type && e->off == k->off && k->type != K_WINDOWS)
      return 1;
  return 0;
}

size_t tlc_config_diff(const tlc_config_t *a, const tlc_config_t *b, tlc_config_diff_cb cb,
                       void *ud) {
  size_t n = 0;
  for (const dkey_t *k = tlc_cfg_dkeys; k < tlc_cfg_dkeys + tlc_cfg_ndkeys; k++) {
    if (tlc_cfg_dkey_alias(k) || dkey_same(k, a, b))
      continue;
    n++;
    if (cb != NULL)
      cb(ud, k->name, k->reload);
  }
  return n;
}

/* Writes key k's value as text, for the refusal message. */
static void dkey_text(const dkey_t *k, const tlc_config_t *c, char *buf, size_t len) {
  const char *p = (const char *)c + k->off;
  if (k->type == K_STR || k->type == K_SERVE || k->type == K_ADDR || k->type == K_DEBUG)
    snprintf(buf, len, "\"%.*s\"", (int)strnlen(p, k->span), p);
  else
    snprintf(buf, len, "(changed)");
}

int tlc_config_reload_merge(const tlc_config_t *running, tlc_config_t *next, char *why,
                            size_t whylen, char *restart, size_t restartlen) {
  size_t rn = 0;
  if (restartlen > 0)
    restart[0] = '\0';
  for (const dkey_t *k = tlc_cfg_dkeys; k < tlc_cfg_dkeys + tlc_cfg_ndkeys; k++) {
    if (tlc_cfg_dkey_alias(k) || k->reload != TLC_CFG_REFUSE || dkey_same(k, running, next))
      continue;
    char from[300], to[300];
    dkey_text(k, running, from, sizeof(from));
    dkey_text(k, next, to, sizeof(to));
    if (whylen > 0)
      snprintf(why, whylen, "%s: address %s -> %s", k->name, from, to);
    return TLC_EINVAL;
  }
  for (const dkey_t *k = tlc_cfg_dkeys; k < tlc_cfg_dkeys + tlc_cfg_ndkeys; k++) {
    if (tlc_cfg_dkey_alias(k) || k->reload != TLC_CFG_RESTART || dkey_same(k, running, next))
      continue;
    memcpy((char *)next + k->off, (const char *)running + k->off, k->span);
    int w = snprintf(restart + rn, restartlen > rn ? restartlen - rn : 0, "%s%s",
                     rn > 0 ? ", " : "", k->name);
    if (w > 0)
      rn = rn + (size_t)w < restartlen ? rn + (size_t)w : restartlen;
  }
  return 0;
}

const dkey_t *tlc_cfg_find_dkey(const char *name) {
  for (size_t i = 0; i < tlc_cfg_ndkeys; i++)
    if (strcmp(tlc_cfg_dkeys[i].name, name) == 0)
      return &tlc_cfg_dkeys[i];
  return NULL;
}
