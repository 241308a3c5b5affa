/* efl_app.c - the applications an efl source captures (efl.c has the connection to efl_debugd).
 *
 * An application efl_debugd reports is matched against the source's pattern, gets its target
 * ("NAME/<app>-<pid>": created, found, or at the source's cap the target of an exited
 * application of the same name), and has its evlog turned on; the EvLog/get replies are fed to
 * its target as efl_debug-style blocks; an empty reply after an "on" tells the EFL 1.26.3
 * CPU/Freq/on bug apart and falls back to EvLog/on (efl.c's top comment has the whole story).
 * Also here: the packets written to efl_debugd, which both halves send.
 *
 * This file calls nothing in efl.c: the connection dispatches to it, never the other way.
 * Loop thread only.
 */
#include "ingest/efl-int.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"

#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* The evlog gets GRACE_MS plus two poll intervals to answer a first "on". */
static uint64_t grace_ms(const tlc_efl_t *e) {
  return GRACE_MS + 2ull * e->src.cfg.poll_ms;
}

/* ---- writing ---- */

typedef struct wreq {
  uv_write_t w;
  uint8_t buf[];
} wreq_t;

static void write_cb(uv_write_t *w, int status) {
  (void)status; /* a failed write shows as a read error or EOF: lost() handles it */
  tlc_free(w);
}

/* Queues one packet (header built here). Returns 0 or a negative error (nothing queued). */
int tlc__efl_send_pkt(tlc_efl_t *e, int32_t cid, int32_t op, const void *payload, size_t plen) {
  wreq_t *r;
  uv_buf_t b;
  int rc;
  if (e->tcp == NULL || op < 0)
    return TLC_EINVAL;
  r = tlc_malloc(sizeof(*r) + TLC_EFLDBG_HDR + plen);
  if (r == NULL)
    return TLC_ENOMEM;
  tlc_efldbg_put_hdr(r->buf, (uint32_t)(TLC_EFLDBG_HDR + plen), cid, op);
  if (plen > 0)
    memcpy(r->buf + TLC_EFLDBG_HDR, payload, plen);
  b = uv_buf_init((char *)r->buf, (unsigned)(TLC_EFLDBG_HDR + plen));
  rc = uv_write(&r->w, (uv_stream_t *)e->tcp, &b, 1, write_cb);
  if (rc != 0)
    tlc_free(r);
  return rc;
}

int tlc__efl_send_raw_to(uv_stream_t *s, const uint8_t *pkt, size_t len) {
  wreq_t *r;
  uv_buf_t b;
  int rc;
  r = tlc_malloc(sizeof(*r) + len);
  if (r == NULL)
    return TLC_ENOMEM;
  memcpy(r->buf, pkt, len);
  b = uv_buf_init((char *)r->buf, (unsigned)len);
  rc = uv_write(&r->w, s, &b, 1, write_cb);
  if (rc != 0)
    tlc_free(r);
  return rc;
}

int tlc__efl_send_raw(tlc_efl_t *e, const uint8_t *pkt, size_t len) {
  return tlc__efl_send_raw_to((uv_stream_t *)e->tcp, pkt, len);
}

/* ---- applications ---- */

static efl_app_t *app_find(const tlc_efl_t *e, int32_t cid) {
  efl_app_t *a;
  LIST_FOREACH(a, &e->apps, link) {
    if (a->cid == cid)
      return a;
  }
  return NULL;
}

/* PATTERN against the application's name or its decimal pid (fnmatch, no flags). */
static int app_matches(const tlc_efl_t *e, const tlc_efldbg_client_t *c) {
  char pid[16];
  snprintf(pid, sizeof(pid), "%" PRId32, c->pid);
  return fnmatch(e->src.cfg.pattern, c->name, 0) == 0 || fnmatch(e->src.cfg.pattern, pid, 0) == 0;
}

/* "NAME/<app>-<pid>": the application name with every byte a target name may not hold
 * replaced by '_' (a leading '.' too), cut so that the whole fits max_name. */
static int target_name(const tlc_efl_t *e, const tlc_efldbg_client_t *c, char *out, size_t cap) {
  static const char ok[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._@:#+=[]-";
  char app[TLC_EFLDBG_NAME_MAX + 1], tail[24];
  size_t room, n = strlen(c->name), fixed;
  int tl = snprintf(tail, sizeof(tail), "-%" PRId32, c->pid);
  size_t max = e->src.d->cfg.max_name < cap - 1 ? e->src.d->cfg.max_name : cap - 1;
  fixed = strlen(e->src.cfg.name) + 1 + (size_t)tl;
  if (fixed + 1 > max)
    return TLC_ERANGE;
  room = max - fixed;
  if (n == 0) {
    snprintf(app, sizeof(app), "app");
    n = 3;
  } else {
    for (size_t i = 0; i < n; i++)
      app[i] = c->name[i] != '\0' && strchr(ok, c->name[i]) ? c->name[i] : '_';
    if (app[0] == '.')
      app[0] = '_';
  }
  if (n > room)
    n = room;
  app[n] = '\0';
  return (size_t)snprintf(out, cap, "%s/%s%s", e->src.cfg.name, app, tail) < cap ? 0 : TLC_ERANGE;
}

/* The target's peer text: "efl_debugd 127.0.0.1:6666 cid 3 pid 1234", and " no-cpufreq" for
 * an application hit by the CPU/Freq/on bug (so `tlcap targets` and subscribers see it). */
static void peer_text(const tlc_efl_t *e, const efl_app_t *a, char *out, size_t cap) {
  char tail[48];
  snprintf(tail, sizeof(tail), " cid %" PRId32 " pid %" PRId32 "%s", a->cid, a->pid,
           a->nocpufreq ? " no-cpufreq" : "");
  snprintf(out, cap, "efl_debugd %.*s%s",
           (int)(cap > strlen(tail) + 12 ? cap - strlen(tail) - 12 : 0), e->addr, tail);
}

static void set_state(efl_app_t *a, int st) {
  a->state = st;
}

static int send_on(tlc_efl_t *e, efl_app_t *a, int kind, uint64_t now) {
  int rc = tlc__efl_send_pkt(e, a->cid, e->op[kind == ON_CPUFREQ ? OP_CPU_ON : OP_EV_ON], NULL, 0);
  if (rc != 0)
    return rc;
  if (a->on_kind != kind)
    a->on_ms = now;
  a->on_kind = kind;
  a->on_effect = 0;
  a->pending_after_on = 0; /* a get already out was sent before this "on" */
  return 0;
}

/* Turns the evlog off again: the "off" that matches the "on" that took effect. An "on" whose
 * effect was never seen gets CPU/Freq/off only (idempotent in eina and in the work-around);
 * EvLog/off is counted in eina, so it is sent only when its EvLog/on is known to have worked. */
void tlc__efl_send_off(tlc_efl_t *e, efl_app_t *a) {
  if (a->on_kind == ON_EVLOG && a->on_effect)
    (void)tlc__efl_send_pkt(e, a->cid, e->op[OP_EV_OFF], NULL, 0);
  else if (a->on_kind != ON_NONE)
    (void)tlc__efl_send_pkt(e, a->cid, e->op[OP_CPU_OFF], NULL, 0);
}

void tlc__efl_app_free(tlc_efl_t *e, efl_app_t *a, const char *reason) {
  if (e->cur == a)
    e->cur = NULL;
  if (a->target != NULL && a->target->source == a)
    tlc_target_detach(a->target, reason);
  if (a->target != NULL)
    a->target->pins--;
  tlc_free(a);
  e->napps--;
}

/* The application's name without control characters, for log lines. */
static void clean_name(const char *in, char *out, size_t cap) {
  size_t i = 0;
  for (; i + 1 < cap && in[i] != '\0'; i++)
    out[i] = (unsigned char)in[i] < 0x20 || in[i] == 0x7f ? '?' : in[i];
  out[i] = '\0';
}

/* The cap on the targets this source keeps: its section's max_targets, else [daemon]
 * efl_max_targets. */
size_t tlc__efl_max_targets(const tlc_efl_t *e) {
  return e->src.cfg.max_targets != 0 ? e->src.cfg.max_targets : e->src.d->cfg.efl_max_targets;
}

/* Whether `name` is one of this source's targets ("NAME/..."); efl names are per source. */
static int own_target(const tlc_efl_t *e, const tlc_target_t *t) {
  size_t n = strlen(e->src.cfg.name);
  return t->src_kind == TLC_SRC_EFL && strncmp(t->name, e->src.cfg.name, n) == 0 &&
         t->name[n] == '/';
}

/* The targets of this source in the target table (attached or not: they persist). */
size_t tlc__efl_source_targets(const tlc_efl_t *e) {
  const tlc_targets_t *r = &e->src.d->targets;
  size_t n = 0;
  for (size_t i = 0; i < r->n; i++)
    n += own_target(e, r->v[i]);
  return n;
}

/* The length of "NAME/<app>" in "NAME/<app>-<pid>" (the name without its "-<digits>" tail). */
static size_t app_base_len(const char *tname) {
  size_t n = strlen(tname), k = n;
  while (k > 0 && tname[k - 1] >= '0' && tname[k - 1] <= '9')
    k--;
  return k < n && k > 0 && tname[k - 1] == '-' ? k - 1 : n;
}

/* For a new application at the cap: the target of an exited application of the same name
 * (same "NAME/<app>" before "-<pid>"), detached and held by no application of this source, the
 * one detached the longest. NULL: none. */
static tlc_target_t *reusable_target(const tlc_efl_t *e, const char *tname) {
  const tlc_targets_t *r = &e->src.d->targets;
  size_t base = app_base_len(tname);
  tlc_target_t *best = NULL;
  for (size_t i = 0; i < r->n; i++) {
    tlc_target_t *t = r->v[i];
    const efl_app_t *a;
    if (!own_target(e, t) || t->connected || t->source != NULL || app_base_len(t->name) != base ||
        strncmp(t->name, tname, base) != 0)
      continue;
    for (a = LIST_FIRST(&e->apps); a != NULL && a->target != t; a = LIST_NEXT(a, link))
      ;
    if (a != NULL)
      continue; /* detached for a moment (decode error): still that application's */
    if (best == NULL || t->last_disconnect_unix_ms < best->last_disconnect_unix_ms)
      best = t;
  }
  return best;
}

/* Unlinks and frees an application that never got its target. */
void tlc__efl_app_drop(tlc_efl_t *e, efl_app_t *a) {
  LIST_REMOVE(a, link);
  tlc__efl_app_free(e, a, NULL);
}

/* Gives a matched application its target (created, found, or at the cap reused), attaches it
 * and turns its evlog on. Returns 0, or -1 when it is refused (logged, counted; the caller
 * drops it). */
int tlc__efl_app_capture(tlc_efl_t *e, efl_app_t *a, uint64_t now) {
  tlc_ingest_t *d = e->src.d;
  char tname[TLC_TARGET_NAME_MAX + 1], peer[TLC_PEER_MAX];
  tlc_efldbg_client_t c;
  tlc_target_conf_t conf;
  tlc_target_t *t = NULL;
  int rc;
  memset(&c, 0, sizeof(c));
  c.cid = a->cid;
  c.pid = a->pid;
  memcpy(c.name, a->name, sizeof(c.name)); /* cleaned: the same target name as the raw one */
  if (target_name(e, &c, tname, sizeof(tname)) != 0) {
    e->apps_refused++;
    tlc_log(TLC_LOG_WARN, TLC_LOGC_EFL,
            "efl %s: application pid %" PRId32 " not captured: the source name leaves no room "
            "for \"/<app>-<pid>\" within max_name (%zu)",
            e->src.cfg.name, a->pid, d->cfg.max_name);
    return -1;
  }
  t = tlc_targets_find(&d->targets, tname);
  if (t == NULL &&
      (tlc__efl_source_targets(e) >= tlc__efl_max_targets(e) || d->targets.n >= d->targets.max)) {
    /* At the source's cap, or the table is full (an efl source never evicts another source's
     * target): the target of an exited application of the same name, else refused. */
    int full = tlc__efl_source_targets(e) < tlc__efl_max_targets(e);
    char why[96];
    if (full)
      snprintf(why, sizeof(why), "the target table is full (max_targets %zu)", d->targets.max);
    else
      snprintf(why, sizeof(why), "the source has its %zu targets (efl_max_targets)",
               tlc__efl_max_targets(e));
    t = reusable_target(e, tname);
    if (t == NULL) {
      e->apps_refused++;
      if (full)
        e->apps_refused_full++;
      else
        e->apps_refused_cap++;
      tlc_log(TLC_LOG_WARN, TLC_LOGC_EFL,
              "efl %s: application %s pid %" PRId32 " not captured: %s and no target of an "
              "exited \"%s\" to reuse (%" PRIu64 " applications refused so far)",
              e->src.cfg.name, a->name, a->pid, why, a->name,
              e->apps_refused_cap + e->apps_refused_full);
      return -1;
    }
    e->targets_reused++;
    tlc_log(TLC_LOG_INFO, TLC_LOGC_EFL,
            "efl %s: application %s pid %" PRId32 ": target %s reused (%s)", e->src.cfg.name,
            a->name, a->pid, t->name, why);
    snprintf(tname, sizeof(tname), "%s", t->name);
  }
  tlc__target_conf(d, TLC_SRC_EFL, e->src.cfg.name, tname, TLC_FMT_EVLOG, &conf);
  rc = tlc_targets_get(&d->targets, tname, TLC_SRC_EFL, &conf, &t);
  if (rc != 0 || t->connected) {
    e->apps_refused++;
    tlc_log(TLC_LOG_WARN, TLC_LOGC_EFL, "efl %s: application pid %" PRId32 ": target %s: %s",
            e->src.cfg.name, a->pid, tname,
            rc == 0                         ? "already attached to another source"
            : rc == TLC_EINVAL && t != NULL ? "a target of this name has another format"
                                            : tlc_strerror(rc));
    return -1;
  }
  a->target = t;
  t->pins++; /* not forgotten while this application may attach again */
  e->apps_matched++;
  peer_text(e, a, peer, sizeof(peer));
  tlc_target_attach(t, a, peer);
  set_state(a, APP_WAITING);
  rc = send_on(e, a, ON_CPUFREQ, now);
  tlc_log(TLC_LOG_INFO, TLC_LOGC_EFL,
          "efl %s: application %s pid %" PRId32 " (cid %" PRId32 "): target %s, evlog on%s",
          e->src.cfg.name, a->name, a->pid, a->cid, tname, rc == 0 ? "" : " failed (will retry)");
  return 0;
}

void tlc__efl_app_added(tlc_efl_t *e, const tlc_efldbg_client_t *c, uint64_t now) {
  char name[TLC_EFLDBG_NAME_MAX + 1];
  efl_app_t *a;
  if (c->cid == 0) {
    /* A client efl_debugd lists before its hello was read (no cid, pid or name yet): it is
     * announced again, with its cid, once it has said hello. */
    e->ignored++;
    return;
  }
  e->apps_seen++;
  clean_name(c->name, name, sizeof(name));
  if (!app_matches(e, c)) {
    TLC_LOGD(TLC_LOGC_EFL,
             "efl %s: application %s pid %" PRId32 " (cid %" PRId32 ") does not "
             "match \"%s\"",
             e->src.cfg.name, name, c->pid, c->cid, e->src.cfg.pattern);
    return;
  }
  if (app_find(e, c->cid) != NULL)
    return; /* announced twice */
  if (e->napps >= MAX_APPS) {
    e->apps_refused++;
    tlc_log(TLC_LOG_WARN, TLC_LOGC_EFL,
            "efl %s: application %s pid %" PRId32 " not captured: %d applications already are",
            e->src.cfg.name, name, c->pid, MAX_APPS);
    return;
  }
  a = tlc_calloc(1, sizeof(*a));
  if (a == NULL) {
    e->apps_refused++;
    return;
  }
  a->cid = c->cid;
  a->pid = c->pid;
  memcpy(a->name, name, sizeof(a->name)); /* for log lines */
  LIST_INSERT_HEAD(&e->apps, a, link);
  e->napps++;
  if (e->verify == VERIFY_PENDING) {
    TLC_LOGD(TLC_LOGC_EFL,
             "efl %s: application %s pid %" PRId32 ": waiting until efl_debugd %s is verified",
             e->src.cfg.name, name, c->pid, e->addr);
    return; /* captured once the probe is seen (probe_seen) */
  }
  if (tlc__efl_app_capture(e, a, now) != 0)
    tlc__efl_app_drop(e, a);
}

void tlc__efl_app_deleted(tlc_efl_t *e, int32_t cid) {
  efl_app_t *a;
  LIST_FOREACH(a, &e->apps, link) {
    if (a->cid == cid) {
      LIST_REMOVE(a, link); /* and no further step of the walk */
      tlc_log(TLC_LOG_INFO, TLC_LOGC_EFL, "efl %s: application %s pid %" PRId32 " exited",
              e->src.cfg.name, a->name, a->pid);
      tlc__efl_app_free(e, a, "application exited");
      return;
    }
  }
}

/* An EvLog/get reply without the overflow word: the application's evlog is off. */
static void reply_empty(tlc_efl_t *e, efl_app_t *a, int after_on, uint64_t now) {
  a->empty++;
  if (!after_on)
    return; /* answers a get sent before the last "on" */
  if (a->evlog_seen && a->on_effect) {
    /* It ran and is off now: someone else turned it off (efl_debug evlogon ends with
     * CPU/Freq/off). Turn it on again the same way. */
    tlc_log(TLC_LOG_NOTICE, TLC_LOGC_EFL,
            "efl %s: application %s pid %" PRId32 ": evlog was turned off by another client; "
            "turning it on again",
            e->src.cfg.name, a->name, a->pid);
    (void)send_on(e, a, a->on_kind, now);
    a->on_retries++;
    return;
  }
  if (a->on_kind == ON_CPUFREQ && now - a->on_ms < grace_ms(e)) {
    (void)send_on(e, a, ON_CPUFREQ, now); /* its handler may not be registered yet */
    a->on_retries++;
    return;
  }
  if (a->on_kind == ON_CPUFREQ) {
    char why[160], peer[TLC_PEER_MAX];
    e->no_cpufreq++;
    a->nocpufreq = 1;
    set_state(a, APP_NO_CPUFREQ);
    /* Told to subscribers too, as a target event: the stream is started again (nothing was
     * captured so far: the evlog was off), under a peer text that says "no-cpufreq". */
    snprintf(why, sizeof(why),
             "pid %" PRId32 ": evlog off, no CPU/Freq/on handler (EFL 1.26.3 bug); restarting "
             "it with EvLog/on",
             a->pid);
    if (a->target->source == a) {
      tlc_target_detach(a->target, why);
      peer_text(e, a, peer, sizeof(peer));
      (void)tlc_target_attach(a->target, a, peer);
    }
    tlc_log(TLC_LOG_WARN, TLC_LOGC_EFL,
            "efl %s: application %s pid %" PRId32 ": its evlog stays off after CPU/Freq/on: "
            "it does not answer CPU/Freq/on (EFL 1.26.3 registers that handler too early; "
            "efl_debug would write an empty capture with block size 0xfffffffc); starting its "
            "evlog with EvLog/on instead (no CPU frequency events)",
            e->src.cfg.name, a->name, a->pid);
    (void)send_on(e, a, ON_EVLOG, now);
    return;
  }
  if (a->on_kind == ON_EVLOG) {
    if (a->state != APP_EVLOG_OFF && now - a->on_ms >= grace_ms(e)) {
      set_state(a, APP_EVLOG_OFF);
      tlc_log(TLC_LOG_WARN, TLC_LOGC_EFL,
              "efl %s: application %s pid %" PRId32 ": its evlog stays off even after "
              "EvLog/on; nothing is captured from it (retrying)",
              e->src.cfg.name, a->name, a->pid);
    }
    (void)send_on(e, a, ON_EVLOG, now); /* the last one had no effect: not counted twice */
    a->on_retries++;
  }
}

void tlc__efl_reply_begin(tlc_efl_t *e, const tlc_efldbg_msg_t *m, uint64_t now) {
  efl_app_t *a = app_find(e, m->hdr.cid);
  uint32_t payload = m->hdr.size - TLC_EFLDBG_HDR, items;
  int after_on;
  e->cur = NULL;
  if (a == NULL || a->target == NULL) {
    e->ignored++;
    return;
  }
  after_on = a->pending ? a->pending_after_on : 0;
  a->pending = 0;
  a->replies++;
  a->skip = 0;
  if (payload < 4) {
    reply_empty(e, a, after_on, now);
    return;
  }
  a->evlog_seen = 1;
  if (after_on && !a->on_effect) {
    a->on_effect = 1;
    set_state(a, a->nocpufreq ? APP_NO_CPUFREQ : APP_CAPTURING);
    tlc_log(TLC_LOG_INFO, TLC_LOGC_EFL, "efl %s: application %s pid %" PRId32 ": capturing%s",
            e->src.cfg.name, a->name, a->pid, a->nocpufreq ? " (evlog via EvLog/on)" : "");
  }
  items = payload - 4;
  if (items == 0)
    return;
  if (a->target->source != a) {
    /* detached after a decode error: a new stream (a gap) from this block on */
    char peer[TLC_PEER_MAX];
    peer_text(e, a, peer, sizeof(peer));
    if (tlc_target_attach(a->target, a, peer) != 0)
      return;
  }
  if (items > e->src.d->cfg.max_block) {
    char why[96];
    snprintf(why, sizeof(why), "evlog block of %" PRIu32 " bytes over max_block, skipped", items);
    tlc_log(TLC_LOG_WARN, TLC_LOGC_EFL, "efl %s: application %s pid %" PRId32 ": %s",
            e->src.cfg.name, a->name, a->pid, why);
    tlc_target_detach(a->target, why); /* a gap; attached again at its next block */
    a->skip = 1;
    e->cur = a;
    return;
  }
  {
    uint8_t hdr[12];
    tlc_efldbg_evlog_header(hdr, items, m->data);
    a->blocks++;
    a->bytes += items;
    e->cur = a;
    if (tlc_target_feed(a->target, hdr, sizeof(hdr)) != 0) {
      tlc_target_detach(a->target, "decode error");
      a->skip = 1;
    }
  }
}

void tlc__efl_reply_data(tlc_efl_t *e, const tlc_efldbg_msg_t *m) {
  efl_app_t *a = e->cur;
  if (a == NULL || a->skip || a->target == NULL || a->target->source != a)
    return;
  if (tlc_target_feed(a->target, m->data, m->len) != 0) {
    char why[200];
    snprintf(why, sizeof(why), "decode error at offset %" PRIu64 ": %s",
             a->target->pipe.dec.err_offset, a->target->pipe.dec.err_reason);
    tlc_log(TLC_LOG_WARN, TLC_LOGC_EFL, "efl %s: application %s pid %" PRId32 ": %s",
            e->src.cfg.name, a->name, a->pid, why);
    tlc_target_detach(a->target, why);
    a->skip = 1;
  }
}
