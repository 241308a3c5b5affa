/* tls.c - OpenSSL server contexts and memory-BIO sessions (see tls.h).
 *
 * A session is an SSL object between two memory BIOs: rbio holds received ciphertext not yet
 * consumed (drained by every handshake/read call, so it stays below one read's worth), wbio
 * holds ciphertext produced and not yet taken (bounded by what the caller encrypts between two
 * takes). Errors are taken off OpenSSL's per-thread error queue at once so one session's
 * failure never shows up in another's.
 *
 * Cost: OpenSSL's: one AES-GCM (or ChaCha20) pass and a copy per byte written, a handshake per
 * connection (a few hundred microseconds of CPU for ECDHE + the certificate signature).
 * Not done here: client authentication by certificate, OCSP, ALPN.
 */
#include "auth/tls.h"

#include "base/alloc.h"
#include "base/err.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

struct tlc_tls {
  pthread_mutex_t mu;
  SSL_CTX *ctx;
  char *cert, *key;
};

struct tlc_tls_conn {
  SSL *ssl;
  BIO *rbio, *wbio; /* owned by ssl */
};

static void ossl_reason(char *buf, size_t len) {
  unsigned long e = ERR_get_error();
  if (e == 0)
    snprintf(buf, len, "unknown error");
  else
    ERR_error_string_n(e, buf, len);
  ERR_clear_error();
}

static SSL_CTX *ctx_build(const char *cert, const char *key, char *err, size_t errlen) {
  char why[256];
  SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == NULL) {
    ossl_reason(why, sizeof(why));
    snprintf(err, errlen, "TLS: %s", why);
    return NULL;
  }
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx,
                      SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
  if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
    ossl_reason(why, sizeof(why));
    snprintf(err, errlen, "TLS: certificate %s: %s", cert, why);
    goto fail;
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
    ossl_reason(why, sizeof(why));
    snprintf(err, errlen, "TLS: key %s: %s", key, why);
    goto fail;
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    ossl_reason(why, sizeof(why));
    snprintf(err, errlen, "TLS: key %s does not match certificate %s: %s", key, cert, why);
    goto fail;
  }
  return ctx;
fail:
  SSL_CTX_free(ctx);
  return NULL;
}

int tlc_tls_new(const char *cert, const char *key, tlc_tls_t **out, char *err, size_t errlen) {
  tlc_tls_t *t;
  *out = NULL;
  t = tlc_calloc(1, sizeof(*t));
  if (t == NULL)
    return TLC_ENOMEM;
  t->cert = tlc_strndup(cert, strlen(cert));
  t->key = tlc_strndup(key, strlen(key));
  if (t->cert == NULL || t->key == NULL || pthread_mutex_init(&t->mu, NULL) != 0) {
    tlc_free(t->cert);
    tlc_free(t->key);
    tlc_free(t);
    snprintf(err, errlen, "TLS: out of memory");
    return TLC_ENOMEM;
  }
  t->ctx = ctx_build(cert, key, err, errlen);
  if (t->ctx == NULL) {
    tlc_tls_free(t);
    return TLC_EINVAL;
  }
  *out = t;
  return 0;
}

int tlc_tls_reload(tlc_tls_t *t, char *err, size_t errlen) {
  SSL_CTX *n = ctx_build(t->cert, t->key, err, errlen), *old;
  if (n == NULL)
    return TLC_EINVAL;
  pthread_mutex_lock(&t->mu);
  old = t->ctx;
  t->ctx = n;
  pthread_mutex_unlock(&t->mu);
  SSL_CTX_free(old); /* sessions made from it hold their own reference */
  return 0;
}

/* An ASN1_TIME as "YYYY-MM-DDTHH:MM:SSZ" into buf ("?" when it cannot be read). */
static void asn1_date(const ASN1_TIME *a, char *buf, size_t len) {
  struct tm tm;
  if (a == NULL || ASN1_TIME_to_tm(a, &tm) != 1 ||
      strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
    snprintf(buf, len, "?");
}

int tlc_tls_check_dates(tlc_tls_t *t, char *why, size_t whylen) {
  SSL_CTX *c = tlc_tls_ctx(t);
  X509 *x = c != NULL ? SSL_CTX_get0_certificate(c) : NULL;
  const ASN1_TIME *nb, *na;
  char from[32], to[32];
  int r = -1;
  if (x != NULL) {
    nb = X509_get0_notBefore(x);
    na = X509_get0_notAfter(x);
    asn1_date(nb, from, sizeof(from));
    asn1_date(na, to, sizeof(to));
    r = 0;
    if (X509_cmp_current_time(nb) > 0) {
      snprintf(why, whylen, "TLS: certificate %s is not valid yet: valid from %s to %s", t->cert,
               from, to);
      r = 1;
    } else if (X509_cmp_current_time(na) < 0) {
      snprintf(why, whylen, "TLS: certificate %s has expired: valid from %s to %s", t->cert, from,
               to);
      r = 1;
    }
  }
  ERR_clear_error();
  SSL_CTX_free(c);
  return r;
}

const char *tlc_tls_cert_path(const tlc_tls_t *t) {
  return t->cert;
}

const char *tlc_tls_key_path(const tlc_tls_t *t) {
  return t->key;
}

void *tlc_tls_ctx(tlc_tls_t *t) {
  SSL_CTX *c;
  pthread_mutex_lock(&t->mu);
  c = t->ctx;
  if (c != NULL)
    SSL_CTX_up_ref(c);
  pthread_mutex_unlock(&t->mu);
  return c;
}

void tlc_tls_free(tlc_tls_t *t) {
  if (t == NULL)
    return;
  SSL_CTX_free(t->ctx);
  pthread_mutex_destroy(&t->mu);
  tlc_free(t->cert);
  tlc_free(t->key);
  tlc_free(t);
}

tlc_tls_conn_t *tlc_tls_conn_new(tlc_tls_t *t) {
  tlc_tls_conn_t *c = tlc_calloc(1, sizeof(*c));
  SSL_CTX *ctx;
  if (c == NULL)
    return NULL;
  ctx = tlc_tls_ctx(t);
  if (ctx == NULL)
    goto fail;
  c->ssl = SSL_new(ctx);
  SSL_CTX_free(ctx); /* the session holds its own reference */
  if (c->ssl == NULL)
    goto fail;
  c->rbio = BIO_new(BIO_s_mem());
  c->wbio = BIO_new(BIO_s_mem());
  if (c->rbio == NULL || c->wbio == NULL) {
    BIO_free(c->rbio);
    BIO_free(c->wbio);
    SSL_free(c->ssl);
    goto fail;
  }
  /* An empty rbio reads as "retry later", not as end of file. */
  BIO_set_mem_eof_return(c->rbio, -1);
  SSL_set_bio(c->ssl, c->rbio, c->wbio);
  SSL_set_accept_state(c->ssl);
  return c;
fail:
  ERR_clear_error();
  tlc_free(c);
  return NULL;
}

int tlc_tls_conn_feed(tlc_tls_conn_t *c, const void *p, size_t n) {
  while (n > 0) {
    int chunk = n > (1u << 30) ? (1 << 30) : (int)n;
    int w = BIO_write(c->rbio, p, chunk);
    if (w <= 0) {
      ERR_clear_error();
      return TLC_ENOMEM;
    }
    p = (const char *)p + w;
    n -= (size_t)w;
  }
  return 0;
}

int tlc_tls_conn_handshake(tlc_tls_conn_t *c, char *why, size_t whylen) {
  int r = SSL_do_handshake(c->ssl);
  if (r == 1)
    return 1;
  switch (SSL_get_error(c->ssl, r)) {
  case SSL_ERROR_WANT_READ:
  case SSL_ERROR_WANT_WRITE:
    return 0;
  default:
    if (why != NULL && whylen > 0)
      ossl_reason(why, whylen);
    ERR_clear_error();
    return TLC_EIO;
  }
}

int tlc_tls_conn_read(tlc_tls_conn_t *c, void *buf, size_t cap) {
  int r = SSL_read(c->ssl, buf, cap > (1u << 30) ? (1 << 30) : (int)cap);
  if (r > 0)
    return r;
  switch (SSL_get_error(c->ssl, r)) {
  case SSL_ERROR_WANT_READ:
  case SSL_ERROR_WANT_WRITE:
    return 0;
  default:
    ERR_clear_error();
    return TLC_EIO;
  }
}

int tlc_tls_conn_write(tlc_tls_conn_t *c, const void *p, size_t n) {
  while (n > 0) {
    int chunk = n > (1u << 30) ? (1 << 30) : (int)n;
    int w = SSL_write(c->ssl, p, chunk);
    if (w <= 0) {
      ERR_clear_error();
      return TLC_EIO;
    }
    p = (const char *)p + w;
    n -= (size_t)w;
  }
  return 0;
}

size_t tlc_tls_conn_pending(const tlc_tls_conn_t *c) {
  return BIO_ctrl_pending(c->wbio);
}

size_t tlc_tls_conn_take(tlc_tls_conn_t *c, void *buf, size_t cap) {
  size_t got = 0;
  while (got < cap) {
    size_t want = cap - got;
    int r = BIO_read(c->wbio, (char *)buf + got, want > (1u << 30) ? (1 << 30) : (int)want);
    if (r <= 0)
      break;
    got += (size_t)r;
  }
  return got;
}

const char *tlc_tls_conn_version(const tlc_tls_conn_t *c) {
  return SSL_get_version(c->ssl);
}

void tlc_tls_conn_free(tlc_tls_conn_t *c) {
  if (c == NULL)
    return;
  SSL_free(c->ssl); /* frees both BIOs */
  tlc_free(c);
}
