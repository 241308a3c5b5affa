/* tcp.c - the TCP listen source kind: listeners, their accept path, socket activation.
 *
 * Accept path: a connection beyond max_connections (or during shutdown) is accepted and closed
 * at once (counted: refused promptly, never left in the backlog). fd exhaustion: libuv's
 * reserve-fd trick accepts and closes what it cannot serve; if accept still fails with
 * EMFILE/ENFILE, the listener is paused for a second - its uv handle is closed while a
 * duplicate of the listening socket (made at start, so it exists when fds are short) keeps the
 * port bound and the backlog queueing - and then resumed from that duplicate. No busy loop.
 * An accepted connection is handed to conn.c (tlc__conn_begin), which reads and decodes it; it
 * belongs to its target from then on, not to the listener.
 *
 * Reload: a listener that keeps its name keeps its socket (an address change is refused by
 * check_reload: restart required); its format and per-target settings apply to connections
 * accepted from then on. An inherited socket (socket activation) stays for the daemon's life.
 */
#include "ingest/sources.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "base/sdnotify.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PAUSE_MS 1000

typedef struct tlc_listener {
  tlc_source_t s;     /* first: d, and cfg (name, format, address as started) */
  uv_tcp_t *h;        /* NULL while paused */
  uv_timer_t *resume; /* while paused */
  int spare_fd;       /* dup of the listening socket, -1 if none */
  int inherited;
  char bound[TLC_PEER_MAX];
} tlc_listener_t;

static void free_cb(uv_handle_t *h) {
  tlc_free(h);
}

int tlc_listen_take_fd(tlc_ingest_t *d, const char *src_name, tlc_format_t format, int fd) {
  tlc_conn_t *c = tlc__conn_new(d, src_name, format);
  int r;
  if (c == NULL)
    return TLC_ENOMEM;
  r = uv_tcp_open(&c->h, fd);
  if (r != 0) {
    tlc__conn_discard(c, NULL, 0); /* the handle holds no fd: `fd` stays the caller's */
    return r;
  }
  d->st.accepted++;
  c->accepted = 1;
  tlc__conn_begin(c, NULL);
  return 0;
}

/* ---- listeners ---- */

static void on_connection(uv_stream_t *s, int status);

static void listener_pause(tlc_listener_t *l);

static void resume_cb(uv_timer_t *t) {
  tlc_listener_t *l = t->data;
  tlc_ingest_t *d = l->s.d;
  uv_tcp_t *h;
  int fd, r;
  if (l->h != NULL || l->spare_fd < 0)
    return;
  fd = dup(l->spare_fd); /* keep a spare for the next pause */
  if (fd < 0) {
    uv_timer_start(t, resume_cb, PAUSE_MS, 0);
    return;
  }
  h = tlc_malloc(sizeof(*h));
  if (h == NULL || uv_tcp_init(d->loop, h) != 0) {
    tlc_free(h);
    close(fd);
    uv_timer_start(t, resume_cb, PAUSE_MS, 0);
    return;
  }
  h->data = l;
  r = uv_tcp_open(h, fd);
  if (r == 0)
    r = uv_listen((uv_stream_t *)h, 511, on_connection);
  if (r != 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_TCP, "listener %s (%s): resume failed: %s", l->s.cfg.name,
            l->bound, uv_strerror(r));
    uv_close((uv_handle_t *)h, free_cb);
    uv_timer_start(t, resume_cb, PAUSE_MS, 0);
    return;
  }
  l->h = h;
  tlc_log(TLC_LOG_NOTICE, TLC_LOGC_TCP, "listener %s (%s): accepting again", l->s.cfg.name,
          l->bound);
}

static void listener_pause(tlc_listener_t *l) {
  if (l->h == NULL || l->spare_fd < 0 || l->resume == NULL)
    return; /* without a spare, libuv's reserve-fd trick is all there is */
  l->s.d->st.accept_pauses++;
  tlc_log(TLC_LOG_WARN, TLC_LOGC_TCP,
          "listener %s (%s): out of file descriptors; not accepting for %d ms", l->s.cfg.name,
          l->bound, PAUSE_MS);
  uv_close((uv_handle_t *)l->h, free_cb);
  l->h = NULL;
  uv_timer_start(l->resume, resume_cb, PAUSE_MS, 0);
}

static void on_connection(uv_stream_t *s, int status) {
  tlc_listener_t *l = s->data;
  tlc_ingest_t *d = l->s.d;
  tlc_conn_t *c;
  int r;
  if (status < 0) {
    d->st.accept_errors++;
    tlc_log(TLC_LOG_WARN, TLC_LOGC_TCP, "listener %s (%s): accept: %s", l->s.cfg.name, l->bound,
            uv_strerror(status));
    if (status == UV_EMFILE || status == UV_ENFILE || status == UV_ENOBUFS || status == UV_ENOMEM)
      listener_pause(l);
    return;
  }
  c = tlc__conn_new(d, l->s.cfg.name, l->s.cfg.format);
  if (c == NULL) {
    /* Not accepting leaves the connection queued and libuv stops polling this listener; pause
     * so that it is retried instead of stuck. */
    listener_pause(l);
    return;
  }
  r = uv_accept(s, (uv_stream_t *)&c->h);
  if (r != 0) {
    d->st.accept_errors++;
    tlc__conn_discard(c, NULL, 0);
    return;
  }
  d->st.accepted++;
  c->accepted = 1;
  if (l->s.cfg.allow[0] != '\0') {
    /* the listener's `allow` list: another peer is reset at once, before a byte of
     * it is read or a target named after it */
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    memset(&ss, 0, sizeof(ss));
    if (uv_tcp_getpeername(&c->h, (struct sockaddr *)&ss, &len) != 0 ||
        !tlc_config_allow_match(l->s.cfg.allow, &ss)) {
      char ip[64] = "?", full[TLC_PEER_MAX] = "?";
      tlc__addr_text((struct sockaddr *)&ss, ip, sizeof(ip), full, sizeof(full));
      d->st.refused_allow++;
      tlc_log(TLC_LOG_WARN, TLC_LOGC_TCP, "listener %s (%s): %s not in allow; refused",
              l->s.cfg.name, l->bound, full);
      tlc__conn_discard(c, NULL, 1);
      return;
    }
  }
  if (d->stopping || d->nconns >= d->max_conns) {
    d->st.refused_limit++;
    tlc_log(TLC_LOG_WARN, TLC_LOGC_TCP,
            "listener %s (%s): max_connections (%zu) reached; refusing new connections",
            l->s.cfg.name, l->bound, d->max_conns);
    tlc__conn_discard(c, d->stopping ? NULL : TLC_CONN_REFUSE_PREFIX "max_connections reached\n",
                      1);
    return;
  }
  tlc__conn_begin(c, NULL);
  if (!c->closing)
    TLC_LOGD(TLC_LOGC_TCP, "listener %s: connection from %s", l->s.cfg.name, c->peer);
}

static void listener_free_cb(uv_handle_t *h) {
  tlc_listener_t *l = h->data;
  tlc_free(h);
  if (l->spare_fd >= 0)
    close(l->spare_fd);
  tlc_free(l);
}

/* Closes a listener; memory goes in the resume timer's close callback. */
static void listener_close(tlc_listener_t *l) {
  if (l->h != NULL) {
    uv_close((uv_handle_t *)l->h, free_cb);
    l->h = NULL;
  }
  /* The spare shares the listening socket: close it now, so that the port is free at once
   * (a reload may bind the same address under another name). */
  if (l->spare_fd >= 0) {
    close(l->spare_fd);
    l->spare_fd = -1;
  }
  uv_close((uv_handle_t *)l->resume, listener_free_cb);
}

static int resolve_bind(const char *host, uint16_t port, struct sockaddr_storage *ss) {
  const char *h = strcmp(host, "localhost") == 0 ? "127.0.0.1" : host;
  if (uv_ip4_addr(h, port, (struct sockaddr_in *)ss) == 0)
    return 0;
  if (uv_ip6_addr(h, port, (struct sockaddr_in6 *)ss) == 0)
    return 0;
  return UV_EINVAL;
}

/* Creates a listener over `fd` (inherited, >= 0) or binding cfg's address (fd < 0). */
static int listener_start(tlc_ingest_t *d, const tlc_cfg_source_t *cfg, int fd,
                          tlc_listener_t **out) {
  tlc_listener_t *l = tlc_calloc(1, sizeof(*l));
  struct sockaddr_storage ss;
  int len = sizeof(ss);
  char ip[64];
  uv_os_fd_t lfd;
  int r;
  if (l == NULL)
    return TLC_ENOMEM;
  l->s.ops = &tlc_listen_source_ops;
  l->s.d = d;
  l->s.cfg = *cfg;
  l->spare_fd = -1;
  l->inherited = fd >= 0;
  l->h = tlc_malloc(sizeof(*l->h));
  l->resume = tlc_malloc(sizeof(*l->resume));
  if (l->h == NULL || l->resume == NULL) {
    tlc_free(l->h);
    tlc_free(l->resume);
    tlc_free(l);
    return TLC_ENOMEM;
  }
  uv_timer_init(d->loop, l->resume);
  l->resume->data = l;
  uv_tcp_init(d->loop, l->h);
  l->h->data = l;
  if (fd >= 0) {
    r = uv_tcp_open(l->h, fd);
  } else {
    r = resolve_bind(cfg->host, cfg->port, &ss);
    if (r != 0) {
      tlc_log(TLC_LOG_ERR, TLC_LOGC_TCP,
              "listener %s: address \"%s\" is not an IP address (names are not resolved for "
              "listening)",
              cfg->name, cfg->host);
      goto fail;
    }
    r = uv_tcp_bind(l->h, (const struct sockaddr *)&ss, 0);
  }
  if (r == 0)
    r = uv_listen((uv_stream_t *)l->h, 511, on_connection);
  if (r != 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_TCP, "listener %s: cannot listen on %s:%u: %s", cfg->name,
            cfg->host, cfg->port, uv_strerror(r));
    goto fail;
  }
  if (uv_tcp_getsockname(l->h, (struct sockaddr *)&ss, &len) == 0)
    tlc__addr_text((struct sockaddr *)&ss, ip, sizeof(ip), l->bound, sizeof(l->bound));
  if (uv_fileno((uv_handle_t *)l->h, &lfd) == 0) {
    l->spare_fd = fcntl(lfd, F_DUPFD_CLOEXEC, 0);
  }
  tlc_log(TLC_LOG_INFO, TLC_LOGC_TCP, "listener %s: %s on %s%s", cfg->name,
          tlc_format_name(cfg->format), l->bound, l->inherited ? " (socket activation)" : "");
  *out = l;
  return 0;
fail:
  listener_close(l);
  return r;
}

static int same_address(const tlc_cfg_source_t *a, const tlc_cfg_source_t *b) {
  return a->port == b->port && strcmp(a->host, b->host) == 0;
}

static void cfg_address(const tlc_cfg_source_t *s, char *buf, size_t len) {
  snprintf(buf, len, strchr(s->host, ':') != NULL ? "[%s]:%u" : "%s:%u", s->host, s->port);
}

/* A listener that would move (same name, another address) needs a restart: moving it means a
 * window without it and a bind that may fail. Inherited listeners are not checked (their
 * address is the socket unit's). */
static int listen_check_reload(const tlc_ingest_t *d, const tlc_config_t *nc, char *why,
                               size_t whylen) {
  struct tlc_source_list *list = tlc_sources_running(d, &tlc_listen_source_ops);
  const tlc_source_t *src;
  size_t n = whylen > 0 ? strnlen(why, whylen) : 0;
  int r = 0;
  if (list == NULL)
    return 0;
  LIST_FOREACH(src, list, link) {
    const tlc_listener_t *l = (const tlc_listener_t *)src;
    const tlc_cfg_source_t *s = tlc_config_find_source(nc, TLC_SRC_LISTEN, l->s.cfg.name);
    char from[TLC_CFG_HOST + 8], to[TLC_CFG_HOST + 8];
    int w;
    /* An inherited socket's address is the socket unit's: the file's does not apply. */
    if (s == NULL || l->inherited || same_address(s, &l->s.cfg))
      continue;
    cfg_address(&l->s.cfg, from, sizeof(from));
    cfg_address(s, to, sizeof(to));
    w = snprintf(why + n, whylen > n ? whylen - n : 0, "%slistener %s: address %s -> %s",
                 n > 0 ? "; " : "", l->s.cfg.name, from, to);
    if (w > 0)
      n = n + (size_t)w < whylen ? n + (size_t)w : whylen;
    r = TLC_EINVAL;
  }
  return r;
}

size_t tlc_listen_count(const tlc_ingest_t *d) {
  struct tlc_source_list *list = tlc_sources_running(d, &tlc_listen_source_ops);
  const tlc_source_t *s;
  size_t n = 0;
  if (list != NULL) {
    LIST_FOREACH(s, list, link) {
      n++;
    }
  }
  return n;
}

/* The running listener named `name`, or NULL. */
static tlc_listener_t *find(tlc_ingest_t *d, const char *name) {
  struct tlc_source_list *list = tlc_sources_running(d, &tlc_listen_source_ops);
  tlc_source_t *s;
  if (list == NULL)
    return NULL;
  LIST_FOREACH(s, list, link) {
    if (strcmp(s->cfg.name, name) == 0)
      return (tlc_listener_t *)s;
  }
  return NULL;
}

static const char *fd_name_format(const char *name, tlc_format_t *f) {
  const char *dash = strrchr(name, '-');
  *f = tlc_format_parse(name);
  if (*f == TLC_FMT_NONE && dash != NULL)
    *f = tlc_format_parse(dash + 1);
  return name;
}

int tlc_listen_adopt(tlc_ingest_t *d) {
  tlc_sd_fd_t *fds;
  int n = tlc_sd_listen_fds(&fds);
  if (n < 0)
    return n;
  for (int i = 0; i < n; i++) {
    tlc_sd_fd_t *f = &fds[i];
    char why[160];
    const tlc_cfg_source_t *src = NULL;
    tlc_cfg_source_t tmp;
    tlc_listener_t *l;
    tlc_format_t fmt;
    int r;
    if (f->taken)
      continue; /* another server's (pubsub took "serve" and "subscribe") */
    r = tlc_sd_check_stream_listener(f->fd, 0, why, sizeof(why));
    if (r != 0) {
      tlc_log(TLC_LOG_ERR, TLC_LOGC_TCP, "socket activation: fd %d (\"%s\"): %s", f->fd, f->name,
              why);
      return r;
    }
    src = tlc_config_find_source(&d->cfg, TLC_SRC_LISTEN, f->name);
    if (src == NULL) {
      /* Not a listener's name (or unnamed: "unknown", or the socket unit's name): match a
       * configured listener by its bound address. */
      struct sockaddr_storage ss;
      socklen_t sl = sizeof(ss);
      char ip[64], full[TLC_PEER_MAX];
      if (getsockname(f->fd, (struct sockaddr *)&ss, &sl) == 0) {
        tlc__addr_text((struct sockaddr *)&ss, ip, sizeof(ip), full, sizeof(full));
        for (size_t j = 0; j < d->cfg.nsrc && src == NULL; j++) {
          const tlc_cfg_source_t *s = &d->cfg.src[j];
          char want[TLC_PEER_MAX];
          snprintf(want, sizeof(want), strchr(s->host, ':') ? "[%s]:%u" : "%s:%u", s->host,
                   s->port);
          if (s->kind == TLC_SRC_LISTEN && strcmp(want, full) == 0)
            src = s;
        }
      }
    }
    if (src == NULL) {
      fd_name_format(f->name, &fmt);
      if (fmt == TLC_FMT_NONE || tlc_target_name_check(f->name, d->cfg.max_name) != 0) {
        tlc_log(TLC_LOG_ERR, TLC_LOGC_TCP,
                "socket activation: fd %d named \"%s\" matches no [listen NAME] and names no "
                "format (use FileDescriptorName=NAME of a configured listener, or bin10, "
                "bin11, evlog, or NAME-FORMAT)",
                f->fd, f->name);
        return UV_EINVAL;
      }
      memset(&tmp, 0, sizeof(tmp));
      tmp.kind = TLC_SRC_LISTEN;
      snprintf(tmp.name, sizeof(tmp.name), "%s", f->name);
      tmp.format = fmt;
      snprintf(tmp.origin, sizeof(tmp.origin), "socket activation");
      src = &tmp;
    }
    if (find(d, src->name) != NULL) {
      tlc_log(TLC_LOG_ERR, TLC_LOGC_TCP, "socket activation: two fds for listener %s", src->name);
      return UV_EINVAL;
    }
    r = listener_start(d, src, f->fd, &l);
    if (r != 0)
      return r;
    f->taken = 1;
    tlc_sources_link(&l->s);
  }
  return 0;
}

/* ---- the source kind ---- */

static int listen_start(tlc_ingest_t *d, const tlc_cfg_source_t *cfg, tlc_source_t **out) {
  tlc_listener_t *l;
  int r = listener_start(d, cfg, -1, &l);
  if (r == 0)
    *out = &l->s;
  return r;
}

static void listen_stop(tlc_source_t *s, tlc_source_why_t why) {
  tlc_listener_t *l = (tlc_listener_t *)s;
  (void)why;
  tlc_log(TLC_LOG_INFO, TLC_LOGC_TCP, "listener %s (%s): stopped", l->s.cfg.name, l->bound);
  listener_close(l);
}

/* A listener that keeps its name keeps its socket: a reload that would move it was refused
 * before (listen_check_reload: restart required), so only its format and per-target settings
 * change, for connections accepted from now on. An inherited socket belongs to the socket
 * unit: it stays for the daemon's life (a reload cannot re-create it); its settings follow a
 * [listen NAME] of the same name. */
static int listen_same_config(const tlc_source_t *s, const tlc_cfg_source_t *cfg) {
  return cfg != NULL || ((const tlc_listener_t *)s)->inherited;
}

static void listen_apply(tlc_source_t *s, const tlc_cfg_source_t *cfg) {
  tlc_listener_t *l = (tlc_listener_t *)s;
  tlc_cfg_source_t c;
  if (cfg == NULL)
    return;
  c = *cfg;
  snprintf(c.host, sizeof(c.host), "%s", l->s.cfg.host);
  c.port = l->s.cfg.port;
  if (c.format != l->s.cfg.format)
    tlc_log(TLC_LOG_INFO, TLC_LOGC_TCP,
            "listener %s (%s): format %s for connections accepted from now on", c.name, l->bound,
            tlc_format_name(c.format));
  l->s.cfg = c;
}

const tlc_source_ops_t tlc_listen_source_ops = {
  .kind = TLC_SRC_LISTEN,
  .name = "listen",
  .start_errors_fatal = 1,
  .start = listen_start,
  .stop = listen_stop,
  .same_config = listen_same_config,
  .apply = listen_apply,
  .drain = tlc__conns_drain_close, /* accepted connections (and any other: idempotent) */
  .check_reload = listen_check_reload,
};
