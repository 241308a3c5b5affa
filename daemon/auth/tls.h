/* tls.h - TLS for the daemon's ports through OpenSSL (SPEC section 8: `--tls-cert FILE
 * --tls-key FILE`, PEM). No crypto of our own.
 *
 * Two parts:
 *  - tlc_tls_t: the server context built from the certificate chain and key files, rebuilt on
 *    SIGHUP (tlc_tls_reload): a new SSL_CTX replaces the old one for new connections only;
 *    connections keep the context they started with (OpenSSL reference-counts it). The HTTP
 *    port (libwebsockets) takes the same paths (tlc_tls_cert_path / tlc_tls_key_path) or the
 *    context itself (tlc_tls_ctx).
 *  - tlc_tls_conn_t: one server-side TLS session over memory BIOs. The caller owns the socket:
 *    it feeds received ciphertext in (tlc_tls_conn_feed), drives the handshake, reads
 *    plaintext, encrypts plaintext, and takes the ciphertext to send (tlc_tls_conn_take). So a
 *    server keeps its own I/O model (libuv reads on the loop thread, pubsub's serving thread
 *    writing bytes that are already encrypted) and TLS never touches a socket.
 *
 * Settings: TLS 1.2 or newer, OpenSSL's default cipher list, no session tickets or renegotiation
 * (nothing to resume; less to send). The certificate and key must match (checked at load).
 *
 * Threads: a tlc_tls_t may be used from any thread (reload swaps the context under a lock); a
 * tlc_tls_conn_t belongs to one thread at a time.
 */
#ifndef TLC_TLS_H
#define TLC_TLS_H

#include <stddef.h>
#include <stdint.h>

typedef struct tlc_tls tlc_tls_t;
typedef struct tlc_tls_conn tlc_tls_conn_t;

/* Loads `cert` (PEM chain) and `key` (PEM) into a new server context. Returns 0 with *out set,
 * or a negative error with err "TLS: cert FILE / key FILE: OpenSSL's reason". */
int tlc_tls_new(const char *cert, const char *key, tlc_tls_t **out, char *err, size_t errlen);

/* Reloads both files (SIGHUP). On failure the running context stays and err says why.
 * Returns 0 or a negative error. */
int tlc_tls_reload(tlc_tls_t *t, char *err, size_t errlen);

/* Checks the loaded certificate's (the chain's first) validity dates against the clock: 0 when
 * it is valid now, 1 when it has expired or is not valid yet (why: "TLS: certificate FILE has
 * expired: valid from 2025-01-01T00:00:00Z to 2025-02-01T00:00:00Z"; "is not valid yet"), -1
 * when there is none. The daemon warns at start and on reload: a client refuses it. */
int tlc_tls_check_dates(tlc_tls_t *t, char *why, size_t whylen);

/* The paths given to tlc_tls_new (owned by t). */
const char *tlc_tls_cert_path(const tlc_tls_t *t);
const char *tlc_tls_key_path(const tlc_tls_t *t);

/* The current SSL_CTX (an `SSL_CTX *`; a reference the caller must SSL_CTX_free), or NULL. */
void *tlc_tls_ctx(tlc_tls_t *t);

/* Frees the context (sessions made from it keep their own reference). NULL is accepted. */
void tlc_tls_free(tlc_tls_t *t);

/* A new server session on the current context, or NULL (no memory). */
tlc_tls_conn_t *tlc_tls_conn_new(tlc_tls_t *t);

/* Hands `n` received bytes to the session. Returns 0 or TLC_ENOMEM. */
int tlc_tls_conn_feed(tlc_tls_conn_t *c, const void *p, size_t n);

/* Advances the handshake with what was fed. Returns 1 once it is complete, 0 while it needs
 * more input (send what tlc_tls_conn_take yields), or TLC_EIO when it failed (not TLS, wrong
 * version, ...; the reason is in why). */
int tlc_tls_conn_handshake(tlc_tls_conn_t *c, char *why, size_t whylen);

/* Reads decrypted bytes into buf. Returns n > 0, 0 when more input is needed, or TLC_EIO when
 * the peer closed the session (close_notify) or sent something invalid. */
int tlc_tls_conn_read(tlc_tls_conn_t *c, void *buf, size_t cap);

/* Encrypts n bytes (all of them; the ciphertext waits for tlc_tls_conn_take). Returns 0 or
 * TLC_EIO. */
int tlc_tls_conn_write(tlc_tls_conn_t *c, const void *p, size_t n);

/* Bytes of ciphertext waiting to be sent. */
size_t tlc_tls_conn_pending(const tlc_tls_conn_t *c);

/* Moves up to `cap` bytes of waiting ciphertext into buf. Returns the number moved. */
size_t tlc_tls_conn_take(tlc_tls_conn_t *c, void *buf, size_t cap);

/* The negotiated protocol ("TLSv1.3"), for logs. */
const char *tlc_tls_conn_version(const tlc_tls_conn_t *c);

/* Frees the session. NULL is accepted. */
void tlc_tls_conn_free(tlc_tls_conn_t *c);

#endif
