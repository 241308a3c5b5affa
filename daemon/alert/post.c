/* post.c - one HTTP/1.1 POST to the Alertmanager, on the request thread (see alert-int.h).
 *
 * Non-blocking sockets and poll(2) with the request's deadline and the cancel eventfd, so that
 * a silent peer costs timeout_ms at most and closing the module never waits on the network.
 * https: OpenSSL on the same socket (SNI, the peer's certificate verified for the host name or
 * address). The request says "Connection: close"; only the status line and headers of the
 * answer are read (8 KiB at most), which is all the Alertmanager's answer needs.
 */
#include "alert/alert-int.h"

#include "base/err.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#define ANSWER_MAX 8192

enum { W_OK_ = 0, W_TIMEOUT = 1, W_CANCEL = 2 };

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits until fd is ready for `events`, the deadline passes, or cancel_fd is readable. */
static int wait_fd(int fd, short events, int64_t deadline, int cancel_fd) {
  for (;;) {
    struct pollfd p[2];
    int64_t left = deadline - mono_ms();
    int r;
    if (left <= 0)
      return W_TIMEOUT;
    p[0].fd = fd;
    p[0].events = events;
    p[0].revents = 0;
    p[1].fd = cancel_fd;
    p[1].events = POLLIN;
    p[1].revents = 0;
    r = poll(p, 2, left > 1000000 ? 1000000 : (int)left);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      return W_TIMEOUT;
    if (p[1].revents != 0)
      return W_CANCEL;
    if (p[0].revents != 0)
      return W_OK_;
  }
}

int tlc_alert_parse_answer(const char *buf, size_t n, int *status) {
  const char *end = NULL;
  int code = 0;
  /* "HTTP/1.x NNN" */
  if (n >= 5 && memcmp(buf, "HTTP/", 5) != 0)
    return -1;
  if (n < 5 && memcmp(buf, "HTTP/", n) != 0)
    return -1;
  if (n >= 12) {
    if (buf[5] != '1' || buf[6] != '.' || buf[7] < '0' || buf[7] > '9' || buf[8] != ' ')
      return -1;
    for (int i = 9; i < 12; i++) {
      if (buf[i] < '0' || buf[i] > '9')
        return -1;
      code = code * 10 + (buf[i] - '0');
    }
    if (code < 100 || (n > 12 && buf[12] != ' ' && buf[12] != '\r'))
      return -1;
  }
  for (size_t i = 0; i + 3 < n; i++)
    if (buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' && buf[i + 3] == '\n') {
      end = buf + i;
      break;
    }
  if (end == NULL || n < 12)
    return 0;
  *status = code;
  return 1;
}

void *tlc__alert_ssl_ctx(const char *ca_file, char *why, size_t whylen) {
  SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == NULL) {
    snprintf(why, whylen, "TLS: no context");
    return NULL;
  }
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
  if (ca_file != NULL && ca_file[0] != '\0') {
    if (SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1) {
      char e[160];
      ERR_error_string_n(ERR_get_error(), e, sizeof(e));
      snprintf(why, whylen, "TLS: CA file %s: %s", ca_file, e);
      SSL_CTX_free(ctx);
      return NULL;
    }
  } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
    snprintf(why, whylen, "TLS: the system's CA store could not be loaded");
    SSL_CTX_free(ctx);
    return NULL;
  }
  return ctx;
}

void tlc__alert_ssl_ctx_free(void *ctx) {
  SSL_CTX_free(ctx);
}

typedef struct conn {
  int fd;
  SSL *ssl;
  int64_t deadline;
  int cancel_fd;
  char *why;
  size_t whylen;
} conn_t;

/* why = "what: detail"; returns 1 + reason */
static int fail(conn_t *c, int reason, const char *what, const char *detail) {
  snprintf(c->why, c->whylen, "%s: %s", what, detail);
  return 1 + reason;
}

static int waited(conn_t *c, int w, const char *what) {
  if (w == W_CANCEL)
    return fail(c, TLC_ALERT_FAIL_TIMEOUT, what, "cancelled (closing)");
  return fail(c, TLC_ALERT_FAIL_TIMEOUT, what, "no answer in time");
}

static int do_connect(conn_t *c, const tlc_alert_url_t *u) {
  struct addrinfo hints, *res = NULL, *ai;
  int r, last_err = 0;
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_ADDRCONFIG;
  r = getaddrinfo(u->host, u->port, &hints, &res);
  if (r != 0 || res == NULL) {
    snprintf(c->why, c->whylen, "%s: %s", u->host, gai_strerror(r));
    return 1 + TLC_ALERT_FAIL_RESOLVE;
  }
  for (ai = res; ai != NULL; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), w;
    socklen_t el = sizeof(last_err);
    if (fd < 0) {
      last_err = errno;
      continue;
    }
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
      last_err = errno;
      close(fd);
      continue;
    }
    w = wait_fd(fd, POLLOUT, c->deadline, c->cancel_fd);
    if (w != W_OK_) {
      close(fd);
      freeaddrinfo(res);
      return waited(c, w, "connect");
    }
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &last_err, &el) != 0)
      last_err = errno;
    if (last_err != 0) {
      close(fd);
      continue;
    }
    c->fd = fd;
    freeaddrinfo(res);
    return 0;
  }
  freeaddrinfo(res);
  return fail(c, TLC_ALERT_FAIL_CONNECT, "connect", strerror(last_err));
}

static int tls_why(conn_t *c, const char *what) {
  unsigned long e = ERR_get_error();
  char buf[160];
  long v = SSL_get_verify_result(c->ssl);
  if (v != X509_V_OK)
    snprintf(c->why, c->whylen, "%s: certificate: %s", what, X509_verify_cert_error_string(v));
  else if (e != 0) {
    ERR_error_string_n(e, buf, sizeof(buf));
    snprintf(c->why, c->whylen, "%s: %s", what, buf);
  } else
    snprintf(c->why, c->whylen, "%s: the connection ended", what);
  ERR_clear_error();
  return 1 + TLC_ALERT_FAIL_TLS;
}

/* Drives an SSL call that may want I/O; returns its result (> 0) or a failure code (< 0 as
 * -(1 + reason)) after writing why. */
static int tls_io(conn_t *c, int r, const char *what) {
  int e = SSL_get_error(c->ssl, r), w;
  if (e == SSL_ERROR_WANT_READ)
    w = wait_fd(c->fd, POLLIN, c->deadline, c->cancel_fd);
  else if (e == SSL_ERROR_WANT_WRITE)
    w = wait_fd(c->fd, POLLOUT, c->deadline, c->cancel_fd);
  else if (e == SSL_ERROR_ZERO_RETURN)
    return -fail(c, TLC_ALERT_FAIL_IO, what, "the peer closed the connection");
  else
    return -tls_why(c, what);
  if (w != W_OK_)
    return -waited(c, w, what);
  return 0; /* try again */
}

static int do_tls(conn_t *c, const tlc_alert_url_t *u, SSL_CTX *ctx) {
  unsigned char ip[16];
  int is_ip = inet_pton(AF_INET, u->host, ip) == 1 || inet_pton(AF_INET6, u->host, ip) == 1;
  c->ssl = SSL_new(ctx);
  if (c->ssl == NULL || SSL_set_fd(c->ssl, c->fd) != 1)
    return fail(c, TLC_ALERT_FAIL_TLS, "TLS", "no session");
  if (!is_ip)
    SSL_set_tlsext_host_name(c->ssl, u->host);
  if (is_ip) {
    if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), u->host) != 1)
      return fail(c, TLC_ALERT_FAIL_TLS, "TLS: bad address", u->host);
  } else if (SSL_set1_host(c->ssl, u->host) != 1) {
    return fail(c, TLC_ALERT_FAIL_TLS, "TLS: bad host name", u->host);
  }
  for (;;) {
    int r = SSL_connect(c->ssl);
    if (r == 1)
      return 0;
    if ((r = tls_io(c, r, "TLS handshake")) < 0)
      return -r;
  }
}

static int send_all(conn_t *c, const char *p, size_t n) {
  while (n > 0) {
    if (c->ssl != NULL) {
      int r = SSL_write(c->ssl, p, n > (1u << 30) ? (int)(1u << 30) : (int)n);
      if (r > 0) {
        p += r;
        n -= (size_t)r;
      } else if ((r = tls_io(c, r, "send")) < 0) {
        return -r;
      }
    } else {
      ssize_t r = send(c->fd, p, n, MSG_NOSIGNAL);
      if (r > 0) {
        p += r;
        n -= (size_t)r;
      } else if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        int w = wait_fd(c->fd, POLLOUT, c->deadline, c->cancel_fd);
        if (w != W_OK_)
          return waited(c, w, "send");
      } else {
        return fail(c, TLC_ALERT_FAIL_IO, "send", strerror(errno));
      }
    }
  }
  return 0;
}

/* Reads up to cap bytes: > 0 bytes, 0 at the end of the stream, < 0 as -(1 + reason). */
static long recv_some(conn_t *c, char *p, size_t cap) {
  for (;;) {
    if (c->ssl != NULL) {
      int r = SSL_read(c->ssl, p, (int)cap);
      if (r > 0)
        return r;
      if (SSL_get_error(c->ssl, r) == SSL_ERROR_ZERO_RETURN)
        return 0;
      if ((r = tls_io(c, r, "answer")) < 0)
        return r;
    } else {
      ssize_t r = recv(c->fd, p, cap, 0);
      if (r >= 0)
        return (long)r;
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
        int w = wait_fd(c->fd, POLLIN, c->deadline, c->cancel_fd);
        if (w != W_OK_)
          return -waited(c, w, "answer");
      } else {
        return -fail(c, TLC_ALERT_FAIL_IO, "answer", strerror(errno));
      }
    }
  }
}

static int exchange(conn_t *c, const tlc_alert_url_t *u, void *ssl_ctx, const char *body,
                    size_t len, int *status) {
  char head[1024], ans[ANSWER_MAX];
  size_t n = 0;
  int r, v6 = strchr(u->host, ':') != NULL;
  if ((r = do_connect(c, u)) != 0)
    return r;
  if (ssl_ctx != NULL && (r = do_tls(c, u, ssl_ctx)) != 0)
    return r;
  snprintf(head, sizeof(head),
           "POST %s/api/v2/alerts HTTP/1.1\r\nHost: %s%s%s:%s\r\nUser-Agent: tlcapd\r\n"
           "Content-Type: application/json\r\nAccept: application/json\r\n"
           "Content-Length: %zu\r\nConnection: close\r\n\r\n",
           u->prefix, v6 ? "[" : "", u->host, v6 ? "]" : "", u->port, len);
  if ((r = send_all(c, head, strlen(head))) != 0 || (r = send_all(c, body, len)) != 0)
    return r;
  for (;;) {
    long got;
    int p;
    if (n == sizeof(ans))
      return fail(c, TLC_ALERT_FAIL_IO, "answer", "headers longer than 8 KiB");
    got = recv_some(c, ans + n, sizeof(ans) - n);
    if (got < 0)
      return (int)-got;
    if (got == 0)
      return fail(c, TLC_ALERT_FAIL_IO, "answer", "the connection ended before one came");
    n += (size_t)got;
    p = tlc_alert_parse_answer(ans, n, status);
    if (p < 0)
      return fail(c, TLC_ALERT_FAIL_IO, "answer", "not HTTP/1.x");
    if (p > 0)
      break;
  }
  if (*status < 200 || *status > 299) {
    char s[16];
    snprintf(s, sizeof(s), "%d", *status);
    return fail(c, TLC_ALERT_FAIL_STATUS, "the Alertmanager answered HTTP", s);
  }
  return 0;
}

int tlc__alert_post(const tlc_alert_url_t *u, void *ssl_ctx, const char *body, size_t len,
                    uint64_t timeout_ms, int cancel_fd, int *status, char *why, size_t whylen) {
  conn_t c;
  int r;
  memset(&c, 0, sizeof(c));
  c.fd = -1;
  c.deadline = mono_ms() + (int64_t)timeout_ms;
  c.cancel_fd = cancel_fd;
  c.why = why;
  c.whylen = whylen;
  *status = 0;
  r = exchange(&c, u, ssl_ctx, body, len, status);
  if (c.ssl != NULL) {
    if (r == 0)
      SSL_shutdown(c.ssl); /* non-blocking: sends close_notify if it can, waits for nothing */
    SSL_free(c.ssl);
  }
  if (c.fd >= 0)
    close(c.fd);
  ERR_clear_error();
  return r;
}
