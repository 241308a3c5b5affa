/* auth.h - the shared secret of remote access (SPEC section 8): `--token-file FILE`.
 *
 * One tlc_auth_t holds the token read from a file, checks what a peer presents in constant
 * time, rate-limits failed attempts per peer address and counts them. The subscriber server
 * (daemon/pubsub) and the HTTP port (daemon/http) share one object, created by the daemon
 * (wiring.c) from the configuration and re-read on SIGHUP.
 *
 * The token file: the secret on its first line (a trailing "\n" or "\r\n" is not part of it;
 * at most TLC_AUTH_MAX_TOKEN bytes), not readable by group or others (mode & 044 == 0: the
 * file is refused otherwise, as ssh refuses a private key), not empty. A token is never
 * logged.
 *
 * Rate limit: a peer address (the IP, without the port) that failed recently waits before its
 * answer: opts.fail_delay_ms after one failure, doubled per further failure within
 * opts.fail_window_ms, capped at opts.fail_delay_max_ms. The caller applies the delay (reading
 * nothing from that peer meanwhile, so guessing costs time and a connection slot). The table of
 * peers is capped (opts.max_peers); a full table forgets the peer whose last failure is oldest.
 *
 * Comparison: SHA-256 of the presented token and of the secret, compared with CRYPTO_memcmp:
 * the time depends on neither the presented length nor where the first difference is.
 *
 * Threads: every function may be called from any thread (one mutex); the daemon calls them
 * from its loop thread. Nothing here blocks except tlc_auth_new / tlc_auth_reload / the
 * file checks, which read one small file (start-up and SIGHUP only).
 */
#ifndef TLC_AUTH_H
#define TLC_AUTH_H

#include <stddef.h>
#include <stdint.h>

#define TLC_AUTH_MAX_TOKEN 4096

typedef struct tlc_auth tlc_auth_t;

typedef struct tlc_auth_opts {
  uint64_t fail_delay_ms;     /* delay after a peer's first failure (default 250) */
  uint64_t fail_delay_max_ms; /* cap of the doubling (default 8000) */
  uint64_t fail_window_ms;    /* failures older than this are forgotten (default 60000) */
  size_t max_peers;           /* peer addresses remembered (default 1024) */
} tlc_auth_opts_t;

typedef struct tlc_auth_stats {
  uint64_t ok;      /* tokens accepted */
  uint64_t failed;  /* tokens refused (wrong or missing) */
  uint64_t delayed; /* refusals answered with more than the first delay (repeat offenders) */
  uint64_t reloads; /* successful re-reads */
  size_t peers;     /* peer addresses in the failure table */
} tlc_auth_stats_t;

/* Reads and checks a token file (rules above) without keeping anything: 0, or a negative
 * error (UV_E*-compatible -errno, or TLC_EINVAL) with err "token file PATH: reason". For
 * --check-config and start-up. */
int tlc_auth_check_file(const char *path, char *err, size_t errlen);

/* Creates the object with the token of `path` (copied). `o` may be NULL (defaults). Returns 0
 * with *out set (free with tlc_auth_free), or a negative error with err filled as above. */
int tlc_auth_new(const char *path, const tlc_auth_opts_t *o, tlc_auth_t **out, char *err,
                 size_t errlen);

/* Re-reads the file (SIGHUP). On success the new token applies to every check from now on
 * (connections already authenticated stay); on failure the old token stays and err says why.
 * Returns 0 or a negative error. */
int tlc_auth_reload(tlc_auth_t *a, char *err, size_t errlen);

/* Checks a presented token (`given`, `len` bytes; len 0 = none presented) from `peer` (an
 * address string, e.g. "192.0.2.7" or "unix"; NULL = anonymous, not rate-limited) at `now_ms`
 * (any monotonic milliseconds). Returns 1 when it is the secret, else 0 with *delay_ms (may be
 * NULL) set to the time the caller should wait before answering. The failure is counted. */
int tlc_auth_check(tlc_auth_t *a, const char *peer, const void *given, size_t len, uint64_t now_ms,
                   uint64_t *delay_ms);

/* The file's path (owned by `a`). */
const char *tlc_auth_path(const tlc_auth_t *a);

/* Copies the counters. */
void tlc_auth_get_stats(tlc_auth_t *a, tlc_auth_stats_t *out);

/* Frees everything (the token bytes are cleared first). NULL is accepted. */
void tlc_auth_free(tlc_auth_t *a);

#endif
