/* benchd_subs.c - subscribers and latency markers for bench/bench_subscribers.py.
 *
 *   benchd_subs SERVE_ADDR INGEST_ADDR [--subs N] [--interval MS] [--seconds S]
 *               [--marker-ms MS] [--marker-target NAME] [--profile heavy|top|light|cores|default]
 *               [--full-decode]
 *
 * One thread, one poll loop, every socket non-blocking:
 *  - N subscribers (default 100) connect to tlcapd's subscriber port, say Hello and subscribe
 *    to every target and every area at `interval` (default 100 ms = 10 Hz), with one of three
 *    subscriptions (--profile):
 *      heavy (default): rolling windows and Neutral rows, every field as Row messages (what
 *        `tlcap top` asked for before it used columns, without names);
 *      top: what `tlcap top` asks for now: columnar rows, Neutral rows only (one per area),
 *        the columns it shows (COUNT, NET and CALL totals, NET n/sum/max) and the same for
 *        each of the 3 rolling windows;
 *      light: a dashboard line per area: columnar rows, Neutral rows only, COUNT, NET total,
 *        NET n/sum/max (avg and max), VALUE;
 *      cores: the same columns per area and context (per core here), no Neutral rows;
 *      default: a Subscribe with every option left at its default (what a script that sets
 *        only the interval gets): Row messages with every cumulative field, one row per area
 *        and context (per core here), no windows, no quantiles, no Neutral rows.
 *    Requests are packed with the protobuf-c code of proto/tlcap.proto.
 *  - A marker connection to the ingest port, named by its preamble (default target "marker"),
 *    writes one bin11 Write record to the variable area 0x20000001 every `marker-ms` (default
 *    37 ms: not a divisor of the interval, so markers fall at every phase of it) with data =
 *    k = 1, 2, ... and records t_send[k] = CLOCK_MONOTONIC just before the write(2) (one
 *    24-byte write on an otherwise idle socket: it reaches tlcapd at once). At the end the
 *    marker connection is half-closed and its close awaited, like any sender.
 *  - Each subscriber's frames are read as they come; for each ServerMessage a minimal
 *    protobuf walk reads Snapshot.target (field 1) and skips everything else, so the
 *    subscribers cost the machine little more than the socket reads (the machine has 2 cores,
 *    shared with tlcapd and the ingest sender). Only snapshots of the marker target are walked
 *    further: the row of the marker handle, its value v (Row.value, or the VALUE cell, or for
 *    the top profile the COUNT cell, which equals v since marker k is the k-th write of the
 *    area). When subscriber i first sees v, every
 *    marker k in (last_i, v] has appeared: latency = now - t_send[k], with now = the time the
 *    read(2) that completed the frame returned. --full-decode unpacks every message with
 *    protobuf-c instead (what a real client does; costs the shared CPU much more).
 * Output (stdout): "ready" once every subscriber has its Ack and a first snapshot of the
 * marker target; at the end "M <k> <t_send>" per marker, "L <k> <latency_us>" per (marker,
 * subscriber) that saw it, and a JSON summary line (snapshots, bytes, errors). Runs `seconds`
 * (default 15) after ready or until SIGTERM/SIGINT, bounded by a deadline for readiness
 * (20 s); every loop is bounded.
 * --tls CAFILE [--token TOKEN]: the subscribers speak TLS (OpenSSL, the daemon's certificate
 *    verified against CAFILE) and present TOKEN in Hello (bench_tls.py: TLS against plain TCP).
 */
#define _GNU_SOURCE
#include "tlcap.pb-c.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
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

#include <openssl/err.h>
#include <openssl/ssl.h>

#define MARKER_HANDLE 0x20000001u
#define MAX_SUBS      250
#define MAX_MARKERS   100000
#define RBUF          (1u << 20)
#define MAX_FRAME     (64u << 20)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what) {
  fprintf(stderr, "benchd_subs: %s: %s\n", what, strerror(errno));
  exit(1);
}

typedef struct sub {
  int fd;
  SSL *ssl;     /* --tls */
  uint8_t *buf; /* frame assembly */
  size_t len, cap;
  int acked, ready;
  uint64_t last; /* highest marker value seen */
  uint64_t snaps, marker_snaps, bytes, errors;
  uint64_t bulk_snaps, bulk_bytes; /* snapshots of the other targets (the bulk one) */
} sub_t;

static double *g_tsend;
static uint64_t g_nmark;
static char g_marker[128] = "marker";
static int g_full;
static SSL_CTX *g_ctx;      /* --tls */
static const char *g_token; /* --token */
static int g_profile;       /* 0 heavy, 1 top, 2 light, 3 cores, 4 default */

/* Column ids of the protocol's columnar rows (proto/tlcap.proto, Snapshot.columns). */
#define COL_HANDLE       1u
#define COL_COUNT        6u
#define COL_VALUE        8u
#define COL_DIST(k, f)   (16u + 16u * (k) + (f))
#define COL_WCOUNT(w)    (128u + 32u * (w))
#define COL_WIN(w, k, f) (128u + 32u * (w) + 1u + 4u * (k) + (f))
enum {
  K_NET = 0,
  K_CALL = 2,
  F_TOTAL = 0,
  F_N = 1,
  F_SUM = 2,
  F_MAX = 4,
  W_N = 0,
  W_SUM = 1,
  W_MAX = 3
};

static size_t profile_columns(uint32_t *c) {
  size_t n = 0;
  if (g_profile == 1) {
    c[n++] = COL_COUNT;
    c[n++] = COL_DIST(K_NET, F_TOTAL);
    c[n++] = COL_DIST(K_NET, F_N);
    c[n++] = COL_DIST(K_NET, F_SUM);
    c[n++] = COL_DIST(K_NET, F_MAX);
    c[n++] = COL_DIST(K_CALL, F_TOTAL);
    for (unsigned w = 0; w < 3; w++) {
      c[n++] = COL_WCOUNT(w);
      c[n++] = COL_WIN(w, K_NET, W_N);
      c[n++] = COL_WIN(w, K_NET, W_SUM);
      c[n++] = COL_WIN(w, K_NET, W_MAX);
      c[n++] = COL_WIN(w, K_CALL, W_SUM);
    }
  } else if (g_profile == 2 || g_profile == 3) {
    c[n++] = COL_COUNT;
    c[n++] = COL_DIST(K_NET, F_TOTAL);
    c[n++] = COL_DIST(K_NET, F_N);
    c[n++] = COL_DIST(K_NET, F_SUM);
    c[n++] = COL_DIST(K_NET, F_MAX);
    c[n++] = COL_VALUE;
  }
  return n;
}
static uint64_t g_lat_n;
static volatile sig_atomic_t g_stop;

static void on_term(int sig) {
  (void)sig;
  g_stop = 1;
}
static FILE *g_lat;

static int dial(const char *hostport) {
  char host[256];
  const char *colon = strrchr(hostport, ':');
  if (colon == NULL || (size_t)(colon - hostport) >= sizeof(host))
    return -1;
  memcpy(host, hostport, (size_t)(colon - hostport));
  host[colon - hostport] = 0;
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)atoi(colon + 1));
  if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
    return -1;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    die("socket");
  if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
    die("connect");
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

static void send_all(int fd, const uint8_t *p, size_t n) {
  double deadline = now_s() + 10;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
      struct pollfd pf = { .fd = fd, .events = POLLOUT, .revents = 0 };
      if (now_s() > deadline) {
        fprintf(stderr, "benchd_subs: write timed out\n");
        exit(1);
      }
      (void)poll(&pf, 1, 100);
      continue;
    }
    if (w <= 0)
      die("write");
    p += w;
    n -= (size_t)w;
  }
}

static void send_msg_ssl(SSL *ssl, const Tlcap__ClientMessage *m) {
  uint8_t buf[1024];
  size_t n = tlcap__client_message__get_packed_size(m), h = 0;
  if (n + 10 > sizeof(buf)) {
    fprintf(stderr, "benchd_subs: request too large\n");
    exit(1);
  }
  for (size_t v = n;; v >>= 7) {
    buf[h++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
    if (v < 0x80)
      break;
  }
  tlcap__client_message__pack(m, buf + h);
  if (SSL_write(ssl, buf, (int)(h + n)) != (int)(h + n)) { /* blocking socket at set-up */
    fprintf(stderr, "benchd_subs: TLS write failed\n");
    exit(1);
  }
}

static void send_msg(int fd, const Tlcap__ClientMessage *m) {
  uint8_t buf[1024];
  size_t n = tlcap__client_message__get_packed_size(m), h = 0;
  if (n + 10 > sizeof(buf)) {
    fprintf(stderr, "benchd_subs: request too large\n");
    exit(1);
  }
  for (size_t v = n;; v >>= 7) {
    buf[h++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
    if (v < 0x80)
      break;
  }
  tlcap__client_message__pack(m, buf + h);
  send_all(fd, buf, h + n);
}

/* ---- minimal protobuf walking ---- */

static int rd_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
  uint64_t x = 0;
  for (int s = 0; s < 64 && *p < end; s += 7) {
    uint8_t b = *(*p)++;
    x |= (uint64_t)(b & 0x7f) << s;
    if (!(b & 0x80)) {
      *v = x;
      return 0;
    }
  }
  return -1;
}

/* Steps over one field whose key was read; for wire type 2 returns its bytes in f and fl. */
static int skip(const uint8_t **p, const uint8_t *end, unsigned wt, const uint8_t **f, size_t *fl) {
  uint64_t v;
  switch (wt) {
  case 0:
    return rd_varint(p, end, &v);
  case 1:
    if (end - *p < 8)
      return -1;
    *p += 8;
    return 0;
  case 5:
    if (end - *p < 4)
      return -1;
    *p += 4;
    return 0;
  case 2:
    if (rd_varint(p, end, &v) < 0 || v > (uint64_t)(end - *p))
      return -1;
    *f = *p;
    *fl = (size_t)v;
    *p += v;
    return 0;
  default:
    return -1;
  }
}

/* In a Row: returns 1 and *value if its handle is the marker's. */
static int row_marker(const uint8_t *p, const uint8_t *end, uint64_t *value) {
  uint64_t key, handle = 0, val = 0, v;
  int have_val = 0;
  while (p < end) {
    if (rd_varint(&p, end, &key) < 0)
      return 0;
    unsigned fn = (unsigned)(key >> 3), wt = (unsigned)(key & 7);
    if ((fn == 1 || fn == 10) && wt == 0) {
      if (rd_varint(&p, end, &v) < 0)
        return 0;
      if (fn == 1)
        handle = v;
      else {
        val = v;
        have_val = 1;
      }
      continue;
    }
    const uint8_t *f;
    size_t fl;
    if (skip(&p, end, wt, &f, &fl) < 0)
      return 0;
  }
  if (handle == MARKER_HANDLE && have_val) {
    *value = val;
    return 1;
  }
  return 0;
}

/* Columnar rows: the marker row's value (VALUE, else COUNT) among cells[0..ncells). */
static int cells_marker(const uint32_t *cols, size_t ncols, const int64_t *cells, size_t ncells,
                        uint64_t *value) {
  size_t h = ncols, v = ncols, c, i;
  int found = 0;
  for (c = 0; c < ncols; c++) {
    if (cols[c] == COL_HANDLE)
      h = c;
    if (cols[c] == COL_VALUE || (cols[c] == COL_COUNT && v == ncols))
      v = c;
  }
  if (h == ncols || v == ncols || ncols == 0)
    return 0;
  for (i = 0; i + ncols <= ncells; i += ncols)
    if ((uint64_t)cells[i + h] == MARKER_HANDLE && (!found || (uint64_t)cells[i + v] > *value)) {
      *value = (uint64_t)cells[i + v];
      found = 1;
    }
  return found;
}

/* Reads a packed varint field into out[] (at most cap values); zigzag-decodes when zz. */
static size_t packed_read(const uint8_t *p, const uint8_t *end, int zz, int64_t *out, size_t cap) {
  size_t n = 0;
  uint64_t v;
  while (p < end && n < cap && rd_varint(&p, end, &v) == 0)
    out[n++] = zz ? (int64_t)((v >> 1) ^ (~(v & 1) + 1)) : (int64_t)v;
  return n;
}

/* In a Snapshot: is it the marker target's, and the marker's value (max over rows). */
static int snap_walk(const uint8_t *p, const uint8_t *end, int *is_marker, uint64_t *value) {
  const uint8_t *s = p;
  uint64_t key;
  int found = 0;
  uint32_t cols[64];
  int64_t colv[64], cells[4096];
  size_t ncols = 0, ncells = 0;
  uint64_t v0 = 0;
  *is_marker = 0;
  /* pass 1: the target name */
  while (p < end) {
    if (rd_varint(&p, end, &key) < 0)
      return -1;
    const uint8_t *f = NULL;
    size_t fl = 0;
    if (skip(&p, end, (unsigned)(key & 7), &f, &fl) < 0)
      return -1;
    if ((key >> 3) == 1 && (key & 7) == 2) {
      *is_marker = fl == strlen(g_marker) && memcmp(f, g_marker, fl) == 0;
      break;
    }
  }
  if (!*is_marker)
    return 0;
  /* pass 2: the rows */
  p = s;
  while (p < end) {
    if (rd_varint(&p, end, &key) < 0)
      return -1;
    const uint8_t *f = NULL;
    size_t fl = 0;
    if (skip(&p, end, (unsigned)(key & 7), &f, &fl) < 0)
      return -1;
    uint64_t v;
    if ((key >> 3) == 15 && (key & 7) == 2 && row_marker(f, f + fl, &v)) {
      if (!found || v > *value)
        *value = v;
      found = 1;
    }
    if ((key >> 3) == 19 && (key & 7) == 2) {
      ncols = packed_read(f, f + fl, 0, colv, 64);
      for (size_t c = 0; c < ncols; c++)
        cols[c] = (uint32_t)colv[c];
    }
    if ((key >> 3) == 20 && (key & 7) == 2) /* the marker target's rows are few */
      ncells = packed_read(f, f + fl, 1, cells, 4096);
  }
  if (ncols > 0 && cells_marker(cols, ncols, cells, ncells, &v0) && (!found || v0 > *value)) {
    *value = v0;
    found = 1;
  }
  return found;
}

static void seen(sub_t *s, uint64_t v, double t) {
  if (v > g_nmark)
    v = g_nmark;
  for (uint64_t k = s->last + 1; k <= v; k++) {
    fprintf(g_lat, "L %" PRIu64 " %.1f\n", k, (t - g_tsend[k]) * 1e6);
    g_lat_n++;
  }
  if (v > s->last)
    s->last = v;
}

/* One complete ServerMessage frame. */
static void on_frame(sub_t *s, const uint8_t *p, size_t n, double t) {
  s->bytes += n;
  if (g_full) {
    Tlcap__ServerMessage *m = tlcap__server_message__unpack(NULL, n, p);
    if (m == NULL) {
      s->errors++;
      return;
    }
    if (m->msg_case == TLCAP__SERVER_MESSAGE__MSG_ACK)
      s->acked = 1;
    else if (m->msg_case == TLCAP__SERVER_MESSAGE__MSG_ERROR) {
      s->errors++;
      fprintf(stderr, "benchd_subs: error from daemon: %s\n", m->error->message);
    } else if (m->msg_case == TLCAP__SERVER_MESSAGE__MSG_SNAPSHOT) {
      Tlcap__Snapshot *sn = m->snapshot;
      s->snaps++;
      if (strcmp(sn->target, g_marker) == 0) {
        uint64_t v = 0;
        int found = 0;
        for (size_t i = 0; i < sn->n_rows; i++)
          if (sn->rows[i]->handle == MARKER_HANDLE && (!found || sn->rows[i]->value > v)) {
            v = sn->rows[i]->value;
            found = 1;
          }
        if (!found && sn->n_columns > 0)
          found = cells_marker(sn->columns, sn->n_columns, sn->cells, sn->n_cells, &v);
        s->marker_snaps++;
        s->ready = 1;
        if (found)
          seen(s, v, t);
      } else {
        s->bulk_snaps++;
        s->bulk_bytes += n;
      }
    }
    tlcap__server_message__free_unpacked(m, NULL);
    return;
  }
  const uint8_t *end = p + n;
  uint64_t key;
  while (p < end) {
    if (rd_varint(&p, end, &key) < 0) {
      s->errors++;
      return;
    }
    const uint8_t *f = NULL;
    size_t fl = 0;
    if (skip(&p, end, (unsigned)(key & 7), &f, &fl) < 0) {
      s->errors++;
      return;
    }
    unsigned fn = (unsigned)(key >> 3);
    if (fn == 16)
      s->acked = 1;
    else if (fn == 15) {
      s->errors++;
      Tlcap__Error *e = tlcap__error__unpack(NULL, fl, f);
      fprintf(stderr, "benchd_subs: error from daemon: %s\n", e ? e->message : "?");
      if (e)
        tlcap__error__free_unpacked(e, NULL);
    } else if (fn == 12) {
      int mk;
      uint64_t v = 0;
      s->snaps++;
      int r = snap_walk(f, f + fl, &mk, &v);
      if (r < 0)
        s->errors++;
      if (mk) {
        s->marker_snaps++;
        s->ready = 1;
      } else {
        s->bulk_snaps++;
        s->bulk_bytes += n;
      }
      if (r > 0)
        seen(s, v, t);
    }
  }
}

/* Reads what the socket has; hands complete frames to on_frame. -1 on EOF/error. */
static int sub_read(sub_t *s) {
  for (int round = 0; round < 64; round++) {
    if (s->cap - s->len < RBUF / 4) {
      size_t nc = s->cap * 2;
      uint8_t *nb = realloc(s->buf, nc);
      if (nb == NULL)
        die("realloc");
      s->buf = nb;
      s->cap = nc;
    }
    ssize_t r;
    if (s->ssl != NULL) {
      size_t want = s->cap - s->len;
      int k = SSL_read(s->ssl, s->buf + s->len, want > (1u << 30) ? 1 << 30 : (int)want);
      if (k <= 0) {
        int e = SSL_get_error(s->ssl, k);
        ERR_clear_error();
        return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE ? 0 : -1;
      }
      r = k;
    } else {
      r = read(s->fd, s->buf + s->len, s->cap - s->len);
      if (r < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
      if (r <= 0)
        return -1;
    }
    double t = now_s();
    s->len += (size_t)r;
    size_t off = 0;
    for (;;) {
      const uint8_t *p = s->buf + off, *end = s->buf + s->len;
      uint64_t fl;
      if (rd_varint(&p, end, &fl) < 0)
        break;
      if (fl > MAX_FRAME) {
        fprintf(stderr, "benchd_subs: frame of %" PRIu64 " bytes\n", fl);
        exit(1);
      }
      if ((uint64_t)(end - p) < fl)
        break;
      on_frame(s, p, (size_t)fl, t);
      off = (size_t)(p - s->buf) + (size_t)fl;
    }
    memmove(s->buf, s->buf + off, s->len - off);
    s->len -= off;
  }
  return 0;
}

static void marker_write(int fd, uint64_t k) {
  uint8_t r[24];
  uint32_t h = MARKER_HANDLE, flags = 4; /* Write, core 0 */
  uint64_t t = k * 1000000ull;
  for (int i = 0; i < 4; i++) {
    r[i] = (uint8_t)(h >> (8 * i));
    r[4 + i] = (uint8_t)(flags >> (8 * i));
  }
  for (int i = 0; i < 8; i++) {
    r[8 + i] = (uint8_t)(k >> (8 * i));
    r[16 + i] = (uint8_t)(t >> (8 * i));
  }
  g_tsend[k] = now_s();
  send_all(fd, r, sizeof(r));
  g_nmark = k;
}

int main(int argc, char **argv) {
  long nsubs = 100, interval = 100;
  double seconds = 15, marker_ms = 37;
  if (argc < 3)
    goto usage;
  for (int i = 3; i < argc; i++) {
    if (strcmp(argv[i], "--full-decode") == 0) {
      g_full = 1;
      continue;
    }
    if (strcmp(argv[i], "--profile") == 0 && i + 1 < argc) {
      const char *v = argv[++i];
      g_profile = strcmp(v, "heavy") == 0     ? 0
                  : strcmp(v, "top") == 0     ? 1
                  : strcmp(v, "light") == 0   ? 2
                  : strcmp(v, "cores") == 0   ? 3
                  : strcmp(v, "default") == 0 ? 4
                                              : -1;
      if (g_profile < 0)
        goto usage;
      continue;
    }
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (v == NULL)
      goto usage;
    if (strcmp(argv[i], "--tls") == 0) {
      g_ctx = SSL_CTX_new(TLS_client_method());
      if (g_ctx == NULL || SSL_CTX_load_verify_locations(g_ctx, v, NULL) != 1)
        die("TLS CA file");
      SSL_CTX_set_verify(g_ctx, SSL_VERIFY_PEER, NULL);
    } else if (strcmp(argv[i], "--token") == 0)
      g_token = v;
    else if (strcmp(argv[i], "--subs") == 0)
      nsubs = atol(v);
    else if (strcmp(argv[i], "--interval") == 0)
      interval = atol(v);
    else if (strcmp(argv[i], "--seconds") == 0)
      seconds = atof(v);
    else if (strcmp(argv[i], "--marker-ms") == 0)
      marker_ms = atof(v);
    else if (strcmp(argv[i], "--marker-target") == 0)
      snprintf(g_marker, sizeof(g_marker), "%s", v);
    else
      goto usage;
    i++;
  }
  if (nsubs < 0 || nsubs > MAX_SUBS || interval < 1 || seconds <= 0 || marker_ms < 1)
    goto usage;
  signal(SIGPIPE, SIG_IGN);
  signal(SIGTERM, on_term);
  signal(SIGINT, on_term);
  g_tsend = calloc(MAX_MARKERS + 1, sizeof(*g_tsend));
  g_lat = tmpfile();
  if (g_tsend == NULL || g_lat == NULL)
    die("alloc");

  /* marker connection first: the marker target exists before anyone subscribes */
  int mfd = dial(argv[2]);
  if (mfd < 0)
    goto usage;
  char pre[200];
  int pl = snprintf(pre, sizeof(pre), "TLCAP/1 target=%s format=bin11\n", g_marker);
  send_all(mfd, (const uint8_t *)pre, (size_t)pl);
  uint64_t k = 1;
  marker_write(mfd, k);

  sub_t *subs = calloc((size_t)(nsubs > 0 ? nsubs : 1), sizeof(*subs));
  struct pollfd *pf = calloc((size_t)nsubs + 1, sizeof(*pf));
  if (subs == NULL || pf == NULL)
    die("alloc");
  for (long i = 0; i < nsubs; i++) {
    sub_t *s = &subs[i];
    s->fd = dial(argv[1]);
    if (s->fd < 0)
      goto usage;
    s->cap = RBUF;
    s->buf = malloc(s->cap);
    if (s->buf == NULL)
      die("malloc");
    if (g_ctx != NULL) {
      s->ssl = SSL_new(g_ctx);
      if (s->ssl == NULL || SSL_set_fd(s->ssl, s->fd) != 1 || SSL_connect(s->ssl) != 1) {
        ERR_print_errors_fp(stderr);
        die("TLS handshake");
      }
    }
    Tlcap__ClientMessage m = TLCAP__CLIENT_MESSAGE__INIT;
    Tlcap__Hello h = TLCAP__HELLO__INIT;
    h.protocol_version = 1;
    h.client_name = "benchd_subs";
    if (g_token != NULL) {
      h.token.data = (uint8_t *)g_token;
      h.token.len = strlen(g_token);
    }
    m.request_id = 1;
    m.msg_case = TLCAP__CLIENT_MESSAGE__MSG_HELLO;
    m.hello = &h;
    if (s->ssl != NULL)
      send_msg_ssl(s->ssl, &m);
    else
      send_msg(s->fd, &m);
    Tlcap__Subscribe sb = TLCAP__SUBSCRIBE__INIT;
    uint32_t cols[64];
    sb.subscription_id = 1;
    sb.interval_ms = (uint32_t)interval;
    sb.n_columns = profile_columns(cols);
    sb.columns = cols;
    sb.windows = g_profile == 0;
    sb.neutral = g_profile == 0;
    sb.neutral_only = g_profile == 1 || g_profile == 2;
    Tlcap__ClientMessage m2 = TLCAP__CLIENT_MESSAGE__INIT;
    m2.request_id = 2;
    m2.msg_case = TLCAP__CLIENT_MESSAGE__MSG_SUBSCRIBE;
    m2.subscribe = &sb;
    if (s->ssl != NULL)
      send_msg_ssl(s->ssl, &m2);
    else
      send_msg(s->fd, &m2);
    if (fcntl(s->fd, F_SETFL, O_NONBLOCK) < 0)
      die("fcntl");
  }

  double t_start = now_s(), t_ready = 0, t_end = 0, next_marker = t_start + marker_ms / 1e3;
  int ready = nsubs == 0;
  if (ready) {
    t_ready = t_start;
    t_end = t_ready + seconds;
    printf("ready\n");
    fflush(stdout);
  }
  for (long iter = 0; iter < 100000000L; iter++) {
    double t = now_s();
    if (!ready && t - t_start > 20) {
      fprintf(stderr, "benchd_subs: subscribers not ready within 20 s\n");
      return 1;
    }
    if ((ready && t >= t_end) || g_stop)
      break;
    if (t >= next_marker) {
      if (k < MAX_MARKERS)
        marker_write(mfd, ++k);
      next_marker += marker_ms / 1e3;
      if (next_marker < t)
        next_marker = t + marker_ms / 1e3;
    }
    for (long i = 0; i < nsubs; i++) {
      pf[i].fd = subs[i].fd;
      pf[i].events = subs[i].fd >= 0 ? POLLIN : 0;
      pf[i].revents = 0;
    }
    int wait_ms = (int)((next_marker - now_s()) * 1e3) + 1;
    if (wait_ms < 0)
      wait_ms = 0;
    if (nsubs > 0) {
      if (poll(pf, (nfds_t)nsubs, wait_ms) < 0 && errno != EINTR)
        die("poll");
    } else {
      usleep((useconds_t)wait_ms * 1000);
    }
    for (long i = 0; i < nsubs; i++) {
      if (pf[i].revents == 0)
        continue;
      if (sub_read(&subs[i]) < 0) {
        fprintf(stderr, "benchd_subs: subscriber %ld: connection closed by tlcapd\n", i);
        return 1;
      }
    }
    if (!ready) {
      long n = 0;
      for (long i = 0; i < nsubs; i++)
        n += subs[i].acked && subs[i].ready;
      if (n == nsubs) {
        ready = 1;
        t_ready = now_s();
        t_end = t_ready + seconds;
        printf("ready\n");
        fflush(stdout);
      }
    }
  }
  /* report */
  uint64_t snaps = 0, msnaps = 0, bytes = 0, errors = 0, bsnaps = 0, bbytes = 0;
  for (long i = 0; i < nsubs; i++) {
    snaps += subs[i].snaps;
    bsnaps += subs[i].bulk_snaps;
    bbytes += subs[i].bulk_bytes;
    msnaps += subs[i].marker_snaps;
    bytes += subs[i].bytes;
    errors += subs[i].errors;
    SSL_free(subs[i].ssl);
    close(subs[i].fd);
    free(subs[i].buf);
  }
  for (uint64_t i = 1; i <= g_nmark; i++)
    printf("M %" PRIu64 " %.6f\n", i, g_tsend[i]);
  rewind(g_lat);
  char line[128];
  for (uint64_t i = 0; i < g_lat_n && fgets(line, sizeof(line), g_lat) != NULL; i++)
    fputs(line, stdout);
  printf("{\"subs\":%ld,\"interval_ms\":%ld,\"seconds\":%.3f,\"markers\":%" PRIu64
         ",\"latency_samples\":%" PRIu64 ",\"snapshots\":%" PRIu64 ",\"marker_snapshots\":%" PRIu64
         ",\"bytes\":%" PRIu64 ",\"errors\":%" PRIu64
         ",\"full_decode\":%d,\"bulk_snapshots\":%" PRIu64 ",\"bulk_bytes\":%" PRIu64 "}\n",
         nsubs, interval, now_s() - t_ready, g_nmark, g_lat_n, snaps, msnaps, bytes, errors, g_full,
         bsnaps, bbytes);
  /* the marker sender, too, half-closes and waits for tlcapd's close */
  if (shutdown(mfd, SHUT_WR) == 0) {
    double deadline = now_s() + 10;
    char b[256];
    while (now_s() < deadline) {
      struct pollfd p1 = { .fd = mfd, .events = POLLIN, .revents = 0 };
      if (poll(&p1, 1, 100) <= 0)
        continue;
      if (read(mfd, b, sizeof(b)) <= 0)
        break;
    }
  }
  close(mfd);
  free(subs);
  free(pf);
  free(g_tsend);
  return errors ? 1 : 0;
usage:
  fprintf(stderr, "usage: benchd_subs SERVE_ADDR INGEST_ADDR [--subs N] [--interval MS] "
                  "[--seconds S] [--marker-ms MS] [--marker-target NAME] "
                  "[--profile heavy|top|light|cores|default] [--full-decode] "
                  "[--tls CAFILE [--token TOKEN]]\n");
  return 2;
}
