/* access.c - remote access (SPEC 8; see access.h): the token file and the TLS context, opened at
 * start, re-read on SIGHUP, and the HTTP port's rule beyond loopback. Loop thread.
 */
#include "daemon/access.h"

#include "auth/peers.h"
#include "base/log.h"

#include <string.h>

int tlc_access_open(tlc_daemon_t *d) {
  const tlc_config_t *c = &d->in.cfg;
  int r = 0;
  char why[600];
  /* tlc_config_validate checked both files already; a failure now is a race (logged). */
  if (c->token_file[0] != '\0' &&
      (r = tlc_auth_new(c->token_file, NULL, &d->auth, why, sizeof(why))) != 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_CONFIG, "%s", why);
    return r;
  }
  if (c->tls_cert[0] != '\0' &&
      (r = tlc_tls_new(c->tls_cert, c->tls_key, &d->tls, why, sizeof(why))) != 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_CONFIG, "%s", why);
    return r;
  }
  if (d->tls != NULL && tlc_tls_check_dates(d->tls, why, sizeof(why)) == 1)
    tlc_log(TLC_LOG_WARN, TLC_LOGC_CONFIG, "%s: clients will refuse it", why);
  return 0;
}

int tlc_access_http_allowed(const tlc_daemon_t *d, const char *host) {
  const char *addr = d->in.cfg.http;
  if (tlc_peers_host_is_loopback(host))
    return 1;
  if (d->auth == NULL) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_CONFIG,
            "http: refusing to serve %s: beyond loopback the HTTP port needs token_file "
            "(--token-file FILE; SPEC 8), and should have tls_cert/tls_key; or bind "
            "127.0.0.1 and reach it through an SSH tunnel, or set http = \"\"",
            addr);
    return 0;
  }
  if (d->tls == NULL)
    tlc_log(TLC_LOG_WARN, TLC_LOGC_CONFIG,
            "http: %s is beyond loopback without TLS: the token crosses the network in "
            "clear (set tls_cert/tls_key)",
            addr);
  return 1;
}

/* The certificate and key just re-read and checked, handed to the HTTP port (a bad pair never
 * reaches it). */
static void reload_tls(tlc_daemon_t *d) {
  const tlc_config_t *c = &d->in.cfg;
  char why[600];
  int both = 0;
  if (tlc_tls_reload(d->tls, why, sizeof(why)) != 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_CONFIG, "reload: keeping the previous certificate: %s", why);
    return;
  }
  if (d->http != NULL && tlc_http_reload_tls(d->http, d->tls, why, sizeof(why)) != 0)
    tlc_log(TLC_LOG_ERR, TLC_LOGC_CONFIG,
            "reload: the HTTP port keeps the previous certificate: %s", why);
  else
    both = d->http != NULL;
  tlc_log(TLC_LOG_INFO, TLC_LOGC_CONFIG, "reload: certificate %s and key reloaded%s", c->tls_cert,
          both ? " (the HTTP port's too)" : "");
  if (tlc_tls_check_dates(d->tls, why, sizeof(why)) == 1)
    tlc_log(TLC_LOG_WARN, TLC_LOGC_CONFIG, "reload: %s: clients will refuse it", why);
}

void tlc_access_reload(tlc_daemon_t *d) {
  const tlc_config_t *c = &d->in.cfg;
  char why[600];
  if (d->auth != NULL && strcmp(c->token_file, tlc_auth_path(d->auth)) == 0) {
    if (tlc_auth_reload(d->auth, why, sizeof(why)) != 0)
      tlc_log(TLC_LOG_ERR, TLC_LOGC_CONFIG, "reload: keeping the previous token: %s", why);
    else
      tlc_log(TLC_LOG_INFO, TLC_LOGC_CONFIG, "reload: token file %s re-read", c->token_file);
  }
  if (d->tls != NULL && strcmp(c->tls_cert, tlc_tls_cert_path(d->tls)) == 0 &&
      strcmp(c->tls_key, tlc_tls_key_path(d->tls)) == 0)
    reload_tls(d);
}

void tlc_access_free(tlc_daemon_t *d) {
  tlc_auth_free(d->auth);
  tlc_tls_free(d->tls);
  d->auth = NULL;
  d->tls = NULL;
}
