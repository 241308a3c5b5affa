/* sources.c - the source registry, the one sync over every kind, and what the kinds share.
 *
 * The registry is a small array in the daemon context (tlc_ingest_t.kinds): each registered
 * kind's ops table (source.h) and the list of its running sources. The built-in kinds are
 * registered at the first sync (or the first listener adopted from socket activation), in the
 * order they start and stop: listen, dial, serial, efl. This file calls a kind only through its
 * table, as nng's core calls a transport; the kinds call the helpers at the end of this file and
 * never each other.
 *
 * Cost: a sync is O(sources x sections) name comparisons; it runs at start, on SIGHUP and at
 * shutdown, never per event.
 */
#include "ingest/sources.h"

#include "base/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The built-in kinds, in start and stop order (nng's list of transport constructors). */
static const tlc_source_ops_t *const builtin[] = {
  &tlc_listen_source_ops,
  &tlc_dial_source_ops,
  &tlc_serial_source_ops,
  &tlc_efl_source_ops,
};

static int add_kind(tlc_ingest_t *d, const tlc_source_ops_t *ops) {
  for (size_t i = 0; i < d->nkinds; i++)
    if (d->kinds[i].ops->kind == ops->kind)
      return TLC_EINVAL;
  if (d->nkinds >= TLC_SOURCE_KINDS)
    return TLC_ELIMIT;
  d->kinds[d->nkinds].ops = ops;
  LIST_INIT(&d->kinds[d->nkinds].running);
  d->nkinds++;
  return 0;
}

static void register_builtin(tlc_ingest_t *d) {
  if (d->nkinds > 0)
    return;
  for (size_t i = 0; i < sizeof(builtin) / sizeof(builtin[0]); i++)
    (void)add_kind(d, builtin[i]);
}

int tlc_sources_register(tlc_ingest_t *d, const tlc_source_ops_t *ops) {
  register_builtin(d);
  return add_kind(d, ops);
}

struct tlc_source_list *tlc_sources_running(const tlc_ingest_t *d, const tlc_source_ops_t *ops) {
  for (size_t i = 0; i < d->nkinds; i++)
    if (d->kinds[i].ops == ops)
      return (struct tlc_source_list *)&d->kinds[i].running; /* the list, not d, is the kind's */
  return NULL;
}

void tlc_sources_link(tlc_source_t *s) {
  struct tlc_source_list *list;
  register_builtin(s->d);
  list = tlc_sources_running(s->d, s->ops);
  if (list != NULL)
    LIST_INSERT_HEAD(list, s, link);
}

static tlc_source_t *find_running(struct tlc_source_list *list, const char *name) {
  tlc_source_t *s;
  LIST_FOREACH(s, list, link) {
    if (strcmp(s->cfg.name, name) == 0)
      return s;
  }
  return NULL;
}

/* Stops the kind's sources whose section is gone or changed beyond what they take in place
 * (all of them when d->stopping); applies the new settings to the others. */
static void stop_gone(tlc_ingest_t *d, tlc_source_kind_t *k) {
  tlc_source_t *s, *next;
  LIST_FOREACH_SAFE(s, &k->running, link, next) {
    const tlc_cfg_source_t *c =
        d->stopping ? NULL : tlc_config_find_source(&d->cfg, k->ops->kind, s->cfg.name);
    if (!d->stopping && k->ops->same_config(s, c)) {
      if (k->ops->apply != NULL)
        k->ops->apply(s, c);
      else if (c != NULL)
        s->cfg = *c;
      continue;
    }
    LIST_REMOVE(s, link);
    k->ops->stop(s, d->stopping ? TLC_SOURCE_SHUTDOWN
                    : c == NULL ? TLC_SOURCE_REMOVED
                                : TLC_SOURCE_CHANGED);
  }
}

/* Starts the kind's sections that run no source, in configuration order. Returns the first
 * start error when the kind's are fatal, else 0. */
static int start_new(tlc_ingest_t *d, tlc_source_kind_t *k) {
  int first_err = 0;
  for (size_t i = 0; i < d->cfg.nsrc; i++) {
    const tlc_cfg_source_t *c = &d->cfg.src[i];
    tlc_source_t *s;
    int r;
    if (c->kind != k->ops->kind || find_running(&k->running, c->name) != NULL)
      continue;
    r = k->ops->start(d, c, &s);
    if (r != 0) {
      if (k->ops->start_errors_fatal && first_err == 0)
        first_err = r;
      continue;
    }
    LIST_INSERT_HEAD(&k->running, s, link);
  }
  return first_err;
}

int tlc_sources_sync(tlc_ingest_t *d) {
  int first_err = 0;
  register_builtin(d);
  if (d->stopping) {
    for (size_t i = 0; i < d->nkinds; i++)
      if (d->kinds[i].ops->drain != NULL)
        d->kinds[i].ops->drain(d);
  }
  for (size_t i = 0; i < d->nkinds; i++)
    stop_gone(d, &d->kinds[i]);
  if (d->stopping)
    return 0;
  for (size_t i = 0; i < d->nkinds; i++) {
    int r = start_new(d, &d->kinds[i]);
    if (r != 0 && first_err == 0)
      first_err = r;
    if (r != 0 && !d->sources_synced)
      break; /* start-up fails: the kinds after it are not started (no tty opened for nothing) */
  }
  d->sources_synced = 1;
  return first_err;
}

int tlc_sources_check_reload(const tlc_ingest_t *d, const tlc_config_t *nc, char *why,
                             size_t whylen) {
  int r = 0;
  if (whylen > 0)
    why[0] = '\0';
  for (size_t i = 0; i < d->nkinds; i++) {
    const tlc_source_ops_t *ops = d->kinds[i].ops;
    if (ops->check_reload != NULL && ops->check_reload(d, nc, why, whylen) != 0 && r == 0)
      r = TLC_EINVAL;
  }
  return r;
}

size_t tlc_sources_down(const tlc_ingest_t *d, char *why, size_t len) {
  size_t down = 0, at = 0;
  if (len > 0)
    why[0] = '\0';
  for (size_t i = 0; i < d->cfg.nsrc; i++) {
    const tlc_cfg_source_t *c = &d->cfg.src[i];
    const tlc_source_kind_t *k = NULL;
    for (size_t j = 0; j < d->nkinds && k == NULL; j++)
      if (d->kinds[j].ops->kind == c->kind)
        k = &d->kinds[j];
    if (k != NULL && find_running((struct tlc_source_list *)&k->running, c->name) != NULL)
      continue;
    down++;
    if (at < len) {
      int n = snprintf(why + at, len - at, "%s%s %s not running", at > 0 ? "; " : "",
                       k != NULL ? k->ops->name : "source", c->name);
      at = n < 0 ? len : at + (size_t)n;
    }
  }
  return down;
}

void tlc_sources_status(const tlc_ingest_t *d, char *buf, size_t len) {
  for (size_t i = 0; i < d->nkinds; i++)
    if (d->kinds[i].ops->status != NULL)
      d->kinds[i].ops->status(d, buf, len);
}

void tlc_sources_dump(const tlc_ingest_t *d, struct tlc_json_w *w) {
  for (size_t i = 0; i < d->nkinds; i++)
    if (d->kinds[i].ops->dump != NULL)
      d->kinds[i].ops->dump(d, w);
}

/* ---- helpers the kinds share ---- */

uint64_t tlc__backoff_next(const tlc_ingest_t *d, uint64_t *cur) {
  uint64_t b = *cur == 0 ? d->cfg.backoff_min_ms : *cur * 2;
  uint64_t j;
  if (b > d->cfg.backoff_max_ms)
    b = d->cfg.backoff_max_ms;
  *cur = b;
  /* +-25% jitter, so that many targets do not reconnect in lockstep. */
  j = b / 2 > 0 ? (uint64_t)rand() % (b / 2 + 1) : 0;
  return b - b / 4 + j;
}

void tlc_target_conf_from_config(const tlc_config_t *c, const tlc_cfg_source_t *src,
                                 const char *name, tlc_format_t format, int resync,
                                 tlc_target_conf_t *out) {
  const tlc_cfg_tset_t *ts = tlc_config_tset(c, src, name);
  memset(out, 0, sizeof(*out));
  out->format = format;
  out->resync = resync;
  out->has_context_area = ts->has_context_area;
  out->context_area = ts->context_area;
  out->mapping_path = ts->mapping[0] != '\0' ? ts->mapping : NULL;
  tlc_config_ctxpack(ts, &out->pack);
  out->rtos_path = ts->rtos[0] != '\0' ? ts->rtos : NULL;
  out->nwindows = c->nwindows;
  memcpy(out->window_ns, c->window_ns, sizeof(out->window_ns));
  out->max_areas = c->max_areas;
  out->max_contexts = c->max_contexts;
  out->max_depth = c->max_depth;
  out->max_names = c->max_names;
  out->max_block = c->max_block;
  out->histograms = (uint8_t)c->histograms;
  out->clock_reset_ns = c->clock_reset_threshold_ms == 0 ? -1
                        : c->clock_reset_threshold_ms > (uint64_t)INT64_MAX / 1000000
                            ? INT64_MAX
                            : (int64_t)c->clock_reset_threshold_ms * 1000000;
}

void tlc__target_conf(const tlc_ingest_t *d, int kind, const char *src_name, const char *name,
                      tlc_format_t format, tlc_target_conf_t *out) {
  const tlc_cfg_source_t *src = tlc_config_find_source(&d->cfg, kind, src_name);
  tlc_target_conf_from_config(&d->cfg, src, name, format, kind == TLC_SRC_SERIAL, out);
}
