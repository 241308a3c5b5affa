/* alert.c - the alert table, its tick and the request thread (see alert.h).
 *
 * The table: entries in one array (grown by doubling up to max_alerts), chained through a
 * bucket array sized for max_alerts, a free list of removed slots. Each entry has a version
 * (bumped by every violation and by its resolution) and the version the Alertmanager last
 * took: an entry is pending while the two differ.
 *
 * The request thread waits for a job (a body the tick built, with the slots, ids and versions
 * of the alerts in it), posts it (post.c), and hands the result back through a uv_async_t. One
 * job at a time: the tick builds the next only when the previous one is back. An eventfd
 * cancels a request in flight when the module closes.
 */
#include "alert/alert-int.h"

#include "base/alloc.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/json.h"
#include "base/log_level.h"
#include "base/out.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define NONE        UINT32_MAX
#define BACKOFF_MIN 1000u
#define BACKOFF_MAX 60000u
#define BODY_MAX    (8u << 20)
#define DEFAULT_MAX 4096u
#define ALERT_NAME  "TlcapBudgetViolation"

typedef struct entry {
  uint64_t id; /* 0: a free slot */
  uint64_t hash;
  uint32_t next;                                 /* bucket chain, or the free list */
  char *budget, *target, *area, *context, *stat; /* one allocation, budget first */
  int64_t value, limit, worst;
  int over;
  int64_t start, end;
  uint64_t epoch;
  int64_t first_wall_ns, last_wall_ns; /* the violations' wall clock */
  int64_t last_seen_ms;                /* loop time of the last violation */
  int64_t last_wall_ms;                /* our wall clock at the last violation */
  uint64_t count;                      /* violations since the alert started */
  uint64_t ver, sent_ver;
  int64_t last_post_ms; /* loop time the Alertmanager last took it (0: never) */
  int resolved;
} entry_t;

typedef struct slot_ref {
  uint32_t slot;
  uint64_t id, ver;
} slot_ref_t;

struct tlc_alert {
  uv_loop_t *loop;
  tlc_alert_opts_t o;
  tlc_alert_url_t u;
  char url[1024], ca_file[1024], state_dir[1024], host[256], generator[1024];
  void *ssl_ctx;

  entry_t *ents;
  uint32_t nents, cap; /* slots used (in_use or on the free list), allocated */
  uint32_t *buckets, nbuckets;
  uint32_t free_head;
  uint64_t next_id;

  tlc_alert_counters_t c;
  uint64_t backoff_ms;
  int64_t retry_at_ms; /* loop time */

  uv_timer_t tick;
  uv_async_t done;
  uv_thread_t thread;
  int cancel_fd;
  int handles, closing;
  void (*close_cb)(void *ud);
  void *close_ud;

  /* the job, shared with the thread under mu */
  uv_mutex_t mu;
  uv_cond_t cv;
  int job_ready, job_done, stop, exited;
  char *body;
  size_t body_len;
  int result, status;
  char why[200];
  /* loop side of the job in flight */
  int in_flight;
  slot_ref_t *refs;
  size_t nrefs;
};

static void say(tlc_alert_t *a, int level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void say(tlc_alert_t *a, int level, const char *fmt, ...) {
  char buf[600];
  va_list ap;
  if (a->o.log == NULL)
    return;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  a->o.log(a->o.log_ud, level, buf);
}

static const char *const drop_names[] = { "table_full", "evicted", "bad_input", "refused" };
static const char *const fail_names[] = { "resolve", "connect", "tls", "timeout", "io", "status" };

const char *tlc_alert_drop_name(int r) {
  return r >= 0 && r < TLC_ALERT_DROP_N ? drop_names[r] : NULL;
}

const char *tlc_alert_fail_name(int r) {
  return r >= 0 && r < TLC_ALERT_FAIL_N ? fail_names[r] : NULL;
}

const char *tlc_alert_url(const tlc_alert_t *a) {
  return a->url;
}

/* ---- URL ---- */

int tlc_alert_parse_url(const char *url, tlc_alert_url_t *u, char *why, size_t whylen) {
  const char *p, *hs, *he, *ps = NULL, *pe;
  size_t n;
  memset(u, 0, sizeof(*u));
  if (strncmp(url, "http://", 7) == 0) {
    p = url + 7;
  } else if (strncmp(url, "https://", 8) == 0) {
    p = url + 8;
    u->tls = 1;
  } else {
    snprintf(why, whylen, "expected http://HOST:PORT or https://HOST:PORT, got \"%s\"", url);
    return TLC_EINVAL;
  }
  if (*p == '[') { /* [IPv6]:port */
    hs = p + 1;
    he = strchr(hs, ']');
    if (he == NULL) {
      snprintf(why, whylen, "no ']' after the IPv6 address in \"%s\"", url);
      return TLC_EINVAL;
    }
    pe = he + 1;
  } else {
    hs = p;
    he = p + strcspn(p, ":/?#@");
    pe = he;
  }
  if (*pe == '@' || strchr(hs, '@') != NULL || strpbrk(p, "?#") != NULL) {
    snprintf(why, whylen, "no user, query or fragment in \"%s\"", url);
    return TLC_EINVAL;
  }
  n = (size_t)(he - hs);
  if (n == 0 || n >= sizeof(u->host)) {
    snprintf(why, whylen, "no host (or one too long) in \"%s\"", url);
    return TLC_EINVAL;
  }
  memcpy(u->host, hs, n);
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)u->host[i] <= ' ' || u->host[i] == 0x7f) {
      snprintf(why, whylen, "a control character or space in the host of \"%s\"", url);
      return TLC_EINVAL;
    }
  if (*pe == ':') {
    char *end;
    unsigned long port;
    ps = pe + 1;
    errno = 0;
    port = strtoul(ps, &end, 10);
    if (end == ps || port == 0 || port > 65535 || errno != 0 || (*end != '\0' && *end != '/') ||
        *ps == '+' || *ps == '-' || *ps == ' ') {
      snprintf(why, whylen, "bad port in \"%s\"", url);
      return TLC_EINVAL;
    }
    snprintf(u->port, sizeof(u->port), "%lu", port);
    pe = end;
  } else {
    snprintf(u->port, sizeof(u->port), "%s", u->tls ? "443" : "80");
  }
  if (*pe != '\0' && *pe != '/') {
    snprintf(why, whylen, "unexpected \"%s\" after the host in \"%s\"", pe, url);
    return TLC_EINVAL;
  }
  n = strlen(pe);
  while (n > 0 && pe[n - 1] == '/')
    n--;
  if (n >= sizeof(u->prefix)) {
    snprintf(why, whylen, "path too long in \"%s\"", url);
    return TLC_EINVAL;
  }
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)pe[i] <= ' ' || pe[i] == 0x7f) {
      snprintf(why, whylen, "a control character or space in the path of \"%s\"", url);
      return TLC_EINVAL;
    }
  memcpy(u->prefix, pe, n);
  return 0;
}

/* ---- the table ---- */

static uint64_t hash_str(uint64_t h, const char *s) {
  for (; *s != '\0'; s++) {
    h ^= (unsigned char)*s;
    h *= 0x100000001b3ull;
  }
  h ^= 0xff; /* a separator: ("ab","c") differs from ("a","bc") */
  return h * 0x100000001b3ull;
}

static uint64_t key_hash(const tlc_alert_violation_t *v) {
  uint64_t h = 0xcbf29ce484222325ull;
  h = hash_str(h, v->budget);
  h = hash_str(h, v->target);
  h = hash_str(h, v->area);
  return hash_str(h, v->context);
}

static int key_eq(const entry_t *e, uint64_t h, const tlc_alert_violation_t *v) {
  return e->hash == h && strcmp(e->budget, v->budget) == 0 && strcmp(e->target, v->target) == 0 &&
         strcmp(e->area, v->area) == 0 && strcmp(e->context, v->context) == 0;
}

static void unlink_entry(tlc_alert_t *a, uint32_t i) {
  uint32_t *pp = &a->buckets[a->ents[i].hash & (a->nbuckets - 1)];
  while (*pp != NONE && *pp != i)
    pp = &a->ents[*pp].next;
  if (*pp == i)
    *pp = a->ents[i].next;
}

static void remove_entry(tlc_alert_t *a, uint32_t i) {
  entry_t *e = &a->ents[i];
  unlink_entry(a, i);
  tlc_free(e->budget);
  if (!e->resolved)
    a->c.firing--;
  memset(e, 0, sizeof(*e));
  e->next = a->free_head;
  a->free_head = i;
  a->c.active--;
}

/* A slot for a new entry: a free one, a new one, or (when full) the oldest resolved entry's. */
static uint32_t take_slot(tlc_alert_t *a) {
  uint32_t i, victim = NONE;
  if (a->free_head != NONE) {
    i = a->free_head;
    a->free_head = a->ents[i].next;
    return i;
  }
  if (a->nents < a->cap)
    return a->nents++;
  if (a->cap < a->o.max_alerts) {
    uint32_t ncap = a->cap == 0 ? 64 : a->cap * 2;
    entry_t *n;
    if (ncap > a->o.max_alerts)
      ncap = (uint32_t)a->o.max_alerts;
    n = tlc_realloc(a->ents, (size_t)ncap * sizeof(*n));
    if (n != NULL) {
      memset(n + a->cap, 0, (size_t)(ncap - a->cap) * sizeof(*n));
      a->ents = n;
      a->cap = ncap;
      return a->nents++;
    }
  }
  if (a->c.active == a->c.firing)
    return NONE; /* every place firing: no scan (a storm of new alerts stays cheap) */
  for (i = 0; i < a->nents; i++)
    if (a->ents[i].id != 0 && a->ents[i].resolved &&
        (victim == NONE || a->ents[i].last_seen_ms < a->ents[victim].last_seen_ms))
      victim = i;
  if (victim == NONE)
    return NONE;
  remove_entry(a, victim);
  a->c.drops[TLC_ALERT_DROP_EVICTED]++;
  a->c.dropped++;
  i = a->free_head;
  a->free_head = a->ents[i].next;
  return i;
}

static int name_ok(const char *s, int may_be_empty) {
  size_t n;
  if (s == NULL)
    return 0;
  n = strnlen(s, TLC_ALERT_NAME_MAX);
  return n < TLC_ALERT_NAME_MAX && (n > 0 || may_be_empty);
}

void tlc_alert_violation(tlc_alert_t *a, const tlc_alert_violation_t *v) {
  uint64_t h;
  uint32_t i;
  entry_t *e;
  int64_t now = (int64_t)uv_now(a->loop), wall_ms = tlc_now_unix_ms();
  /* the violation's wall clock; ours when it has none, or one ahead of ours (startsAt must
   * come before the endsAt ours gives, or the Alertmanager refuses the alert) */
  int64_t wall_ns =
      v->wall_ns > 0 && v->wall_ns / 1000000 <= wall_ms ? v->wall_ns : wall_ms * 1000000;
  if (a->closing)
    return;
  a->c.violations++;
  if (!name_ok(v->budget, 0) || !name_ok(v->target, 0) || !name_ok(v->area, 0) ||
      !name_ok(v->context, 1) || !name_ok(v->stat, 0)) {
    a->c.drops[TLC_ALERT_DROP_BAD_INPUT]++;
    a->c.dropped++;
    return;
  }
  h = key_hash(v);
  for (i = a->buckets[h & (a->nbuckets - 1)]; i != NONE; i = a->ents[i].next)
    if (key_eq(&a->ents[i], h, v))
      break;
  if (i == NONE) {
    size_t lb = strlen(v->budget) + 1, lt = strlen(v->target) + 1, la = strlen(v->area) + 1,
           lc = strlen(v->context) + 1, ls = strlen(v->stat) + 1;
    char *mem;
    if ((i = take_slot(a)) == NONE || (mem = tlc_malloc(lb + lt + la + lc + ls)) == NULL) {
      if (i != NONE) { /* no memory: the slot goes back */
        a->ents[i].next = a->free_head;
        a->free_head = i;
      }
      a->c.drops[TLC_ALERT_DROP_TABLE_FULL]++;
      a->c.dropped++;
      return;
    }
    e = &a->ents[i];
    memset(e, 0, sizeof(*e));
    e->budget = memcpy(mem, v->budget, lb);
    e->target = memcpy(mem + lb, v->target, lt);
    e->area = memcpy(mem + lb + lt, v->area, la);
    e->context = memcpy(mem + lb + lt + la, v->context, lc);
    e->stat = memcpy(mem + lb + lt + la + lc, v->stat, ls);
    e->id = ++a->next_id;
    e->hash = h;
    e->next = a->buckets[h & (a->nbuckets - 1)];
    a->buckets[h & (a->nbuckets - 1)] = i;
    e->first_wall_ns = wall_ns;
    e->worst = v->value;
    a->c.active++;
    a->c.firing++;
  } else {
    e = &a->ents[i];
    if (e->resolved) { /* resolved, not yet delivered: it fires on */
      e->resolved = 0;
      a->c.firing++;
    }
    if (v->over ? v->value > e->worst : v->value < e->worst)
      e->worst = v->value;
  }
  e->value = v->value;
  e->limit = v->limit;
  e->over = v->over;
  e->start = v->start;
  e->end = v->end;
  e->epoch = v->epoch;
  e->last_wall_ns = wall_ns;
  e->last_seen_ms = now;
  e->last_wall_ms = wall_ms;
  e->count++;
  e->ver++;
}

/* ---- the body ---- */

static void rfc3339(char *buf, size_t len, int64_t unix_ns) {
  struct tm tm;
  time_t s;
  int64_t frac;
  if (unix_ns < 0)
    unix_ns = 0;
  s = (time_t)(unix_ns / 1000000000);
  frac = unix_ns % 1000000000;
  gmtime_r(&s, &tm);
  snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%09" PRId64 "Z", tm.tm_year + 1900,
           tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, frac);
}

static void human_digits(char *buf, size_t len, int64_t v, int rate) {
  uint64_t m = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  const char *sign = v < 0 ? "-" : "";
  if (rate)
    snprintf(buf, len, "%" PRId64 " events", v);
  else if (m < 1000)
    snprintf(buf, len, "%s%" PRIu64 "ns", sign, m);
  else if (m < 1000000)
    snprintf(buf, len, "%s%" PRIu64 ".%03" PRIu64 "us", sign, m / 1000, m % 1000);
  else if (m < 1000000000)
    snprintf(buf, len, "%s%" PRIu64 ".%06" PRIu64 "ms", sign, m / 1000000, m % 1000000);
  else
    snprintf(buf, len, "%s%" PRIu64 ".%09" PRIu64 "s", sign, m / 1000000000, m % 1000000000);
}

/* A value as a person reads it: "1.5ms", "1.234567ms" (every digit down to the ns, trailing
 * zeros left out), or "N events" for rate. */
static void human(char *buf, size_t len, int64_t v, int rate) {
  size_t n;
  human_digits(buf, len, v, rate);
  n = strlen(buf);
  if (rate || strchr(buf, '.') == NULL || n < 3)
    return;
  {
    size_t u = n; /* the unit starts after the last digit */
    size_t d;
    while (u > 0 && (buf[u - 1] < '0' || buf[u - 1] > '9'))
      u--;
    d = u;
    while (d > 0 && buf[d - 1] == '0')
      d--;
    if (d > 0 && buf[d - 1] == '.')
      d--;
    memmove(buf + d, buf + u, n - u + 1);
  }
}

/* s as one shell word: as it is when it needs no quoting, else in single quotes. */
static void shell_word(tlc_out_t *o, const char *s) {
  size_t n = strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./:@%+=,-");
  if (s[0] != '\0' && s[n] == '\0') {
    tlc_out_puts(o, s);
    return;
  }
  tlc_out_putc(o, '\'');
  for (; *s != '\0'; s++) {
    if (*s == '\'')
      tlc_out_puts(o, "'\\''");
    else
      tlc_out_putc(o, *s);
  }
  tlc_out_putc(o, '\'');
}

/* An annotation built in a scratch buffer. */
static void ann(tlc_json_w_t *w, const char *k, tlc_out_t *scratch) {
  char *s;
  size_t n;
  s = tlc_out_take(scratch, &n);
  tlc_json_w_str(w, k, s != NULL ? s : "");
  tlc_free(s);
  tlc_out_init(scratch, 1u << 16, NULL, NULL);
}

static void write_alert(tlc_alert_t *a, tlc_json_w_t *w, const entry_t *e) {
  char t1[48], t2[48], v[48], l[48], worst[48];
  tlc_out_t s;
  int rate = strcmp(e->stat, "rate") == 0;
  int64_t ends_ms = e->last_wall_ms + (int64_t)a->o.resolve_ms;
  tlc_out_init(&s, 1u << 16, NULL, NULL);
  human(v, sizeof(v), e->value, rate);
  human(l, sizeof(l), e->limit, rate);
  human(worst, sizeof(worst), e->worst, rate);

  tlc_json_w_open(w, NULL, '{');
  tlc_json_w_open(w, "labels", '{');
  tlc_json_w_str(w, "alertname", ALERT_NAME);
  tlc_json_w_str(w, "budget", e->budget);
  tlc_json_w_str(w, "target", e->target);
  tlc_json_w_str(w, "area", e->area);
  if (e->context[0] != '\0')
    tlc_json_w_str(w, "context", e->context);
  tlc_json_w_str(w, "stat", e->stat);
  tlc_json_w_str(w, "host", a->host);
  tlc_json_w_close(w, '}');

  tlc_json_w_open(w, "annotations", '{');
  tlc_out_printf(&s, "%s: %s%s%s %s %s %s budget %s (%s %s)", e->target, e->area,
                 e->context[0] != '\0' ? " in " : "", e->context, e->stat, v,
                 e->over ? "over" : "under", e->budget, e->over ? "max" : "min", l);
  ann(w, "summary", &s);
  rfc3339(t1, sizeof(t1), e->first_wall_ns);
  rfc3339(t2, sizeof(t2), e->last_wall_ns);
  tlc_out_printf(&s,
                 "%" PRIu64 " violation%s since %s, the last at %s (target time ns:%" PRId64
                 " to ns:%" PRId64 ", epoch %" PRIu64 "); worst %s",
                 e->count, e->count == 1 ? "" : "s", t1, t2, e->start, e->end, e->epoch, worst);
  ann(w, "description", &s);
  tlc_json_w_str(w, "value", v);
  tlc_out_i64(&s, e->value);
  ann(w, "value_raw", &s);
  tlc_json_w_str(w, "limit", l);
  tlc_out_i64(&s, e->limit);
  ann(w, "limit_raw", &s);
  tlc_json_w_str(w, "worst", worst);
  tlc_out_u64(&s, e->count);
  ann(w, "count", &s);
  tlc_json_w_str(w, "first_violation", t1);
  tlc_json_w_str(w, "last_violation", t2);
  tlc_out_printf(&s, "ns:%" PRId64 "..ns:%" PRId64 " epoch %" PRIu64, e->start, e->end, e->epoch);
  ann(w, "target_time", &s);
  tlc_out_puts(&s, "tlcap around ");
  shell_word(&s, e->target);
  tlc_out_printf(&s, " ns:%" PRId64, e->start);
  ann(w, "around", &s);
  if (a->state_dir[0] != '\0') {
    tlc_out_puts(&s, "tlcapd replay --state-dir ");
    shell_word(&s, a->state_dir);
    tlc_out_puts(&s, " --target ");
    shell_word(&s, e->target);
    tlc_out_printf(&s, " --around ns:%" PRId64, e->start);
    ann(w, "replay", &s);
  }
  tlc_json_w_close(w, '}');

  rfc3339(t1, sizeof(t1), e->first_wall_ns);
  tlc_json_w_str(w, "startsAt", t1);
  /* firing: the Alertmanager resolves it by itself if no re-post comes; resolved: when */
  rfc3339(t2, sizeof(t2), ends_ms * 1000000);
  tlc_json_w_str(w, "endsAt", t2);
  if (a->generator[0] != '\0')
    tlc_json_w_str(w, "generatorURL", a->generator);
  tlc_json_w_close(w, '}');
  tlc_out_fini(&s);
}

/* ---- the tick and the job ---- */

static void start_job(tlc_alert_t *a, int64_t now) {
  tlc_out_t o;
  tlc_json_w_t w;
  size_t n = 0, len;
  char *body;
  uint64_t repost = a->o.repost_ms;
  tlc_out_init(&o, BODY_MAX, NULL, NULL);
  tlc_json_w_init(&w, &o, 1);
  tlc_json_w_open(&w, NULL, '[');
  for (uint32_t i = 0; i < a->nents && n < TLC_ALERT_BATCH; i++) {
    entry_t *e = &a->ents[i];
    if (e->id == 0 || (e->resolved && e->ver == e->sent_ver))
      continue;
    /* firing, and posted less than repost_ms ago: the next re-post (every firing alert is
     * re-posted, new violations or not, so that an Alertmanager that restarted learns it
     * again, as Prometheus re-sends its firing alerts) */
    if (!e->resolved && e->last_post_ms != 0 && now - e->last_post_ms < (int64_t)repost)
      continue;
    write_alert(a, &w, e);
    a->refs[n].slot = i;
    a->refs[n].id = e->id;
    a->refs[n].ver = e->ver;
    n++;
  }
  tlc_json_w_close(&w, ']');
  if (n == 0) {
    tlc_out_fini(&o);
    return;
  }
  body = tlc_out_take(&o, &len);
  tlc_out_fini(&o);
  if (body == NULL)
    return; /* no memory: the next tick tries again */
  a->nrefs = n;
  a->in_flight = 1;
  uv_mutex_lock(&a->mu);
  a->body = body;
  a->body_len = len;
  a->job_ready = 1;
  uv_cond_signal(&a->cv);
  uv_mutex_unlock(&a->mu);
}

static void tick_cb(uv_timer_t *t) {
  tlc_alert_t *a = t->data;
  int64_t now = (int64_t)uv_now(a->loop);
  for (uint32_t i = 0; i < a->nents; i++) {
    entry_t *e = &a->ents[i];
    if (e->id != 0 && !e->resolved && now - e->last_seen_ms >= (int64_t)a->o.resolve_ms) {
      e->resolved = 1;
      e->ver++;
      a->c.firing--;
    }
  }
  if (a->in_flight || now < a->retry_at_ms)
    return;
  start_job(a, now);
}

static void job_done(tlc_alert_t *a, int result, int status, const char *why) {
  int64_t now = (int64_t)uv_now(a->loop);
  a->in_flight = 0;
  if (result == 0) {
    if (a->c.failures > 0 && a->backoff_ms > 0)
      say(a, TLC_LOG_NOTICE, "alertmanager %s: taking alerts again", a->url);
    a->backoff_ms = 0;
    a->retry_at_ms = 0;
    a->c.requests++;
    a->c.last_ok_unix_ms = tlc_now_unix_ms();
    for (size_t k = 0; k < a->nrefs; k++) {
      entry_t *e = &a->ents[a->refs[k].slot];
      a->c.posted++;
      if (e->id != a->refs[k].id)
        continue; /* evicted meanwhile */
      e->sent_ver = a->refs[k].ver;
      e->last_post_ms = now;
      if (e->resolved && e->ver == a->refs[k].ver) {
        a->c.resolved++;
        remove_entry(a, a->refs[k].slot);
      }
    }
  } else {
    int r = result - 1;
    if (r < 0 || r >= TLC_ALERT_FAIL_N)
      r = TLC_ALERT_FAIL_IO;
    a->c.fails[r]++;
    a->c.failures++;
    snprintf(a->c.last_error, sizeof(a->c.last_error), "%s", why);
    if (r == TLC_ALERT_FAIL_STATUS && status >= 400 && status < 500 && status != 408 &&
        status != 429) {
      /* refused for good (a wrong path, an alert it finds invalid): sending the same again
       * would be refused again, and would hold every other alert back */
      for (size_t k = 0; k < a->nrefs; k++) {
        entry_t *e = &a->ents[a->refs[k].slot];
        a->c.drops[TLC_ALERT_DROP_REFUSED]++;
        a->c.dropped++;
        if (e->id != a->refs[k].id)
          continue;
        e->sent_ver = a->refs[k].ver;
        e->last_post_ms = now;
        if (e->resolved && e->ver == a->refs[k].ver)
          remove_entry(a, a->refs[k].slot);
      }
    }
    if (a->backoff_ms == 0)
      say(a, TLC_LOG_WARN,
          "alertmanager %s: %s; %zu alert%s kept, retrying with backoff (1s to 60s)", a->url, why,
          a->nrefs, a->nrefs == 1 ? "" : "s");
    a->backoff_ms = a->backoff_ms == 0 ? BACKOFF_MIN : a->backoff_ms * 2;
    if (a->backoff_ms > BACKOFF_MAX)
      a->backoff_ms = BACKOFF_MAX;
    a->retry_at_ms = now + (int64_t)a->backoff_ms;
  }
  a->nrefs = 0;
}

static void handle_closed(uv_handle_t *h) {
  tlc_alert_t *a = h->data;
  if (--a->handles > 0)
    return;
  if (a->cancel_fd >= 0)
    close(a->cancel_fd);
  tlc__alert_ssl_ctx_free(a->ssl_ctx);
  for (uint32_t i = 0; i < a->nents; i++)
    tlc_free(a->ents[i].budget);
  tlc_free(a->ents);
  tlc_free(a->buckets);
  tlc_free(a->refs);
  tlc_free(a->body);
  uv_mutex_destroy(&a->mu);
  uv_cond_destroy(&a->cv);
  {
    void (*cb)(void *) = a->close_cb;
    void *ud = a->close_ud;
    tlc_free(a);
    if (cb != NULL)
      cb(ud);
  }
}

static void done_cb(uv_async_t *as) {
  tlc_alert_t *a = as->data;
  int have, exited, result = 0, status = 0;
  char why[sizeof(a->why)];
  uv_mutex_lock(&a->mu);
  have = a->job_done;
  exited = a->exited;
  if (have) {
    a->job_done = 0;
    result = a->result;
    status = a->status;
    memcpy(why, a->why, sizeof(why));
  }
  uv_mutex_unlock(&a->mu);
  if (have && !a->closing)
    job_done(a, result, status, why);
  if (exited && a->closing) {
    uv_thread_join(&a->thread);
    uv_close((uv_handle_t *)&a->done, handle_closed);
  }
}

static void thread_main(void *arg) {
  tlc_alert_t *a = arg;
  uv_mutex_lock(&a->mu);
  for (;;) {
    while (!a->job_ready && !a->stop)
      uv_cond_wait(&a->cv, &a->mu);
    if (a->stop)
      break;
    {
      char *body = a->body;
      size_t len = a->body_len;
      int status = 0, r;
      char why[sizeof(a->why)];
      a->body = NULL;
      a->job_ready = 0;
      uv_mutex_unlock(&a->mu);
      why[0] = '\0';
      r = tlc__alert_post(&a->u, a->ssl_ctx, body, len, a->o.timeout_ms, a->cancel_fd, &status, why,
                          sizeof(why));
      tlc_free(body);
      uv_mutex_lock(&a->mu);
      a->result = r;
      a->status = status;
      memcpy(a->why, why, sizeof(why));
      a->job_done = 1;
    }
    uv_async_send(&a->done);
  }
  a->exited = 1;
  uv_mutex_unlock(&a->mu);
  uv_async_send(&a->done);
}

int tlc_alert_new(tlc_alert_t **out, uv_loop_t *loop, const tlc_alert_opts_t *o) {
  tlc_alert_t *a;
  char why[300];
  uint64_t period;
  *out = NULL;
  a = tlc_calloc(1, sizeof(*a));
  if (a == NULL)
    return TLC_ENOMEM;
  a->loop = loop;
  a->o = *o;
  a->cancel_fd = -1;
  a->free_head = NONE;
  if (o->url == NULL || strlen(o->url) >= sizeof(a->url) ||
      tlc_alert_parse_url(o->url, &a->u, why, sizeof(why)) != 0) {
    if (o->url == NULL || strlen(o->url) >= sizeof(a->url))
      snprintf(why, sizeof(why), "no URL, or one too long");
    say(a, TLC_LOG_ERR, "alertmanager_url: %s", why);
    tlc_free(a);
    return TLC_EINVAL;
  }
  snprintf(a->url, sizeof(a->url), "%s", o->url);
  snprintf(a->ca_file, sizeof(a->ca_file), "%s", o->ca_file != NULL ? o->ca_file : "");
  snprintf(a->state_dir, sizeof(a->state_dir), "%s", o->state_dir != NULL ? o->state_dir : "");
  snprintf(a->generator, sizeof(a->generator), "%s", o->generator != NULL ? o->generator : "");
  if (o->host != NULL && o->host[0] != '\0')
    snprintf(a->host, sizeof(a->host), "%s", o->host);
  else if (gethostname(a->host, sizeof(a->host) - 1) != 0 || a->host[0] == '\0')
    snprintf(a->host, sizeof(a->host), "localhost");
  a->o.url = a->url;
  a->o.ca_file = a->ca_file;
  if (a->o.resolve_ms == 0)
    a->o.resolve_ms = 300000;
  if (a->o.repost_ms == 0)
    a->o.repost_ms = 60000;
  if (a->o.repost_ms > a->o.resolve_ms / 2) /* re-posted before its endsAt passes */
    a->o.repost_ms = a->o.resolve_ms / 2 > 0 ? a->o.resolve_ms / 2 : 1;
  if (a->o.timeout_ms == 0)
    a->o.timeout_ms = 10000;
  if (a->o.max_alerts == 0)
    a->o.max_alerts = DEFAULT_MAX;
  if (a->o.max_alerts > (1u << 20))
    a->o.max_alerts = 1u << 20;
  for (a->nbuckets = 64; a->nbuckets < a->o.max_alerts * 2; a->nbuckets *= 2)
    ;
  a->buckets = tlc_malloc(a->nbuckets * sizeof(*a->buckets));
  a->refs = tlc_calloc(TLC_ALERT_BATCH, sizeof(*a->refs));
  if (a->buckets == NULL || a->refs == NULL) {
    tlc_free(a->buckets);
    tlc_free(a->refs);
    tlc_free(a);
    return TLC_ENOMEM;
  }
  memset(a->buckets, 0xff, a->nbuckets * sizeof(*a->buckets));
  if (a->u.tls && (a->ssl_ctx = tlc__alert_ssl_ctx(a->ca_file, why, sizeof(why))) == NULL) {
    say(a, TLC_LOG_ERR, "alertmanager_url %s: %s", a->url, why);
    tlc_free(a->buckets);
    tlc_free(a->refs);
    tlc_free(a);
    return TLC_EINVAL;
  }
  a->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (a->cancel_fd < 0 || uv_mutex_init(&a->mu) != 0) {
    int e = -errno;
    if (a->cancel_fd >= 0)
      close(a->cancel_fd);
    tlc__alert_ssl_ctx_free(a->ssl_ctx);
    tlc_free(a->buckets);
    tlc_free(a->refs);
    tlc_free(a);
    return e != 0 ? e : TLC_ENOMEM;
  }
  uv_cond_init(&a->cv);
  uv_async_init(loop, &a->done, done_cb);
  a->done.data = a;
  uv_timer_init(loop, &a->tick);
  a->tick.data = a;
  a->handles = 2;
  /* a second, or faster with a short resolve (tests): a resolution is late by a tick at most */
  period = a->o.resolve_ms / 4;
  if (period > 1000)
    period = 1000;
  if (period < 50)
    period = 50;
  uv_timer_start(&a->tick, tick_cb, period, period);
  if (uv_thread_create(&a->thread, thread_main, a) != 0) {
    a->exited = 1; /* no thread: closing joins none */
    say(a, TLC_LOG_ERR, "alertmanager_url %s: cannot start the request thread", a->url);
    a->closing = 1;
    uv_close((uv_handle_t *)&a->tick, handle_closed);
    uv_close((uv_handle_t *)&a->done, handle_closed);
    return TLC_ENOMEM;
  }
  say(a, TLC_LOG_INFO, "alerts: budget violations go to the Alertmanager at %s", a->url);
  *out = a;
  return 0;
}

void tlc_alert_counters(const tlc_alert_t *a, tlc_alert_counters_t *out) {
  *out = a->c;
  out->backoff_ms = a->backoff_ms;
}

void tlc_alert_dump(const tlc_alert_t *a, tlc_json_w_t *j) {
  tlc_alert_counters_t c;
  tlc_alert_counters(a, &c);
  tlc_json_w_open(j, "alerts", '{');
  tlc_json_w_str(j, "url", a->url);
  tlc_json_w_u64(j, "violations", c.violations);
  tlc_json_w_u64(j, "active", c.active);
  tlc_json_w_u64(j, "firing", c.firing);
  tlc_json_w_u64(j, "requests", c.requests);
  tlc_json_w_u64(j, "posted", c.posted);
  tlc_json_w_u64(j, "resolved", c.resolved);
  tlc_json_w_u64(j, "dropped_total", c.dropped);
  tlc_json_w_open(j, "dropped", '{');
  for (int r = 0; r < TLC_ALERT_DROP_N; r++)
    tlc_json_w_u64(j, tlc_alert_drop_name(r), c.drops[r]);
  tlc_json_w_close(j, '}');
  tlc_json_w_u64(j, "failures_total", c.failures);
  tlc_json_w_open(j, "failures", '{');
  for (int r = 0; r < TLC_ALERT_FAIL_N; r++)
    tlc_json_w_u64(j, tlc_alert_fail_name(r), c.fails[r]);
  tlc_json_w_close(j, '}');
  tlc_json_w_u64(j, "backoff_ms", c.backoff_ms);
  tlc_json_w_i64(j, "last_ok_unix_ms", c.last_ok_unix_ms);
  tlc_json_w_str(j, "last_error", c.last_error);
  tlc_json_w_close(j, '}');
}

void tlc_alert_close(tlc_alert_t *a, void (*cb)(void *ud), void *ud) {
  uint64_t one = 1;
  if (a == NULL || a->closing)
    return;
  a->closing = 1;
  a->close_cb = cb;
  a->close_ud = ud;
  uv_timer_stop(&a->tick);
  uv_close((uv_handle_t *)&a->tick, handle_closed);
  uv_mutex_lock(&a->mu);
  a->stop = 1;
  uv_cond_signal(&a->cv);
  uv_mutex_unlock(&a->mu);
  if (write(a->cancel_fd, &one, sizeof(one)) < 0) {
    /* an eventfd at its maximum is already readable: the request is cancelled either way */
  }
  /* done_cb joins the thread once it reports its exit, then closes the async handle */
}
