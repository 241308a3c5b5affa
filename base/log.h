/* log.h - the daemon's one log path: levels, per-component debug switches, rate limiting, and
 * a bounded, non-blocking sink.
 *
 * Lines go to stderr with an ISO-8601 UTC timestamp and the level name. Under systemd
 * (JOURNAL_STREAM names our stderr) they go to the journal as native-protocol datagrams with
 * structured fields (PRIORITY, TARGET, PEER, SEGMENT, DEVICE: tlc_log_fields), sent without
 * blocking; a datagram journald cannot take at once goes to stderr instead, with a "<N>"
 * syslog priority prefix and no timestamp. If stderr is a pipe or socket it is made O_NONBLOCK and
 * lines that cannot be written at once wait in a bounded buffer (64 KiB); when that is full, lines
 * are dropped and counted (tlc_log_dropped) and a "log: N lines dropped" line follows when the sink
 * drains. So a stalled log reader never blocks the event loop (RELIABILITY T38).
 *
 * Rate limit: per call site (keyed by the format string, the level and the component, so that
 * the pubsub and storage modules' "%s" pass-through lines are limited per module and level),
 * at most TLC_LOG_BURST lines per
 * TLC_LOG_INTERVAL_MS; the rest are counted and reported once the interval ends as
 * "suppressed N messages like: <format>". Debug lines are not rate-limited but only appear when
 * their component's debug switch is on.
 *
 * Rule for callers: every line about a peer names it (target name and address, or subscriber
 * id); never log per event above TLC_LOG_DEBUG.
 *
 * Loop thread only (the buffer and counters are not locked).
 */
#ifndef TLC_LOG_H
#define TLC_LOG_H

#include <stdint.h>

#include "base/log_level.h" /* TLC_LOG_ERR .. TLC_LOG_DEBUG: the levels every library uses */

/* Components (bit flags) for debug switches and line prefixes. */
enum tlc_log_comp {
  TLC_LOGC_MAIN = 1u << 0,
  TLC_LOGC_CONFIG = 1u << 1,
  TLC_LOGC_TCP = 1u << 2,
  TLC_LOGC_DIAL = 1u << 3,
  TLC_LOGC_SERIAL = 1u << 4,
  TLC_LOGC_TARGET = 1u << 5,
  TLC_LOGC_NOTIFY = 1u << 6,
  TLC_LOGC_PUBSUB = 1u << 7,
  TLC_LOGC_STORE = 1u << 8,
  TLC_LOGC_ENGINE = 1u << 9,
  TLC_LOGC_EFL = 1u << 10,
  TLC_LOGC_ALL = 0x7FFu
};

#define TLC_LOG_BURST       10
#define TLC_LOG_INTERVAL_MS 10000
#define TLC_LOG_BUFFER      (64u * 1024u)

/* Sets up the sink on stderr (timestamps or journal style, O_NONBLOCK for pipes and sockets).
 * Call once at start-up. */
void tlc_log_init(void);

/* Writes out what the buffer holds, as far as the sink accepts it, and emits pending
 * "suppressed"/"dropped" lines. Call periodically (the daemon does every 500 ms) and at exit
 * (at exit with `final` set: waits up to ~1 s for a slow sink, then gives up). */
void tlc_log_flush(int final);

/* Level: messages above it are not written. Default TLC_LOG_INFO. */
void tlc_log_set_level(int level);
int tlc_log_get_level(void);
/* "err", "warn", "notice", "info", "debug" (or 3..7) -> level, or -1. */
int tlc_log_parse_level(const char *s);
/* Debug switches: a comma-separated list of component names ("tcp,serial", "all", "none").
 * Returns 0, or -1 naming nothing valid (the switches are unchanged then). */
int tlc_log_set_debug(const char *list);

/* 0 if `list` is a valid debug switch list, else -1 (nothing changed). */
int tlc_log_check_debug(const char *list);

/* 1 if a line of this level and component would be written (to skip formatting costs). */
int tlc_log_enabled(int level, unsigned comp);

/* Logs one line (no trailing newline needed). */
void tlc_log(int level, unsigned comp, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* The journal fields a message names, by the callers' conventions (see the rule above: lines
 * about a peer name it): "target NAME", "dial NAME", "serial NAME", "(target NAME)" and a
 * storage line's leading "NAME:" give TARGET; "target NAME (PEER)", "dial NAME (HOST:PORT)",
 * "connection PEER on ...", "connected from PEER", "sub#N PEER:" give PEER; "serial NAME
 * (DEVICE)" gives DEVICE; the first segment file name (.txt.BIN, .xml.BIN, .log, with
 * .part/.zst/.torn/.skipped) gives SEGMENT, and its directory the TARGET when nothing else
 * did. Empty strings for fields the message does not name. */
typedef struct tlc_log_fields {
  char target[160];
  char peer[80];
  char segment[256];
  char device[256];
} tlc_log_fields_t;
void tlc_log_fields(const char *msg, unsigned comp, tlc_log_fields_t *f);

/* Tests: journald's socket path (default /run/systemd/journal/socket); datagrams that could
 * not be sent and went to stderr. */
void tlc_log_set_journal_socket(const char *path);
uint64_t tlc_log_journal_fallbacks(void);

/* Lines dropped because the sink was full; lines suppressed by the rate limit. */
uint64_t tlc_log_dropped(void);
uint64_t tlc_log_suppressed(void);

#define TLC_LOGD(comp, ...)                                                                        \
  do {                                                                                             \
    if (tlc_log_enabled(TLC_LOG_DEBUG, (comp)))                                                    \
      tlc_log(TLC_LOG_DEBUG, (comp), __VA_ARGS__);                                                 \
  } while (0)

#endif
