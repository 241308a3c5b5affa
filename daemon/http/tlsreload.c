/* tlsreload.c - a new certificate for the HTTP port's new handshakes (tlc_http_reload_tls,
 * SIGHUP), through OpenSSL's certificate callback on lws's SSL_CTX. Loop thread only.
 */
#include "http/server-int.h"

#include "base/alloc.h"
#include "base/err.h"

#include <openssl/err.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <netinet/in.h>

/* ---- TLS certificate reload ----
 *
 * lws loads the certificate into its vhost's SSL_CTX once, at start. A reload does not change
 * that SSL_CTX (an OpenSSL context keeps a certificate per key type: loading an EC certificate
 * over an RSA one would leave the RSA one served to some clients); instead OpenSSL's
 * certificate callback, set on lws's SSL_CTX when lws creates it
 * (LWS_CALLBACK_OPENSSL_LOAD_EXTRA_SERVER_VERIFY_CERTS), runs before every new handshake picks
 * its certificate, clears what the session copied from lws's context and gives it the current
 * chain and key (tls_cur, a context the caller loaded and checked: tlc_tls_reload). A session
 * keeps its certificate once made; connections already open are not touched. */

int tlc__http_tls_cert_cb(SSL *ssl, void *arg) {
  tlc_http_t *h = arg;
  SSL_CTX *c = h->tls_cur;
  STACK_OF(X509) *chain = NULL;
  if (c == NULL)
    return 1; /* no reload yet: lws's own */
  if (SSL_CTX_get0_chain_certs(c, &chain) != 1)
    chain = NULL;
  SSL_certs_clear(ssl);
  if (SSL_use_cert_and_key(ssl, SSL_CTX_get0_certificate(c), SSL_CTX_get0_privatekey(c), chain,
                           1) != 1) {
    ERR_clear_error();
    return 0; /* this handshake fails (cannot happen: the pair was checked at load) */
  }
  return 1;
}

int tlc_http_reload_tls(tlc_http_t *h, tlc_tls_t *tls, char *err, size_t errlen) {
  SSL_CTX *n;
  if (!h->tls_on) {
    snprintf(err, errlen, "the HTTP port does not speak TLS");
    return TLC_EINVAL;
  }
  if (!h->tls_hooked) {
    snprintf(err, errlen,
             "libwebsockets gave no TLS context to hook: restart for the new "
             "certificate");
    return TLC_EINVAL;
  }
  n = tlc_tls_ctx(tls);
  if (n == NULL || SSL_CTX_get0_certificate(n) == NULL || SSL_CTX_get0_privatekey(n) == NULL) {
    SSL_CTX_free(n);
    snprintf(err, errlen, "no certificate and key loaded");
    return TLC_EINVAL;
  }
  SSL_CTX_free(h->tls_cur);
  h->tls_cur = n;
  return 0;
}
