/* target.c - targets and their registry: decode -> (evmap) -> engine -> observers.
 *
 * Invariants:
 *  - a target is in the registry from creation to daemon shutdown; its index never changes
 *    (the read side, view/view.h, relies on it), so the registry only grows, up to its cap;
 *  - at most one source is attached to a target at a time (t->source);
 *  - every detach makes exactly one engine gap, and leaves the decoder reset for the next
 *    stream with its counters kept;
 *  - while a checkpoint freezes a target (tlc_target_freeze) nothing reaches its pipeline:
 *    fed bytes (and a resync idle) are kept in order, at most TLC_TARGET_FREEZE_MAX, and the
 *    thaw feeds them before anything newer; a freeze that cannot go on (cap, detach, free)
 *    tells the checkpoint first and then feeds what it kept, so no byte is ever dropped.
 *
 * Cost: per received chunk, one tlc_dec_push per TLC_TARGET_BATCH events and one engine push
 * per batch; events live in the registry's shared arrays (the loop thread owns them), never
 * copied per event except by the evlog mapping step, which writes its 0..2 outputs per item.
 *
 * Does not: own connections (sources do), write files (the storage observer does), or remove
 * targets at run time (a future "forget target" command would have to renumber the read side).
 */
#include "ingest/target.h"

#include "formats/preamble.h"

#include "base/alloc.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/fileread.h"
#include "base/log.h"

#include "formats/evmap.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define MAPPING_FILE_MAX (64u << 20)

int tlc_targets_init(tlc_targets_t *r, size_t max_targets) {
  memset(r, 0, sizeof(*r));
  r->max = max_targets;
  return 0;
}

/* ---- memory budget: the engine's accounting hook, per target ---- */

#define MEM_WARN_MS 10000 /* at most one "memory limit" warning per target per 10 s */

static void mem_refused(tlc_target_t *t, size_t bytes, const char *what) {
  const tlc_budget_t *b = &t->reg->budget;
  int64_t now;
  t->mem_refused++;
  now = tlc_now_unix_ms();
  if (t->mem_warn_ms != 0 && now - t->mem_warn_ms < MEM_WARN_MS)
    return;
  tlc_log(TLC_LOG_WARN, TLC_LOGC_TARGET,
          "target %s: memory limit %" PRIu64 " bytes reached (%" PRIu64
          " in use by every target, %" PRIu64 " by this one): %s of %zu bytes refused; "
          "%" PRIu64 " refusals since the last warning; new areas are dropped and counted "
          "in dropped_area_limit, existing statistics are kept",
          t->name, b->limit, b->used, t->mem_bytes, what, bytes, t->mem_refused - t->mem_warned);
  t->mem_warn_ms = now;
  t->mem_warned = t->mem_refused;
}

static int mem_charge_cb(void *ud, size_t bytes, int kind) {
  tlc_target_t *t = ud;
  if (tlc_budget_charge(&t->reg->budget, bytes, kind) != 0) {
    if (bytes > 0)
      mem_refused(t, bytes, kind == TLC_ACCT_AREA ? "a new area" : "the growth of an area");
    return TLC_ELIMIT;
  }
  t->mem_bytes += bytes;
  return 0;
}

static void mem_release_cb(void *ud, size_t bytes) {
  tlc_target_t *t = ud;
  tlc_budget_release(&t->reg->budget, bytes);
  t->mem_bytes = bytes > t->mem_bytes ? 0 : t->mem_bytes - bytes;
}

/* The evlog mapper's new names (formats/evmap.h), refused like a new area past the budget;
 * those of a checkpoint being restored were granted before (forced). */
static int evmap_charge_cb(void *ud, size_t bytes, int force) {
  return mem_charge_cb(ud, bytes, force ? TLC_ACCT_FORCE : TLC_ACCT_AREA);
}

/* Bytes a parsed mapping holds (its arrays and each entry's strings, with an allocator
 * overhead of 16 bytes per block). */
static uint64_t mapping_bytes(const tlc_mapping_t *m) {
  uint64_t n =
      (uint64_t)m->capareas * sizeof(*m->areas) + (uint64_t)m->capcontexts * sizeof(*m->contexts);
  for (size_t i = 0; i < m->nareas; i++) {
    const tlc_map_area_t *a = &m->areas[i];
    n += strlen(a->name) + strlen(a->file) + strlen(a->value_type) + strlen(a->unit) +
         strlen(a->path) + 5 + 16;
  }
  for (size_t i = 0; i < m->ncontexts; i++)
    n += strlen(m->contexts[i].name) + 1 + 16;
  return n;
}

static void freeze_abort(tlc_target_t *t);

static void target_free(tlc_target_t *t) {
  if (t->frozen) { /* the checkpoint forgets it; what was kept reaches the engine (and storage) */
    freeze_abort(t);
    (void)tlc_target_thaw(t, SIZE_MAX);
  }
  tlc_target_notify(t, TLC_TEV_FREED, NULL);
  tlc_free(t->fz_buf);
  tlc_pipeline_fini(&t->pipe); /* the engine releases its charges */
  tlc_mapping_fini(&t->mapping);
  tlc_mapping_fini(&t->rtos_names);
  tlc_free((char *)(uintptr_t)t->conf.mapping_path);
  tlc_mapping_fini(&t->evnames);
  mem_release_cb(t, t->evnames_bytes);
  mem_release_cb(t, t->mapping_bytes);
  tlc_free(t->name);
  tlc_free(t);
}

const tlc_mapping_t *tlc_target_names(tlc_target_t *t) {
  if (t->has_mapping)
    return &t->mapping;
  if (t->pipe.evmap != NULL) {
    size_t n = tlc_evmap_area_count(t->pipe.evmap);
    if (n != t->evnames_n) { /* new names since the last call: export them again */
      tlc_mapping_t m;
      tlc_mapping_init(&m);
      uint64_t bytes = 0;
      /* out of memory, over the cap or past the memory budget: the previous names stay (the
       * new copy is charged before the old one is given back: both are live meanwhile) */
      if (tlc_evmap_export(t->pipe.evmap, &m) != 0 ||
          ((bytes = mapping_bytes(&m)) > 0 &&
           mem_charge_cb(t, (size_t)bytes, TLC_ACCT_AREA) != 0)) {
        tlc_mapping_fini(&m);
      } else {
        tlc_mapping_finish(&m);
        tlc_mapping_fini(&t->evnames);
        mem_release_cb(t, t->evnames_bytes);
        t->evnames = m;
        t->evnames_n = n;
        t->evnames_bytes = bytes;
      }
    }
    return t->evnames_n > 0 ? &t->evnames : NULL;
  }
  return NULL;
}

void tlc_targets_fini(tlc_targets_t *r) {
  for (size_t i = 0; i < r->n; i++)
    target_free(r->v[i]);
  tlc_free(r->v);
  r->v = NULL;
  r->n = 0;
}

int tlc_targets_observe(tlc_targets_t *r, const tlc_target_observer_t *o) {
  if (r->nobs == TLC_TARGET_MAX_OBSERVERS)
    return TLC_ELIMIT;
  r->obs[r->nobs++] = *o;
  return 0;
}

void tlc_targets_unobserve(tlc_targets_t *r, void *ud) {
  size_t j = 0;
  for (size_t i = 0; i < r->nobs; i++)
    if (r->obs[i].ud != ud)
      r->obs[j++] = r->obs[i];
  r->nobs = j;
}

void tlc_target_notify(const tlc_target_t *t, int kind, const char *detail) {
  const tlc_targets_t *r = t->reg;
  for (size_t i = 0; i < r->nobs && (!t->quiet || kind == TLC_TEV_FREED); i++)
    if (r->obs[i].cb != NULL)
      r->obs[i].cb(r->obs[i].ud, t, kind, detail);
}

int tlc_target_name_check(const char *name, size_t max) {
  return tlc_target_name_valid(name, max); /* one rule for names, wherever they come from */
}

int tlc_target_name_check_efl(const char *name, size_t max) {
  const char *slash = strchr(name, '/');
  char src[TLC_TARGET_NAME_MAX + 1];
  size_t sl = slash != NULL ? (size_t)(slash - name) : 0;
  if (slash == NULL || sl == 0 || sl > TLC_TARGET_NAME_MAX || strlen(name) > max)
    return TLC_EINVAL;
  memcpy(src, name, sl);
  src[sl] = '\0';
  if (tlc_target_name_valid(src, max) != 0 || tlc_target_name_valid(slash + 1, max) != 0)
    return TLC_EINVAL; /* also refuses a second '/' */
  return 0;
}

tlc_target_t *tlc_targets_find(const tlc_targets_t *r, const char *name) {
  for (size_t i = 0; i < r->n; i++)
    if (strcmp(r->v[i]->name, name) == 0)
      return r->v[i];
  return NULL;
}

/* Reads a whole mapping file (blocking; target creation is rare and the file small). */
static int load_mapping_file(tlc_target_t *t, const char *path) {
  char *buf = NULL;
  size_t len = 0;
  char err[200];
  int r = tlc_file_read(path, MAPPING_FILE_MAX, &buf, &len);
  if (r != 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_TARGET, "target %s: mapping %s: %s", t->name, path,
            r == TLC_ELIMIT ? "larger than the 64 MiB limit" : tlc_strerror(r));
    return r;
  }
  r = tlc_target_load_mapping_as(t, buf, len, TLC_MAP_FILE, err, sizeof(err));
  tlc_free(buf);
  if (r != 0)
    tlc_log(TLC_LOG_ERR, TLC_LOGC_TARGET, "target %s: mapping %s:%s", t->name, path, err);
  else
    tlc_log(TLC_LOG_INFO, TLC_LOGC_TARGET, "target %s: mapping %s: %zu areas", t->name, path,
            t->mapping.nareas);
  return r;
}

/* Adds to m (finished) each task name of `names` for a task m does not name, and finishes it
 * again. Returns 0 or TLC_ENOMEM. */
static int add_rtos_names(tlc_mapping_t *m, const tlc_mapping_t *names) {
  size_t n0 = m->ncontexts;
  for (size_t i = 0; i < names->ncontexts; i++) {
    tlc_mapping_t had = *m; /* the names m had, sorted */
    had.ncontexts = n0;
    if (tlc_mapping_ctx_name(&had, names->contexts[i].handle) == NULL &&
        tlc_mapping_add_ctx(m, names->contexts[i].handle, names->contexts[i].name) != 0)
      return TLC_ENOMEM;
  }
  if (m->ncontexts != n0)
    tlc_mapping_finish(m);
  return 0;
}

/* context_rtos: reads the description's task names into t->rtos_names and t->mapping. */
static void load_rtos_names(tlc_target_t *t, const char *path) {
  tlc_ctxpack_t p;
  char err[300];
  if (tlc_config_read_rtos(path, &p, &t->rtos_names, err, sizeof(err)) != 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_TARGET, "target %s: context_rtos %s", t->name, err);
    tlc_mapping_fini(&t->rtos_names);
    tlc_mapping_init(&t->rtos_names);
    return;
  }
  tlc_mapping_finish(&t->rtos_names);
  if (t->rtos_names.ncontexts == 0 || add_rtos_names(&t->mapping, &t->rtos_names) != 0)
    return;
  t->has_mapping = 1;
  tlc_engine_set_mapping(t->pipe.engine, &t->mapping);
  tlc_log(TLC_LOG_INFO, TLC_LOGC_TARGET, "target %s: context_rtos %s: %zu task names", t->name,
          path, t->rtos_names.ncontexts);
}

int tlc_target_load_mapping(tlc_target_t *t, const char *buf, size_t len, char *err,
                            size_t errlen) {
  return tlc_target_load_mapping_as(t, buf, len, TLC_MAP_RUNTIME, err, errlen);
}

int tlc_target_load_mapping_as(tlc_target_t *t, const char *buf, size_t len, int origin, char *err,
                               size_t errlen) {
  tlc_mapping_t m;
  tlc_parse_err_t pe;
  int r;
  uint64_t bytes, cap = t->reg->mapping_limit;
  tlc_mapping_init(&m);
  /* a parse-time bound from the per-target cap: an entry costs at least its struct */
  if (cap != 0 && cap / sizeof(tlc_map_area_t) < 1000000)
    m.max_areas = (size_t)(cap / sizeof(tlc_map_area_t)) + 1;
  memset(&pe, 0, sizeof(pe));
  r = tlc_mapping_parse(&m, buf, len, &pe);
  if (r != 0) {
    if (r == TLC_ELIMIT && m.max_areas != 0)
      snprintf(err, errlen,
               "%" PRIu64 ": more areas than the per-target mapping limit (%" PRIu64
               " bytes, mapping_limit) allows",
               pe.line, cap);
    else
      snprintf(err, errlen, "%" PRIu64 ": %s", pe.line, pe.reason);
    tlc_mapping_fini(&m);
    return r;
  }
  tlc_mapping_finish(&m);
  if (add_rtos_names(&m, &t->rtos_names) != 0) {
    snprintf(err, errlen, " out of memory");
    tlc_mapping_fini(&m);
    return TLC_ENOMEM;
  }
  bytes = mapping_bytes(&m);
  if (cap != 0 && bytes > cap) {
    snprintf(err, errlen,
             " the mapping needs %" PRIu64 " bytes, above the per-target mapping "
             "limit of %" PRIu64 " (mapping_limit)",
             bytes, cap);
    tlc_mapping_fini(&m);
    t->mem_refused++;
    return TLC_ELIMIT;
  }
  /* the new mapping is charged before the old one is released: both are live meanwhile */
  if (bytes > 0 && mem_charge_cb(t, (size_t)bytes, TLC_ACCT_AREA) != 0) {
    snprintf(err, errlen,
             " the mapping needs %" PRIu64 " bytes: the daemon's memory limit "
             "(%" PRIu64 " bytes, %" PRIu64 " in use) is reached",
             bytes, t->reg->budget.limit, t->reg->budget.used);
    tlc_mapping_fini(&m);
    return TLC_ELIMIT;
  }
  mem_release_cb(t, t->mapping_bytes);
  t->mapping_bytes = bytes;
  /* Swap in place: the engine borrows &t->mapping, whose address does not change. */
  tlc_mapping_fini(&t->mapping);
  t->mapping = m;
  t->has_mapping = 1;
  tlc_engine_set_mapping(t->pipe.engine, &t->mapping);
  t->map_origin = (uint8_t)origin;
  t->gen = ++t->reg->gens; /* every reader starts over, with the new names */
  if (origin == TLC_MAP_RUNTIME) {
    t->map_text = buf;
    t->map_len = len;
  }
  tlc_target_notify(t, TLC_TEV_MAPPING, NULL);
  t->map_text = NULL;
  t->map_len = 0;
  return 0;
}

int tlc_target_reset(tlc_target_t *t) {
  int64_t now = tlc_now_unix_ms();
  if (t->frozen)
    return TLC_EAGAIN;
  /* a gap first (the evlog mapping forgets its stacks, the engine what was open), then the
   * engine back to new; its mapping stays borrowed */
  tlc_pipeline_gap(&t->pipe);
  tlc_engine_clear(t->pipe.engine);
  if (t->has_mapping)
    tlc_engine_set_mapping(t->pipe.engine, &t->mapping);
  t->dropped_reported = 0;
  t->gaps++;
  t->gaplog[t->ngaplog % TLC_TARGET_GAPLOG].disconnect_unix_ms = now;
  t->gaplog[t->ngaplog % TLC_TARGET_GAPLOG].reconnect_unix_ms = t->connected ? now : 0;
  t->ngaplog++;
  t->resets++;
  t->gen = ++t->reg->gens;
  tlc_log(TLC_LOG_NOTICE, TLC_LOGC_TARGET, "target %s: statistics reset", t->name);
  tlc_target_notify(t, TLC_TEV_RESET, NULL);
  return 0;
}

static void on_bytes(void *ud, const uint8_t *buf, size_t len, uint64_t offset);
static void on_decoded(void *ud, const tlc_event_t *ev, size_t n, const uint8_t *chunk, size_t clen,
                       uint64_t coff);
static void on_mapped(void *ud, const tlc_event_t *ev, size_t n);
static void on_skipped(void *ud, uint64_t offset, const uint8_t *buf, size_t len);

static int target_new(tlc_targets_t *r, const char *name, int src_kind,
                      const tlc_target_conf_t *conf, tlc_target_t **out) {
  tlc_target_t *t;
  tlc_pipeline_conf_t pc;
  tlc_pipeline_io_t io;
  tlc_engine_opts_t *eo = &pc.engine;
  int err;

  t = tlc_calloc(1, sizeof(*t));
  if (t == NULL)
    return TLC_ENOMEM;
  t->reg = r;
  t->gen = ++r->gens;
  t->format = conf->format;
  t->src_kind = src_kind;
  t->has_context_area = conf->has_context_area;
  t->context_area = conf->context_area;
  t->conf = *conf;
  t->conf.mapping_path = NULL;
  t->conf.rtos_path = NULL;
  if (conf->mapping_path != NULL && conf->mapping_path[0] != '\0' &&
      (t->conf.mapping_path = tlc_strndup(conf->mapping_path, strlen(conf->mapping_path))) ==
          NULL) {
    tlc_free(t);
    return TLC_ENOMEM;
  }
  tlc_mapping_init(&t->mapping);
  tlc_mapping_init(&t->rtos_names);
  t->name = tlc_strndup(name, strlen(name));
  if (t->name == NULL) {
    err = TLC_ENOMEM;
    goto fail_name;
  }
  tlc_target_pipeline_conf(conf, &pc);
  pc.dec.skipped_cb = on_skipped; /* the live target's only: storage's keep_skipped */
  pc.dec.skipped_ud = t;
  eo->acct.charge_cb = mem_charge_cb;
  eo->acct.release_cb = mem_release_cb;
  eo->acct.ud = t;
  pc.evmap.charge_cb = evmap_charge_cb; /* evlog: the name table is in the budget too */
  pc.evmap.release_cb = mem_release_cb;
  pc.evmap.acct_ud = t;
  memset(&io, 0, sizeof(io));
  io.raw = r->evbuf; /* shared by every target: the loop thread runs one pipeline at a time */
  io.out = r->mapbuf;
  io.batch = TLC_TARGET_BATCH;
  io.bytes_cb = on_bytes;
  io.decoded_cb = on_decoded;
  io.mapped_cb = on_mapped;
  io.ud = t;
  err = tlc_pipeline_init(&t->pipe, &pc, &io);
  if (err != 0)
    goto fail_pipe;
  if (conf->mapping_path != NULL && conf->mapping_path[0] != '\0')
    (void)load_mapping_file(t, conf->mapping_path); /* logged; the target works without */
  if (conf->rtos_path != NULL)
    load_rtos_names(t, conf->rtos_path); /* logged; the contexts keep their numbers */
  *out = t;
  return 0;

fail_pipe:
  tlc_free(t->name);
fail_name:
  tlc_free((char *)(uintptr_t)t->conf.mapping_path);
  tlc_free(t);
  return err;
}

/* The target a full registry evicts: disconnected, created by a listener (dial and serial targets
 * belong to their configured source), the one disconnected longest ago. SIZE_MAX: none. */
static size_t evictable(const tlc_targets_t *r) {
  size_t best = SIZE_MAX;
  for (size_t i = 0; i < r->n; i++) {
    const tlc_target_t *t = r->v[i];
    if (t->connected || t->source != NULL || t->src_kind != TLC_SRC_LISTEN)
      continue;
    if (best == SIZE_MAX || t->last_disconnect_unix_ms < r->v[best]->last_disconnect_unix_ms)
      best = i;
  }
  return best;
}

/* Frees target v[i] to make room for `newcomer`; its statistics are logged (counters and the
 * shape of its table) since nothing keeps them after this. Observers get TLC_TEV_FREED (storage
 * seals its segment). */
static void evict(tlc_targets_t *r, size_t i, const char *newcomer) {
  tlc_target_t *t = r->v[i];
  tlc_counters_t c;
  tlc_target_counters(t, &c);
  r->evicted++;
  tlc_log(TLC_LOG_NOTICE, TLC_LOGC_TARGET,
          "target %s: evicted for %s (the target table is full, max_targets %zu; it was "
          "disconnected the longest, since %" PRId64 " ms unix time): its statistics were "
          "events %" PRIu64 ", records %" PRIu64 ", bytes %" PRIu64 ", gaps %" PRIu64
          ", anomalies %" PRIu64 ", bytes_skipped %" PRIu64 ", connections %" PRIu64,
          t->name, newcomer, r->max, t->last_disconnect_unix_ms, c.events, c.records, c.bytes,
          t->gaps, c.anomalies, c.bytes_skipped, t->connections);
  target_free(t);
}

int tlc_targets_forget(tlc_targets_t *r, tlc_target_t *t) {
  size_t i;
  char idx[32];
  for (i = 0; i < r->n && r->v[i] != t; i++)
    ;
  if (i == r->n || t->connected || t->source != NULL || t->pins > 0)
    return TLC_EINVAL;
  if (t->src_kind != TLC_SRC_LISTEN && t->src_kind != TLC_SRC_EFL)
    return TLC_EINVAL; /* a configured dial or serial source recreates it */
  if (t->frozen)
    return TLC_EAGAIN;
  snprintf(idx, sizeof idx, "%zu", i);
  tlc_log(TLC_LOG_NOTICE, TLC_LOGC_TARGET, "target %s: forgotten (its stored segments stay)",
          t->name);
  tlc_target_notify(t, TLC_TEV_FORGOTTEN, idx);
  target_free(t);
  memmove(&r->v[i], &r->v[i + 1], (r->n - i - 1) * sizeof(*r->v));
  r->v[--r->n] = NULL;
  return 0;
}

void tlc_target_pipeline_conf(const tlc_target_conf_t *conf, tlc_pipeline_conf_t *pc) {
  tlc_engine_opts_t *eo = &pc->engine;
  memset(pc, 0, sizeof(*pc));
  pc->format = conf->format;
  pc->dec.resync = conf->resync;
  pc->dec.max_block = conf->max_block;
  pc->evmap.max_names = conf->max_names;
  pc->evmap.max_depth = conf->max_depth;
  pc->with_engine = 1;
  tlc_engine_opts_default(eo);
  eo->has_context_area = conf->has_context_area;
  eo->context_area = conf->context_area;
  if (tlc_ctxpack_on(&conf->pack))
    eo->pack = conf->pack;
  if (conf->nwindows > 0) {
    eo->nwindows = conf->nwindows;
    memcpy(eo->window_ns, conf->window_ns, sizeof(eo->window_ns));
  }
  if (conf->max_areas)
    eo->max_areas = conf->max_areas;
  if (conf->max_contexts)
    eo->max_contexts = conf->max_contexts;
  if (conf->max_depth)
    eo->max_depth = conf->max_depth;
  eo->histograms = conf->histograms;
  if (conf->clock_reset_ns != 0)
    eo->clock_reset_ns = conf->clock_reset_ns;
  eo->mapping = NULL;
}

int tlc_targets_get(tlc_targets_t *r, const char *name, int src_kind, const tlc_target_conf_t *conf,
                    tlc_target_t **out) {
  tlc_target_t *t = tlc_targets_find(r, name);
  int err;
  *out = t;
  if (t != NULL)
    return t->format == conf->format ? 0 : TLC_EINVAL;
  if (src_kind == TLC_SRC_EFL ? tlc_target_name_check_efl(name, TLC_TARGET_NAME_MAX) != 0
                              : tlc_target_name_check(name, TLC_TARGET_NAME_MAX) != 0) {
    r->refused_name++;
    return TLC_EINVAL;
  }
  if (r->n >= r->max) {
    /* Full: the longest-disconnected target a listener created makes room, so that
     * throw-away names cannot lock every new target out until a restart. */
    size_t victim = evictable(r);
    if (victim == SIZE_MAX) {
      r->refused_limit++;
      return TLC_ELIMIT;
    }
    err = target_new(r, name, src_kind, conf, &t);
    if (err != 0)
      return err;
    evict(r, victim, name);
    r->v[victim] = t;
    *out = t;
    tlc_log(TLC_LOG_INFO, TLC_LOGC_TARGET, "target %s: created (%s%s%s)", t->name,
            tlc_format_name(t->format), conf->resync ? ", resync" : "",
            t->has_context_area ? ", context_area" : "");
    tlc_target_notify(t, TLC_TEV_CREATED, NULL);
    return 0;
  }
  if (r->v == NULL) {
    /* The registry array is made once at its cap: it never moves afterwards. */
    r->v = tlc_calloc(r->max, sizeof(*r->v));
    if (r->v == NULL)
      return TLC_ENOMEM;
  }
  err = target_new(r, name, src_kind, conf, &t);
  if (err != 0)
    return err;
  r->v[r->n++] = t;
  *out = t;
  tlc_log(TLC_LOG_INFO, TLC_LOGC_TARGET, "target %s: created (%s%s%s)", t->name,
          tlc_format_name(t->format), conf->resync ? ", resync" : "",
          t->has_context_area ? ", context_area" : "");
  tlc_target_notify(t, TLC_TEV_CREATED, NULL);
  return 0;
}

int tlc_target_attach(tlc_target_t *t, void *source, const char *peer) {
  int64_t now = tlc_now_unix_ms();
  if (t->connected)
    return TLC_EINVAL;
  if (t->connections > 0) {
    t->reconnects++;
    if (t->ngaplog > 0)
      t->gaplog[(t->ngaplog - 1) % TLC_TARGET_GAPLOG].reconnect_unix_ms = now;
  }
  t->connections++;
  t->connected = 1;
  t->attach_pos = t->pipe.dec.pos;
  t->source = source;
  t->last_connect_unix_ms = now;
  snprintf(t->peer, sizeof(t->peer), "%s", peer != NULL ? peer : "");
  tlc_log(TLC_LOG_INFO, TLC_LOGC_TARGET, "target %s: connected from %s%s", t->name, t->peer,
          t->connections > 1 ? " (reconnect)" : "");
  tlc_target_notify(t, TLC_TEV_CONNECTED, t->peer);
  return 0;
}

/* The pipeline's observers: the registry's observers, in the order target.h gives. */
static void on_bytes(void *ud, const uint8_t *buf, size_t len, uint64_t offset) {
  tlc_target_t *t = ud;
  tlc_targets_t *r = t->reg;
  for (size_t i = 0; i < r->nobs && !t->quiet; i++)
    if (r->obs[i].bytes_cb != NULL)
      r->obs[i].bytes_cb(r->obs[i].ud, t, buf, len, offset);
}

static void decoded_to(tlc_target_t *t, const tlc_event_t *ev, size_t n, const uint8_t *chunk,
                       size_t clen, uint64_t coff) {
  tlc_targets_t *r = t->reg;
  for (size_t i = 0; i < r->nobs && !t->quiet && n > 0; i++) {
    if (r->obs[i].decoded_cb != NULL)
      r->obs[i].decoded_cb(r->obs[i].ud, t, ev, n);
    if (r->obs[i].records_cb != NULL)
      r->obs[i].records_cb(r->obs[i].ud, t, ev, n, chunk, clen, coff);
  }
}

/* The decoded batch goes to the observers in parts cut where the engine will start a new clock
 * epoch (TLC_TEV_CLOCK_RESET between them), so that a segment's times never go back. Only a
 * bin1x engine after a gap or a batch with a TLC_EVF_GAP or TLC_EVF_RESTART record can restart:
 * the others are not looked at. After a gap the cut is before the batch's first event (no
 * split); a cut inside a batch needs TLC_EVF_RESTART, which the decoder sets on a restart it
 * confirmed by the records after it (serial, and TCP and files since the strict decoder
 * confirms too: storage's write_chunk then finds the records after the cut further on in a
 * lent gather buffer, which the rotation's flush copied, and moves them). */
static void on_decoded(void *ud, const tlc_event_t *ev, size_t n, const uint8_t *chunk, size_t clen,
                       uint64_t coff) {
  tlc_target_t *t = ud;
  tlc_engine_clock_t ck;
  size_t i, k;
  int look = 0, first = 1;
  if (t->format != TLC_FMT_EVLOG && t->pipe.engine != NULL) {
    look = tlc_engine_counters(t->pipe.engine)->gaps != t->gaps_seen;
    for (i = 0; i < n && !look; i++)
      look = (ev[i].flags & (TLC_EVF_RESTART | TLC_EVF_GAP)) != 0;
    tlc_engine_clock_init(t->pipe.engine, &ck);
  }
  while (look && n > 0 && (k = tlc_engine_clock_scan(&ck, ev, n)) < n) {
    int gap = first && k == 0 && tlc_engine_counters(t->pipe.engine)->gaps != t->gaps_seen;
    decoded_to(t, ev, k, chunk, clen, coff);
    tlc_target_notify(t, TLC_TEV_CLOCK_RESET, gap ? "after a gap" : "in stream");
    tlc_log(TLC_LOG_NOTICE, TLC_LOGC_TARGET, "target %s (%s): clock restarted (%s)", t->name,
            t->peer, gap ? "after a gap" : "in stream");
    decoded_to(t, ev + k, 1, chunk, clen, coff);
    ev += k + 1;
    n -= k + 1;
    first = 0;
  }
  decoded_to(t, ev, n, chunk, clen, coff);
}

static void on_skipped(void *ud, uint64_t offset, const uint8_t *buf, size_t len) {
  tlc_target_t *t = ud;
  tlc_targets_t *r = t->reg;
  for (size_t i = 0; i < r->nobs && !t->quiet; i++)
    if (r->obs[i].skipped_cb != NULL)
      r->obs[i].skipped_cb(r->obs[i].ud, t, offset, buf, len);
}

static void on_mapped(void *ud, const tlc_event_t *ev, size_t n) {
  tlc_target_t *t = ud;
  tlc_targets_t *r = t->reg;
  r->events += n;
  /* after the engine took the batch: a clock restart in it made its own gap, which is not a
   * gap before the next batch (on_decoded runs before the engine sees a batch, so reading the
   * count there missed it, and a restart that began the next batch was taken as one after a
   * gap: no segment boundary) */
  if (t->pipe.engine != NULL)
    t->gaps_seen = tlc_engine_counters(t->pipe.engine)->gaps;
  for (size_t i = 0; i < r->nobs && !t->quiet; i++)
    if (r->obs[i].batch_cb != NULL)
      r->obs[i].batch_cb(r->obs[i].ud, t, ev, n);
}

static void report_changes(tlc_target_t *t) {
  const tlc_counters_t *ec = tlc_engine_counters(t->pipe.engine);
  char detail[96];
  if (t->pipe.dec.c.resyncs != t->resyncs_reported) {
    snprintf(detail, sizeof(detail), "%" PRIu64 " resyncs, %" PRIu64 " bytes skipped in all",
             t->pipe.dec.c.resyncs - t->resyncs_reported, t->pipe.dec.c.bytes_skipped);
    t->resyncs_reported = t->pipe.dec.c.resyncs;
    tlc_log(TLC_LOG_NOTICE, TLC_LOGC_TARGET, "target %s (%s): resync: %s", t->name, t->peer,
            detail);
    tlc_target_notify(t, TLC_TEV_RESYNC, detail);
  }
  if (ec->dropped_area_limit != t->dropped_reported) {
    snprintf(detail, sizeof(detail), "%" PRIu64 " events dropped (area limit)",
             ec->dropped_area_limit - t->dropped_reported);
    t->dropped_reported = ec->dropped_area_limit;
    tlc_log(TLC_LOG_WARN, TLC_LOGC_TARGET, "target %s (%s): %s", t->name, t->peer, detail);
    tlc_target_notify(t, TLC_TEV_DROPS, detail);
  }
}

/* A strict decode error: counted, logged and announced once per stream. */
static void decode_error(tlc_target_t *t) {
  char detail[220];
  /* Offsets count from the start of this connection's stream (after any preamble); the
   * decoder's own offsets run on across connections and appear in its reason text. */
  uint64_t off = t->pipe.dec.err_offset - t->attach_pos;
  t->decode_errors++;
  t->reg->decode_errors++;
  snprintf(detail, sizeof(detail), "offset %" PRIu64 ": %s", off, t->pipe.dec.err_reason);
  tlc_log(TLC_LOG_WARN, TLC_LOGC_TARGET,
          "target %s (%s): decode error at byte offset %" PRIu64 ": %s", t->name, t->peer, off,
          t->pipe.dec.err_reason);
  tlc_target_notify(t, TLC_TEV_DECODE_ERROR, detail);
}

/* Keeps buf[0..len) of a frozen target in fz_buf. 0, or TLC_ELIMIT/TLC_ENOMEM (not kept). */
static int freeze_keep(tlc_target_t *t, const uint8_t *buf, size_t len) {
  size_t have = t->fz_len - t->fz_head;
  if (len > TLC_TARGET_FREEZE_MAX - have)
    return TLC_ELIMIT;
  if (t->fz_head > 0 && t->fz_len + len > t->fz_cap) { /* drained from the front: compact */
    memmove(t->fz_buf, t->fz_buf + t->fz_head, have);
    if (t->fz_idle_at != SIZE_MAX)
      t->fz_idle_at -= t->fz_head;
    t->fz_head = 0;
    t->fz_len = have;
  }
  if (t->fz_len + len > t->fz_cap) {
    size_t nc = t->fz_cap != 0 ? t->fz_cap : 65536;
    uint8_t *np;
    while (nc < t->fz_len + len)
      nc *= 2;
    if (nc > TLC_TARGET_FREEZE_MAX)
      nc = TLC_TARGET_FREEZE_MAX;
    np = tlc_realloc(t->fz_buf, nc);
    if (np == NULL)
      return TLC_ENOMEM;
    t->fz_buf = np;
    t->fz_cap = nc;
  }
  memcpy(t->fz_buf + t->fz_len, buf, len);
  t->fz_len += len;
  t->freeze_bytes += len;
  return 0;
}

static int feed_now(tlc_target_t *t, const uint8_t *buf, size_t len);

int tlc_target_feed(tlc_target_t *t, const uint8_t *buf, size_t len) {
  if (t->frozen) {
    if (freeze_keep(t, buf, len) == 0)
      return 0;
    /* the source outran the cap: the checkpoint gives way, nothing is dropped */
    freeze_abort(t);
    (void)tlc_target_thaw(t, SIZE_MAX);
  }
  return feed_now(t, buf, len);
}

static int feed_now(tlc_target_t *t, const uint8_t *buf, size_t len) {
  tlc_targets_t *r = t->reg;
  int ret = 0;
  r->bytes += len;
  /* the arrival time new extremes are stamped with (tlc_at_t.wall_ms): one per chunk; none
   * for stored bytes replayed at a restart (quiet), whose arrival is not known */
  if (t->pipe.engine != NULL)
    tlc_engine_set_wall_ms(t->pipe.engine, t->quiet ? 0 : tlc_now_unix_ms());
  while (len > 0) {
    size_t used = 0;
    /* bytes_cb, decoded_cb and records_cb, mapping, engine, batch_cb (on_* above) */
    int n = tlc_pipeline_push(&t->pipe, buf, len, &used, NULL, NULL);
    /* A strict decoder hands out the events before a bad record first and keeps the error
     * for its next call (dec.h: sticky); it counts now, not at a next call that may never
     * come (the stream may end right here). */
    if (n >= 0 && t->pipe.dec.err != 0)
      n = t->pipe.dec.err;
    if (n < 0) {
      decode_error(t);
      ret = n;
      break;
    }
    if (n == 0 && used == 0)
      break; /* cannot happen per dec.h; never spin */
    buf += used;
    len -= used;
  }
  report_changes(t);
  return ret;
}

int tlc_target_read_buffer(tlc_target_t *t, size_t want, uint8_t **buf, size_t *len) {
  tlc_targets_t *r = t->reg;
  if (t->frozen || t->quiet)
    return 0; /* the bytes would be kept aside, or none come from a source */
  size_t held = tlc_target_pending(t);
  for (size_t i = 0; i < r->nobs; i++)
    if (r->obs[i].read_buffer_cb != NULL &&
        r->obs[i].read_buffer_cb(r->obs[i].ud, t, held, want, buf, len))
      return 1;
  return 0;
}

size_t tlc_target_pending(const tlc_target_t *t) {
  return tlc_dec_pending(&t->pipe.dec); /* the decoder says what it holds back */
}

static void idle_now(tlc_target_t *t);

void tlc_target_idle(tlc_target_t *t) {
  if (t->frozen) {
    /* delivered at its place among the kept bytes (a later one supersedes it: the bytes in
     * between confirm what the decoder held) */
    t->fz_idle_at = t->fz_len;
    return;
  }
  idle_now(t);
}

static void idle_now(tlc_target_t *t) {
  int guard = 0;
  /* held records go through the pipeline (no chunk, as at the end); at most 64 batches, and
   * what is left stays in the decoder */
  while (guard++ < 64 && tlc_pipeline_idle(&t->pipe, NULL, NULL) > 0)
    ;
  report_changes(t);
}

uint64_t tlc_target_units(const tlc_target_t *t) {
  const tlc_dec_counters_t *c = &t->pipe.dec.c;
  /* evlog: the unit is the block (items inside one may come out before it is whole) */
  return (t->format == TLC_FMT_EVLOG ? c->blocks : c->records) + c->bytes_skipped +
         c->records_invalid;
}

void tlc_target_detach(tlc_target_t *t, const char *reason) {
  int64_t now;
  int reported;
  if (!t->connected)
    return;
  if (t->frozen) { /* the stream ends: what was kept is fed before the end */
    freeze_abort(t);
    (void)tlc_target_thaw(t, SIZE_MAX);
  }
  reported = t->pipe.dec.err != 0; /* a strict error tlc_target_feed already counted */
  for (int guard = 0; guard < 1 << 16; guard++) {
    int n = tlc_pipeline_finish(&t->pipe, NULL, NULL);
    if (n > 0)
      continue;
    if (n == TLC_ETRUNC) {
      t->truncated_tails++;
      tlc_log(TLC_LOG_NOTICE, TLC_LOGC_TARGET,
              "target %s (%s): stream ended inside a record at byte offset %" PRIu64 ": %s",
              t->name, t->peer, t->pipe.dec.err_offset - t->attach_pos, t->pipe.dec.err_reason);
      tlc_target_notify(t, TLC_TEV_TRUNCATED, t->pipe.dec.err_reason);
    } else if (n < 0 && !reported) {
      decode_error(t); /* found among records the decoder held until the end */
    }
    break;
  }
  tlc_pipeline_reset(&t->pipe);
  report_changes(t);
  tlc_pipeline_gap(&t->pipe);
  now = tlc_now_unix_ms();
  t->gaps++;
  t->gaplog[t->ngaplog % TLC_TARGET_GAPLOG].disconnect_unix_ms = now;
  t->gaplog[t->ngaplog % TLC_TARGET_GAPLOG].reconnect_unix_ms = 0;
  t->ngaplog++;
  t->last_disconnect_unix_ms = now;
  t->connected = 0;
  t->source = NULL;
  t->hold_cb = NULL;
  tlc_log(TLC_LOG_INFO, TLC_LOGC_TARGET, "target %s (%s): disconnected: %s", t->name, t->peer,
          reason != NULL ? reason : "closed");
  tlc_target_notify(t, TLC_TEV_DISCONNECTED, reason);
}

void tlc_target_hold(tlc_target_t *t, int on) {
  on = on != 0;
  if (t->held == on)
    return;
  t->held = on;
  t->holds += (uint64_t)on;
  if (t->source == NULL || t->hold_cb == NULL || t->frozen)
    return; /* detached (the next connection starts held), a source that cannot wait, or
               frozen (the source is held already; the thaw applies storage's hold) */
  tlc_log(TLC_LOG_DEBUG, TLC_LOGC_TARGET, "target %s (%s): storage %s", t->name, t->peer,
          on ? "queue share full: not reading" : "drained: reading again");
  t->hold_cb(t->source, on);
}

void tlc_target_counters(const tlc_target_t *t, tlc_counters_t *out) {
  *out = *tlc_engine_counters(t->pipe.engine);
  out->bytes = t->pipe.dec.c.bytes;
  out->records = t->pipe.dec.c.records;
  out->bytes_skipped = t->pipe.dec.c.bytes_skipped;
  out->resyncs = t->pipe.dec.c.resyncs;
  out->records_invalid = t->pipe.dec.c.records_invalid;
  out->truncated = t->pipe.dec.c.truncated;
  out->overflow_items = t->pipe.dec.c.overflow_items;
  /* evlog items whose new name the mapping refused (max_names, max_name_bytes, the memory
   * budget) never reach the engine: they are dropped areas all the same */
  if (t->pipe.evmap != NULL)
    out->dropped_area_limit += tlc_evmap_counters(t->pipe.evmap)->dropped_area_limit;
}

int tlc_target_snapshot(const tlc_target_t *t, tlc_table_t *tab, const tlc_snap_opts_t *so) {
  int r = tlc_engine_snapshot(t->pipe.engine, tab, so);
  tlc_target_counters(t, &tab->counters);
  return r;
}

/* ---- checkpoint freeze ---- */

int tlc_target_holding(const tlc_target_t *t) {
  return t->held || t->frozen;
}

int tlc_target_freeze(tlc_target_t *t, void (*abort_cb)(void *ud, tlc_target_t *t), void *ud) {
  if (t->frozen)
    return TLC_EINVAL;
  t->frozen = 1;
  t->fz_head = t->fz_len = 0;
  t->fz_idle_at = SIZE_MAX;
  t->fz_abort_cb = abort_cb;
  t->fz_ud = ud;
  t->freezes++;
  if (!t->held && t->source != NULL && t->hold_cb != NULL)
    t->hold_cb(t->source, 1);
  return 0;
}

static void freeze_abort(tlc_target_t *t) {
  void (*cb)(void *, tlc_target_t *) = t->fz_abort_cb;
  t->fz_abort_cb = NULL;
  t->freeze_aborts++;
  if (cb != NULL)
    cb(t->fz_ud, t);
}

int tlc_target_thaw(tlc_target_t *t, size_t max_bytes) {
  if (!t->frozen)
    return 1;
  while (t->fz_head < t->fz_len || t->fz_idle_at != SIZE_MAX) {
    size_t end =
        t->fz_idle_at != SIZE_MAX && t->fz_idle_at >= t->fz_head ? t->fz_idle_at : t->fz_len;
    size_t n = end - t->fz_head;
    if (n > max_bytes)
      n = max_bytes;
    if (n > 0) {
      /* still frozen meanwhile: bytes arriving now are kept behind these. A strict decode
       * error stays sticky in the decoder: the source's next feed returns it (and closes). */
      size_t at = t->fz_head;
      t->fz_head += n;
      max_bytes -= n;
      (void)feed_now(t, t->fz_buf + at, n);
    }
    if (t->fz_head == t->fz_idle_at) {
      t->fz_idle_at = SIZE_MAX;
      idle_now(t);
    }
    if (max_bytes == 0 && (t->fz_head < t->fz_len || t->fz_idle_at != SIZE_MAX))
      return 0;
  }
  t->frozen = 0;
  t->fz_abort_cb = NULL;
  t->fz_head = t->fz_len = 0;
  if (t->fz_cap > 65536) { /* a large buffer is not kept between checkpoints */
    tlc_free(t->fz_buf);
    t->fz_buf = NULL;
    t->fz_cap = 0;
  }
  if (!t->held && t->source != NULL && t->hold_cb != NULL)
    t->hold_cb(t->source, 0);
  return 1;
}
