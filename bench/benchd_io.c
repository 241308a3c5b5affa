/* benchd_io.c - the load generator and the plain receivers of the daemon-level benchmarks
 * (bench/bench_ingest.py, bench/bench_subscribers.py orchestrate it; it is not a benchmark on
 * its own, hence not named bench_*).
 *
 *   benchd_io send HOST:PORT [--mib N] [--cores K] [--areas A] [--chunk KIB] [--passes P]
 *                            [--seconds S] [--conns C] [--preamble NAME] [--timeout S]
 *   benchd_io recv PORTFILE [--file PATH] [--conns C] [--buf KIB]
 *
 * send: generates one realistic bin11 stream in memory first (not timed): nested calls on
 *   `areas` function areas (default 1,000) on `cores` cores (default 4), winIDEA style (the
 *   caller's Suspend before the callee's Entry, its Resume after the callee's Exit), depth up to
 *   12, the cores' records interleaved with one global, non-decreasing clock; every stack is
 *   unwound at the end, so passes can be concatenated. Then, per connection: connect, write the
 *   buffer `passes` times (or until `seconds` have passed, whole passes; pass p > 0 shifts every
 *   time by p times the stream's span, patched in place chunk by chunk just before it is
 *   written, so time never goes backwards within a connection) in `chunk`-sized blocking
 *   writes (default 1 MiB), then shutdown(SHUT_WR) and wait for the peer to close (EOF or
 *   reset) - the receiver has then processed every byte (SPEC section 1). Timed from the first
 *   write to the close. With --conns C (or --seconds and --conns 0: until the time is up) it
 *   reconnects C times. One JSON line per connection on stdout:
 *   {"conn":i,"bytes":B,"records":R,"seconds":S,"mbps":M,"t0":T0,"t1":T1,"t_shut":TS} (T0, T1,
 *   TS: CLOCK_MONOTONIC seconds at the first write, at the close, and at the half-close: T1 - TS
 *   is the receiver's tail, what it still had to do once every byte was sent), then a summary
 *   line "total".
 * recv: the baseline. Listens on 127.0.0.1 (an ephemeral port, written to PORTFILE once
 *   listening), accepts `conns` connections one after another (default 1), reads each with
 *   read(2) into one `buf`-KiB buffer (default 64, tlcapd's read_buffer default) until EOF;
 *   with --file, writes every read to PATH (truncated per connection) and at EOF fdatasyncs it
 *   (tlcapd's storage seals a segment with fdatasync on disconnect). Then closes the
 *   connection: the sender's timing thus covers the same work as with tlcapd. Prints one JSON
 *   line per connection with the bytes received.
 *
 * Every loop is bounded: by the byte count, by the pass/connection counts, or by the deadline
 * given with --timeout (default 300 s) on every blocking wait (poll).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define REC 24

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what) {
  fprintf(stderr, "benchd_io: %s: %s\n", what, strerror(errno));
  exit(1);
}

/* ---- the stream ---- */

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
  uint64_t z = (rs += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static void st32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
static void st64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t ld64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

enum { EV_X = 0, EV_S = 1, EV_R = 2, EV_E = 3 };

static void put(uint8_t *buf, size_t *i, uint32_t h, unsigned type, unsigned core, int64_t t) {
  uint8_t *r = buf + *i * REC;
  st32(r, h);
  st32(r + 4, (uint32_t)(core << 4 | type));
  st64(r + 8, 0);
  st64(r + 16, (uint64_t)t);
  (*i)++;
}

#define MAXCORES 16
#define MAXDEPTH 12

/* Fills buf with n records (n a multiple of nothing in particular); returns records written
 * (<= n: the tail is what unwinding needed) and the last time in *last. */
static size_t gen(uint8_t *buf, size_t n, unsigned cores, unsigned areas, int64_t *last) {
  uint32_t st[MAXCORES][MAXDEPTH];
  unsigned d[MAXCORES];
  size_t i = 0;
  int64_t t = 1000;
  memset(d, 0, sizeof(d));
  /* Reserve room to unwind every stack: 2 records per level (X and R). */
  size_t room = (size_t)cores * MAXDEPTH * 2 + 4;
  while (i + room < n) {
    unsigned c = (unsigned)(rnd() % cores);
    t += 20 + (int64_t)(rnd() % 200);
    if (d[c] == 0 || (d[c] < MAXDEPTH && rnd() % 2 == 0)) {
      uint32_t h = (uint32_t)(rnd() % areas);
      if (d[c] > 0)
        put(buf, &i, st[c][d[c] - 1], EV_S, c, t);
      put(buf, &i, h, EV_E, c, t);
      st[c][d[c]++] = h;
    } else {
      put(buf, &i, st[c][--d[c]], EV_X, c, t);
      if (d[c] > 0)
        put(buf, &i, st[c][d[c] - 1], EV_R, c, t);
    }
  }
  for (unsigned c = 0; c < cores; c++)
    while (d[c] > 0) {
      t += 20;
      put(buf, &i, st[c][--d[c]], EV_X, c, t);
      if (d[c] > 0)
        put(buf, &i, st[c][d[c] - 1], EV_R, c, t);
    }
  *last = t;
  return i;
}

/* Adds delta to the time of every record in [p, p + len). */
static void shift(uint8_t *p, size_t len, int64_t delta) {
  for (size_t o = 0; o + REC <= len; o += REC)
    st64(p + o + 16, ld64(p + o + 16) + (uint64_t)delta);
}

/* ---- I/O helpers ---- */

static double g_timeout = 300.0;

static void wait_fd(int fd, short ev, double deadline) {
  for (;;) {
    double left = deadline - now_s();
    if (left <= 0) {
      fprintf(stderr, "benchd_io: timed out\n");
      exit(1);
    }
    struct pollfd p = { .fd = fd, .events = ev, .revents = 0 };
    int r = poll(&p, 1, (int)(left * 1000) + 1);
    if (r > 0)
      return;
    if (r < 0 && errno != EINTR)
      die("poll");
  }
}

static int dial(const char *hostport) {
  char host[256];
  const char *colon = strrchr(hostport, ':');
  if (colon == NULL || (size_t)(colon - hostport) >= sizeof(host)) {
    fprintf(stderr, "benchd_io: bad address %s\n", hostport);
    exit(2);
  }
  memcpy(host, hostport, (size_t)(colon - hostport));
  host[colon - hostport] = 0;
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)atoi(colon + 1));
  if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
    fprintf(stderr, "benchd_io: bad IPv4 address %s\n", host);
    exit(2);
  }
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    die("socket");
  if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
    die("connect");
  return fd;
}

static void write_all(int fd, const uint8_t *p, size_t len, double deadline) {
  while (len > 0) {
    ssize_t w = write(fd, p, len);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN) {
        wait_fd(fd, POLLOUT, deadline);
        continue;
      }
      die("write");
    }
    p += w;
    len -= (size_t)w;
    if (now_s() > deadline) {
      fprintf(stderr, "benchd_io: timed out writing\n");
      exit(1);
    }
  }
}

/* Half-closes and waits for the peer's close; returns bytes the peer sent (expected 0). */
static size_t wait_close(int fd, double deadline) {
  char b[4096];
  size_t got = 0;
  if (shutdown(fd, SHUT_WR) < 0)
    die("shutdown");
  for (;;) {
    wait_fd(fd, POLLIN, deadline);
    ssize_t r = read(fd, b, sizeof(b));
    if (r == 0 || (r < 0 && (errno == ECONNRESET || errno == EPIPE)))
      return got;
    if (r < 0 && errno != EINTR)
      die("read");
    if (r > 0)
      got += (size_t)r;
  }
}

/* ---- send ---- */

static int cmd_send(int argc, char **argv) {
  const char *addr = argv[0];
  double mib = 256, seconds = 0;
  unsigned cores = 4, areas = 1000;
  size_t chunk = 1u << 20;
  long passes = 1, conns = 1;
  const char *preamble = NULL;
  for (int i = 1; i < argc; i += 2) { /* OPTION VALUE pairs */
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (v == NULL)
      goto usage;
    if (strcmp(argv[i], "--mib") == 0)
      mib = atof(v);
    else if (strcmp(argv[i], "--cores") == 0)
      cores = (unsigned)atoi(v);
    else if (strcmp(argv[i], "--areas") == 0)
      areas = (unsigned)atoi(v);
    else if (strcmp(argv[i], "--chunk") == 0)
      chunk = (size_t)atol(v) * 1024;
    else if (strcmp(argv[i], "--passes") == 0)
      passes = atol(v);
    else if (strcmp(argv[i], "--seconds") == 0)
      seconds = atof(v);
    else if (strcmp(argv[i], "--conns") == 0)
      conns = atol(v);
    else if (strcmp(argv[i], "--preamble") == 0)
      preamble = v;
    else if (strcmp(argv[i], "--timeout") == 0)
      g_timeout = atof(v);
    else
      goto usage;
  }
  if (mib <= 0 || cores < 1 || cores > MAXCORES || areas < 1 || chunk < REC || passes < 1 ||
      conns < 0 || (conns == 0 && seconds <= 0))
    goto usage;
  chunk -= chunk % REC;
  size_t n = (size_t)(mib * 1048576.0) / REC;
  uint8_t *buf = malloc(n * REC);
  if (buf == NULL)
    die("malloc");
  int64_t last;
  n = gen(buf, n, cores, areas, &last);
  size_t len = n * REC;
  int64_t span = last + 1000; /* pass p starts at p * span */
  signal(SIGPIPE, SIG_IGN);

  double start = now_s(), tot_s = 0;
  uint64_t tot_b = 0;
  int64_t applied = 0; /* time shift currently applied to buf */
  long pass_ctr = 0;   /* passes sent on every connection so far: times keep rising */
  for (long ci = 0; conns == 0 || ci < conns; ci++) {
    if (conns == 0 && now_s() - start >= seconds)
      break;
    if (ci > 100000)
      break;
    int fd = dial(addr);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    double deadline = now_s() + g_timeout;
    if (preamble != NULL) {
      char line[300];
      int k = snprintf(line, sizeof(line), "TLCAP/1 target=%s format=bin11\n", preamble);
      write_all(fd, (const uint8_t *)line, (size_t)k, deadline);
    }
    double t0 = now_s();
    uint64_t sent = 0;
    for (long p = 0; p < (seconds > 0 && conns != 0 ? 1000000 : passes); p++) {
      if (seconds > 0 && conns != 0 && p > 0 && now_s() - t0 >= seconds)
        break;
      int64_t want = (int64_t)pass_ctr * span;
      for (size_t off = 0; off < len; off += chunk) {
        size_t k = len - off < chunk ? len - off : chunk;
        if (want != applied)
          shift(buf + off, k, want - applied);
        write_all(fd, buf + off, k, deadline);
      }
      applied = want;
      pass_ctr++;
      sent += len;
    }
    double t_shut = now_s(); /* every byte handed to the kernel: the rest is the peer's tail */
    size_t back = wait_close(fd, deadline);
    double dt = now_s() - t0;
    close(fd);
    printf("{\"conn\":%ld,\"bytes\":%" PRIu64 ",\"records\":%" PRIu64
           ",\"seconds\":%.6f,\"mbps\":%.2f,\"reply_bytes\":%zu,\"t0\":%.6f,\"t1\":%.6f,"
           "\"t_shut\":%.6f}\n",
           ci, sent, sent / REC, dt, (double)sent / dt / 1e6, back, t0, t0 + dt, t_shut);
    fflush(stdout);
    tot_b += sent;
    tot_s += dt;
  }
  printf("{\"total\":true,\"bytes\":%" PRIu64 ",\"records\":%" PRIu64
         ",\"seconds\":%.6f,\"mbps\":%.2f,\"stream_records\":%zu}\n",
         tot_b, tot_b / REC, tot_s, tot_s > 0 ? (double)tot_b / tot_s / 1e6 : 0.0, n);
  free(buf);
  return 0;
usage:
  fprintf(stderr, "usage: benchd_io send HOST:PORT [--mib N] [--cores K] [--areas A] "
                  "[--chunk KIB] [--passes P] [--seconds S] [--conns C] [--preamble NAME] "
                  "[--timeout S]\n");
  return 2;
}

/* ---- recv ---- */

static int cmd_recv(int argc, char **argv) {
  const char *portfile = argv[0], *path = NULL;
  long conns = 1;
  size_t bufsz = 64 * 1024;
  for (int i = 1; i < argc; i += 2) { /* OPTION VALUE pairs */
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (v == NULL)
      goto usage;
    if (strcmp(argv[i], "--file") == 0)
      path = v;
    else if (strcmp(argv[i], "--conns") == 0)
      conns = atol(v);
    else if (strcmp(argv[i], "--buf") == 0)
      bufsz = (size_t)atol(v) * 1024;
    else if (strcmp(argv[i], "--timeout") == 0)
      g_timeout = atof(v);
    else
      goto usage;
  }
  if (conns < 1 || bufsz < 1)
    goto usage;
  uint8_t *buf = malloc(bufsz);
  if (buf == NULL)
    die("malloc");
  signal(SIGPIPE, SIG_IGN);
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  if (ls < 0)
    die("socket");
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  struct sockaddr_in sa;
  socklen_t sl = sizeof(sa);
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(ls, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(ls, 16) < 0 ||
      getsockname(ls, (struct sockaddr *)&sa, &sl) < 0)
    die("listen");
  char tmp[4200];
  snprintf(tmp, sizeof(tmp), "%s.tmp", portfile);
  FILE *pf = fopen(tmp, "w");
  if (pf == NULL)
    die(tmp);
  fprintf(pf, "%u\n", ntohs(sa.sin_port));
  fclose(pf);
  if (rename(tmp, portfile) < 0)
    die("rename");
  for (long ci = 0; ci < conns; ci++) {
    double deadline = now_s() + g_timeout;
    wait_fd(ls, POLLIN, deadline);
    int fd = accept(ls, NULL, NULL);
    if (fd < 0)
      die("accept");
    int out = -1;
    if (path != NULL && (out = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0)
      die(path);
    uint64_t got = 0;
    for (;;) {
      ssize_t r = read(fd, buf, bufsz);
      if (r == 0)
        break;
      if (r < 0) {
        if (errno == EINTR)
          continue;
        if (errno == ECONNRESET)
          break;
        die("read");
      }
      got += (size_t)r;
      for (ssize_t o = 0; out >= 0 && o < r;) {
        ssize_t w = write(out, buf + o, (size_t)(r - o));
        if (w <= 0)
          die("write file");
        o += w;
      }
      if (now_s() > deadline) {
        fprintf(stderr, "benchd_io: recv timed out\n");
        return 1;
      }
    }
    if (out >= 0) {
      if (fdatasync(out) < 0)
        die("fdatasync");
      close(out);
    }
    close(fd);
    printf("{\"conn\":%ld,\"bytes\":%" PRIu64 "}\n", ci, got);
    fflush(stdout);
  }
  close(ls);
  free(buf);
  return 0;
usage:
  fprintf(stderr, "usage: benchd_io recv PORTFILE [--file PATH] [--conns C] [--buf KIB] "
                  "[--timeout S]\n");
  return 2;
}

int main(int argc, char **argv) {
  if (argc >= 3 && strcmp(argv[1], "send") == 0)
    return cmd_send(argc - 2, argv + 2);
  if (argc >= 3 && strcmp(argv[1], "recv") == 0)
    return cmd_recv(argc - 2, argv + 2);
  fprintf(stderr, "usage: benchd_io send HOST:PORT [options] | recv PORTFILE [options]\n");
  return 2;
}
