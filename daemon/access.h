/* access.h - remote access (SPEC 8): the token file and the TLS context every server borrows
 * (the subscriber port, the HTTP port), held by the daemon object (d->auth, d->tls), and the
 * rule the HTTP port follows beyond loopback.
 *
 * Loop thread only.
 */
#ifndef TLC_DAEMON_ACCESS_H
#define TLC_DAEMON_ACCESS_H

#include "daemon/daemon.h"

/* Opens d->auth (token_file set) and d->tls (tls_cert set) from d->in.cfg; a certificate out of
 * its dates is a warning. Returns 0, or a negative error (logged: start-up fails). */
int tlc_access_open(tlc_daemon_t *d);

/* Whether the HTTP port may serve on `host` (d->in.cfg.http's host): loopback, or beyond it with
 * a token file (without TLS a warning: the token crosses the network in clear). 1, or 0 after
 * logging why not. */
int tlc_access_http_allowed(const tlc_daemon_t *d, const char *host);

/* SIGHUP, after d->in.cfg was replaced: the token file and the certificate re-read (new
 * connections get them; an unusable file keeps the running one, logged), the certificate handed
 * to the HTTP port too. Turning either on or off, or another path, needs a restart (the settings
 * table keeps the running paths). */
void tlc_access_reload(tlc_daemon_t *d);

/* Frees d->auth and d->tls, once no server borrows them. */
void tlc_access_free(tlc_daemon_t *d);

#endif
