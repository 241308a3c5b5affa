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
 * Not thread-safe: loop thread only.
 */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
  int nonblock;
  char buf[TLC_LOG_BUFFER];
  size_t len;
  uint64_t dropped, dropped_unreported;
  uint64_t suppressed;
  site_t sites[NSITES];
} L = { TLC_LOG_INFO, 0, 0, 0, { 0 }, 0, 0, 0, 0, { { 0 } } };

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

static void emit(int level, unsigned comp, const char *msg) {
  char line[LINE_MAX_ + 96];
  int n;
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
