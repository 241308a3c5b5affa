/* alert-int.h - the parts of daemon/alert shared between its files (not a public header). */
#ifndef TLC_ALERT_INT_H
#define TLC_ALERT_INT_H

#include "alert/alert.h"

#include <stddef.h>

/* One request (post.c): POST u's PREFIX/api/v2/alerts with body[0, len), on the calling thread,
 * within timeout_ms; gives up at once when cancel_fd becomes readable. `ssl_ctx` (an SSL_CTX *)
 * for https, else NULL. Returns 0 when the Alertmanager answered 2xx, else 1 + enum
 * tlc_alert_fail with why[] saying what happened (the HTTP status in *status, 0 when none). */
int tlc__alert_post(const tlc_alert_url_t *u, void *ssl_ctx, const char *body, size_t len,
                    uint64_t timeout_ms, int cancel_fd, int *status, char *why, size_t whylen);

/* An SSL_CTX * for https requests: peers verified against ca_file (PEM) or, when it is "" or
 * NULL, the system's store; TLS 1.2 or newer. NULL with why[] set on failure. */
void *tlc__alert_ssl_ctx(const char *ca_file, char *why, size_t whylen);
void tlc__alert_ssl_ctx_free(void *ctx);

#endif
