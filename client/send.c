/* send.c - `tlcap send FILE --target NAME --format bin10|bin11|evlog [--rate N] [--loop[=N]]`:
 * a target simulator. It connects to the daemon's ingest port (default 127.0.0.1:7411, not the
 * subscriber port), sends the preamble `TLCAP/1 target=NAME format=F` and then FILE's bytes
 * (read whole, at most 2 GiB): with --rate paced in slices of ~10 ms worth of 24-byte records
 * against one monotonic schedule, with --loop again and again until interrupted (--loop=N: N
 * times in all). Then it half-closes and waits (30 s at most) for the daemon's answer.
 *
 * Loops continue the timeline: loop k sends the file's times shifted by k x D, where D = (the
 * file's last time - its first time) + one period (the mean spacing of its records, at least
 * one tick: 1 ns, or 1e-9 s for evlog), so the stream the daemon sees is one capture that goes
 * on, never the same times again (statistics over a soak are those of that stream). bin1x:
 * every record's i64 time; evlog: every item's `tim`, and `srctim` when not 0, in the item's
 * own byte order (the items are found with the strict decoder; a file that does not decode to
 * its end cannot loop). With --loop a bin1x file's partial last record is not sent.
 *
 * The daemon's answer (docs/configuration.md, "[listen NAME]"): a stream it takes is closed by
 * it once processed and written, with nothing sent back; a refused one gets one line
 * `tlcapd: refused: REASON` before the close. send watches for it while sending (a
 * non-blocking read between slices) and after the half-close: refused, closed early, reset or
 * no answer within 30 s is exit 1 with the reason; "sent" is printed only after a clean close.
 *
 * Progress: when stderr is a terminal, one line rewritten in place about 5 times a second
 * (records, records per second, elapsed time, loop); nothing when it is not.
 */
#include "client/cli.h"

#include "base/alloc.h"
#include "base/err.h"
#include "formats/dec.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SEND_SLICE     (64u << 10) /* bytes per send between reply checks (unpaced) */
#define ANSWER_WAIT_MS 30000       /* after the half-close */
#define REFUSED_PREFIX "tlcapd: refused: "

/* A blocking socket to a target listener, through the client's one dialer. */
static int dial_tcp(const char *addr, int *fd_out, char *err, size_t errlen) {
  int fd;
  if (tlc_client_dial(addr, -1, "listening for targets", &fd, err, errlen) < 0)
    return -1;
  if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
    snprintf(err, errlen, "%s: %s", addr, strerror(errno));
    close(fd);
    return -1;
  }
  *fd_out = fd;
  return 0;
}

/* Sends everything. An interrupt (SIGINT/SIGTERM) lets the slice finish, so that no record is
 * cut; one that comes while a stop was already asked for ends it: -1 with errno EINTR. */
static int send_all(int fd, const void *p, size_t n) {
  const char *c = p;
  int stop_before = tlc_cli_stop;
  while (n > 0) {
    ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) {
      if (stop_before)
        return -1;
      continue;
    }
    if (w <= 0)
      return -1;
    c += w;
    n -= (size_t)w;
  }
  return 0;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---------------------------------------------------------------- the daemon's answer */

typedef struct reply {
  char buf[512]; /* what the daemon sent (a refusal line), cut at 511 bytes */
  size_t n;
  int eof;   /* it closed (orderly) */
  int reset; /* errno of a failed read (ECONNRESET ...), 0 if none */
} reply_t;

/* Reads what the daemon sent, waiting up to wait_ms for the first byte or the close (0: only
 * what is there). Returns 1 once it has a complete answer (a line, the close or a reset). */
static int reply_read(int fd, reply_t *r, int wait_ms) {
  double until = now_s() + wait_ms / 1000.0;
  for (;;) {
    char tmp[256];
    ssize_t k;
    if (r->eof || r->reset)
      return 1;
    if (memchr(r->buf, '\n', r->n) != NULL)
      return 1;
    k = recv(fd, tmp, sizeof(tmp), MSG_DONTWAIT);
    if (k > 0) {
      size_t take = (size_t)k < sizeof(r->buf) - 1 - r->n ? (size_t)k : sizeof(r->buf) - 1 - r->n;
      memcpy(r->buf + r->n, tmp, take);
      r->n += take;
      continue;
    }
    if (k == 0) {
      r->eof = 1;
      continue;
    }
    if (errno == EINTR)
      continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      r->reset = errno;
      continue;
    }
    {
      double left = until - now_s();
      struct pollfd pf = { fd, POLLIN, 0 };
      if (left <= 0)
        return 0;
      (void)poll(&pf, 1, (int)(left * 1000) + 1);
    }
  }
}

/* What the answer means, for a stream that was not taken: writes the message and returns
 * EXIT_BAD. `sent` bytes went out before. */
static int reply_fail(const reply_t *r, const char *to, uint64_t sent, int send_errno) {
  size_t n = r->n;
  const char *nl = memchr(r->buf, '\n', r->n);
  if (nl != NULL)
    n = (size_t)(nl - r->buf);
  if (n > 0 && n >= sizeof(REFUSED_PREFIX) - 1 &&
      memcmp(r->buf, REFUSED_PREFIX, sizeof(REFUSED_PREFIX) - 1) == 0) {
    fprintf(stderr, "tlcap send: %s refused the stream: %.*s\n", to,
            (int)(n - (sizeof(REFUSED_PREFIX) - 1)), r->buf + sizeof(REFUSED_PREFIX) - 1);
    return EXIT_BAD;
  }
  if (n > 0) {
    size_t i;
    fprintf(stderr, "tlcap send: %s: unexpected answer (is this tlcapd's ingest port?): \"", to);
    for (i = 0; i < n && i < 80; i++)
      fputc(r->buf[i] >= 0x20 && r->buf[i] < 0x7f ? r->buf[i] : '?', stderr);
    fprintf(stderr, "\"\n");
    return EXIT_BAD;
  }
  if (r->reset || send_errno)
    fprintf(stderr, "tlcap send: %s: connection reset by the daemon after %llu bytes (%s)\n", to,
            (unsigned long long)sent, strerror(r->reset ? r->reset : send_errno));
  else
    fprintf(stderr, "tlcap send: %s: connection closed by the daemon after %llu bytes\n", to,
            (unsigned long long)sent);
  return EXIT_BAD;
}

/* ---------------------------------------------------------------- the file and its times */

typedef struct plan {
  const char *format;
  int evlog;
  uint8_t *data;
  size_t len;
  size_t body;      /* bytes sent per loop */
  uint64_t records; /* records (bin1x) or items (evlog) per loop */
  /* --loop: the shift added to every time after each loop */
  int64_t shift_ns; /* bin1x */
  int64_t tmax;     /* bin1x: the latest time in the buffer (overflow guard) */
  double shift_s;   /* evlog */
  uint64_t *sites;  /* evlog: item offsets, bit 63 = big-endian item */
  size_t nsites;
} plan_t;

static int64_t ld_i64le(const uint8_t *p) {
  uint64_t v = 0;
  int i;
  for (i = 7; i >= 0; i--)
    v = v << 8 | p[i];
  return (int64_t)v;
}

static void st_i64le(uint8_t *p, int64_t x) {
  uint64_t v = (uint64_t)x;
  int i;
  for (i = 0; i < 8; i++, v >>= 8)
    p[i] = (uint8_t)v;
}

static double ld_f64(const uint8_t *p, int be) {
  uint64_t v = 0;
  double d;
  int i;
  for (i = 0; i < 8; i++)
    v = v << 8 | p[be ? i : 7 - i];
  memcpy(&d, &v, sizeof(d));
  return d;
}

static void st_f64(uint8_t *p, int be, double d) {
  uint64_t v;
  int i;
  memcpy(&v, &d, sizeof(v));
  for (i = 0; i < 8; i++, v >>= 8)
    p[be ? 7 - i : i] = (uint8_t)v;
}

/* bin1x: records, and with loop the shift. */
static void plan_bin1x(plan_t *p, int loop) {
  size_t n = p->len / 24, i;
  int64_t lo = INT64_MAX, hi = INT64_MIN, period;
  p->records = n;
  p->body = loop ? n * 24 : p->len;
  if (!loop || n == 0)
    return;
  for (i = 0; i < n; i++) {
    int64_t t = ld_i64le(p->data + i * 24 + 16);
    lo = t < lo ? t : lo;
    hi = t > hi ? t : hi;
  }
  /* the span in unsigned arithmetic: times may span the whole int64 range */
  period = n > 1 ? (int64_t)(((uint64_t)hi - (uint64_t)lo) / (n - 1)) : 0;
  if (period < 1)
    period = 1;
  p->shift_ns = (uint64_t)hi - (uint64_t)lo > (uint64_t)(INT64_MAX - period)
                    ? 0 /* cannot continue: the span alone fills int64 */
                    : (int64_t)((uint64_t)hi - (uint64_t)lo) + period;
  p->tmax = hi;
}

/* evlog: items (strict decoder), their places (for the progress count and the shift), and with
 * loop the shift. Returns 0, or -1 with the reason in err (out of memory, or loop asked for and
 * the file cannot loop). */
static int plan_evlog(plan_t *p, int loop, char *err, size_t errlen) {
  tlc_dec_t d;
  tlc_event_t ev[TLC_EVLOG_BATCH];
  size_t at = 0, cap = 0;
  double lo = INFINITY, hi = -INFINITY;
  int n, bad = 0;
  p->body = p->len;
  if (tlc_dec_init(&d, TLC_FMT_EVLOG, NULL) != 0) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  for (;;) {
    size_t used = 0;
    int k;
    if (at < p->len)
      n = tlc_dec_push(&d, p->data + at, p->len - at, &used, ev, TLC_EVLOG_BATCH);
    else
      n = tlc_dec_finish(&d, ev, TLC_EVLOG_BATCH);
    if (n < 0) {
      bad = 1;
      break;
    }
    at += used;
    for (k = 0; k < n; k++) {
      const tlc_evlog_ext_t *x = ev[k].evlog;
      p->records++;
      if (x == NULL)
        continue;
      if (isfinite(x->tim)) {
        lo = x->tim < lo ? x->tim : lo;
        hi = x->tim > hi ? x->tim : hi;
      }
      if (p->nsites == cap) {
        uint64_t *ns = tlc_grow(p->sites, &cap, p->nsites + 1, sizeof(*ns), 1024);
        if (ns == NULL) {
          tlc_dec_fini(&d);
          snprintf(err, errlen, "out of memory");
          return -1;
        }
        p->sites = ns;
      }
      p->sites[p->nsites++] = ev[k].offset | (x->item_be ? (uint64_t)1 << 63 : 0);
    }
    if (n == 0 && at >= p->len)
      break;
  }
  if (loop && bad) {
    snprintf(err, errlen, "--loop needs a file that decodes to its end: byte %llu: %s",
             (unsigned long long)d.err_offset, d.err_reason);
    tlc_dec_fini(&d);
    return -1;
  }
  tlc_dec_fini(&d);
  if (loop && p->nsites > 0 && lo <= hi) {
    double period = p->nsites > 1 ? (hi - lo) / (double)(p->nsites - 1) : 0;
    if (!(period >= 1e-9))
      period = 1e-9;
    p->shift_s = (hi - lo) + period;
  }
  return 0;
}

/* evlog: items that begin before byte `at` of the file (the sites are in file order). */
static uint64_t items_below(const plan_t *p, size_t at) {
  size_t lo = 0, hi = p->nsites;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if ((p->sites[mid] & ~((uint64_t)1 << 63)) < at)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* Moves every time of the buffer on by one loop's shift. Returns 0, or -1 when bin1x times
 * would leave int64. */
static int plan_shift(plan_t *p) {
  size_t i;
  if (!p->evlog) {
    size_t n = p->body / 24;
    if (p->shift_ns <= 0 || p->tmax > INT64_MAX - p->shift_ns)
      return -1;
    for (i = 0; i < n; i++) {
      uint8_t *t = p->data + i * 24 + 16;
      st_i64le(t, ld_i64le(t) + p->shift_ns);
    }
    p->tmax += p->shift_ns;
    return 0;
  }
  for (i = 0; i < p->nsites; i++) {
    int be = (int)(p->sites[i] >> 63);
    uint8_t *it = p->data + (p->sites[i] & ~((uint64_t)1 << 63));
    double srctim = ld_f64(it + 8, be);
    st_f64(it, be, ld_f64(it, be) + p->shift_s);
    if (srctim != 0.0)
      st_f64(it + 8, be, srctim + p->shift_s);
  }
  return 0;
}

/* ---------------------------------------------------------------- progress */

typedef struct progress {
  int on;      /* stderr is a terminal */
  int shown;   /* a line is on the screen */
  double t0;   /* start */
  double last; /* last drawn */
} progress_t;

static void progress_draw(progress_t *g, uint64_t records, uint64_t loop, int looping, int force) {
  double now, el;
  if (!g->on)
    return;
  now = now_s();
  if (!force && now - g->last < 0.2)
    return;
  g->last = now;
  el = now - g->t0;
  fprintf(stderr, "\r\033[Ktlcap send: %llu records, %.0f records/s, %.1f s elapsed",
          (unsigned long long)records, el > 0 ? (double)records / el : 0.0, el);
  if (looping)
    fprintf(stderr, ", loop %llu", (unsigned long long)loop);
  fflush(stderr);
  g->shown = 1;
}

static void progress_end(progress_t *g) {
  if (g->shown) {
    fputc('\n', stderr);
    g->shown = 0;
  }
}

/* ---------------------------------------------------------------- the command */

int tlc_cli_send(int argc, char **argv) {
  const char *file = NULL, *target = NULL, *format = NULL, *to = "127.0.0.1:7411";
  double rate = 0, t0;
  int loop = 0, i, fd = -1, status = EXIT_BAD, send_errno = 0;
  uint64_t loops = 1, done_loops = 0; /* loops: 0 = until interrupted */
  char *data = NULL, err[512], pre[300];
  size_t len = 0;
  uint64_t sent = 0, records = 0;
  int r, o;
  plan_t pl;
  reply_t rep;
  progress_t prog;
  static const struct option lo[] = { { "target", required_argument, NULL, 't' },
                                      { "format", required_argument, NULL, 'f' },
                                      { "rate", required_argument, NULL, 'r' },
                                      { "to", required_argument, NULL, 'T' },
                                      { "loop", optional_argument, NULL, 'l' },
                                      { "help", no_argument, NULL, 'h' },
                                      { NULL, 0, NULL, 0 } };
  tlc_cli_opt_reset();
  while ((o = tlc_cli_next_opt(argc, argv, ":ht:f:", lo)) != -1) {
    if (o == 't') {
      target = optarg;
    } else if (o == 'f') {
      format = optarg;
    } else if (o == 'T') {
      to = optarg;
    } else if (o == 'r') {
      char *end;
      rate = strtod(optarg, &end);
      if (*end != 0 || rate <= 0) {
        fprintf(stderr, "tlcap send: --rate wants a positive number of events per second\n");
        return EXIT_USAGE;
      }
    } else if (o == 'l') {
      loop = 1;
      loops = 0;
      if (optarg != NULL) {
        char *end;
        errno = 0;
        loops = strtoull(optarg, &end, 10);
        if (*end != 0 || optarg[0] < '0' || optarg[0] > '9' || loops == 0 || errno != 0) {
          fprintf(stderr, "tlcap send: --loop=N wants a positive number of times\n");
          return EXIT_USAGE;
        }
      }
    } else if (o == '?') {
      return EXIT_USAGE;
    } else {
      printf("usage: tlcap send FILE --target NAME --format bin10|bin11|evlog\n"
             "                  [--rate EVENTS/S] [--loop[=N]] [--to HOST:PORT]\n"
             "A target simulator: connects to tlcapd's ingest port (default 127.0.0.1:7411),\n"
             "sends the preamble `TLCAP/1 target=NAME format=F` and then FILE's bytes.\n"
             "--rate limits bin10/bin11 records per second; --loop repeats the file until\n"
             "interrupted (--loop=N: N times), each time with its times moved on past the\n"
             "last loop's (by the file's span plus its mean record spacing), so the daemon sees\n"
             "one capture that goes on. Then it half-closes and waits for tlcapd's answer:\n"
             "exit 1 with tlcapd's reason when it refused the stream. A progress line is shown\n"
             "when stderr is a terminal.\n");
      return 0;
    }
  }
  for (i = optind; i < argc; i++) {
    const char *a = argv[i];
    if (file == NULL)
      file = a;
    else {
      fprintf(stderr, "tlcap send: unexpected argument %s\n", a);
      return EXIT_USAGE;
    }
  }
  if (file == NULL || target == NULL || format == NULL) {
    fprintf(stderr, "usage: tlcap send FILE --target NAME --format bin10|bin11|evlog "
                    "[--rate EVENTS/S] [--loop[=N]] [--to HOST:PORT]\n");
    return EXIT_USAGE;
  }
  if (strcmp(format, "bin10") != 0 && strcmp(format, "bin11") != 0 &&
      strcmp(format, "evlog") != 0) {
    fprintf(stderr, "tlcap send: unknown --format %s (bin10, bin11 or evlog)\n", format);
    return EXIT_USAGE;
  }
  if (rate > 0 && strcmp(format, "evlog") == 0) {
    fprintf(stderr, "tlcap send: --rate applies to bin10/bin11 records only\n");
    return EXIT_USAGE;
  }
  if (strlen(target) == 0 || strlen(target) > 128 || strpbrk(target, " \t\r\n") != NULL) {
    fprintf(stderr, "tlcap send: bad --target name\n");
    return EXIT_USAGE;
  }
  if ((r = tlc_cli_read_file(file, &data, &len, (size_t)1 << 31)) < 0) {
    fprintf(stderr, "tlcap send: %s: %s\n", file, tlc_strerror(r));
    return EXIT_BAD;
  }
  memset(&pl, 0, sizeof(pl));
  pl.format = format;
  pl.evlog = strcmp(format, "evlog") == 0;
  pl.data = (uint8_t *)data;
  pl.len = len;
  if (pl.evlog) {
    if (plan_evlog(&pl, loop, err, sizeof(err)) < 0) {
      fprintf(stderr, "tlcap send: %s: %s\n", file, err);
      goto out;
    }
  } else {
    plan_bin1x(&pl, loop);
    if (loop && len % 24 != 0)
      fprintf(stderr,
              "tlcap send: %s: %zu bytes after the last whole record are not sent "
              "with --loop\n",
              file, len % 24);
  }
  if (loop && pl.records == 0) {
    fprintf(stderr, "tlcap send: %s: no whole %s to loop over\n", file,
            pl.evlog ? "item" : "record");
    goto out;
  }
  if (dial_tcp(to, &fd, err, sizeof(err)) < 0) {
    fprintf(stderr, "tlcap send: %s\n", err);
    goto out;
  }
  memset(&rep, 0, sizeof(rep));
  memset(&prog, 0, sizeof(prog));
  prog.on = isatty(STDERR_FILENO);
  t0 = prog.t0 = now_s();
  snprintf(pre, sizeof(pre), "TLCAP/1 target=%s format=%s\n", target, format);
  if (send_all(fd, pre, strlen(pre)) < 0)
    goto write_failed;
  while (!tlc_cli_stop && (loops == 0 || done_loops < loops)) {
    if (done_loops > 0 && plan_shift(&pl) < 0) {
      progress_end(&prog);
      fprintf(stderr,
              "tlcap send: times would leave the int64 range after %llu loops; "
              "stopping\n",
              (unsigned long long)done_loops);
      break;
    }
    if (rate <= 0 || pl.body < 24) {
      size_t at = 0;
      while (at < pl.body && !tlc_cli_stop) {
        size_t k = pl.body - at < SEND_SLICE ? pl.body - at : SEND_SLICE;
        if (send_all(fd, pl.data + at, k) < 0)
          goto write_failed;
        at += k;
        sent += k;
        records = pl.evlog ? done_loops * pl.records + items_below(&pl, at) : sent / 24;
        if (reply_read(fd, &rep, 0))
          goto answered;
        progress_draw(&prog, records, done_loops + 1, loop, 0);
      }
      if (at < pl.body)
        break; /* interrupted */
      if (pl.evlog)
        records = (done_loops + 1) * pl.records;
    } else {
      /* Paced in slices of ~10 ms worth of records against one monotonic schedule. */
      size_t nrec = pl.body / 24, done = 0, slice = (size_t)(rate / 100) + 1;
      while (done < nrec && !tlc_cli_stop) {
        size_t k = nrec - done < slice ? nrec - done : slice;
        double due, el;
        if (send_all(fd, pl.data + done * 24, k * 24) < 0)
          goto write_failed;
        done += k;
        sent += k * 24;
        records += k;
        if (reply_read(fd, &rep, 0))
          goto answered;
        progress_draw(&prog, records, done_loops + 1, loop, 0);
        due = (double)records / rate;
        el = now_s() - t0;
        if (due > el) {
          double dl = due - el;
          struct timespec ts = { (time_t)dl, (long)((dl - (double)(time_t)dl) * 1e9) };
          nanosleep(&ts, NULL); /* rate limiting */
        }
      }
      if (done < nrec)
        break; /* interrupted */
      if (!loop && pl.body % 24 != 0) {
        if (send_all(fd, pl.data + nrec * 24, pl.body % 24) < 0)
          goto write_failed;
        sent += pl.body % 24;
      }
    }
    done_loops++;
  }
  progress_draw(&prog, records, done_loops, loop, 1);
  /* Half-close and wait (bounded) for the daemon's answer: its close once it has taken and
   * written everything, or a refusal line. */
  shutdown(fd, SHUT_WR);
  if (!reply_read(fd, &rep, ANSWER_WAIT_MS)) {
    progress_end(&prog);
    fprintf(stderr,
            "tlcap send: %s: %llu bytes sent, but no answer from tlcapd within %d s: it may "
            "not have taken them all\n",
            to, (unsigned long long)sent, ANSWER_WAIT_MS / 1000);
    goto out;
  }
  if (rep.n > 0 || rep.reset) {
    progress_end(&prog);
    status = reply_fail(&rep, to, sent, 0);
    goto out;
  }
  progress_end(&prog);
  fprintf(stderr, "tlcap send: %llu bytes (%llu records) sent to %s as %s in %.1f s\n",
          (unsigned long long)sent, (unsigned long long)records, to, target, now_s() - t0);
  status = 0;
  goto out;
write_failed:
  send_errno = errno;
  if (send_errno == EINTR) {
    progress_end(&prog);
    fprintf(stderr, "tlcap send: interrupted after %llu bytes\n", (unsigned long long)sent);
    goto out;
  }
  /* the daemon may have said why before it closed */
  (void)reply_read(fd, &rep, 1000);
answered:
  progress_end(&prog);
  status = reply_fail(&rep, to, sent, send_errno);
out:
  if (fd >= 0)
    close(fd);
  tlc_free(pl.sites);
  tlc_free(data);
  return status;
}
