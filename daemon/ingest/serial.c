/* serial.c - serial ports: a tty opened raw, watched with uv_poll_t, decoded in resync mode.
 *
 * Why not uv_tty_t: it reopens /dev/tty-style paths and applies its own modes (libuv#120). The
 * port is opened O_RDWR|O_NOCTTY|O_NONBLOCK|O_CLOEXEC, locked (flock LOCK_EX|LOCK_NB, then
 * TIOCEXCL) so that two programs never split one byte stream, and set raw with cfmakeraw (no
 * ICRNL, IXON, ISIG, OPOST, ECHO, ICANON): every byte value passes unchanged. Then baud, data
 * bits, parity, stop bits and flow control from the configuration; CLOCAL|CREAD. Input already
 * queued in the tty is kept (it is data), not flushed.
 *
 * Lossy link: the decoder runs in resync mode; bytes it skips are counted (bytes_skipped,
 * resyncs, records_invalid) and reported as TLC_TEV_RESYNC, never a reason to close.
 *
 * Unplug: read() returning 0 (pty master closed), EIO/ENXIO/ENODEV (USB adapter gone), or a
 * poll error/POLLHUP closes the fd at once, detaches the target (engine gap) and retries the
 * open with exponential backoff and jitter (backoff_min..backoff_max; no busy loop while the
 * device is absent). A replugged device - or a symlink re-pointed at a new one - is opened
 * again under the same target: statistics carry on and `reconnects` counts it.
 *
 * Fairness: at most READS_PER_EVENT reads of the shared buffer per poll callback.
 */
#include "ingest/sources.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#define READS_PER_EVENT 16
#define DRAIN_CAP       (16u << 20)

typedef struct tlc_serial {
  tlc_source_t src; /* first: d, cfg */
  tlc_target_t *target;
  int fd;
  uv_poll_t *poll;
  uv_timer_t *timer;
  uv_timer_t *idle; /* resync_idle after the last byte read: tlc_target_idle */
  int idle_closed;
  uint64_t backoff;
  uint64_t failures;
  int last_errno; /* of the last failed open, to log a change once */
  int stopping;
  int timer_closed;
  int polls_open; /* poll handles still closing */
} tlc_serial_t;

static void free_poll_cb(uv_handle_t *h) {
  tlc_serial_t *s = h->data;
  tlc_free(h);
  s->polls_open--;
  if (s->stopping && s->timer_closed && s->idle_closed && s->polls_open == 0)
    tlc_free(s);
}

/* The line was silent for resync_idle: the records held only for confirmation by later ones
 * are delivered now (SPEC 1: a burst's last records do not wait for the next burst). */
static void idle_cb(uv_timer_t *t) {
  tlc_serial_t *s = t->data;
  if (s->target != NULL && s->target->source == s)
    tlc_target_idle(s->target);
}

static speed_t baud_const(uint32_t b) {
  static const struct {
    uint32_t rate;
    speed_t sp;
  } t[] = {
    { 50, B50 },           { 75, B75 },           { 110, B110 },         { 134, B134 },
    { 150, B150 },         { 200, B200 },         { 300, B300 },         { 600, B600 },
    { 1200, B1200 },       { 1800, B1800 },       { 2400, B2400 },       { 4800, B4800 },
    { 9600, B9600 },       { 19200, B19200 },     { 38400, B38400 },     { 57600, B57600 },
    { 115200, B115200 },   { 230400, B230400 },
#ifdef B4000000
    { 460800, B460800 },   { 500000, B500000 },   { 576000, B576000 },   { 921600, B921600 },
    { 1000000, B1000000 }, { 1152000, B1152000 }, { 1500000, B1500000 }, { 2000000, B2000000 },
    { 2500000, B2500000 }, { 3000000, B3000000 }, { 3500000, B3500000 }, { 4000000, B4000000 },
#endif
  };
  for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
    if (t[i].rate == b)
      return t[i].sp;
  return B0;
}

/* Raw mode plus line settings. Returns 0 or -errno with why. */
static int configure(int fd, const tlc_cfg_source_t *c, char *why, size_t wl) {
  struct termios tio;
  speed_t sp = baud_const(c->baud);
  if (tcgetattr(fd, &tio) != 0) {
    int e = errno;
    snprintf(why, wl, "not a terminal (tcgetattr: %s)", strerror(e));
    return -e;
  }
  cfmakeraw(&tio); /* clears ICRNL, IXON, ISIG, OPOST, ICANON, ECHO, ... */
  tio.c_iflag &= ~(tcflag_t)(IXON | IXOFF | IXANY | ICRNL | INLCR | IGNCR | ISTRIP | INPCK);
  tio.c_oflag &= ~(tcflag_t)OPOST;
  tio.c_lflag &= ~(tcflag_t)(ISIG | ICANON | ECHO | IEXTEN);
  tio.c_cflag &= ~(tcflag_t)(CSIZE | PARENB | PARODD | CSTOPB | CRTSCTS);
  tio.c_cflag |= CLOCAL | CREAD;
  switch (c->data_bits) {
  case 5:
    tio.c_cflag |= CS5;
    break;
  case 6:
    tio.c_cflag |= CS6;
    break;
  case 7:
    tio.c_cflag |= CS7;
    break;
  default:
    tio.c_cflag |= CS8;
    break;
  }
  if (c->parity == TLC_PARITY_EVEN)
    tio.c_cflag |= PARENB;
  else if (c->parity == TLC_PARITY_ODD)
    tio.c_cflag |= PARENB | PARODD;
  if (c->stop_bits == 2)
    tio.c_cflag |= CSTOPB;
  if (c->flow == TLC_FLOW_RTSCTS)
    tio.c_cflag |= CRTSCTS;
  else if (c->flow == TLC_FLOW_XONXOFF)
    tio.c_iflag |= IXON | IXOFF; /* the user's choice: 0x11/0x13 are then not data */
  tio.c_cc[VMIN] = 1;
  tio.c_cc[VTIME] = 0;
  if (sp == B0 || cfsetispeed(&tio, sp) != 0 || cfsetospeed(&tio, sp) != 0) {
    snprintf(why, wl, "baud rate %u not supported", c->baud);
    return UV_EINVAL;
  }
  if (tcsetattr(fd, TCSANOW, &tio) != 0) {
    int e = errno;
    snprintf(why, wl, "tcsetattr: %s", strerror(e));
    return -e;
  }
  return 0;
}

static void try_open(tlc_serial_t *s);

static void timer_cb(uv_timer_t *t) {
  try_open(t->data);
}

static void schedule(tlc_serial_t *s) {
  uint64_t delay;
  if (s->stopping || s->src.d->stopping)
    return;
  delay = tlc__backoff_next(s->src.d, &s->backoff);
  uv_timer_start(s->timer, timer_cb, delay, 0);
}

static void port_close(tlc_serial_t *s, const char *reason) {
  if (s->poll != NULL) {
    uv_close((uv_handle_t *)s->poll, free_poll_cb); /* stops epoll at once */
    s->poll = NULL;
  }
  if (s->fd >= 0) {
    close(s->fd);
    s->fd = -1;
  }
  if (s->target != NULL && s->target->source == s)
    tlc_target_detach(s->target, reason);
}

static void unplug(tlc_serial_t *s, const char *reason) {
  s->src.d->st.serial_unplugs++;
  tlc_log(TLC_LOG_NOTICE, TLC_LOGC_SERIAL, "serial %s (%s): %s; reopening with backoff",
          s->src.cfg.name, s->src.cfg.device, reason);
  port_close(s, reason);
  s->backoff = 0;
  s->failures = 0;
  s->last_errno = 0;
  schedule(s);
}

/* Reads what is there (at most `cap` bytes in `max_reads` reads). Returns 0, or -1 after an
 * unplug. */
static int read_some(tlc_serial_t *s, int max_reads, size_t cap) {
  tlc_ingest_t *d = s->src.d;
  size_t total = 0;
  for (int i = 0; i < max_reads && total < cap; i++) {
    ssize_t r = read(s->fd, d->rbuf, d->rbuf_len);
    if (r > 0) {
      total += (size_t)r;
      s->backoff = 0;
      (void)tlc_target_feed(s->target, d->rbuf, (size_t)r); /* resync mode: never fails */
      if (d->cfg.resync_idle_ms > 0 && s->idle != NULL)
        uv_timer_start(s->idle, idle_cb, d->cfg.resync_idle_ms, 0); /* restarted by each read */
      continue;
    }
    if (r == 0) {
      unplug(s, "end of file (device closed)");
      return -1;
    }
    if (errno == EINTR)
      continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK)
      break;
    {
      char why[96];
      snprintf(why, sizeof(why), "read: %s", strerror(errno));
      unplug(s, why);
      return -1;
    }
  }
  return 0;
}

static void poll_cb(uv_poll_t *p, int status, int events) {
  tlc_serial_t *s = p->data;
  if (s->poll != p)
    return;
  if (status < 0) {
    char why[96];
    /* libuv reports a hang-up of the tty (the adapter unplugged, the pty's other end closed)
     * to a poll handle as UV_EBADF: say what it is rather than "bad file descriptor" */
    if (status == UV_EBADF)
      snprintf(why, sizeof(why), "device hung up or went away");
    else
      snprintf(why, sizeof(why), "poll: %s", uv_strerror(status));
    unplug(s, why);
    return;
  }
  if (read_some(s, READS_PER_EVENT, (size_t)-1) != 0)
    return;
  if ((events & UV_DISCONNECT) && !(events & UV_READABLE))
    unplug(s, "hang-up");
}

static void try_open(tlc_serial_t *s) {
  tlc_ingest_t *d = s->src.d;
  char why[160] = "";
  int fd, r;
  if (s->stopping || d->stopping || s->fd >= 0)
    return;
  fd = open(s->src.cfg.device, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    r = -errno;
    snprintf(why, sizeof(why), "open: %s", strerror(errno));
    goto fail;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    r = -errno;
    snprintf(why, sizeof(why), "device is locked by another process");
    goto fail_fd;
  }
  r = configure(fd, &s->src.cfg, why, sizeof(why));
  if (r != 0)
    goto fail_fd;
  (void)ioctl(fd, TIOCEXCL); /* no second opener while we read (root excepted) */
  s->poll = tlc_malloc(sizeof(*s->poll));
  if (s->poll == NULL) {
    r = TLC_ENOMEM;
    snprintf(why, sizeof(why), "out of memory");
    goto fail_fd;
  }
  r = uv_poll_init(d->loop, s->poll, fd);
  if (r != 0) {
    tlc_free(s->poll);
    s->poll = NULL;
    snprintf(why, sizeof(why), "poll: %s", uv_strerror(r));
    goto fail_fd;
  }
  s->poll->data = s;
  s->polls_open++;
  s->fd = fd;
  r = uv_poll_start(s->poll, UV_READABLE | UV_DISCONNECT, poll_cb);
  if (r != 0) {
    snprintf(why, sizeof(why), "poll: %s", uv_strerror(r));
    port_close(s, why);
    d->st.serial_failures++;
    s->failures++;
    schedule(s);
    return;
  }
  d->st.serial_opens++;
  s->failures = 0;
  s->last_errno = 0;
  tlc_log(TLC_LOG_INFO, TLC_LOGC_SERIAL, "serial %s (%s): open, %u baud %u%c%u%s", s->src.cfg.name,
          s->src.cfg.device, s->src.cfg.baud, s->src.cfg.data_bits,
          s->src.cfg.parity == TLC_PARITY_EVEN  ? 'E'
          : s->src.cfg.parity == TLC_PARITY_ODD ? 'O'
                                                : 'N',
          s->src.cfg.stop_bits,
          s->src.cfg.flow == TLC_FLOW_RTSCTS    ? " rtscts"
          : s->src.cfg.flow == TLC_FLOW_XONXOFF ? " xonxoff"
                                                : "");
  tlc_target_attach(s->target, s, s->src.cfg.device);
  (void)read_some(s, READS_PER_EVENT, (size_t)-1); /* bytes queued before we polled */
  return;

fail_fd:
  close(fd);
fail:
  d->st.serial_failures++;
  s->failures++;
  /* One line per new reason; repeats of the same failure only at debug. */
  if (r != s->last_errno)
    tlc_log(TLC_LOG_WARN, TLC_LOGC_SERIAL, "serial %s (%s): %s; retrying with backoff",
            s->src.cfg.name, s->src.cfg.device, why);
  else
    TLC_LOGD(TLC_LOGC_SERIAL, "serial %s (%s): %s", s->src.cfg.name, s->src.cfg.device, why);
  s->last_errno = r;
  schedule(s);
}

static void timer_close_cb(uv_handle_t *h) {
  tlc_serial_t *s = h->data;
  if (h == (uv_handle_t *)s->idle)
    s->idle_closed = 1;
  else
    s->timer_closed = 1;
  tlc_free(h);
  if (s->timer_closed && s->idle_closed && s->polls_open == 0)
    tlc_free(s);
}

static void serial_stop(tlc_serial_t *s, const char *reason) {
  s->stopping = 1;
  if (s->idle != NULL)
    uv_timer_stop(s->idle); /* nothing held is delivered after the detach below */
  port_close(s, reason);
  uv_close((uv_handle_t *)s->timer, timer_close_cb);
  uv_close((uv_handle_t *)s->idle, timer_close_cb);
}

static int serial_start(tlc_ingest_t *d, const tlc_cfg_source_t *c, tlc_serial_t **out) {
  tlc_serial_t *s = tlc_calloc(1, sizeof(*s));
  tlc_target_conf_t conf;
  int r;
  if (s == NULL)
    return TLC_ENOMEM;
  s->src.ops = &tlc_serial_source_ops;
  s->src.d = d;
  s->src.cfg = *c;
  s->fd = -1;
  tlc__target_conf(d, TLC_SRC_SERIAL, c->name, c->name, c->format, &conf);
  r = tlc_targets_get(&d->targets, c->name, TLC_SRC_SERIAL, &conf, &s->target);
  if (r != 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_SERIAL, "serial %s: cannot create target: %s", c->name,
            r == TLC_EINVAL && s->target != NULL ? "a target of this name has another format"
                                                 : tlc_strerror(r));
    tlc_free(s);
    return r;
  }
  s->timer = tlc_malloc(sizeof(*s->timer));
  s->idle = tlc_malloc(sizeof(*s->idle));
  if (s->timer == NULL || s->idle == NULL) {
    tlc_free(s->timer);
    tlc_free(s->idle);
    tlc_free(s);
    return TLC_ENOMEM;
  }
  uv_timer_init(d->loop, s->timer);
  s->timer->data = s;
  uv_timer_init(d->loop, s->idle);
  s->idle->data = s;
  try_open(s);
  *out = s;
  return 0;
}

static int serial_start_op(tlc_ingest_t *d, const tlc_cfg_source_t *cfg, tlc_source_t **out) {
  tlc_serial_t *s;
  int r = serial_start(d, cfg, &s);
  if (r == 0)
    *out = &s->src;
  return r;
}

static void serial_stop_op(tlc_source_t *src, tlc_source_why_t why) {
  tlc_serial_t *s = (tlc_serial_t *)src;
  if (why != TLC_SOURCE_SHUTDOWN)
    tlc_log(TLC_LOG_INFO, TLC_LOGC_SERIAL, "serial %s (%s): %s", s->src.cfg.name, s->src.cfg.device,
            why == TLC_SOURCE_REMOVED ? "stopped" : "settings changed; reopening");
  serial_stop(s,
              why == TLC_SOURCE_SHUTDOWN ? "daemon shutting down" : "serial source reconfigured");
}

/* A new device, format or line setting reopens the port; other settings apply in place. */
static int serial_same_config(const tlc_source_t *src, const tlc_cfg_source_t *b) {
  const tlc_cfg_source_t *a = &src->cfg;
  return b != NULL && a->format == b->format && strcmp(a->device, b->device) == 0 &&
         a->baud == b->baud && a->data_bits == b->data_bits && a->parity == b->parity &&
         a->stop_bits == b->stop_bits && a->flow == b->flow;
}

/* Shutdown: reads what each tty holds (non-blocking, at most DRAIN_CAP), before the stop. */
static void serial_drain(tlc_ingest_t *d) {
  struct tlc_source_list *list = tlc_sources_running(d, &tlc_serial_source_ops);
  tlc_source_t *src;
  if (list == NULL)
    return;
  LIST_FOREACH(src, list, link) {
    tlc_serial_t *s = (tlc_serial_t *)src;
    if (s->fd >= 0)
      (void)read_some(s, 1 << 20, DRAIN_CAP);
  }
}

/* An absent device is retried with backoff, never a start error. */
const tlc_source_ops_t tlc_serial_source_ops = {
  .kind = TLC_SRC_SERIAL,
  .name = "serial",
  .start = serial_start_op,
  .stop = serial_stop_op,
  .same_config = serial_same_config,
  .drain = serial_drain,
};
