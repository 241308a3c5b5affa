/* log.c - levels, debug switches, per-site rate limiting and a bounded non-blocking sink.
 *
 * Design: a line is formatted into a stack buffer (capped at 1 KiB, truncated with "..."),
 * then either written straight to fd 2 or, when the sink is busy (EAGAIN) or already has a
 * backlog, appended to one 64 KiB buffer; when that is full the line is dropped and counted.
 * The buffer is retried by tlc_log_flush (the daemon calls it from a timer), so the loop never
 * waits on a slow journal or a stopped pipe reader. Only pipes and sockets are switched to
 * O_NONBLOCK: a terminal or file on stderr may be shared with the invoking shell, and writing
 * to them does not stall indefinitely.
 *
 * Rate limiting is per call site, keyed by the format string's address in a small open-
 * addressed table (64 sites; sites beyond that are not limited). Cost per line: one
 * vsnprintf and one write.
 *
 * Under systemd (JOURNAL_STREAM names our stderr) a line is one datagram of journald's native
 * protocol ("KEY=value\n" fields: MESSAGE, PRIORITY, SYSLOG_IDENTIFIER, TLCAP_COMPONENT and,
 * when the message names them, TARGET, PEER, SEGMENT, DEVICE; see tlc_log_fields), sent with
 * MSG_DONTWAIT to /run/systemd/journal/socket. This is what libsystemd's sd_journal_send
 * writes, but sd_journal_send blocks once journald's queue is full, and a stalled log reader
 * must never stall capture (RELIABILITY T38): a datagram that cannot be sent at once goes
 * down the stderr path instead ("<N>" prefix, bounded buffer, drops counted).
 *
 * Not thread-safe: loop thread only.
 */
#include "base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define LINE_MAX_ 1024
#define NSITES    64

typedef struct site {
  const char *fmt;
  int64_t window_start;
  unsigned count;
  uint64_t suppressed;
  int level;
  unsigned comp;
  char example[128]; /* last suppressed line of a "%s" passthrough site (its format says
                        nothing), for the summary line */
} site_t;

static struct {
  int level;
  unsigned debug;
  int journal;
  int jfd;                    /* datagram socket to journald, -1: none */
  struct sockaddr_un jaddr;   /* journald's native socket */
  uint64_t journal_fallbacks; /* datagrams that went to stderr instead */
  int nonblock;
  char buf[TLC_LOG_BUFFER];
  size_t len;
  uint64_t dropped, dropped_unreported;
  uint64_t suppressed;
  site_t sites[NSITES];
} L = { .level = TLC_LOG_INFO, .jfd = -1 };

#define JOURNAL_SOCKET "/run/systemd/journal/socket"

static const struct {
  const char *name;
  unsigned bit;
} comps[] = { { "main", TLC_LOGC_MAIN },     { "config", TLC_LOGC_CONFIG },
              { "tcp", TLC_LOGC_TCP },       { "dial", TLC_LOGC_DIAL },
              { "serial", TLC_LOGC_SERIAL }, { "target", TLC_LOGC_TARGET },
              { "notify", TLC_LOGC_NOTIFY }, { "pubsub", TLC_LOGC_PUBSUB },
              { "store", TLC_LOGC_STORE },   { "engine", TLC_LOGC_ENGINE },
              { "efl", TLC_LOGC_EFL } };

static const char *const level_names[] = { "emerg", "alert",  "crit", "err",
                                           "warn",  "notice", "info", "debug" };

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *comp_name(unsigned comp) {
  for (size_t i = 0; i < sizeof(comps) / sizeof(comps[0]); i++)
    if (comps[i].bit == comp)
      return comps[i].name;
  return "tlcapd";
}

void tlc_log_init(void) {
  struct stat st;
  const char *js = getenv("JOURNAL_STREAM");
  L.journal = 0;
  if (js != NULL && *js != '\0' && fstat(2, &st) == 0) {
    /* JOURNAL_STREAM=dev:ino of the stream journald gave us; only trust it for our stderr. */
    unsigned long long dev, ino;
    if (sscanf(js, "%llu:%llu", &dev, &ino) == 2 && (unsigned long long)st.st_dev == dev &&
        (unsigned long long)st.st_ino == ino)
      L.journal = 1;
  }
  if (L.journal && L.jfd < 0) {
    L.jfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    memset(&L.jaddr, 0, sizeof(L.jaddr));
    L.jaddr.sun_family = AF_UNIX;
    memcpy(L.jaddr.sun_path, JOURNAL_SOCKET, sizeof(JOURNAL_SOCKET));
  }
  if (fstat(2, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) {
    int fl = fcntl(2, F_GETFL);
    if (fl >= 0 && fcntl(2, F_SETFL, fl | O_NONBLOCK) == 0)
      L.nonblock = 1;
  }
}

/* Tries to write the buffer out. Returns 1 when it is empty afterwards. */
static int drain(void) {
  while (L.len > 0) {
    ssize_t w = write(2, L.buf, L.len);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        return 0;
      L.len = 0; /* stderr gone (EPIPE, EBADF): nothing can be done */
      return 1;
    }
    memmove(L.buf, L.buf + w, L.len - (size_t)w);
    L.len -= (size_t)w;
  }
  return 1;
}

static void sink(const char *line, size_t n) {
  if (L.len == 0) {
    while (n > 0) {
      ssize_t w = write(2, line, n);
      if (w < 0) {
        if (errno == EINTR)
          continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
          return; /* stderr closed: lines are lost, not an error of ours */
        break;
      }
      line += w;
      n -= (size_t)w;
    }
    if (n == 0)
      return;
  }
  if (n > sizeof(L.buf) - L.len) {
    L.dropped++;
    L.dropped_unreported++;
    return;
  }
  memcpy(L.buf + L.len, line, n);
  L.len += n;
  drain();
}

/* ---- structured fields for the journal ---- */

static int is_name_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         strchr("._-@:#+=[]/", c) != NULL;
}

/* Copies the token at p (up to a space, or `stop`) into out, without one trailing ':'. */
static void take(const char *p, char stop, char *out, size_t cap) {
  size_t n = 0;
  while (p[n] != '\0' && p[n] != ' ' && p[n] != stop && n + 1 < cap)
    n++;
  if (n > 0 && p[n - 1] == ':' && stop != ':')
    n--;
  memcpy(out, p, n);
  out[n] = '\0';
}

/* The text after the first occurrence of `key`, or NULL. */
static const char *after(const char *msg, const char *key) {
  const char *p = strstr(msg, key);
  return p != NULL ? p + strlen(key) : NULL;
}

static int starts(const char *msg, const char *key) {
  return strncmp(msg, key, strlen(key)) == 0;
}

/* A segment file name: ends in .txt.BIN, .xml.BIN or .log, with .part, .zst, .torn or
 * .skipped after it. */
static int is_segment(const char *tok) {
  static const char *const base[] = { ".txt.BIN", ".xml.BIN", ".log" };
  static const char *const tail[] = { "", ".part", ".zst", ".torn", ".skipped" };
  size_t n = strlen(tok);
  for (size_t i = 0; i < sizeof(base) / sizeof(base[0]); i++)
    for (size_t j = 0; j < sizeof(tail) / sizeof(tail[0]); j++) {
      size_t bl = strlen(base[i]), tl = strlen(tail[j]);
      if (n > bl + tl && memcmp(tok + n - tl, tail[j], tl) == 0 &&
          memcmp(tok + n - tl - bl, base[i], bl) == 0)
        return 1;
    }
  return 0;
}

void tlc_log_fields(const char *msg, unsigned comp, tlc_log_fields_t *f) {
  const char *p;
  memset(f, 0, sizeof(*f));
  /* Sources and targets: "target NAME ...", "dial NAME ...", "serial NAME ..." (dial and
   * serial names are target names), then "(PEER)" or "(DEVICE)" right after the name. */
  if (starts(msg, "target ") || starts(msg, "dial ") || starts(msg, "serial ")) {
    p = strchr(msg, ' ') + 1;
    take(p, '\0', f->target, sizeof(f->target));
    p += strcspn(p, " ");
    if (p[0] == ' ' && p[1] == '(') {
      if (starts(msg, "serial "))
        take(p + 2, ')', f->device, sizeof(f->device));
      else
        take(p + 2, ')', f->peer, sizeof(f->peer));
    }
  } else if (starts(msg, "connection ")) {
    /* "connection PEER on LISTENER (target NAME): ..." */
    take(msg + strlen("connection "), '\0', f->peer, sizeof(f->peer));
  } else if (starts(msg, "sub#")) {
    /* pubsub: "sub#N PEER: ..." */
    p = strchr(msg, ' ');
    if (p != NULL)
      take(p + 1, '\0', f->peer, sizeof(f->peer));
  }
  if (f->target[0] == '\0' && (p = after(msg, "target ")) != NULL)
    take(p, ')', f->target, sizeof(f->target));
  if (f->peer[0] == '\0' && (p = after(msg, "connected from ")) != NULL)
    take(p, '\0', f->peer, sizeof(f->peer));
  /* Storage: the first token that is a segment file; its directory is the target's. */
  for (p = msg; *p != '\0';) {
    char tok[sizeof(f->segment)];
    size_t n;
    while (*p == ' ' || *p == '(')
      p++;
    take(p, '\0', tok, sizeof(tok));
    n = strlen(tok);
    while (n > 0 && strchr(",;)", tok[n - 1]) != NULL)
      tok[--n] = '\0';
    if (is_segment(tok)) {
      const char *slash = strrchr(tok, '/');
      memcpy(f->segment, tok, n + 1);
      if (f->target[0] == '\0' && slash != NULL) {
        const char *d = slash;
        while (d > tok && d[-1] != '/')
          d--;
        if (slash > d && (size_t)(slash - d) < sizeof(f->target)) {
          memcpy(f->target, d, (size_t)(slash - d));
          f->target[slash - d] = '\0';
        }
      }
      break;
    }
    p += strcspn(p, " ");
  }
  /* Storage lines "NAME: ..." name their target first. */
  if (f->target[0] == '\0' && comp == TLC_LOGC_STORE) {
    size_t n = strcspn(msg, " ");
    static const char *const words[] = { "retention:", "reconfigure:", "close:", "recovery:",
                                         "storage:",   "disk",         "store:" };
    int word = 0;
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
      word |= strlen(words[i]) == n && strncmp(msg, words[i], n) == 0;
    if (!word && n > 1 && n < sizeof(f->target) && msg[n - 1] == ':')
      take(msg, '\0', f->target, sizeof(f->target));
  }
  /* Only names made of name characters are fields (a stray word is not a target). */
  for (p = f->target; *p != '\0'; p++)
    if (!is_name_char(*p)) {
      f->target[0] = '\0';
      break;
    }
}

void tlc_log_set_journal_socket(const char *path) {
  size_t n = strlen(path);
  if (n < sizeof(L.jaddr.sun_path))
    memcpy(L.jaddr.sun_path, path, n + 1);
}

uint64_t tlc_log_journal_fallbacks(void) {
  return L.journal_fallbacks;
}

static size_t field(char *buf, size_t cap, size_t n, const char *key, const char *v) {
  int w;
  if (v[0] == '\0' || n >= cap)
    return n;
  w = snprintf(buf + n, cap - n, "%s=%s\n", key, v);
  if (w < 0 || (size_t)w >= cap - n)
    return n; /* the field does not fit: left out, the datagram stays well-formed */
  return n + (size_t)w;
}

/* One native-protocol datagram. Returns 0 when journald took it. */
static int journal_send(int level, unsigned comp, const char *msg) {
  char dg[LINE_MAX_ + 1024], lv[4];
  tlc_log_fields_t f;
  size_t n = 0;
  int w;
  if (L.jfd < 0)
    return -1;
  tlc_log_fields(msg, comp, &f);
  w = snprintf(dg, sizeof(dg), "MESSAGE=%s: %s\n", comp_name(comp), msg);
  if (w < 0 || (size_t)w >= sizeof(dg))
    return -1;
  n = (size_t)w;
  snprintf(lv, sizeof(lv), "%d", level & 7);
  n = field(dg, sizeof(dg), n, "PRIORITY", lv);
  n = field(dg, sizeof(dg), n, "SYSLOG_IDENTIFIER", "tlcapd");
  n = field(dg, sizeof(dg), n, "TLCAP_COMPONENT", comp_name(comp));
  n = field(dg, sizeof(dg), n, "TARGET", f.target);
  n = field(dg, sizeof(dg), n, "PEER", f.peer);
  n = field(dg, sizeof(dg), n, "SEGMENT", f.segment);
  n = field(dg, sizeof(dg), n, "DEVICE", f.device);
  for (;;) {
    ssize_t r = sendto(L.jfd, dg, n, MSG_DONTWAIT | MSG_NOSIGNAL, (const struct sockaddr *)&L.jaddr,
                       sizeof(L.jaddr));
    if (r >= 0)
      return 0;
    if (errno != EINTR)
      break;
  }
  L.journal_fallbacks++;
  return -1;
}

static void emit(int level, unsigned comp, const char *msg) {
  char line[LINE_MAX_ + 96];
  int n;
  if (L.journal && journal_send(level, comp, msg) == 0)
    return;
  if (L.journal) {
    n = snprintf(line, sizeof(line), "<%d>%s: %s\n", level, comp_name(comp), msg);
  } else {
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s %s: %s\n",
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                 ts.tv_nsec / 1000000, level_names[level & 7], comp_name(comp), msg);
  }
  if (n < 0)
    return;
  if ((size_t)n >= sizeof(line))
    n = (int)sizeof(line) - 1;
  sink(line, (size_t)n);
}

static void report_site(site_t *s) {
  char msg[LINE_MAX_];
  snprintf(msg, sizeof(msg), "suppressed %llu messages like: %.200s",
           (unsigned long long)s->suppressed, s->example[0] ? s->example : s->fmt);
  s->suppressed = 0;
  s->example[0] = '\0';
  emit(s->level, s->comp, msg);
}

/* Returns 1 if the line may be written; else 0 with *sup set to the site that suppressed it. */
static int rate_ok(const char *fmt, int level, unsigned comp, site_t **sup) {
  size_t h = (((size_t)(uintptr_t)fmt >> 3) ^ (size_t)level * 31u ^ (size_t)comp * 131u) % NSITES;
  int64_t now = mono_ms();
  for (size_t i = 0; i < NSITES; i++) {
    site_t *s = &L.sites[(h + i) % NSITES];
    if (s->fmt == NULL) {
      s->fmt = fmt;
      s->window_start = now;
      s->count = 1;
      s->level = level;
      s->comp = comp;
      return 1;
    }
    /* a site is a format, a level and a component: lines passed through as "%s" by the pubsub
     * and storage modules share a format, and one module's info lines must neither use up the
     * other's burst nor hide a warning under an info-level summary */
    if (s->fmt != fmt || s->level != level || s->comp != comp)
      continue;
    if (now - s->window_start >= TLC_LOG_INTERVAL_MS) {
      if (s->suppressed > 0)
        report_site(s);
      s->window_start = now;
      s->count = 0;
    }
    if (s->count < TLC_LOG_BURST) {
      s->count++;
      return 1;
    }
    s->suppressed++;
    L.suppressed++;
    *sup = s;
    return 0;
  }
  return 1;
}

void tlc_log_flush(int final) {
  int64_t now = mono_ms();
  for (size_t i = 0; i < NSITES; i++) {
    site_t *s = &L.sites[i];
    if (s->fmt != NULL && s->suppressed > 0 &&
        (final || now - s->window_start >= TLC_LOG_INTERVAL_MS)) {
      report_site(s);
      s->window_start = now;
      s->count = 0;
    }
  }
  if (drain() && L.dropped_unreported > 0) {
    char msg[96];
    snprintf(msg, sizeof(msg), "log: %llu lines dropped (log sink stalled)",
             (unsigned long long)L.dropped_unreported);
    L.dropped_unreported = 0;
    emit(TLC_LOG_WARN, TLC_LOGC_MAIN, msg);
  }
  if (final && L.nonblock) {
    /* At exit: give a slow reader a moment, then give up (never hang shutdown). */
    for (int i = 0; i < 100 && !drain(); i++) {
      struct timespec ts = { 0, 10 * 1000 * 1000 };
      nanosleep(&ts, NULL);
    }
  }
}

void tlc_log_set_level(int level) {
  if (level >= TLC_LOG_ERR && level <= TLC_LOG_DEBUG)
    L.level = level;
}

int tlc_log_get_level(void) {
  return L.level;
}

int tlc_log_parse_level(const char *s) {
  static const struct {
    const char *n;
    int l;
  } t[] = { { "err", TLC_LOG_ERR },      { "error", TLC_LOG_ERR },     { "warn", TLC_LOG_WARN },
            { "warning", TLC_LOG_WARN }, { "notice", TLC_LOG_NOTICE }, { "info", TLC_LOG_INFO },
            { "debug", TLC_LOG_DEBUG } };
  for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
    if (strcmp(s, t[i].n) == 0)
      return t[i].l;
  if (s[0] >= '3' && s[0] <= '7' && s[1] == '\0')
    return s[0] - '0';
  return -1;
}

static int debug_bits(const char *list, unsigned *out) {
  unsigned bits = 0;
  const char *p = list;
  while (*p != '\0') {
    size_t n = strcspn(p, ", ");
    int found = 0;
    if (n == 3 && strncmp(p, "all", 3) == 0) {
      bits = TLC_LOGC_ALL;
      found = 1;
    } else if (n == 4 && strncmp(p, "none", 4) == 0) {
      bits = 0;
      found = 1;
    }
    for (size_t i = 0; !found && i < sizeof(comps) / sizeof(comps[0]); i++) {
      if (strlen(comps[i].name) == n && strncmp(p, comps[i].name, n) == 0) {
        bits |= comps[i].bit;
        found = 1;
      }
    }
    if (n > 0 && !found)
      return -1;
    p += n;
    while (*p == ',' || *p == ' ')
      p++;
  }
  *out = bits;
  return 0;
}

int tlc_log_check_debug(const char *list) {
  unsigned bits;
  return debug_bits(list, &bits);
}

int tlc_log_set_debug(const char *list) {
  unsigned bits;
  if (debug_bits(list, &bits) != 0)
    return -1;
  L.debug = bits;
  return 0;
}

int tlc_log_enabled(int level, unsigned comp) {
  if (level == TLC_LOG_DEBUG)
    return L.level >= TLC_LOG_DEBUG || (L.debug & comp) != 0;
  return level <= L.level;
}

void tlc_log(int level, unsigned comp, const char *fmt, ...) {
  char msg[LINE_MAX_];
  va_list ap;
  site_t *sup = NULL;
  if (!tlc_log_enabled(level, comp))
    return;
  if (level != TLC_LOG_DEBUG && !rate_ok(fmt, level, comp, &sup)) {
    /* Lines passed through as "%s" (from the pubsub and storage modules) share one site; keep
     * the text of the last one so the summary names what was suppressed. */
    if (strcmp(fmt, "%s") == 0) {
      va_start(ap, fmt);
      vsnprintf(sup->example, sizeof(sup->example), fmt, ap);
      va_end(ap);
      for (char *c = sup->example; *c != '\0'; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
          *c = '?';
    }
    return;
  }
  va_start(ap, fmt);
  int n = vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (n >= (int)sizeof(msg))
    memcpy(msg + sizeof(msg) - 4, "...", 4);
  /* Control characters from peers never reach the log raw. */
  for (char *c = msg; *c != '\0'; c++)
    if ((unsigned char)*c < 0x20 || *c == 0x7f)
      *c = '?';
  emit(level, comp, msg);
}

uint64_t tlc_log_dropped(void) {
  return L.dropped;
}

uint64_t tlc_log_suppressed(void) {
  return L.suppressed;
}
