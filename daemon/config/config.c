/* config.c - INI file (inih), command line and embedded default, into one tlc_config_t.
 *
 * inih calls a handler per "key = value"; it does not tell the handler the line number, so the
 * file is read through ini_parse_stream with a reader that counts lines: the handler runs for
 * the line the reader returned last, which gives every error its FILE:LINE. Only the first
 * error is kept (inih goes on parsing; later errors are usually consequences). A line longer
 * than inih's line buffer is refused with its FILE:LINE, never handed over in pieces.
 *
 * The command line uses the same key table as [daemon] (`--max-connections 64` is
 * `max_connections = 64`), so every option exists in both places by construction: the
 * getopt_long option array is built from that table (cli_build_options).
 *
 * Caps: at most TLC_CFG_MAX_SOURCES sources and TLC_CFG_MAX_TARGETS [target] sections; values
 * are bounded by their fields (fixed-size strings, checked numbers). No allocation beyond the
 * two arrays made by tlc_config_init.
 */
#include "config/config-int.h"

#include "base/log.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/fileread.h"
#include "base/out.h"
#include "tlc_version.h"

#include "auth/auth.h"
#include "auth/peers.h"
#include "alert/alert.h"
#include "auth/tls.h"

#include <arpa/inet.h>
#include <ini.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <netinet/in.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef struct pctx {
  tlc_config_t *c;
  const char *origin;
  unsigned line;
  char *err;
  size_t errlen;
  int failed;
  /* string reader */
  const char *p;
  FILE *f;
  uint64_t bytes; /* file reader: bytes read so far, capped at TLC_CFG_MAX_FILE */
  int too_big;    /* file reader: stopped at the cap, or at a NUL byte (1: size, 2: NUL) */
  int too_long;   /* stopped at a line longer than inih's buffer: its limit in bytes */
} pctx_t;

/* A configuration file is a few KiB; past this it is not one (--config /dev/zero is refused,
 * not read forever). */
#define TLC_CFG_MAX_FILE (1u << 20)

static void seterr(char *err, size_t errlen, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static void seterr(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  if (err == NULL || errlen == 0)
    return;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

static int copy_str(char *dst, size_t cap, const char *v) {
  size_t n = strlen(v);
  if (n >= cap)
    return -1;
  memcpy(dst, v, n + 1);
  return 0;
}

int tlc_config_parse_duration_ms(const char *s, uint64_t *ms) {
  char *end;
  double v;
  errno = 0;
  if (*s == '\0' || *s == '-')
    return TLC_EINVAL;
  v = strtod(s, &end);
  if (errno != 0 || end == s || v < 0)
    return TLC_EINVAL;
  if (*end == '\0' || strcmp(end, "ms") == 0)
    ;
  else if (strcmp(end, "s") == 0)
    v *= 1e3;
  else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
    v *= 60e3;
  else if (strcmp(end, "h") == 0)
    v *= 3600e3;
  else if (strcmp(end, "us") == 0)
    v /= 1e3;
  else
    return TLC_EINVAL;
  if (v > 1e15)
    return TLC_EINVAL;
  *ms = (uint64_t)(v + 0.5);
  return 0;
}

static int parse_size(const char *s, uint64_t max, uint64_t *out) {
  char *end;
  unsigned long long v;
  uint64_t mul = 1;
  errno = 0;
  if (*s == '\0' || *s == '-' || !isdigit((unsigned char)*s))
    return TLC_EINVAL;
  v = strtoull(s, &end, 10);
  if (errno != 0)
    return TLC_EINVAL;
  if (*end == 'k' || *end == 'K')
    mul = 1024;
  else if (*end == 'M')
    mul = 1024 * 1024;
  else if (*end == 'G')
    mul = 1024ull * 1024 * 1024;
  if (mul != 1)
    end++;
  if (*end == 'B' || *end == 'i')
    end += (*end == 'i' && end[1] == 'B') ? 2 : 1;
  if (*end != '\0')
    return TLC_EINVAL;
  if (v > max / mul)
    return TLC_ERANGE;
  *out = v * mul;
  return 0;
}

static int parse_bool(const char *s, int *out) {
  static const char *const yes[] = { "1", "yes", "true", "on" };
  static const char *const no[] = { "0", "no", "false", "off" };
  for (size_t i = 0; i < 4; i++) {
    if (strcasecmp(s, yes[i]) == 0) {
      *out = 1;
      return 0;
    }
    if (strcasecmp(s, no[i]) == 0) {
      *out = 0;
      return 0;
    }
  }
  return TLC_EINVAL;
}

static int parse_handle(const char *s, uint32_t *out) {
  char *end;
  unsigned long h;
  errno = 0;
  if (*s == '\0' || *s == '-')
    return TLC_EINVAL;
  h = strtoul(s, &end, 16);
  if (errno != 0 || end == s || *end != '\0' || h > 0xFFFFFFFFul)
    return TLC_EINVAL;
  *out = (uint32_t)h;
  return 0;
}

int tlc_config_parse_hostport(const char *s, char *host, size_t hostlen, uint16_t *port) {
  const char *colon;
  const char *h = s;
  size_t hl;
  char *end;
  unsigned long p;
  if (s[0] == '[') {
    const char *rb = strchr(s, ']');
    if (rb == NULL || rb[1] != ':')
      return TLC_EINVAL;
    h = s + 1;
    hl = (size_t)(rb - h);
    colon = rb + 1;
  } else {
    colon = strrchr(s, ':');
    if (colon == NULL)
      return TLC_EINVAL;
    hl = (size_t)(colon - s);
    if (memchr(s, ':', hl) != NULL)
      return TLC_EINVAL; /* a bare IPv6 address needs brackets */
  }
  if (hl == 0 || hl >= hostlen)
    return TLC_EINVAL;
  errno = 0;
  p = strtoul(colon + 1, &end, 10);
  if (errno != 0 || end == colon + 1 || *end != '\0' || p > 65535 || colon[1] == '-')
    return TLC_EINVAL;
  memcpy(host, h, hl);
  host[hl] = '\0';
  *port = (uint16_t)p;
  return 0;
}

/* ---- listener allow / targets lists ---- */

typedef struct cidr {
  int v6;
  unsigned char a[16];
  unsigned bits;
} cidr_t;

/* Parses one entry "ADDR" or "ADDR/BITS". Returns 0 or TLC_EINVAL. */
static int cidr_parse(const char *s, size_t n, cidr_t *c) {
  char buf[64];
  const char *slash;
  unsigned long bits;
  char *end;
  if (n == 0 || n >= sizeof(buf))
    return TLC_EINVAL;
  memcpy(buf, s, n);
  buf[n] = '\0';
  slash = strchr(buf, '/');
  if (slash != NULL)
    buf[slash - buf] = '\0';
  memset(c, 0, sizeof(*c));
  if (inet_pton(AF_INET, buf, c->a) == 1)
    c->v6 = 0;
  else if (inet_pton(AF_INET6, buf, c->a) == 1)
    c->v6 = 1;
  else
    return TLC_EINVAL;
  c->bits = c->v6 ? 128 : 32;
  if (slash != NULL) {
    errno = 0;
    bits = strtoul(slash + 1, &end, 10);
    if (errno != 0 || end == slash + 1 || *end != '\0' || bits > c->bits)
      return TLC_EINVAL;
    c->bits = (unsigned)bits;
  }
  return 0;
}

static int prefix_eq(const unsigned char *a, const unsigned char *b, unsigned bits) {
  unsigned full = bits / 8, rest = bits % 8;
  if (memcmp(a, b, full) != 0)
    return 0;
  return rest == 0 || ((a[full] ^ b[full]) & (0xFF00u >> rest) & 0xFF) == 0;
}

/* Calls fn for each entry of a comma/space separated list; stops at a non-zero return. */
static int list_each(const char *list, int (*fn)(const char *s, size_t n, void *ud), void *ud) {
  const char *p = list;
  while (*p != '\0') {
    size_t n;
    while (*p == ',' || *p == ' ' || *p == '\t')
      p++;
    n = strcspn(p, ", \t");
    if (n > 0) {
      int r = fn(p, n, ud);
      if (r != 0)
        return r;
    }
    p += n;
  }
  return 0;
}

typedef struct allow_ud {
  char *err;
  size_t errlen;
  int v6;
  const unsigned char *a;
} allow_ud_t;

static int allow_check_one(const char *s, size_t n, void *ud) {
  allow_ud_t *u = ud;
  cidr_t c;
  if (cidr_parse(s, n, &c) != 0) {
    seterr(u->err, u->errlen, "\"%.*s\" is not an address or ADDR/BITS block",
           (int)(n < 64 ? n : 64), s);
    return TLC_EINVAL;
  }
  return 0;
}

int tlc_config_allow_check(const char *list, char *err, size_t errlen) {
  allow_ud_t u = { err, errlen, 0, NULL };
  return list_each(list, allow_check_one, &u);
}

static int allow_match_one(const char *s, size_t n, void *ud) {
  allow_ud_t *u = ud;
  cidr_t c;
  if (cidr_parse(s, n, &c) != 0 || c.v6 != u->v6)
    return 0;
  return prefix_eq(c.a, u->a, c.bits);
}

int tlc_config_allow_match(const char *list, const void *sa) {
  const struct sockaddr *s = sa;
  allow_ud_t u = { NULL, 0, 0, NULL };
  if (list[0] == '\0')
    return 1;
  if (s->sa_family == AF_INET) {
    u.a = (const unsigned char *)&((const struct sockaddr_in *)sa)->sin_addr;
  } else if (s->sa_family == AF_INET6) {
    const unsigned char *a = (const unsigned char *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
    static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
    if (memcmp(a, mapped, 12) == 0) {
      u.a = a + 12;
    } else {
      u.v6 = 1;
      u.a = a;
    }
  } else {
    return 0;
  }
  return list_each(list, allow_match_one, &u) > 0;
}

static int targets_match_one(const char *s, size_t n, void *ud) {
  char pat[TLC_CFG_LIST];
  memcpy(pat, s, n);
  pat[n] = '\0';
  return fnmatch(pat, (const char *)ud, 0) == 0;
}

int tlc_config_targets_match(const char *list, const char *name) {
  if (list[0] == '\0')
    return 1;
  return list_each(list, targets_match_one, (void *)(uintptr_t)name) > 0;
}

static int parse_windows(const char *s, tlc_config_t *c) {
  char buf[256];
  uint32_t n = 0;
  char *save = NULL;
  if (copy_str(buf, sizeof(buf), s) != 0)
    return TLC_EINVAL;
  for (char *tok = strtok_r(buf, ", ", &save); tok != NULL; tok = strtok_r(NULL, ", ", &save)) {
    uint64_t ms;
    if (n == TLC_MAX_WINDOWS || tlc_config_parse_duration_ms(tok, &ms) != 0 || ms == 0 ||
        ms > 86400000ull * 365)
      return TLC_EINVAL;
    c->window_ns[n++] = (int64_t)ms * 1000000;
  }
  if (n == 0)
    return TLC_EINVAL; /* "" or ",,,": no window at all, not the engine's defaults */
  c->nwindows = n;
  return 0;
}

/* Applies one [daemon] key. Returns 0 or TLC_EINVAL with a reason in why. */
static int set_dkey(tlc_config_t *c, const dkey_t *k, const char *v, char *why, size_t wl) {
  char *base = (char *)c;
  switch (k->type) {
  case K_STR:
    if (copy_str(base + k->off, k->size, v) != 0) {
      seterr(why, wl, "value longer than %zu bytes", k->size - 1);
      return TLC_EINVAL;
    }
    return 0;
  case K_SERVE:
    if (strncmp(v, "unix:", 5) == 0) {
      /* sun_path holds 108 bytes with its NUL */
      if (v[5] == '\0' || strlen(v + 5) > 107) {
        seterr(why, wl, "expected unix:PATH with a path of 1 to 107 bytes, got \"%s\"", v);
        return TLC_EINVAL;
      }
      if (copy_str(base + k->off, k->size, v) != 0) {
        seterr(why, wl, "path too long");
        return TLC_EINVAL;
      }
      return 0;
    }
    /* HOST:PORT: as K_ADDR */
    __attribute__((fallthrough));
  case K_ADDR: {
    char host[TLC_CFG_HOST];
    uint16_t port;
    if (*v != '\0' && tlc_config_parse_hostport(v, host, sizeof(host), &port) != 0) {
      seterr(why, wl, "expected HOST:PORT (or empty to disable), got \"%s\"", v);
      return TLC_EINVAL;
    }
    if (copy_str(base + k->off, k->size, v) != 0) {
      seterr(why, wl, "address too long");
      return TLC_EINVAL;
    }
    return 0;
  }
  case K_BOOL:
    if (parse_bool(v, (int *)(void *)(base + k->off)) != 0) {
      seterr(why, wl, "expected yes or no, got \"%s\"", v);
      return TLC_EINVAL;
    }
    return 0;
  case K_SIZE: {
    uint64_t x;
    int r = parse_size(v, k->max, &x);
    if (r != 0 || x < tlc_cfg_dkey_min(k)) {
      seterr(why, wl, "expected a number from %llu to %llu (suffix k, M, G allowed), got \"%s\"",
             (unsigned long long)tlc_cfg_dkey_min(k), (unsigned long long)k->max, v);
      return TLC_EINVAL;
    }
    if (k->size == sizeof(uint32_t))
      *(uint32_t *)(void *)(base + k->off) = (uint32_t)x;
    else
      *(size_t *)(void *)(base + k->off) = (size_t)x;
    return 0;
  }
  case K_U64: {
    uint64_t x;
    if (parse_size(v, k->max, &x) != 0) {
      seterr(why, wl, "expected a number from 0 to %llu (suffix k, M, G allowed), got \"%s\"",
             (unsigned long long)k->max, v);
      return TLC_EINVAL;
    }
    *(uint64_t *)(void *)(base + k->off) = x;
    return 0;
  }
  case K_DUR: {
    uint64_t ms;
    if (tlc_config_parse_duration_ms(v, &ms) != 0 || (k->max != 0 && ms > k->max)) {
      seterr(why, wl, "expected a duration (e.g. 500ms, 2s, 1m), got \"%s\"", v);
      return TLC_EINVAL;
    }
    *(uint64_t *)(void *)(base + k->off) = ms;
    return 0;
  }
  case K_SECS: {
    uint64_t ms;
    char *end;
    double sec;
    errno = 0;
    sec = strtod(v, &end);
    if (*v != '\0' && *v != '-' && end != v && *end == '\0' && errno == 0 && sec >= 0 &&
        sec <= 1e12)
      ms = (uint64_t)(sec * 1e3 + 0.5);
    else if (tlc_config_parse_duration_ms(v, &ms) != 0)
      ms = UINT64_MAX;
    if (ms == UINT64_MAX || (k->max != 0 && ms > k->max)) {
      seterr(why, wl, "expected seconds or a duration (e.g. 60, 500ms, 1m), got \"%s\"", v);
      return TLC_EINVAL;
    }
    *(uint64_t *)(void *)(base + k->off) = ms;
    return 0;
  }
  case K_SYNC:
    /* values of enum tlc_store_sync (store.h), kept numeric here: config.c stays pure */
    if (strcmp(v, "on_close") == 0)
      c->sync_mode = 0;
    else if (strcmp(v, "never") == 0)
      c->sync_mode = 1;
    else if (strcmp(v, "periodic") == 0)
      c->sync_mode = 2;
    else {
      seterr(why, wl, "expected on_close, never or periodic, got \"%s\"", v);
      return TLC_EINVAL;
    }
    return 0;
  case K_MAINEXP:
    /* values of enum tlc_store_main_export (store.h), numeric here like K_SYNC */
    if (strcmp(v, "text1") == 0)
      c->main_export = 0;
    else if (strcmp(v, "xml") == 0)
      c->main_export = 1;
    else {
      seterr(why, wl, "expected text1 or xml, got \"%s\"", v);
      return TLC_EINVAL;
    }
    return 0;
  case K_LEVEL: {
    int l = tlc_log_parse_level(v);
    if (l < 0) {
      seterr(why, wl, "expected err, warn, notice, info or debug, got \"%s\"", v);
      return TLC_EINVAL;
    }
    c->log_level = l;
    return 0;
  }
  case K_DEBUG:
    if (tlc_log_check_debug(v) != 0 || copy_str(c->debug, sizeof(c->debug), v) != 0) {
      seterr(why, wl,
             "expected a list of main, config, tcp, dial, serial, target, notify, pubsub, "
             "store, engine, efl, all, none; got \"%s\"",
             v);
      return TLC_EINVAL;
    }
    return 0;
  case K_WINDOWS:
    if (parse_windows(v, c) != 0) {
      seterr(why, wl, "expected 1 to %d positive durations separated by commas, got \"%s\"",
             TLC_MAX_WINDOWS, v);
      return TLC_EINVAL;
    }
    return 0;
  }
  return TLC_EINVAL;
}

/* ---- sources and [target] sections ---- */

static const char *kind_name(int kind) {
  switch (kind) {
  case TLC_SRC_LISTEN:
    return "listen";
  case TLC_SRC_DIAL:
    return "dial";
  case TLC_SRC_SERIAL:
    return "serial";
  case TLC_SRC_EFL:
    return "efl";
  default:
    return "?";
  }
}

static void source_defaults(tlc_cfg_source_t *s, int kind) {
  memset(s, 0, sizeof(*s));
  s->kind = kind;
  s->baud = 115200;
  s->data_bits = 8;
  s->parity = TLC_PARITY_NONE;
  s->stop_bits = 1;
  s->flow = TLC_FLOW_NONE;
  if (kind == TLC_SRC_EFL) {
    /* efl: evlog targets; efl_debugd's debugger port; efl_debug's poll interval */
    s->format = TLC_FMT_EVLOG;
    tlc_config_parse_hostport(TLC_DEFAULT_EFL_DEBUGD, s->host, sizeof(s->host), &s->port);
    s->has_address = 1;
    s->poll_ms = TLC_DEFAULT_EFL_POLL_MS;
  }
}

/* efl: "debugd" is efl_debugd's debugger (master) port, as a numeric "IP:PORT". */
static int set_efl_debugd(tlc_cfg_source_t *s, const char *v, char *why, size_t wl) {
  unsigned char a[16];
  if (v[0] == '/' || strncmp(v, "unix:", 5) == 0) {
    seterr(
        why, wl,
        "\"%s\" is a Unix socket: efl_debugd's Unix socket ($XDG_RUNTIME_DIR/.edebug/efl_debug/0) "
        "is for applications only; debuggers such as efl_debug and tlcapd use its TCP port "
        "(default %s; the socket goes in debugd_socket, which tlcapd checks the port against: "
        "docs/efl.md)",
        v, TLC_DEFAULT_EFL_DEBUGD);
    return TLC_EINVAL;
  }
  if (tlc_config_parse_hostport(v, s->host, sizeof(s->host), &s->port) != 0 || s->port == 0 ||
      (inet_pton(AF_INET, s->host, a) != 1 && inet_pton(AF_INET6, s->host, a) != 1)) {
    seterr(why, wl, "expected an IP address and port such as %s, got \"%s\"",
           TLC_DEFAULT_EFL_DEBUGD, v);
    return TLC_EINVAL;
  }
  s->has_address = 1;
  return 0;
}

static int set_efl_key(tlc_cfg_source_t *s, const char *key, const char *v, char *why, size_t wl) {
  uint64_t x;
  if (strcmp(key, "pattern") == 0) {
    if (*v == '\0' || copy_str(s->pattern, sizeof(s->pattern), v) != 0) {
      seterr(why, wl, "expected a pattern of 1 to %d bytes", TLC_CFG_PATTERN - 1);
      return TLC_EINVAL;
    }
    return 0;
  }
  if (strcmp(key, "poll_ms") == 0) {
    if (parse_size(v, 60000, &x) != 0 || x < 10) {
      seterr(why, wl, "expected 10 to 60000 milliseconds, got \"%s\"", v);
      return TLC_EINVAL;
    }
    s->poll_ms = (uint32_t)x;
    return 0;
  }
  if (strcmp(key, "debugd") == 0)
    return set_efl_debugd(s, v, why, wl);
  if (strcmp(key, "debugd_socket") == 0) {
    if (copy_str(s->debugd_socket, sizeof(s->debugd_socket), v) != 0 ||
        (strcmp(v, "none") != 0 && v[0] != '/')) {
      seterr(why, wl, "expected an absolute path or \"none\", got \"%s\"", v);
      return TLC_EINVAL;
    }
    return 0;
  }
  if (strcmp(key, "max_targets") == 0) {
    if (parse_size(v, 1000000, &x) != 0 || x < 1) {
      seterr(why, wl, "expected 1 to 1000000 targets, got \"%s\"", v);
      return TLC_EINVAL;
    }
    s->max_targets = (size_t)x;
    return 0;
  }
  seterr(why, wl,
         "unknown option for an [efl] section (pattern, poll_ms, debugd, debugd_socket, "
         "max_targets, mapping, context_area, context_rtos, context_id_mask, "
         "context_state_mask, context_running, context_stopped)");
  return TLC_EINVAL;
}

/* The source (kind, name), created if absent. NULL when the cap is reached. */
static tlc_cfg_source_t *get_source(tlc_config_t *c, int kind, const char *name,
                                    const char *origin) {
  for (size_t i = 0; i < c->nsrc; i++)
    if (c->src[i].kind == kind && strcmp(c->src[i].name, name) == 0)
      return &c->src[i];
  if (c->nsrc == TLC_CFG_MAX_SOURCES)
    return NULL;
  tlc_cfg_source_t *s = &c->src[c->nsrc++];
  source_defaults(s, kind);
  snprintf(s->name, sizeof(s->name), "%s", name);
  snprintf(s->origin, sizeof(s->origin), "%s", origin);
  return s;
}

static tlc_cfg_target_t *get_target(tlc_config_t *c, const char *name) {
  for (size_t i = 0; i < c->ntgt; i++)
    if (strcmp(c->tgt[i].name, name) == 0)
      return &c->tgt[i];
  if (c->ntgt == TLC_CFG_MAX_TARGETS)
    return NULL;
  tlc_cfg_target_t *t = &c->tgt[c->ntgt++];
  memset(t, 0, sizeof(*t));
  snprintf(t->name, sizeof(t->name), "%s", name);
  return t;
}

static int set_tset(tlc_cfg_tset_t *ts, const char *key, const char *v, char *why, size_t wl) {
  if (strcmp(key, "mapping") == 0) {
    if (copy_str(ts->mapping, sizeof(ts->mapping), v) != 0) {
      seterr(why, wl, "path longer than %zu bytes", sizeof(ts->mapping) - 1);
      return TLC_EINVAL;
    }
    return 0;
  }
  if (strcmp(key, "context_area") == 0) {
    if (*v == '\0' || strcmp(v, "none") == 0) {
      ts->has_context_area = 0;
      return 0;
    }
    if (parse_handle(v, &ts->context_area) != 0) {
      seterr(why, wl, "expected a hex handle (e.g. 0x30000000 or 30000000), got \"%s\"", v);
      return TLC_EINVAL;
    }
    ts->has_context_area = 1;
    return 0;
  }
  if (strcmp(key, "context_id_mask") == 0 || strcmp(key, "context_state_mask") == 0) {
    int id = key[8] == 'i';
    if (tlc_ctxpack_parse_mask(v, id ? &ts->pack.id_mask : &ts->pack.state_mask) != 0) {
      seterr(why, wl, "expected a nonzero hex mask (e.g. %s), got \"%s\"",
             id ? "0x0000FFFF" : "0x00FF0000", v);
      return TLC_EINVAL;
    }
    ts->pack_set |= id ? TLC_CFG_PK_ID : TLC_CFG_PK_STATE;
    return 0;
  }
  if (strcmp(key, "context_running") == 0 || strcmp(key, "context_stopped") == 0) {
    int run = key[8] == 'r';
    if (tlc_ctxpack_parse_list(v, run ? ts->pack.run : ts->pack.stop,
                               run ? &ts->pack.nrun : &ts->pack.nstop) != 0) {
      seterr(why, wl, "expected 1 to %d hex state values separated by commas, got \"%s\"",
             TLC_CTXPACK_MAX, v);
      return TLC_EINVAL;
    }
    ts->pack_set |= run ? TLC_CFG_PK_RUN : TLC_CFG_PK_STOP;
    return 0;
  }
  if (strcmp(key, "context_rtos") == 0) {
    if (*v == '\0' || strcmp(v, "none") == 0) {
      ts->rtos[0] = '\0';
      return 0;
    }
    if (copy_str(ts->rtos, sizeof(ts->rtos), v) != 0) {
      seterr(why, wl, "path longer than %zu bytes", sizeof(ts->rtos) - 1);
      return TLC_EINVAL;
    }
    if (tlc_config_read_rtos(v, &ts->rtos_pack, NULL, why, wl) != 0) {
      ts->rtos[0] = '\0';
      return TLC_EINVAL;
    }
    return 0;
  }
  return 1; /* not a tset key */
}

#define RTOS_FILE_MAX (16u << 20)

int tlc_config_read_rtos(const char *path, tlc_ctxpack_t *p, tlc_mapping_t *names, char *err,
                         size_t errlen) {
  char *buf = NULL;
  size_t len = 0;
  tlc_parse_err_t pe;
  int r = tlc_file_read(path, RTOS_FILE_MAX, &buf, &len);
  if (r != 0) {
    seterr(err, errlen, "%s: %s", path,
           r == TLC_ELIMIT ? "larger than the 16 MiB limit" : tlc_strerror(r));
    return r;
  }
  r = tlc_rtos_parse(buf, len, p, names, &pe);
  tlc_free(buf);
  if (r != 0)
    seterr(err, errlen, "%s:%" PRIu64 ": %s", path, pe.line, pe.reason);
  return r;
}

void tlc_config_ctxpack(const tlc_cfg_tset_t *ts, tlc_ctxpack_t *out) {
  if (ts->rtos[0] != '\0')
    *out = ts->rtos_pack;
  else
    tlc_ctxpack_default(out);
  if (ts->pack_set & TLC_CFG_PK_ID)
    out->id_mask = ts->pack.id_mask;
  if (ts->pack_set & TLC_CFG_PK_STATE)
    out->state_mask = ts->pack.state_mask;
  if (ts->pack_set & TLC_CFG_PK_RUN) {
    out->nrun = ts->pack.nrun;
    memcpy(out->run, ts->pack.run, sizeof(out->run));
  }
  if (ts->pack_set & TLC_CFG_PK_STOP) {
    out->nstop = ts->pack.nstop;
    memcpy(out->stop, ts->pack.stop, sizeof(out->stop));
    out->stop_all = 0;
  }
  tlc_ctxpack_finish(out);
}

/* A tset's packed task variable is whole: both masks or none, and on a context_area. */
static int tset_check(const tlc_cfg_tset_t *ts, const char *what, char *err, size_t errlen) {
  tlc_ctxpack_t p;
  tlc_config_ctxpack(ts, &p);
  if ((p.id_mask != 0) != (p.state_mask != 0)) {
    seterr(err, errlen, "%s: context_id_mask and context_state_mask go together (set both)", what);
    return TLC_EINVAL;
  }
  if ((p.id_mask != 0 || (ts->pack_set & (TLC_CFG_PK_RUN | TLC_CFG_PK_STOP))) &&
      !ts->has_context_area) {
    seterr(err, errlen,
           "%s: a packed task variable (context_rtos, context_id_mask, ...) needs context_area",
           what);
    return TLC_EINVAL;
  }
  return 0;
}

static int set_source_key(tlc_cfg_source_t *s, const char *key, const char *v, char *why,
                          size_t wl) {
  int r = set_tset(&s->tset, key, v, why, wl);
  if (r <= 0)
    return r;
  if (s->kind == TLC_SRC_EFL)
    return set_efl_key(s, key, v, why, wl);
  if (strcmp(key, "format") == 0) {
    s->format = tlc_format_parse(v);
    if (s->format == TLC_FMT_NONE) {
      seterr(why, wl, "expected bin10, bin11 or evlog, got \"%s\"", v);
      return TLC_EINVAL;
    }
    return 0;
  }
  if (s->kind == TLC_SRC_LISTEN && strcmp(key, "allow") == 0) {
    if (tlc_config_allow_check(v, why, wl) != 0)
      return TLC_EINVAL;
    if (copy_str(s->allow, sizeof(s->allow), v) != 0) {
      seterr(why, wl, "list longer than %zu bytes", sizeof(s->allow) - 1);
      return TLC_EINVAL;
    }
    return 0;
  }
  if (s->kind == TLC_SRC_LISTEN && strcmp(key, "targets") == 0) {
    if (copy_str(s->targets, sizeof(s->targets), v) != 0) {
      seterr(why, wl, "list longer than %zu bytes", sizeof(s->targets) - 1);
      return TLC_EINVAL;
    }
    return 0;
  }
  if (s->kind != TLC_SRC_SERIAL && strcmp(key, "address") == 0) {
    if (tlc_config_parse_hostport(v, s->host, sizeof(s->host), &s->port) != 0) {
      seterr(why, wl, "expected HOST:PORT or [IPV6]:PORT, got \"%s\"", v);
      return TLC_EINVAL;
    }
    if (s->kind == TLC_SRC_DIAL && s->port == 0) {
      seterr(why, wl, "port 0 cannot be dialled");
      return TLC_EINVAL;
    }
    s->has_address = 1;
    return 0;
  }
  if (s->kind == TLC_SRC_SERIAL) {
    uint64_t x;
    if (strcmp(key, "device") == 0) {
      if (*v == '\0' || copy_str(s->device, sizeof(s->device), v) != 0) {
        seterr(why, wl, "expected a device path of at most %zu bytes", sizeof(s->device) - 1);
        return TLC_EINVAL;
      }
      return 0;
    }
    if (strcmp(key, "baud") == 0) {
      if (parse_size(v, 4000000, &x) != 0 || tlc_config_baud_ok((uint32_t)x) == 0) {
        seterr(why, wl, "unsupported baud rate \"%s\"", v);
        return TLC_EINVAL;
      }
      s->baud = (uint32_t)x;
      return 0;
    }
    if (strcmp(key, "data_bits") == 0) {
      if (parse_size(v, 8, &x) != 0 || x < 5) {
        seterr(why, wl, "expected 5, 6, 7 or 8, got \"%s\"", v);
        return TLC_EINVAL;
      }
      s->data_bits = (uint8_t)x;
      return 0;
    }
    if (strcmp(key, "stop_bits") == 0) {
      if (strcmp(v, "1") != 0 && strcmp(v, "2") != 0) {
        seterr(why, wl, "expected 1 or 2, got \"%s\"", v);
        return TLC_EINVAL;
      }
      s->stop_bits = (uint8_t)(v[0] - '0');
      return 0;
    }
    if (strcmp(key, "parity") == 0) {
      if (strcmp(v, "none") == 0 || strcmp(v, "n") == 0)
        s->parity = TLC_PARITY_NONE;
      else if (strcmp(v, "even") == 0 || strcmp(v, "e") == 0)
        s->parity = TLC_PARITY_EVEN;
      else if (strcmp(v, "odd") == 0 || strcmp(v, "o") == 0)
        s->parity = TLC_PARITY_ODD;
      else {
        seterr(why, wl, "expected none, even or odd, got \"%s\"", v);
        return TLC_EINVAL;
      }
      return 0;
    }
    if (strcmp(key, "flow") == 0) {
      if (strcmp(v, "none") == 0)
        s->flow = TLC_FLOW_NONE;
      else if (strcmp(v, "rtscts") == 0)
        s->flow = TLC_FLOW_RTSCTS;
      else if (strcmp(v, "xonxoff") == 0)
        s->flow = TLC_FLOW_XONXOFF;
      else {
        seterr(why, wl, "expected none, rtscts or xonxoff, got \"%s\"", v);
        return TLC_EINVAL;
      }
      return 0;
    }
  }
  seterr(why, wl, "unknown option for a [%s] section", kind_name(s->kind));
  return TLC_EINVAL;
}

int tlc_config_baud_ok(uint32_t b) {
  static const uint32_t rates[] = { 50,      75,      110,     134,     150,     200,
                                    300,     600,     1200,    1800,    2400,    4800,
                                    9600,    19200,   38400,   57600,   115200,  230400,
                                    460800,  500000,  576000,  921600,  1000000, 1152000,
                                    1500000, 2000000, 2500000, 3000000, 3500000, 4000000 };
  for (size_t i = 0; i < sizeof(rates) / sizeof(rates[0]); i++)
    if (rates[i] == b)
      return 1;
  return 0;
}

/* ---- INI ---- */

/* A key of [budget NAME] (formats/budget.h): the budget is made at its section's first key,
 * where it is defined (FILE:LINE), and checked complete by tlc_config_validate. */
static int set_budget_key(pctx_t *x, const char *nm, const char *key, const char *value, char *why,
                          size_t wl) {
  long i = tlc_tbudget_set_find(&x->c->bset, nm);
  if (i < 0) {
    tlc_tbudget_t b;
    char origin[TLC_CFG_PATH + 16];
    int r;
    snprintf(origin, sizeof(origin), "%s:%u", x->origin, x->line);
    if (tlc_tbudget_init(&b, nm, origin, why, wl) != 0)
      return TLC_EINVAL;
    r = tlc_tbudget_set_add(&x->c->bset, &b, why, wl);
    if (r != 0)
      return r == -1 ? TLC_ELIMIT : r;
    i = (long)x->c->bset.n - 1;
  }
  return tlc_tbudget_set_key(&x->c->bset.b[i], key, value, why, wl) != 0 ? TLC_EINVAL : 0;
}

static int cfg_ini_handler(void *user, const char *section, const char *name, const char *value) {
  pctx_t *x = user;
  char why[256] = "";
  int r = 0;
  if (x->failed)
    return 1; /* keep the first error only */
  if (strcmp(section, "daemon") == 0) {
    const dkey_t *k = tlc_cfg_find_dkey(name);
    if (k == NULL) {
      seterr(why, sizeof(why), "unknown option");
      r = TLC_EINVAL;
    } else {
      r = set_dkey(x->c, k, value, why, sizeof(why));
    }
  } else {
    const char *sp = strchr(section, ' ');
    char kind[16];
    const char *nm;
    int k = 0;
    if (sp == NULL || (size_t)(sp - section) >= sizeof(kind)) {
      seterr(why, sizeof(why),
             "unknown section (expected [daemon], [listen NAME], [dial NAME], [serial NAME], "
             "[efl NAME] or [target NAME])");
      r = TLC_EINVAL;
      goto out;
    }
    memcpy(kind, section, (size_t)(sp - section));
    kind[sp - section] = '\0';
    nm = sp + 1;
    while (*nm == ' ')
      nm++;
    if (strcmp(kind, "budget") == 0) {
      r = set_budget_key(x, nm, name, value, why, sizeof(why));
      goto out;
    }
    if (strcmp(kind, "listen") == 0)
      k = TLC_SRC_LISTEN;
    else if (strcmp(kind, "dial") == 0)
      k = TLC_SRC_DIAL;
    else if (strcmp(kind, "serial") == 0)
      k = TLC_SRC_SERIAL;
    else if (strcmp(kind, "efl") == 0)
      k = TLC_SRC_EFL;
    else if (strcmp(kind, "target") != 0) {
      seterr(why, sizeof(why), "unknown section kind \"%s\"", kind);
      r = TLC_EINVAL;
      goto out;
    }
    if (tlc_target_name_valid(nm, TLC_TARGET_NAME_MAX) != 0) {
      seterr(why, sizeof(why),
             "invalid name \"%s\" (1 to %d characters of A-Z a-z 0-9 . _ - @ : # + = [ ], "
             "not starting with '.')",
             nm, TLC_TARGET_NAME_MAX);
      r = TLC_EINVAL;
      goto out;
    }
    if (k == 0) {
      tlc_cfg_target_t *t = get_target(x->c, nm);
      if (t == NULL) {
        seterr(why, sizeof(why), "more than %d [target] sections", TLC_CFG_MAX_TARGETS);
        r = TLC_ELIMIT;
      } else {
        r = set_tset(&t->tset, name, value, why, sizeof(why));
        if (r > 0) {
          seterr(why, sizeof(why), "unknown option for a [target] section");
          r = TLC_EINVAL;
        }
      }
    } else {
      char origin[TLC_CFG_PATH + 16];
      snprintf(origin, sizeof(origin), "%s:%u", x->origin, x->line);
      tlc_cfg_source_t *s = get_source(x->c, k, nm, origin);
      if (s == NULL) {
        seterr(why, sizeof(why), "more than %d sources", TLC_CFG_MAX_SOURCES);
        r = TLC_ELIMIT;
      } else {
        r = set_source_key(s, name, value, why, sizeof(why));
      }
    }
  }
out:
  if (r != 0) {
    x->failed = 1;
    seterr(x->err, x->errlen, "%s:%u: [%s] %s: %s", x->origin, x->line, section, name, why);
    return 0;
  }
  return 1;
}

/* The next byte of the file or string, or EOF. A file stops (end of input for inih, x->too_big
 * set) past TLC_CFG_MAX_FILE bytes or at a NUL byte, which no text configuration has and fgets
 * would hide. */
static int next_byte(pctx_t *x) {
  int ch;
  if (x->f == NULL)
    return *x->p != '\0' ? (unsigned char)*x->p++ : EOF;
  ch = getc(x->f);
  if (ch != EOF && (++x->bytes > TLC_CFG_MAX_FILE || ch == '\0')) {
    x->too_big = ch == '\0' ? 2 : 1;
    return EOF;
  }
  return ch;
}

/* inih's reader: one whole line per call, counted (x->line), so that the handler's errors name
 * their line. inih's line buffer is `num` bytes (Debian's libinih: INI_MAX_LINE, 200, compiled
 * in); a line longer than num - 1 bytes before its newline would come back in pieces, the rest
 * of it read as another line (a value cut, a key injected), so it ends the input instead,
 * x->too_long set to the limit. */
static char *line_reader(char *str, int num, void *stream) {
  pctx_t *x = stream;
  int n = 0, ch = EOF;
  if (x->too_big || x->too_long)
    return NULL;
  while ((ch = next_byte(x)) != EOF) {
    if (ch == '\n') {
      if (n + 1 < num)
        str[n++] = '\n';
      break;
    }
    if (n + 1 >= num) {
      x->too_long = num - 1;
      return NULL;
    }
    str[n++] = (char)ch;
  }
  if (x->too_big || (n == 0 && ch == EOF))
    return NULL;
  str[n] = '\0';
  x->line++;
  return str;
}

static int finish_parse(pctx_t *x, int r) {
  if (x->failed)
    return TLC_EINVAL;
  if (x->too_long && r == 0) {
    seterr(x->err, x->errlen, "%s:%u: line longer than %d bytes (the INI parser's limit)",
           x->origin, x->line + 1, x->too_long);
    return TLC_ELIMIT;
  }
  if (r != 0) {
    /* A line inih could not parse (no '=', unterminated section). */
    seterr(x->err, x->errlen, "%s:%d: syntax error (expected [section] or key = value)", x->origin,
           r);
    return TLC_ESYNTAX;
  }
  return 0;
}

int tlc_config_load_file(tlc_config_t *c, const char *path, char *err, size_t errlen) {
  pctx_t x;
  int r;
  memset(&x, 0, sizeof(x));
  x.c = c;
  x.origin = path;
  x.err = err;
  x.errlen = errlen;
  x.f = fopen(path, "re");
  if (x.f == NULL) {
    r = -errno;
    seterr(err, errlen, "%s: cannot read: %s", path, strerror(errno));
    return r;
  }
  r = ini_parse_stream(line_reader, &x, cfg_ini_handler, &x);
  fclose(x.f);
  if (x.too_big && !x.failed) {
    if (x.too_big == 2)
      seterr(err, errlen, "%s:%u: a NUL byte: not a text configuration file", path, x.line + 1);
    else
      seterr(err, errlen, "%s: larger than %u bytes: not a configuration file", path,
             TLC_CFG_MAX_FILE);
    return TLC_ELIMIT;
  }
  if (r < 0) {
    seterr(err, errlen, "%s: cannot read", path);
    return TLC_EIO;
  }
  return finish_parse(&x, r);
}

int tlc_config_load_string(tlc_config_t *c, const char *text, const char *origin, char *err,
                           size_t errlen) {
  pctx_t x;
  memset(&x, 0, sizeof(x));
  x.c = c;
  x.origin = origin;
  x.err = err;
  x.errlen = errlen;
  x.p = text;
  return finish_parse(&x, ini_parse_stream(line_reader, &x, cfg_ini_handler, &x));
}

/* ---- defaults, command line ---- */

int tlc_config_init(tlc_config_t *c) {
  memset(c, 0, sizeof(*c));
  snprintf(c->state_dir, sizeof(c->state_dir), "%s", TLC_DEFAULT_STATE_DIR);
  c->store = 1;
  snprintf(c->serve, sizeof(c->serve), "%s", TLC_DEFAULT_SERVE_ADDR);
  c->log_level = TLC_LOG_INFO;
  c->max_connections = 0; /* from RLIMIT_NOFILE */
  c->max_targets = 1024;
  c->max_name = 64;
  c->efl_max_targets = 64;
  c->read_buffer = 64 * 1024;
  c->max_block = 4u << 20;
  c->partial_timeout_ms = 30000;
  c->resync_idle_ms = 50;
  c->clock_reset_threshold_ms = 1000;
  c->budget_keep = 100;
  tlc_tbudget_set_init(&c->bset);
  c->idle_timeout_ms = 0;
  c->backoff_min_ms = 200;
  c->backoff_max_ms = 30000;
  c->status_interval_ms = 2000;
  c->nwindows = 0; /* engine defaults: 1 s, 10 s, 60 s */
  c->histograms = 1;
  c->rotate_bytes = 64ull << 20;
  c->index_interval = 1024;
  c->store_queue = 64ull << 20;
  c->memory_limit = TLC_CFG_MEMORY_AUTO;
  c->mapping_limit = 64ull << 20;
  snprintf(c->http, sizeof(c->http), "%s", TLC_DEFAULT_HTTP_ADDR);
  c->metrics_areas = 20;
  c->http_max_connections = 64;
  c->max_per_address = 16;
  c->nats_interval_ms = 1000;
  c->nats_full_interval_ms = 60000;
  c->nats_buffer = 8ull << 20;
  c->nats_max_age_ms = 7ull * 86400 * 1000;
  c->nats_max_bytes = 1ull << 30;
  c->alert_resolve_ms = 300000;
  c->alert_repost_ms = 60000;
  c->checkpoint_interval_ms = 60000;
  c->checkpoint_slice_us = 1000;
  c->idle_seal_ms = 60000;
  c->rollup_minutes_ms = 14ull * 86400000;
  c->rollup_hours_ms = 400ull * 86400000;
  c->rollup_bytes = 1ull << 30;
  c->src = tlc_calloc(TLC_CFG_MAX_SOURCES, sizeof(*c->src));
  c->tgt = tlc_calloc(TLC_CFG_MAX_TARGETS, sizeof(*c->tgt));
  if (c->src == NULL || c->tgt == NULL) {
    tlc_config_fini(c);
    return TLC_ENOMEM;
  }
  return 0;
}

void tlc_config_fini(tlc_config_t *c) {
  tlc_tbudget_set_fini(&c->bset);
  tlc_free(c->src);
  tlc_free(c->tgt);
  c->src = NULL;
  c->tgt = NULL;
  c->nsrc = c->ntgt = 0;
}

int tlc_config_add_defaults(tlc_config_t *c) {
  static const struct {
    const char *name;
    tlc_format_t f;
    const char *addr;
  } d[] = { { "bin11", TLC_FMT_BIN11, TLC_DEFAULT_BIN11_ADDR },
            { "evlog", TLC_FMT_EVLOG, TLC_DEFAULT_EVLOG_ADDR } };
  for (size_t i = 0; i < 2; i++) {
    tlc_cfg_source_t *s = get_source(c, TLC_SRC_LISTEN, d[i].name, "embedded default");
    if (s == NULL)
      return TLC_ELIMIT;
    s->format = d[i].f;
    tlc_config_parse_hostport(d[i].addr, s->host, sizeof(s->host), &s->port);
    s->has_address = 1;
  }
  return 0;
}

int tlc_config_parse_spec(tlc_cfg_source_t *s, const char *spec, char *err, size_t errlen) {
  const char *eq = strchr(spec, '=');
  const char *at = eq != NULL ? strchr(eq, '@') : NULL;
  char name[TLC_TARGET_NAME_MAX + 1], fmt[16];
  int kind = s->kind;
  if (eq == NULL || at == NULL) {
    seterr(err, errlen, "expected NAME=FORMAT@%s, got \"%s\"",
           kind == TLC_SRC_SERIAL ? "DEVICE[:BAUD]" : "HOST:PORT", spec);
    return TLC_EINVAL;
  }
  if ((size_t)(eq - spec) >= sizeof(name) || (size_t)(at - eq - 1) >= sizeof(fmt)) {
    seterr(err, errlen, "name or format too long in \"%s\"", spec);
    return TLC_EINVAL;
  }
  memcpy(name, spec, (size_t)(eq - spec));
  name[eq - spec] = '\0';
  memcpy(fmt, eq + 1, (size_t)(at - eq - 1));
  fmt[at - eq - 1] = '\0';
  source_defaults(s, kind);
  if (tlc_target_name_valid(name, TLC_TARGET_NAME_MAX) != 0) {
    seterr(err, errlen, "invalid name \"%s\"", name);
    return TLC_EINVAL;
  }
  snprintf(s->name, sizeof(s->name), "%s", name);
  s->format = tlc_format_parse(fmt);
  if (s->format == TLC_FMT_NONE) {
    seterr(err, errlen, "unknown format \"%s\" (expected bin10, bin11 or evlog)", fmt);
    return TLC_EINVAL;
  }
  if (kind == TLC_SRC_SERIAL) {
    const char *dev = at + 1;
    const char *colon = strrchr(dev, ':');
    size_t dl = strlen(dev);
    if (colon != NULL && colon[1] != '\0' && strspn(colon + 1, "0123456789") == strlen(colon + 1)) {
      uint64_t b;
      if (parse_size(colon + 1, 4000000, &b) != 0 || !tlc_config_baud_ok((uint32_t)b)) {
        seterr(err, errlen, "unsupported baud rate \"%s\"", colon + 1);
        return TLC_EINVAL;
      }
      s->baud = (uint32_t)b;
      dl = (size_t)(colon - dev);
    }
    if (dl == 0 || dl >= sizeof(s->device)) {
      seterr(err, errlen, "missing or too long device path in \"%s\"", spec);
      return TLC_EINVAL;
    }
    memcpy(s->device, dev, dl);
    s->device[dl] = '\0';
    return 0;
  }
  if (tlc_config_parse_hostport(at + 1, s->host, sizeof(s->host), &s->port) != 0 ||
      (kind == TLC_SRC_DIAL && s->port == 0)) {
    seterr(err, errlen, "expected HOST:PORT after '@' in \"%s\"", spec);
    return TLC_EINVAL;
  }
  s->has_address = 1;
  return 0;
}

/* ---- command line: getopt_long, its long options built from the [daemon] key table ---- */

/* Options that are not [daemon] keys. */
static const struct {
  const char *name;
  int has_arg;
} cli_extra[] = { { "config", required_argument },  { "listen", required_argument },
                  { "dial", required_argument },    { "serial", required_argument },
                  { "mapping", required_argument }, { "context-area", required_argument },
                  { "efl", required_argument },     { "no-store", no_argument },
                  { "check-config", no_argument },  { "help", no_argument },
                  { "version", no_argument } };

#define CLI_NEXTRA (sizeof(cli_extra) / sizeof(cli_extra[0]))
#define CLI_NDKEYS tlc_cfg_ndkeys
#define CLI_VAL0   256 /* getopt_long's val for long option i: CLI_VAL0 + i */

/* The long options: cli_extra, then every tlc_cfg_dkeys[] name with '-' for '_'. Built once from
 * the tables, so a key added to tlc_cfg_dkeys[] is an option without further code. */
static struct option cli_longopts[CLI_NEXTRA + TLC_CFG_DKEYS_CAP + 1];
static char cli_dashed[TLC_CFG_DKEYS_CAP][64];

static void cli_build_options(void) {
  size_t n = 0;
  if (cli_longopts[0].name != NULL)
    return;
  for (size_t i = 0; i < CLI_NEXTRA; i++, n++) {
    cli_longopts[n].name = cli_extra[i].name;
    cli_longopts[n].has_arg = cli_extra[i].has_arg;
    cli_longopts[n].val = CLI_VAL0 + (int)n;
  }
  for (size_t i = 0; i < CLI_NDKEYS; i++, n++) {
    size_t j;
    for (j = 0; tlc_cfg_dkeys[i].name[j] != '\0' && j + 1 < sizeof(cli_dashed[i]); j++)
      cli_dashed[i][j] = tlc_cfg_dkeys[i].name[j] == '_' ? '-' : tlc_cfg_dkeys[i].name[j];
    cli_dashed[i][j] = '\0';
    cli_longopts[n].name = cli_dashed[i];
    cli_longopts[n].has_arg = required_argument;
    cli_longopts[n].val = CLI_VAL0 + (int)n;
  }
}

static void usage(FILE *f) {
  fputs("usage: tlcapd [--config FILE] [--state-dir DIR] [--listen NAME=FORMAT@HOST:PORT]...\n"
        "              [--dial NAME=FORMAT@HOST:PORT]... [--serial NAME=FORMAT@DEVICE[:BAUD]]...\n"
        "              [--efl NAME=PATTERN]... (EFL applications through efl_debugd)\n"
        "              [--serve HOST:PORT|unix:PATH] [--no-store] [--log-level LEVEL] [--debug "
        "LIST]\n"
        "              [--http HOST:PORT] [--metrics-areas N]\n"
        "              [--max-connections N] [--max-targets N] [--partial-timeout DUR]\n"
        "              [--dump-stats-on-exit FILE] [--mapping TARGET=FILE]\n"
        "              [--context-area TARGET=HANDLE] [--memory-limit BYTES] [--check-config]\n"
        "              [--OPTION VALUE]...\n"
        "              (storage: --rotate-bytes SIZE, --rotate-age DUR, --retain-bytes SIZE,\n"
        "              --retain-segments N, --sync on_close|never|periodic, --compress yes,\n"
        "              --main-export text1|xml, ...)\n"
        "              (serial: --resync-idle DUR, default 50ms: a burst's last record is\n"
        "              delivered after this silence; 0 = wait for the next burst)\n"
        "              (continuity: --checkpoint-interval SECONDS, --idle-seal SECONDS,\n"
        "              --checkpoint-slice-us N: the loop's longest slice of a checkpoint)\n"
        "              (remote access: --token-file FILE, --tls-cert FILE --tls-key FILE)\n"
        "       tlcapd replay FILE... [options]   (tlcapd replay --help)\n"
        "       tlcapd --version\n"
        "Every [daemon] option of the configuration file is also a long option, with '-' for\n"
        "'_' (see docs/configuration.md). Short options: -c FILE (--config), -q (--log-level\n"
        "warn), -v (--log-level debug), -h (--help), -V (--version).\n"
        "Exit status: 0 ok, 1 runtime failure, 2 usage.\n",
        f);
}

/* The name getopt_long stopped at (argv element without "=value"), for messages. */
static void cli_bad_name(char **argv, int optind_, char *buf, size_t len) {
  const char *a = optind_ > 0 ? argv[optind_ - 1] : "";
  snprintf(buf, len, "%.*s", (int)strcspn(a, "="), a);
}

int tlc_cli_parse(tlc_cli_t *cli, int argc, char **argv, char *err, size_t errlen) {
  int c, idx;
  memset(cli, 0, sizeof(*cli));
  cli_build_options();
  optind = 0; /* GNU: a full re-initialisation (the parse may run more than once) */
  opterr = 0;
  /* '+': stop at the first non-option (there are none; it is reported below). */
  while ((c = getopt_long(argc, argv, "+:c:hVqv", cli_longopts, &idx)) != -1) {
    const char *name = NULL, *v = optarg;
    char bad[64];
    switch (c) {
    case 'h':
      usage(stdout);
      return 1;
    case 'V':
      fputs("tlcapd " TLC_VERSION "\n", stdout);
      return 1;
    case 'c':
      cli->config = optarg;
      continue;
    case 'q':
    case 'v':
      name = "log-level";
      v = c == 'q' ? "warn" : "debug";
      break;
    case ':':
      if (optopt >= CLI_VAL0)
        seterr(err, errlen, "command line: --%s needs a value",
               cli_longopts[optopt - CLI_VAL0].name);
      else
        seterr(err, errlen, "command line: -%c needs a value", optopt);
      return TLC_EINVAL;
    case '?':
      cli_bad_name(argv, optind, bad, sizeof(bad));
      if (optopt >= CLI_VAL0)
        seterr(err, errlen, "command line: --%s takes no value",
               cli_longopts[optopt - CLI_VAL0].name);
      else if (optopt != 0)
        seterr(err, errlen, "command line: unknown option \"-%c\"", optopt);
      else
        seterr(err, errlen, "command line: unknown option \"%s\"", bad);
      return TLC_EINVAL;
    default:
      name = cli_longopts[c - CLI_VAL0].name;
      break;
    }
    if (strcmp(name, "help") == 0) {
      usage(stdout);
      return 1;
    }
    if (strcmp(name, "version") == 0) {
      fputs("tlcapd " TLC_VERSION "\n", stdout);
      return 1;
    }
    if (strcmp(name, "config") == 0) {
      cli->config = v;
      continue;
    }
    if (strcmp(name, "check-config") == 0)
      cli->check_only = 1;
    if (cli->n == TLC_CFG_MAX_CLI) {
      seterr(err, errlen, "command line: more than %d options", TLC_CFG_MAX_CLI);
      return TLC_EINVAL;
    }
    /* The name is the option table's (static); the value points into argv. */
    cli->opt[cli->n] = name;
    cli->val[cli->n] = v;
    cli->n++;
    if (strcmp(name, "listen") == 0 || strcmp(name, "dial") == 0 || strcmp(name, "serial") == 0 ||
        strcmp(name, "efl") == 0)
      cli->nsources++;
  }
  if (optind < argc) {
    seterr(err, errlen, "command line: unexpected argument \"%s\"", argv[optind]);
    return TLC_EINVAL;
  }
  return 0;
}

/* Option name of cli entry i without any "=value" part, into key. */
static void cli_key(const tlc_cli_t *cli, size_t i, char *key, size_t kl) {
  const char *o = cli->opt[i];
  size_t n = strcspn(o, "=");
  if (n >= kl)
    n = kl - 1;
  memcpy(key, o, n);
  key[n] = '\0';
}

static int apply_target_opt(tlc_config_t *c, const char *key, const char *v, char *err,
                            size_t errlen) {
  const char *eq = strchr(v, '=');
  char name[TLC_TARGET_NAME_MAX + 1];
  char why[256] = "";
  tlc_cfg_target_t *t;
  if (eq == NULL || (size_t)(eq - v) >= sizeof(name)) {
    seterr(err, errlen, "command line: --%s: expected TARGET=VALUE, got \"%s\"", key, v);
    return TLC_EINVAL;
  }
  memcpy(name, v, (size_t)(eq - v));
  name[eq - v] = '\0';
  if (tlc_target_name_valid(name, TLC_TARGET_NAME_MAX) != 0) {
    seterr(err, errlen, "command line: --%s: invalid target name \"%s\"", key, name);
    return TLC_EINVAL;
  }
  t = get_target(c, name);
  if (t == NULL) {
    seterr(err, errlen, "command line: --%s: too many targets", key);
    return TLC_ELIMIT;
  }
  if (set_tset(&t->tset, strcmp(key, "mapping") == 0 ? "mapping" : "context_area", eq + 1, why,
               sizeof(why)) != 0) {
    seterr(err, errlen, "command line: --%s: %s", key, why);
    return TLC_EINVAL;
  }
  return 0;
}

/* --efl NAME=PATTERN: the [efl NAME] section's pattern (its other keys stay the file's). */
static int apply_efl_opt(tlc_config_t *c, const char *v, char *err, size_t errlen) {
  const char *eq = strchr(v, '=');
  char name[TLC_TARGET_NAME_MAX + 1], why[256] = "";
  tlc_cfg_source_t *s;
  if (eq == NULL || eq == v || (size_t)(eq - v) >= sizeof(name) || eq[1] == '\0') {
    seterr(err, errlen, "command line: --efl: expected NAME=PATTERN, got \"%s\"", v);
    return TLC_EINVAL;
  }
  memcpy(name, v, (size_t)(eq - v));
  name[eq - v] = '\0';
  if (tlc_target_name_valid(name, TLC_TARGET_NAME_MAX) != 0) {
    seterr(err, errlen, "command line: --efl: invalid name \"%s\"", name);
    return TLC_EINVAL;
  }
  s = get_source(c, TLC_SRC_EFL, name, "command line");
  if (s == NULL) {
    seterr(err, errlen, "command line: --efl: more than %d sources", TLC_CFG_MAX_SOURCES);
    return TLC_ELIMIT;
  }
  if (set_efl_key(s, "pattern", eq + 1, why, sizeof(why)) != 0) {
    seterr(err, errlen, "command line: --efl: %s", why);
    return TLC_EINVAL;
  }
  snprintf(s->origin, sizeof(s->origin), "command line");
  return 0;
}

int tlc_config_apply_cli(tlc_config_t *c, const tlc_cli_t *cli, char *err, size_t errlen) {
  for (size_t i = 0; i < cli->n; i++) {
    char key[64], dk[64], why[256] = "";
    const char *v = cli->val[i];
    cli_key(cli, i, key, sizeof(key));
    if (strcmp(key, "no-store") == 0) {
      c->store = 0;
      continue;
    }
    if (strcmp(key, "check-config") == 0)
      continue;
    if (strcmp(key, "listen") == 0 || strcmp(key, "dial") == 0 || strcmp(key, "serial") == 0) {
      tlc_cfg_source_t s, *d;
      int kind = key[0] == 'l' ? TLC_SRC_LISTEN : key[0] == 'd' ? TLC_SRC_DIAL : TLC_SRC_SERIAL;
      s.kind = kind;
      if (tlc_config_parse_spec(&s, v, why, sizeof(why)) != 0) {
        seterr(err, errlen, "command line: --%s: %s", key, why);
        return TLC_EINVAL;
      }
      d = get_source(c, kind, s.name, "command line");
      if (d == NULL) {
        seterr(err, errlen, "command line: --%s: more than %d sources", key, TLC_CFG_MAX_SOURCES);
        return TLC_ELIMIT;
      }
      s.tset = d->tset; /* keep the file's mapping/context_area for this source */
      snprintf(s.origin, sizeof(s.origin), "command line");
      *d = s;
      continue;
    }
    if (strcmp(key, "efl") == 0) {
      int r = apply_efl_opt(c, v, err, errlen);
      if (r != 0)
        return r;
      continue;
    }
    if (strcmp(key, "mapping") == 0 || strcmp(key, "context-area") == 0) {
      int r = apply_target_opt(c, key, v, err, errlen);
      if (r != 0)
        return r;
      continue;
    }
    for (size_t j = 0; j <= strlen(key); j++)
      dk[j] = key[j] == '-' ? '_' : key[j];
    const dkey_t *k = tlc_cfg_find_dkey(dk);
    if (k == NULL || set_dkey(c, k, v, why, sizeof(why)) != 0) {
      seterr(err, errlen, "command line: --%s: %s", key, k == NULL ? "unknown option" : why);
      return TLC_EINVAL;
    }
  }
  return 0;
}

/* SPEC 8: the token file is readable only by its owner and not empty; a port beyond loopback
 * needs it; the TLS files come as a pair and load. Reads the files (start-up, SIGHUP, and
 * --check-config report the same errors). */
static int validate_remote(const tlc_config_t *c, char *err, size_t errlen) {
  char why[600];
  if (c->token_file[0] != '\0' && tlc_auth_check_file(c->token_file, why, sizeof(why)) != 0) {
    seterr(err, errlen, "[daemon] token_file: %s", why);
    return TLC_EINVAL;
  }
  if (c->serve[0] != '\0' && strncmp(c->serve, "unix:", 5) != 0 && c->token_file[0] == '\0') {
    char host[TLC_CFG_HOST];
    uint16_t port;
    if (tlc_config_parse_hostport(c->serve, host, sizeof(host), &port) == 0 &&
        !tlc_peers_host_is_loopback(host)) {
      seterr(err, errlen,
             "[daemon] serve: %s is beyond loopback: it needs token_file (--token-file FILE), "
             "and should have tls_cert/tls_key",
             c->serve);
      return TLC_EINVAL;
    }
  }
  if ((c->tls_cert[0] != '\0') != (c->tls_key[0] != '\0')) {
    seterr(err, errlen, "[daemon] tls_cert and tls_key: give both or neither");
    return TLC_EINVAL;
  }
  if (c->tls_cert[0] != '\0') {
    tlc_tls_t *t;
    if (tlc_tls_new(c->tls_cert, c->tls_key, &t, why, sizeof(why)) != 0) {
      seterr(err, errlen, "[daemon] tls_cert/tls_key: %s", why);
      return TLC_EINVAL;
    }
    tlc_tls_free(t);
  }
  return 0;
}

int tlc_config_load_budgets(tlc_config_t *c, char *err, size_t errlen) {
  tlc_tbudget_set_t s;
  char *text = NULL, why[600];
  size_t len = 0, i;
  int r;
  if (c->budgets[0] == '\0')
    return 0;
  r = tlc_file_read(c->budgets, TLC_CFG_MAX_FILE, &text, &len);
  if (r < 0) {
    seterr(err, errlen, "[daemon] budgets: %s: %s", c->budgets, tlc_strerror(r));
    return TLC_EINVAL;
  }
  tlc_tbudget_set_init(&s);
  r = tlc_tbudget_parse(&s, text, len, c->budgets, why, sizeof(why));
  tlc_free(text);
  if (r != 0) {
    seterr(err, errlen, "%s", r == -1 ? why : "out of memory");
    tlc_tbudget_set_fini(&s);
    return r == -1 ? TLC_EINVAL : r;
  }
  for (i = 0; i < s.n && r == 0; i++) {
    r = tlc_tbudget_set_add(&c->bset, &s.b[i], why, sizeof(why));
    if (r != 0)
      seterr(err, errlen, "%s: [budget %s] %s", s.b[i].origin, s.b[i].name,
             r == -1 ? why : "out of memory");
  }
  tlc_tbudget_set_fini(&s);
  return r == 0 ? 0 : r == -1 ? TLC_EINVAL : r;
}

int tlc_config_validate(const tlc_config_t *c, char *err, size_t errlen) {
  for (size_t i = 0; i < c->bset.n; i++) {
    char why[300];
    if (tlc_tbudget_check(&c->bset.b[i], why, sizeof(why)) != 0) {
      seterr(err, errlen, "%s: [budget %s] %s", c->bset.b[i].origin, c->bset.b[i].name, why);
      return TLC_EINVAL;
    }
  }
  for (size_t i = 0; i < c->nsrc; i++) {
    char what[TLC_CFG_PATH + TLC_TARGET_NAME_MAX + 64];
    snprintf(what, sizeof(what), "[%s %s] (%s)", kind_name(c->src[i].kind), c->src[i].name,
             c->src[i].origin);
    if (tset_check(&c->src[i].tset, what, err, errlen) != 0)
      return TLC_EINVAL;
  }
  for (size_t i = 0; i < c->ntgt; i++) {
    char what[TLC_TARGET_NAME_MAX + 16];
    snprintf(what, sizeof(what), "[target %s]", c->tgt[i].name);
    if (tset_check(&c->tgt[i].tset, what, err, errlen) != 0)
      return TLC_EINVAL;
  }
  if (c->max_name == 0 || c->max_name > TLC_TARGET_NAME_MAX) {
    seterr(err, errlen, "[daemon] max_name: must be 1 to %d", TLC_TARGET_NAME_MAX);
    return TLC_EINVAL;
  }
  if (c->read_buffer < 256) {
    seterr(err, errlen, "[daemon] read_buffer: must be at least 256 bytes");
    return TLC_EINVAL;
  }
  if (c->max_targets == 0) {
    seterr(err, errlen, "[daemon] max_targets: must be at least 1");
    return TLC_EINVAL;
  }
  if (c->efl_max_targets == 0) {
    seterr(err, errlen, "[daemon] efl_max_targets: must be at least 1");
    return TLC_EINVAL;
  }

  if (c->memory_limit != TLC_CFG_MEMORY_AUTO && c->memory_limit < (1u << 20)) {
    seterr(err, errlen, "[daemon] memory_limit: must be at least 1M");
    return TLC_EINVAL;
  }
  if (c->mapping_limit == 0) {
    seterr(err, errlen,
           "[daemon] mapping_limit: must be at least 1 (the memory budget "
           "caps it in any case)");
    return TLC_EINVAL;
  }
  if (c->backoff_min_ms == 0 || c->backoff_max_ms < c->backoff_min_ms) {
    seterr(err, errlen, "[daemon] backoff_min/backoff_max: need 0 < backoff_min <= backoff_max");
    return TLC_EINVAL;
  }
  if (c->status_interval_ms < 100) {
    seterr(err, errlen, "[daemon] status_interval: must be at least 100ms");
    return TLC_EINVAL;
  }
  if (c->nats_url[0] != '\0' && strncmp(c->nats_url, "nats://", 7) != 0 &&
      strncmp(c->nats_url, "tls://", 6) != 0) {
    seterr(err, errlen,
           "[daemon] nats_url: expected nats://HOST[:PORT] or tls://HOST[:PORT], got \"%s\"",
           c->nats_url);
    return TLC_EINVAL;
  }
  if (c->alertmanager_url[0] != '\0') {
    tlc_alert_url_t au;
    char why[300];
    if (tlc_alert_parse_url(c->alertmanager_url, &au, why, sizeof(why)) != 0) {
      seterr(err, errlen, "[daemon] alertmanager_url: %s", why);
      return TLC_EINVAL;
    }
    if (c->alert_resolve_ms < 100 || c->alert_repost_ms < 100) {
      seterr(err, errlen, "[daemon] alert_resolve and alert_repost must be at least 100ms");
      return TLC_EINVAL;
    }
  }
  if (c->nats_url[0] != '\0' && (c->nats_interval_ms < 50 || c->nats_buffer < 65536)) {
    seterr(err, errlen,
           "[daemon] nats_interval must be at least 50ms and nats_buffer at least 64K");
    return TLC_EINVAL;
  }
  if (*c->state_dir == '\0') {
    seterr(err, errlen, "[daemon] state_dir: must not be empty");
    return TLC_EINVAL;
  }
  if (c->rotate_bytes == 0) {
    seterr(err, errlen, "[daemon] rotate_bytes: must be at least 1 byte");
    return TLC_EINVAL;
  }
  if (c->index_interval == 0) {
    seterr(err, errlen, "[daemon] index_interval: must be at least 1 record");
    return TLC_EINVAL;
  }
  if (c->store_queue < c->max_block) {
    /* a block larger than the whole queue could never be queued: every one would be dropped */
    seterr(err, errlen, "[daemon] store_queue: must be at least max_block (%u bytes)",
           c->max_block);
    return TLC_EINVAL;
  }
  if (c->sync_mode == 2 && c->sync_interval_ms == 0 && c->sync_bytes == 0) {
    seterr(err, errlen, "[daemon] sync: periodic needs sync_interval or sync_bytes");
    return TLC_EINVAL;
  }
  for (size_t i = 0; i < c->nsrc; i++) {
    const tlc_cfg_source_t *s = &c->src[i];
    const char *miss = NULL;
    if (s->format == TLC_FMT_NONE)
      miss = "format";
    else if (s->kind != TLC_SRC_SERIAL && !s->has_address)
      miss = "address";
    else if (s->kind == TLC_SRC_SERIAL && s->device[0] == '\0')
      miss = "device";
    else if (s->kind == TLC_SRC_EFL && s->pattern[0] == '\0')
      miss = "pattern";
    if (miss != NULL) {
      seterr(err, errlen, "%s: [%s %s]: missing option \"%s\"", s->origin, kind_name(s->kind),
             s->name, miss);
      return TLC_EINVAL;
    }
    if (strlen(s->name) > c->max_name) {
      seterr(err, errlen, "%s: [%s %s]: name longer than max_name (%zu)", s->origin,
             kind_name(s->kind), s->name, c->max_name);
      return TLC_EINVAL;
    }
    /* Dial and serial names are target names: one target, one source. */
    for (size_t j = 0; j < i; j++) {
      const tlc_cfg_source_t *o = &c->src[j];
      if (o->kind != TLC_SRC_LISTEN && s->kind != TLC_SRC_LISTEN && strcmp(o->name, s->name) == 0) {
        seterr(err, errlen, "%s: [%s %s]: name already used by [%s %s] (%s)", s->origin,
               kind_name(s->kind), s->name, kind_name(o->kind), o->name, o->origin);
        return TLC_EINVAL;
      }
    }
  }
  return validate_remote(c, err, errlen);
}

int tlc_config_build(tlc_config_t *c, const tlc_cli_t *cli, char *err, size_t errlen) {
  int r = tlc_config_init(c);
  if (r != 0) {
    seterr(err, errlen, "out of memory");
    return r;
  }
  if (cli->config != NULL && (r = tlc_config_load_file(c, cli->config, err, errlen)) != 0)
    goto fail;
  if ((r = tlc_config_apply_cli(c, cli, err, errlen)) != 0)
    goto fail;
  if ((r = tlc_config_load_budgets(c, err, errlen)) != 0)
    goto fail;
  if (cli->config == NULL && cli->nsources == 0 && c->nsrc == 0 &&
      (r = tlc_config_add_defaults(c)) != 0)
    goto fail;
  if ((r = tlc_config_validate(c, err, errlen)) != 0)
    goto fail;
  return 0;
fail:
  tlc_config_fini(c);
  return r;
}

const tlc_cfg_source_t *tlc_config_find_source(const tlc_config_t *c, int kind, const char *name) {
  for (size_t i = 0; i < c->nsrc; i++)
    if (c->src[i].kind == kind && strcmp(c->src[i].name, name) == 0)
      return &c->src[i];
  return NULL;
}

const tlc_cfg_tset_t *tlc_config_tset(const tlc_config_t *c, const tlc_cfg_source_t *src,
                                      const char *name) {
  static const tlc_cfg_tset_t none;
  for (size_t i = 0; i < c->ntgt; i++)
    if (strcmp(c->tgt[i].name, name) == 0)
      return &c->tgt[i].tset;
  return src != NULL ? &src->tset : &none;
}
