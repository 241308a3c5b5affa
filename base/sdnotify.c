/* sdnotify.c - sd_notify datagrams, the health-gated watchdog, inherited sockets.
 *
 * The notify socket is opened once (SOCK_DGRAM|SOCK_CLOEXEC|SOCK_NONBLOCK) and every message
 * is one sendto with MSG_DONTWAIT|MSG_NOSIGNAL: it never blocks and never raises SIGPIPE. A
 * message that cannot be sent (reader's queue full, socket gone) is counted and forgotten; the
 * next STATUS supersedes it anyway. READY/STOPPING are sent at most a few times per run.
 *
 * Watchdog: a uv_timer at WATCHDOG_USEC/2. The loop-late test compares uv_now with the time
 * the ping was due: if the loop was blocked for more than a period the ping is withheld (the
 * stall already cost systemd one ping, so the unit will be restarted as it should).
 */
#include "base/sdnotify.h"

#include "base/err.h"
#include "base/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>

static struct {
  int fd; /* -1 not opened yet, -2 no NOTIFY_SOCKET */
  struct sockaddr_un addr;
  socklen_t addrlen;
  uint64_t dropped;
  uv_timer_t timer;
  int timer_on;
  uint64_t period_ms;
  uint64_t due;
  uint64_t sent, withheld;
  struct {
    tlc_sd_health_fn fn;
    void *ud;
  } health[TLC_SD_MAX_HEALTH];
  size_t nhealth;
  tlc_sd_fd_t fds[TLC_SD_MAX_FDS];
  int nfds;
  int fds_read;
} S = { .fd = -1 };

static int notify_open(void) {
  const char *p = getenv("NOTIFY_SOCKET");
  size_t n;
  if (S.fd != -1)
    return S.fd;
  if (p == NULL || *p == '\0' || (p[0] != '/' && p[0] != '@')) {
    S.fd = -2;
    return S.fd;
  }
  n = strlen(p);
  if (n >= sizeof(S.addr.sun_path)) {
    tlc_log(TLC_LOG_WARN, TLC_LOGC_NOTIFY, "NOTIFY_SOCKET path too long; not notifying");
    S.fd = -2;
    return S.fd;
  }
  memset(&S.addr, 0, sizeof(S.addr));
  S.addr.sun_family = AF_UNIX;
  memcpy(S.addr.sun_path, p, n);
  if (p[0] == '@')
    S.addr.sun_path[0] = '\0';
  S.addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (p[0] == '@' ? 0 : 1));
  S.fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (S.fd < 0) {
    tlc_log(TLC_LOG_WARN, TLC_LOGC_NOTIFY, "notify socket: %s", strerror(errno));
    S.fd = -2;
  }
  return S.fd;
}

int tlc_sd_notify(const char *msg) {
  int fd = notify_open();
  if (fd < 0)
    return 0;
  for (;;) {
    ssize_t r = sendto(fd, msg, strlen(msg), MSG_DONTWAIT | MSG_NOSIGNAL,
                       (const struct sockaddr *)&S.addr, S.addrlen);
    if (r >= 0)
      break;
    if (errno == EINTR)
      continue;
    S.dropped++;
    TLC_LOGD(TLC_LOGC_NOTIFY, "notify \"%.40s\" not sent: %s", msg, strerror(errno));
    return -errno;
  }
  TLC_LOGD(TLC_LOGC_NOTIFY, "notify: %.200s", msg);
  return 1;
}

uint64_t tlc_sd_dropped(void) {
  return S.dropped;
}

int tlc_sd_health_add(tlc_sd_health_fn fn, void *ud) {
  if (S.nhealth == TLC_SD_MAX_HEALTH)
    return TLC_ELIMIT;
  S.health[S.nhealth].fn = fn;
  S.health[S.nhealth].ud = ud;
  S.nhealth++;
  return 0;
}

void tlc_sd_health_remove(void *ud) {
  size_t j = 0;
  for (size_t i = 0; i < S.nhealth; i++)
    if (S.health[i].ud != ud)
      S.health[j++] = S.health[i];
  S.nhealth = j;
}

int tlc_sd_health_check(const char **why) {
  for (size_t i = 0; i < S.nhealth; i++) {
    *why = NULL;
    if (S.health[i].fn(S.health[i].ud, why) != 0) {
      if (*why == NULL)
        *why = "a stage is stalled";
      return 1;
    }
  }
  return 0;
}

static void watchdog_cb(uv_timer_t *t) {
  uint64_t now = uv_now(t->loop);
  const char *why = NULL;
  int ok = 1;
  if (now > S.due + S.period_ms) {
    ok = 0;
    why = "event loop was blocked";
  }
  for (size_t i = 0; ok && i < S.nhealth; i++)
    if (S.health[i].fn(S.health[i].ud, &why) != 0)
      ok = 0;
  S.due = now + S.period_ms;
  if (ok) {
    tlc_sd_notify("WATCHDOG=1");
    S.sent++;
  } else {
    S.withheld++;
    tlc_log(TLC_LOG_WARN, TLC_LOGC_NOTIFY, "watchdog ping withheld: %s",
            why != NULL ? why : "a stage is stalled");
  }
}

int tlc_sd_watchdog_start(uv_loop_t *loop) {
  uint64_t v = 0;
  int r = sd_watchdog_enabled(0, &v); /* WATCHDOG_USEC, and WATCHDOG_PID when set is ours */
  if (r < 0) {
    const char *us = getenv("WATCHDOG_USEC");
    tlc_log(TLC_LOG_WARN, TLC_LOGC_NOTIFY, "ignoring invalid WATCHDOG_USEC=%s",
            us != NULL ? us : "");
    return 0;
  }
  if (r == 0)
    return 0;
  S.period_ms = v / 2000;
  if (S.period_ms == 0)
    S.period_ms = 1;
  r = uv_timer_init(loop, &S.timer);
  if (r != 0)
    return r;
  S.timer_on = 1;
  S.due = uv_now(loop) + S.period_ms;
  r = uv_timer_start(&S.timer, watchdog_cb, S.period_ms, S.period_ms);
  if (r != 0)
    return r;
  tlc_log(TLC_LOG_INFO, TLC_LOGC_NOTIFY, "watchdog: pinging every %llu ms",
          (unsigned long long)S.period_ms);
  return 1;
}

void tlc_sd_watchdog_stop(void) {
  if (S.timer_on) {
    S.timer_on = 0;
    uv_close((uv_handle_t *)&S.timer, NULL);
  }
}

uint64_t tlc_sd_watchdog_sent(void) {
  return S.sent;
}

uint64_t tlc_sd_watchdog_withheld(void) {
  return S.withheld;
}

int tlc_sd_listen_fds(tlc_sd_fd_t **out) {
  char **names = NULL;
  int n;
  *out = S.fds;
  if (S.fds_read)
    return S.nfds;
  S.fds_read = 1;
  /* unsets LISTEN_* and marks the sockets FD_CLOEXEC: nothing spawned inherits them */
  n = sd_listen_fds_with_names(1, &names);
  if (n < 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_NOTIFY, "socket activation: %s", strerror(-n));
    return n;
  }
  for (int i = 0; i < n && i < TLC_SD_MAX_FDS; i++) {
    S.fds[i].fd = SD_LISTEN_FDS_START + i;
    snprintf(S.fds[i].name, sizeof(S.fds[i].name), "%s",
             names != NULL && names[i] != NULL ? names[i] : "unknown");
  }
  if (names != NULL) {
    for (int i = 0; i < n; i++)
      free(names[i]);
    free(names);
  }
  if (n > TLC_SD_MAX_FDS) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_NOTIFY, "socket activation: %d fds, at most %d supported", n,
            TLC_SD_MAX_FDS);
    return TLC_ELIMIT;
  }
  S.nfds = n;
  return n;
}

int tlc_sd_check_stream_listener(int fd, int want_unix, char *why, size_t whylen) {
  int type = 0, acc = 0;
  struct sockaddr_storage ss;
  socklen_t l = sizeof(type);
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) != 0) {
    snprintf(why, whylen, "fd %d is not a socket (%s)", fd, strerror(errno));
    return -errno;
  }
  if (type != SOCK_STREAM) {
    snprintf(why, whylen, "fd %d is a %s socket, a stream (TCP) socket is needed", fd,
             type == SOCK_DGRAM       ? "datagram"
             : type == SOCK_SEQPACKET ? "seqpacket"
                                      : "non-stream");
    return UV_EINVAL;
  }
  l = sizeof(acc);
  if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &l) != 0 || !acc) {
    snprintf(why, whylen, "fd %d is a stream socket that is not listening", fd);
    return UV_EINVAL;
  }
  l = sizeof(ss);
  if (getsockname(fd, (struct sockaddr *)&ss, &l) != 0) {
    snprintf(why, whylen, "fd %d: getsockname: %s", fd, strerror(errno));
    return -errno;
  }
  if (want_unix ? ss.ss_family != AF_UNIX : (ss.ss_family != AF_INET && ss.ss_family != AF_INET6)) {
    snprintf(why, whylen, "fd %d is a %s socket, an %s socket is needed", fd,
             ss.ss_family == AF_UNIX ? "AF_UNIX" : "non-IP",
             want_unix ? "AF_UNIX" : "AF_INET/AF_INET6");
    return UV_EINVAL;
  }
  return 0;
}
