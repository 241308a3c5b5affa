/* client.c - the subscriber client library (see tlcap_client.h).
 *
 * One non-blocking socket driven by poll() with timeouts; received bytes go through the same
 * incremental frame decoder as the daemon's (proto/frame.c), capped at max_message before any
 * allocation. Messages that arrive while a request waits for its reply are kept in a bounded
 * FIFO for tlc_client_recv. Subscriptions are kept as their encoded frames, replayed on
 * reconnect. Cost: one poll per wait, one unpack per message.
 *
 * TLS (tls://) is OpenSSL over the same non-blocking socket: io_send/io_recv map SSL's
 * WANT_READ/WANT_WRITE to EAGAIN and the event to poll for, and every wait first drains what
 * SSL already decrypted (SSL_read before poll), so buffered records are never left behind.
 * Reconnection (opts.reconnect) lives in tlc_client_recv: a loss closes the link and records
 * when; each call attempts when the backoff allows and otherwise waits at most its timeout.
 * Not done here: threads, client certificates.
 */
#include "client/tlcap_client.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/list.h"
#include "proto/convert.h"
#include "proto/frame.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define RBUF 65536

typedef struct qnode {
  STAILQ_ENTRY(qnode) link;
  Tlcap__ServerMessage *m;
} qnode_t;

typedef struct saved_sub {
  SLIST_ENTRY(saved_sub) link;
  uint32_t id;
  size_t len;
  uint8_t data[]; /* the framed Subscribe request */
} saved_sub_t;

struct tlc_client {
  char *addr;
  tlc_client_opts_t o;
  char *name, *token;
  int fd;
  tlc_frame_dec_t dec;
  uint8_t *rbuf;
  size_t rlen, roff;
  Tlcap__ServerMessage *welcome;
  STAILQ_HEAD(, qnode) q; /* unsolicited messages, oldest first */
  size_t nq;
  SLIST_HEAD(, saved_sub) subs; /* sent again on reconnect */
  uint32_t next_req, next_sub;
  /* TLS */
  int tls;
  char *ca_file;
  SSL_CTX *ctx;
  SSL *ssl;
  /* reconnection */
  int lost; /* the link is down and reconnect is on */
  int64_t lost_at, next_try;
  unsigned attempts;
  uint64_t old_iid;
  char last_err[512];
};

static void set_err(char *err, size_t errlen, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#include <stdarg.h>
static void set_err(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  if (err == NULL || errlen == 0)
    return;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Remaining time of a deadline (-1: none). */
static int left_ms(int64_t deadline) {
  int64_t l;
  if (deadline < 0)
    return -1;
  l = deadline - mono_ms();
  return l < 0 ? 0 : (int)(l > 1000000000 ? 1000000000 : l);
}

/* recv/send through TLS when on: > 0 bytes, 0 end of stream (recv), or -1 with errno (EAGAIN:
 * wait for *ev). */
static ssize_t io_recv(tlc_client_t *c, void *buf, size_t n, short *ev) {
  int r, e;
  *ev = POLLIN;
  if (c->ssl == NULL)
    return recv(c->fd, buf, n, 0);
  r = SSL_read(c->ssl, buf, (int)(n > 1u << 30 ? 1u << 30 : n));
  if (r > 0)
    return r;
  e = SSL_get_error(c->ssl, r);
  ERR_clear_error();
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
    *ev = e == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN;
    errno = EAGAIN;
    return -1;
  }
  return 0; /* close_notify, or the daemon closed without one (a stop, a crash) */
}

static ssize_t io_send(tlc_client_t *c, const void *p, size_t n, short *ev) {
  int r, e;
  *ev = POLLOUT;
  if (c->ssl == NULL)
    return send(c->fd, p, n, MSG_NOSIGNAL);
  r = SSL_write(c->ssl, p, (int)(n > 1u << 30 ? 1u << 30 : n));
  if (r > 0)
    return r;
  e = SSL_get_error(c->ssl, r);
  ERR_clear_error();
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
    *ev = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
    errno = EAGAIN;
    return -1;
  }
  errno = ECONNRESET;
  return -1;
}

/* The host part of "tls://HOST:PORT" / "tls://[V6]:PORT" into buf. */
static int tls_host(const char *addr, char *buf, size_t len) {
  const char *h = addr + 6, *end;
  size_t n;
  if (*h == '[') {
    h++;
    end = strchr(h, ']');
  } else {
    end = strrchr(h, ':');
  }
  if (end == NULL || (n = (size_t)(end - h)) == 0 || n >= len)
    return TLC_EINVAL;
  memcpy(buf, h, n);
  buf[n] = 0;
  return 0;
}

/* TLS handshake on c->fd (connected): verifies the chain (ca_file or the system's store) and
 * the name or IP. */
static int tls_connect(tlc_client_t *c, char *err, size_t errlen) {
  char host[256];
  unsigned char ipb[16];
  int64_t deadline = mono_ms() + c->o.timeout_ms;
  int is_ip;
  if (tls_host(c->addr, host, sizeof(host)) != 0) {
    set_err(err, errlen, "bad address %s (want tls://HOST:PORT)", c->addr);
    return TLC_EINVAL;
  }
  if (c->ctx == NULL) {
    c->ctx = SSL_CTX_new(TLS_client_method());
    if (c->ctx == NULL)
      return TLC_ENOMEM;
    SSL_CTX_set_min_proto_version(c->ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(c->ctx, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_mode(c->ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    if ((c->ca_file != NULL ? SSL_CTX_load_verify_locations(c->ctx, c->ca_file, NULL)
                            : SSL_CTX_set_default_verify_paths(c->ctx)) != 1) {
      char why[256];
      ERR_error_string_n(ERR_get_error(), why, sizeof(why));
      ERR_clear_error();
      set_err(err, errlen, "%s: CA certificates %s: %s", c->addr,
              c->ca_file != NULL ? c->ca_file : "(system default)", why);
      SSL_CTX_free(c->ctx);
      c->ctx = NULL;
      return TLC_EINVAL;
    }
  }
  c->ssl = SSL_new(c->ctx);
  if (c->ssl == NULL || SSL_set_fd(c->ssl, c->fd) != 1)
    return TLC_ENOMEM;
  is_ip = inet_pton(AF_INET, host, ipb) == 1 || inet_pton(AF_INET6, host, ipb) == 1;
  if (is_ip) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), host);
  } else {
    SSL_set_tlsext_host_name(c->ssl, host);
    SSL_set1_host(c->ssl, host);
  }
  for (;;) {
    int r = SSL_connect(c->ssl), e;
    struct pollfd pf;
    if (r == 1)
      return 0;
    e = SSL_get_error(c->ssl, r);
    if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
      long v = SSL_get_verify_result(c->ssl);
      char why[256];
      unsigned long ee = ERR_get_error();
      ERR_error_string_n(ee, why, sizeof(why));
      ERR_clear_error();
      if (v != X509_V_OK) {
        set_err(err, errlen, "%s: TLS: the daemon's certificate does not verify: %s%s", c->addr,
                X509_verify_cert_error_string(v), c->ca_file == NULL ? " (try --ca FILE)" : "");
        return TLC_EINVAL; /* another attempt cannot cure it */
      }
      set_err(err, errlen, "%s: TLS handshake failed: %s (is it a TLS port?)", c->addr,
              ee != 0 ? why : "connection closed");
      return TLC_EIO;
    }
    pf.fd = c->fd;
    pf.events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
    pf.revents = 0;
    if (poll(&pf, 1, left_ms(deadline)) == 0) {
      set_err(err, errlen, "%s: TLS handshake: no answer within %d ms", c->addr, c->o.timeout_ms);
      return -ETIMEDOUT;
    }
  }
}

int tlc_client_dial(const char *addr, int timeout_ms, const char *what, int *out, char *err,
                    size_t errlen) {
  int fd = -1, r;
  int64_t deadline = timeout_ms >= 0 ? mono_ms() + timeout_ms : -1;
  if (strncmp(addr, "tls://", 6) == 0)
    addr += 6;
  if (strncmp(addr, "unix:", 5) == 0) {
    struct sockaddr_un sa;
    const char *path = addr + 5;
    if (strlen(path) >= sizeof(sa.sun_path) || path[0] == 0) {
      set_err(err, errlen, "bad unix socket path in %s", addr);
      return TLC_EINVAL;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
      return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
      r = -errno;
      close(fd);
      set_err(err, errlen, "cannot connect to %s: %s (is tlcapd %s there?)", addr, strerror(-r),
              what != NULL ? what : "running and serving");
      return r;
    }
  } else {
    char host[256], port[16];
    const char *colon;
    struct addrinfo hints, *res = NULL, *ai;
    size_t hl;
    if (addr[0] == '[') {
      const char *rb = strchr(addr, ']');
      if (rb == NULL || rb[1] != ':') {
        set_err(err, errlen, "bad address %s (want HOST:PORT, [V6]:PORT or unix:PATH)", addr);
        return TLC_EINVAL;
      }
      hl = (size_t)(rb - addr - 1);
      if (hl >= sizeof(host))
        return TLC_EINVAL;
      memcpy(host, addr + 1, hl);
      host[hl] = 0;
      colon = rb + 1;
    } else {
      colon = strrchr(addr, ':');
      if (colon == NULL) {
        set_err(err, errlen, "bad address %s (want HOST:PORT, [V6]:PORT or unix:PATH)", addr);
        return TLC_EINVAL;
      }
      hl = (size_t)(colon - addr);
      if (hl >= sizeof(host) || hl == 0) {
        set_err(err, errlen, "bad address %s (want HOST:PORT, [V6]:PORT or unix:PATH)", addr);
        return TLC_EINVAL;
      }
      memcpy(host, addr, hl);
      host[hl] = 0;
    }
    if (strlen(colon + 1) == 0 || strlen(colon + 1) >= sizeof(port) ||
        strspn(colon + 1, "0123456789") != strlen(colon + 1)) {
      set_err(err, errlen, "bad port in %s", addr);
      return TLC_EINVAL;
    }
    strcpy(port, colon + 1);
    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_family = AF_UNSPEC;
    if ((r = getaddrinfo(host, port, &hints, &res)) != 0) {
      set_err(err, errlen, "cannot resolve %s: %s", addr, gai_strerror(r));
      return TLC_EINVAL;
    }
    r = -ECONNREFUSED;
    for (ai = res; ai != NULL; ai = ai->ai_next) {
      struct pollfd pf;
      int soerr = 0;
      socklen_t sl = sizeof(soerr);
      fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      if (fd < 0) {
        r = -errno;
        continue;
      }
      if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
        break;
      if (errno != EINPROGRESS) {
        r = -errno;
        close(fd);
        fd = -1;
        continue;
      }
      pf.fd = fd;
      pf.events = POLLOUT;
      pf.revents = 0;
      if (poll(&pf, 1, left_ms(deadline)) <= 0) {
        r = -ETIMEDOUT;
        close(fd);
        fd = -1;
        continue;
      }
      if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr != 0) {
        r = soerr != 0 ? -soerr : -errno;
        close(fd);
        fd = -1;
        continue;
      }
      break;
    }
    freeaddrinfo(res);
    if (fd < 0) {
      set_err(err, errlen, "cannot connect to %s: %s (is tlcapd %s there?)", addr, strerror(-r),
              what != NULL ? what : "running and serving");
      return r;
    }
  }
  if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) {
    r = -errno;
    close(fd);
    return r;
  }
  *out = fd;
  return 0;
}

static int write_all(tlc_client_t *c, const uint8_t *p, size_t n, int timeout_ms) {
  int64_t deadline = timeout_ms >= 0 ? mono_ms() + timeout_ms : -1;
  while (n > 0) {
    ssize_t w;
    short ev;
    if (c->fd < 0)
      return -ENOTCONN;
    w = io_send(c, p, n, &ev);
    if (w > 0) {
      p += w;
      n -= (size_t)w;
      continue;
    }
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      struct pollfd pf = { c->fd, ev, 0 };
      int pr = poll(&pf, 1, left_ms(deadline));
      if (pr == 0)
        return -ETIMEDOUT;
      if (pr < 0 && errno != EINTR)
        return -errno;
      continue;
    }
    return w < 0 ? -errno : TLC_EIO;
  }
  return 0;
}

static int pack_send(tlc_client_t *c, const ProtobufCMessage *m, uint8_t **keep, size_t *keeplen) {
  size_t payload, n = tlc_pb_frame_size(m, &payload);
  uint8_t *buf = tlc_malloc(n);
  int r;
  if (buf == NULL)
    return TLC_ENOMEM;
  tlc_pb_frame_pack(m, payload, buf);
  r = write_all(c, buf, n, c->o.timeout_ms);
  if (r == 0 && keep != NULL) {
    *keep = buf;
    *keeplen = n;
    return 0;
  }
  tlc_free(buf);
  return r;
}

int tlc_client_send(tlc_client_t *c, Tlcap__ClientMessage *m) {
  int r;
  if (m->request_id == 0) {
    if (++c->next_req == 0 || c->next_req > 0x7FFFFFFF)
      c->next_req = 1;
    m->request_id = c->next_req;
  }
  r = pack_send(c, &m->base, NULL, NULL);
  return r < 0 ? r : (int)m->request_id;
}

/* Reads what is available (waiting up to timeout) and tries to decode one message. */
static int recv_one(tlc_client_t *c, int timeout_ms, Tlcap__ServerMessage **out) {
  int64_t deadline = timeout_ms >= 0 ? mono_ms() + timeout_ms : -1;
  for (;;) {
    while (c->roff < c->rlen) {
      const uint8_t *frame;
      size_t used, flen;
      int r =
          tlc_frame_dec_feed(&c->dec, c->rbuf + c->roff, c->rlen - c->roff, &used, &frame, &flen);
      if (r < 0)
        return r;
      c->roff += used;
      if (r == 1) {
        *out = tlcap__server_message__unpack(&tlc_pb_allocator, flen, frame);
        return *out != NULL ? 1 : TLC_EFRAME;
      }
    }
    c->roff = c->rlen = 0;
    if (c->fd < 0)
      return -ENOTCONN;
    {
      short ev;
      ssize_t n = io_recv(c, c->rbuf, RBUF, &ev);
      if (n > 0) {
        c->rlen = (size_t)n;
        continue;
      }
      if (n == 0)
        return TLC_EIO; /* the daemon closed the connection */
      if (errno == EINTR)
        continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        return -errno;
      {
        struct pollfd pf = { c->fd, ev, 0 };
        int pr = poll(&pf, 1, left_ms(deadline));
        if (pr == 0)
          return 0;
        if (pr < 0 && errno != EINTR)
          return -errno;
      }
    }
  }
}

static void disconnect(tlc_client_t *c);

static void tell(tlc_client_t *c, tlc_client_event_t *ev) {
  if (c->o.event_cb != NULL)
    c->o.event_cb(c->o.event_ud, ev);
}

/* The link is gone: close it, remember when and which daemon instance it was. */
static void lose(tlc_client_t *c, const char *reason) {
  tlc_client_event_t ev;
  const Tlcap__Welcome *w = tlc_client_welcome(c);
  c->old_iid = w != NULL ? w->instance_id : 0;
  disconnect(c);
  c->lost = 1;
  c->lost_at = mono_ms();
  c->next_try = c->lost_at; /* the first attempt at once */
  c->attempts = 0;
  memset(&ev, 0, sizeof(ev));
  ev.kind = TLC_CLIENT_EV_LOST;
  ev.reason = reason;
  ev.old_instance_id = c->old_iid;
  tell(c, &ev);
}

/* Attempts to reconnect when the backoff allows, waiting for it at most until `deadline`
 * (-1: as long as it takes). Returns 1 when back, 0 at the deadline, or an error no attempt
 * can cure. */
static int try_reconnect(tlc_client_t *c, int64_t deadline) {
  for (;;) {
    tlc_client_event_t ev;
    int64_t now = mono_ms();
    int r;
    if (now < c->next_try) {
      int64_t until = deadline >= 0 && deadline < c->next_try ? deadline : c->next_try;
      struct timespec ts;
      if (until > now) {
        /* the backoff itself, not a synchronisation */
        ts.tv_sec = (time_t)((until - now) / 1000);
        ts.tv_nsec = (long)((until - now) % 1000) * 1000000L;
        nanosleep(&ts, NULL);
      }
      if (mono_ms() < c->next_try)
        return 0;
    }
    c->attempts++;
    r = tlc_client_reconnect(c, c->last_err, sizeof(c->last_err));
    memset(&ev, 0, sizeof(ev));
    ev.attempts = c->attempts;
    ev.old_instance_id = c->old_iid;
    if (r == 0) {
      const Tlcap__Welcome *w = tlc_client_welcome(c);
      c->lost = 0;
      c->last_err[0] = 0;
      ev.kind = TLC_CLIENT_EV_RECONNECTED;
      ev.down_ms = (uint64_t)(mono_ms() - c->lost_at);
      ev.instance_id = w != NULL ? w->instance_id : 0;
      ev.restarted = ev.instance_id != c->old_iid;
      tell(c, &ev);
      return 1;
    }
    if (r == TLC_EINVAL || r == TLC_ENOMEM)
      return r; /* refused token, certificate, bad address, version: not cured by waiting */
    {
      uint64_t b = c->o.backoff_min_ms;
      unsigned k;
      for (k = 1; k < c->attempts && b < c->o.backoff_max_ms; k++)
        b *= 2;
      if (b > c->o.backoff_max_ms)
        b = c->o.backoff_max_ms;
      b += (uint64_t)rand() % (b / 4 + 1); /* spread the clients of one restart */
      c->next_try = mono_ms() + (int64_t)b;
      ev.kind = TLC_CLIENT_EV_RETRY;
      ev.reason = c->last_err;
      ev.backoff_ms = b;
      tell(c, &ev);
    }
    if (deadline >= 0 && mono_ms() >= deadline)
      return 0;
  }
}

int tlc_client_recv(tlc_client_t *c, int timeout_ms, Tlcap__ServerMessage **out) {
  int64_t deadline = timeout_ms >= 0 ? mono_ms() + timeout_ms : -1;
  *out = NULL;
  for (;;) {
    int r;
    if (!STAILQ_EMPTY(&c->q)) {
      qnode_t *q = STAILQ_FIRST(&c->q);
      STAILQ_REMOVE_HEAD(&c->q, link);
      c->nq--;
      *out = q->m;
      tlc_free(q);
      return 1;
    }
    if (c->lost) {
      r = try_reconnect(c, deadline);
      if (r <= 0)
        return r;
      continue;
    }
    r = recv_one(c, left_ms(deadline), out);
    if (!c->o.reconnect)
      return r;
    if (r == 1 && (*out)->msg_case == TLCAP__SERVER_MESSAGE__MSG_ERROR && (*out)->error->fatal &&
        (*out)->error->code == TLCAP__ERROR_CODE__ERR_SHUTDOWN) {
      tlc_client_msg_free(*out);
      *out = NULL;
      lose(c, "the daemon is stopping");
      continue;
    }
    if (r == TLC_EIO || r == -ECONNRESET || r == -EPIPE || r == -ENOTCONN || r == -ETIMEDOUT ||
        r == -ECONNABORTED || r == -EHOSTUNREACH || r == -ENETUNREACH) {
      lose(c, r == TLC_EIO ? "closed by the daemon" : tlc_strerror(r));
      continue;
    }
    return r;
  }
}

const char *tlc_client_last_error(const tlc_client_t *c) {
  return c->last_err;
}

void tlc_client_msg_free(Tlcap__ServerMessage *m) {
  if (m != NULL)
    tlcap__server_message__free_unpacked(m, &tlc_pb_allocator);
}

char *tlc_client_error_text(const Tlcap__Error *e, char *buf, size_t len) {
  snprintf(buf, len, "%s (%s)", e->message != NULL && e->message[0] ? e->message : "error",
           tlc_pb_error_name(e->code));
  return buf;
}

int tlc_client_request(tlc_client_t *c, Tlcap__ClientMessage *req, Tlcap__ServerMessage **reply,
                       char *err, size_t errlen) {
  int64_t deadline = mono_ms() + c->o.timeout_ms;
  int id = tlc_client_send(c, req), r;
  *reply = NULL;
  if (id < 0) {
    set_err(err, errlen, "%s: send: %s", c->addr, tlc_strerror(id));
    return id;
  }
  for (;;) {
    Tlcap__ServerMessage *m;
    r = recv_one(c, left_ms(deadline), &m);
    if (r == 0) {
      set_err(err, errlen, "%s: no reply within %d ms", c->addr, c->o.timeout_ms);
      return -ETIMEDOUT;
    }
    if (r < 0) {
      set_err(err, errlen, "%s: %s", c->addr,
              r == TLC_EIO ? "the daemon closed the connection" : tlc_strerror(r));
      return r;
    }
    if (m->request_id == (uint32_t)id ||
        (m->msg_case == TLCAP__SERVER_MESSAGE__MSG_ERROR && m->error->fatal)) {
      *reply = m;
      return 1;
    }
    if (c->nq >= c->o.max_queued) {
      tlc_client_msg_free(m); /* bounded: the oldest unsolicited messages are kept */
    } else {
      qnode_t *q = tlc_malloc(sizeof(*q));
      if (q == NULL) {
        tlc_client_msg_free(m);
        continue;
      }
      q->m = m;
      STAILQ_INSERT_TAIL(&c->q, q, link);
      c->nq++;
    }
  }
}

static void disconnect(tlc_client_t *c) {
  if (c->ssl != NULL) {
    SSL_free(c->ssl); /* no close_notify: the link is being dropped anyway */
    c->ssl = NULL;
  }
  if (c->fd >= 0)
    close(c->fd);
  c->fd = -1;
  tlc_frame_dec_fini(&c->dec);
  tlc_frame_dec_init(&c->dec, c->o.max_message);
  c->rlen = c->roff = 0;
  tlc_client_msg_free(c->welcome);
  c->welcome = NULL;
}

static int hello(tlc_client_t *c, char *err, size_t errlen) {
  Tlcap__ClientMessage cm = TLCAP__CLIENT_MESSAGE__INIT;
  Tlcap__Hello h = TLCAP__HELLO__INIT;
  Tlcap__ServerMessage *m = NULL;
  int r;
  cm.msg_case = TLCAP__CLIENT_MESSAGE__MSG_HELLO;
  cm.hello = &h;
  h.protocol_version = TLC_PROTO_VERSION;
  h.min_protocol_version = TLC_PROTO_MIN_VERSION;
  h.client_name = c->name;
  if (c->token != NULL) {
    h.token.data = (uint8_t *)c->token;
    h.token.len = strlen(c->token);
  }
  r = tlc_client_request(c, &cm, &m, err, errlen);
  if (r < 0)
    return r;
  if (m->msg_case == TLCAP__SERVER_MESSAGE__MSG_ERROR) {
    char t[300];
    int code = m->error->code;
    set_err(err, errlen, "%s: %s", c->addr, tlc_client_error_text(m->error, t, sizeof(t)));
    tlc_client_msg_free(m);
    /* A refused token or version is final; a daemon that is stopping or full may take us on
     * the next attempt. */
    return code == TLCAP__ERROR_CODE__ERR_SHUTDOWN ||
                   code == TLCAP__ERROR_CODE__ERR_TOO_MANY_SUBSCRIBERS
               ? TLC_EIO
               : TLC_EINVAL;
  }
  if (m->msg_case != TLCAP__SERVER_MESSAGE__MSG_WELCOME) {
    set_err(err, errlen, "%s: unexpected reply to Hello", c->addr);
    tlc_client_msg_free(m);
    return TLC_EFRAME;
  }
  c->welcome = m;
  return 0;
}

int tlc_client_reconnect(tlc_client_t *c, char *err, size_t errlen) {
  saved_sub_t *s;
  int r;
  disconnect(c);
  if ((r = tlc_client_dial(c->addr, c->o.timeout_ms, NULL, &c->fd, err, errlen)) < 0)
    return r;
  if (c->tls && (r = tls_connect(c, err, errlen)) < 0) {
    disconnect(c);
    return r;
  }
  if ((r = hello(c, err, errlen)) < 0) {
    disconnect(c);
    return r;
  }
  SLIST_FOREACH(s, &c->subs, link)
  if ((r = write_all(c, s->data, s->len, c->o.timeout_ms)) < 0) {
    set_err(err, errlen, "%s: resubscribe: %s", c->addr, tlc_strerror(r));
    disconnect(c);
    return r;
  }
  return 0;
}

int tlc_client_connect(const char *addr, const tlc_client_opts_t *o, tlc_client_t **out, char *err,
                       size_t errlen) {
  tlc_client_t *c;
  int r;
  *out = NULL;
  c = tlc_calloc(1, sizeof(*c));
  if (c == NULL)
    return TLC_ENOMEM;
  c->fd = -1;
  STAILQ_INIT(&c->q);
  SLIST_INIT(&c->subs);
  if (o != NULL)
    c->o = *o;
  if (c->o.timeout_ms <= 0)
    c->o.timeout_ms = 5000;
  if (c->o.max_message == 0)
    c->o.max_message = 64u << 20;
  if (c->o.max_queued == 0)
    c->o.max_queued = 4096;
  if (c->o.backoff_min_ms == 0)
    c->o.backoff_min_ms = 100;
  if (c->o.backoff_max_ms < c->o.backoff_min_ms)
    c->o.backoff_max_ms = c->o.backoff_min_ms > 5000 ? c->o.backoff_min_ms : 5000;
  c->tls = strncmp(addr, "tls://", 6) == 0;
  if (c->o.ca_file != NULL &&
      (c->ca_file = tlc_strndup(c->o.ca_file, strlen(c->o.ca_file))) == NULL) {
    tlc_free(c);
    return TLC_ENOMEM;
  }
  c->o.ca_file = NULL;
  c->addr = tlc_strndup(addr, strlen(addr));
  c->name = tlc_strndup(c->o.name != NULL ? c->o.name : "tlcap-client",
                        strlen(c->o.name != NULL ? c->o.name : "tlcap-client"));
  if (c->o.token != NULL)
    c->token = tlc_strndup(c->o.token, strlen(c->o.token));
  c->rbuf = tlc_malloc(RBUF);
  c->o.name = c->o.token = NULL;
  tlc_frame_dec_init(&c->dec, c->o.max_message);
  if (c->addr == NULL || c->name == NULL || c->rbuf == NULL ||
      (o != NULL && o->token != NULL && c->token == NULL)) {
    tlc_client_free(c);
    return TLC_ENOMEM;
  }
  if ((r = tlc_client_reconnect(c, err, errlen)) < 0) {
    tlc_client_free(c);
    return r;
  }
  *out = c;
  return 0;
}

void tlc_client_free(tlc_client_t *c) {
  if (c == NULL)
    return;
  disconnect(c);
  tlc_frame_dec_fini(&c->dec);
  while (!STAILQ_EMPTY(&c->q)) {
    qnode_t *q = STAILQ_FIRST(&c->q);
    STAILQ_REMOVE_HEAD(&c->q, link);
    tlc_client_msg_free(q->m);
    tlc_free(q);
  }
  while (!SLIST_EMPTY(&c->subs)) {
    saved_sub_t *s = SLIST_FIRST(&c->subs);
    SLIST_REMOVE_HEAD(&c->subs, link);
    tlc_free(s);
  }
  SSL_CTX_free(c->ctx);
  tlc_free(c->ca_file);
  tlc_free(c->rbuf);
  tlc_free(c->addr);
  tlc_free(c->name);
  tlc_free(c->token);
  tlc_free(c);
}

int tlc_client_fd(const tlc_client_t *c) {
  return c->fd;
}

const char *tlc_client_addr(const tlc_client_t *c) {
  return c->addr;
}

const Tlcap__Welcome *tlc_client_welcome(const tlc_client_t *c) {
  return c->welcome != NULL ? c->welcome->welcome : NULL;
}

int tlc_client_subscribe(tlc_client_t *c, Tlcap__Subscribe *s) {
  Tlcap__ClientMessage cm = TLCAP__CLIENT_MESSAGE__INIT;
  saved_sub_t *sv;
  size_t payload, n;
  int r;
  if (s->subscription_id == 0)
    s->subscription_id = ++c->next_sub;
  cm.msg_case = TLCAP__CLIENT_MESSAGE__MSG_SUBSCRIBE;
  cm.subscribe = s;
  if (++c->next_req == 0 || c->next_req > 0x7FFFFFFF)
    c->next_req = 1;
  cm.request_id = c->next_req;
  n = tlc_pb_frame_size(&cm.base, &payload);
  sv = tlc_malloc(sizeof(*sv) + n);
  if (sv == NULL)
    return TLC_ENOMEM;
  sv->id = s->subscription_id;
  sv->len = tlc_pb_frame_pack(&cm.base, payload, sv->data);
  r = write_all(c, sv->data, sv->len, c->o.timeout_ms);
  if (r < 0) {
    tlc_free(sv);
    return r;
  }
  SLIST_INSERT_HEAD(&c->subs, sv, link);
  return (int)s->subscription_id;
}
