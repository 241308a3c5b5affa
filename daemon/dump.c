/* dump.c - the stats dump, written off the loop in parts (see dump.h).
 *
 * A dump is a chain of jobs, one in flight at a time: the loop fills d->job (text to write, and
 * optionally one part of a target's statistics with the mapping entries it names), queues it on
 * libuv's pool (uv_queue_work), and when the pool thread has written it (after_cb, on the loop)
 * frees it and fills the next. The pool thread touches only d->job, d->f, d->tmp and d->js, which
 * the loop leaves alone while a job is in flight (the job owns copies of what it writes: text,
 * the target's name, the part's table and mapping entries); the targets and their engines are
 * read only on the loop. The first job opens FILE.tmp, the last closes it and renames it to FILE (a
 * failed write removes the .tmp and is logged).
 *
 * Cost on the loop: per part, tlc_engine_handle_split and tlc_engine_snapshot_part (O(rows) scans
 * of the target, plus the part's rows), and a copy of the mapping entries of the part's areas.
 * Memory: one part's table and mapping entries, and the file buffer.
 *
 * Does not: lock the targets (nothing is shared with the pool thread but the job), or hold a
 * target across jobs (it is found again by name: one that disappeared meanwhile ends its entry).
 */
#include "daemon/rolld.h"
#include "daemon/dump.h"

#include "daemon/daemon.h"
#include "daemon/stored.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "base/sdnotify.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

static void job_clear(tlc_dump_t *d) {
  tlc_free(d->job.text);
  tlc_free(d->job.name);
  d->job.name = NULL;
  tlc_table_fini(&d->job.tab);
  tlc_mapping_fini(&d->job.map);
  d->job.text = NULL;
  d->job.textlen = 0;
  d->job.has_table = d->job.begin = d->job.end = d->job.finish = d->job.has_map = 0;
  d->job.close_target = 0;
  tlc_table_init(&d->job.tab);
  tlc_mapping_init(&d->job.map);
}

void tlc_dump_init(tlc_dump_t *d, uv_loop_t *loop, tlc_targets_t *reg, const char *path,
                   void (*head_cb)(void *ud, tlc_json_w_t *w), void *ud) {
  memset(d, 0, sizeof(*d));
  d->loop = loop;
  d->reg = reg;
  d->head_cb = head_cb;
  d->head_ud = ud;
  snprintf(d->path, sizeof(d->path), "%s", path != NULL ? path : "");
  tlc_table_init(&d->job.tab);
  tlc_mapping_init(&d->job.map);
}

void tlc_dump_set_path(tlc_dump_t *d, const char *path) {
  snprintf(d->path, sizeof(d->path), "%s", path != NULL ? path : "");
}

int tlc_dump_busy(const tlc_dump_t *d) {
  return d->busy;
}

void tlc_dump_fini(tlc_dump_t *d) {
  job_clear(d);
  tlc_table_fini(&d->job.tab);
  tlc_mapping_fini(&d->job.map);
  tlc_free(d->cur);
  d->cur = NULL;
}

/* ---- the document's head: what the daemon and each of its parts answer for ---- */

/* The "daemon" object: the ingest context's counters, the log's, systemd's notifications and the
 * memory budget. */
static void daemon_object(const tlc_daemon_t *dm, tlc_json_w_t *w) {
  const tlc_ingest_t *d = &dm->in;
  const tlc_ingest_stats_t *st = &d->st;
  tlc_json_w_open(w, "daemon", '{');
  tlc_json_w_u64(w, "accepted", st->accepted);
  tlc_json_w_u64(w, "refused_limit", st->refused_limit);
  tlc_json_w_u64(w, "refused_target", st->refused_target);
  tlc_json_w_u64(w, "accept_errors", st->accept_errors);
  tlc_json_w_u64(w, "accept_pauses", st->accept_pauses);
  tlc_json_w_u64(w, "preamble_errors", st->preamble_errors);
  tlc_json_w_u64(w, "closed_decode", st->closed_decode);
  tlc_json_w_u64(w, "closed_deadline", st->closed_deadline);
  tlc_json_w_u64(w, "closed_idle", st->closed_idle);
  tlc_json_w_u64(w, "closed_eof", st->closed_eof);
  tlc_json_w_u64(w, "closed_reset", st->closed_reset);
  tlc_json_w_u64(w, "dial_attempts", st->dial_attempts);
  tlc_json_w_u64(w, "dial_failures", st->dial_failures);
  tlc_json_w_u64(w, "serial_opens", st->serial_opens);
  tlc_json_w_u64(w, "serial_failures", st->serial_failures);
  tlc_json_w_u64(w, "serial_unplugs", st->serial_unplugs);
  tlc_json_w_u64(w, "connections", d->nconns);
  tlc_json_w_u64(w, "max_connections", d->max_conns);
  tlc_json_w_u64(w, "listeners", tlc_listen_count(d));
  tlc_json_w_u64(w, "targets_refused_limit", d->targets.refused_limit);
  tlc_json_w_u64(w, "targets_refused_name", d->targets.refused_name);
  tlc_json_w_u64(w, "log_dropped", tlc_log_dropped());
  tlc_json_w_u64(w, "log_suppressed", tlc_log_suppressed());
  tlc_json_w_u64(w, "watchdog_sent", tlc_sd_watchdog_sent());
  tlc_json_w_u64(w, "watchdog_withheld", tlc_sd_watchdog_withheld());
  tlc_json_w_u64(w, "notify_dropped", tlc_sd_dropped());
  tlc_json_w_u64(w, "memory_limit", d->targets.budget.limit);
  tlc_json_w_u64(w, "memory_used", d->targets.budget.used);
  tlc_json_w_u64(w, "memory_peak", d->targets.budget.peak);
  tlc_json_w_u64(w, "memory_refused", d->targets.budget.refused);
  tlc_json_w_u64(w, "refused_allow", st->refused_allow);
  tlc_json_w_u64(w, "targets_evicted", d->targets.evicted);
  tlc_json_w_close(w, '}');
}

void tlc_dump_daemon_head(void *ud, tlc_json_w_t *w) {
  const tlc_daemon_t *dm = ud;
  daemon_object(dm, w);
  tlc_sources_dump(&dm->in, w);
  if (dm->pubsub != NULL) { /* the subscriber server's budget violation events */
    tlc_pubsub_stats_t ps;
    tlc_pubsub_get_stats(dm->pubsub, &ps);
    tlc_json_w_open(w, "subscribers", '{');
    tlc_json_w_u64(w, "connected", ps.subscribers);
    tlc_json_w_u64(w, "violations_sent", ps.violations_sent);
    tlc_json_w_u64(w, "violations_suppressed", ps.violations_suppressed);
    tlc_json_w_close(w, '}');
  }
  if (dm->fleet != NULL)
    tlc_fleet_dump(dm->fleet, w);
  if (dm->alert != NULL)
    tlc_alert_dump(dm->alert, w);
  tlc_stored_dump(dm, w);
  if (dm->histq != NULL)
    tlc_histq_dump(dm->histq, w);
  tlc_rolld_dump(dm, w);
  if (dm->cont != NULL)
    tlc_cont_dump(dm->cont, w);
}

/* ---- the pool thread ---- */

static int file_cb(void *ud, const void *buf, size_t len) {
  return fwrite(buf, 1, len, (FILE *)ud) == len ? 0 : TLC_EIO;
}

static void work_cb(uv_work_t *req) {
  tlc_dump_t *d = req->data;
  tlc_out_t o;
  int r = 0;
  if (d->f == NULL && d->failed_errno == 0) {
    snprintf(d->tmp, sizeof(d->tmp), "%s.tmp", d->wpath);
    if ((d->f = fopen(d->tmp, "we")) == NULL) {
      d->failed_errno = errno ? errno : EIO;
      return;
    }
  }
  if (d->f == NULL)
    return;
  if (d->failed_errno != 0) { /* the loop gave up (no memory): the file goes */
    fclose(d->f);
    d->f = NULL;
    unlink(d->tmp);
    return;
  }
  tlc_out_init(&o, 0, file_cb, d->f);
  if (d->job.text != NULL)
    tlc_out_write(&o, d->job.text, d->job.textlen);
  if (d->job.has_table) {
    const tlc_mapping_t *m = d->job.has_map ? &d->job.map : NULL;
    if (d->job.begin)
      tlc_json_begin_member(&d->js, &o, "stats", &d->job.tab, m, d->job.name);
    tlc_json_rows(&d->js, &o, &d->job.tab, m);
  }
  if (d->job.end)
    tlc_json_end_member(&d->js, &o);
  d->js.o = &o;
  if (d->job.close_target)
    tlc_json_w_close(&d->js, '}');
  if (d->job.finish) { /* the target list and the document */
    tlc_json_w_close(&d->js, ']');
    tlc_json_w_close(&d->js, '}');
    tlc_out_putc(&o, '\n');
  }
  d->js.o = NULL;
  r = tlc_out_fini(&o);
  if (r != 0)
    d->failed_errno = EIO;
  if (d->job.finish || d->failed_errno != 0) {
    if (fclose(d->f) != 0 && d->failed_errno == 0)
      d->failed_errno = errno ? errno : EIO;
    d->f = NULL;
    if (d->failed_errno == 0 && rename(d->tmp, d->wpath) != 0)
      d->failed_errno = errno ? errno : EIO;
    if (d->failed_errno != 0)
      unlink(d->tmp);
  }
}

/* ---- the loop ---- */

static void after_cb(uv_work_t *req, int status);

/* Copies the mapping entries the rows of `t` name (and every task context name) into `out`. */
static int map_subset(tlc_mapping_t *out, const tlc_mapping_t *m, const tlc_table_t *t) {
  const tlc_map_area_t *last = NULL;
  size_t i;
  for (i = 0; i < m->ncontexts; i++)
    if (tlc_mapping_add_ctx(out, m->contexts[i].handle, m->contexts[i].name) < 0)
      return TLC_ENOMEM;
  for (i = 0; i < t->nrows; i++) {
    const tlc_map_area_t *a[2];
    int k;
    a[0] = tlc_mapping_find(m, t->rows[i].handle);
    a[1] = tlc_mapping_row_entry(m, &t->rows[i]);
    for (k = 0; k < 2; k++)
      if (a[k] != NULL && a[k] != last && (k == 0 || a[1] != a[0])) {
        if (tlc_mapping_add(out, a[k]) < 0)
          return TLC_ENOMEM;
        last = a[k];
      }
  }
  tlc_mapping_finish(out);
  return 0;
}

/* The text of target t's entry up to its statistics, written with the document's writer. */
static char *target_head(const tlc_target_t *t, tlc_json_w_t *w, size_t *len) {
  tlc_out_t o;
  tlc_counters_t c;
  tlc_target_counters(t, &c);
  tlc_out_init(&o, 1u << 20, NULL, NULL);
  w->o = &o;
  tlc_json_w_open(w, NULL, '{');
  tlc_json_w_str(w, "name", t->name);
  tlc_json_w_str(w, "format", tlc_format_name(t->format));
  tlc_json_w_i64(w, "connected", t->connected);
  tlc_json_w_str(w, "peer", t->peer);
  tlc_json_w_u64(w, "events", c.events);
  tlc_json_w_u64(w, "anomalies", c.anomalies);
  tlc_json_w_u64(w, "dropped_area_limit", c.dropped_area_limit);
  tlc_json_w_u64(w, "engine_gaps", c.gaps);
  tlc_json_w_u64(w, "bytes", c.bytes);
  tlc_json_w_u64(w, "records", c.records);
  tlc_json_w_u64(w, "bytes_skipped", c.bytes_skipped);
  tlc_json_w_u64(w, "resyncs", c.resyncs);
  tlc_json_w_u64(w, "records_invalid", c.records_invalid);
  tlc_json_w_u64(w, "truncated", c.truncated);
  tlc_json_w_u64(w, "overflow_items", c.overflow_items);
  tlc_json_w_u64(w, "clock_resets", c.clock_resets);
  tlc_json_w_u64(w, "connections", t->connections);
  tlc_json_w_u64(w, "reconnects", t->reconnects);
  tlc_json_w_u64(w, "gaps", t->gaps);
  tlc_json_w_u64(w, "decode_errors", t->decode_errors);
  tlc_json_w_u64(w, "truncated_tails", t->truncated_tails);
  tlc_json_w_u64(w, "deadline_closes", t->deadline_closes);
  tlc_json_w_i64(w, "last_connect_unix_ms", t->last_connect_unix_ms);
  tlc_json_w_i64(w, "last_disconnect_unix_ms", t->last_disconnect_unix_ms);
  tlc_json_w_i64(w, "has_mapping", t->has_mapping);
  tlc_json_w_u64(w, "memory_bytes", t->mem_bytes);
  tlc_json_w_u64(w, "memory_refused", t->mem_refused);
  /* The most recent gaps, oldest first: [disconnect, reconnect (0 while still open)]. */
  tlc_json_w_open(w, "gap_log", '[');
  {
    uint64_t n = t->ngaplog < TLC_TARGET_GAPLOG ? t->ngaplog : TLC_TARGET_GAPLOG;
    for (uint64_t k = t->ngaplog - n; k < t->ngaplog; k++) {
      const tlc_target_gap_t *g = &t->gaplog[k % TLC_TARGET_GAPLOG];
      tlc_json_w_open(w, NULL, '[');
      tlc_json_w_i64(w, NULL, g->disconnect_unix_ms);
      tlc_json_w_i64(w, NULL, g->reconnect_unix_ms);
      tlc_json_w_close(w, ']');
    }
  }
  tlc_json_w_close(w, ']');
  /* storage backpressure: times the source was held, and whether it is now */
  tlc_json_w_u64(w, "store_holds", t->holds);
  tlc_json_w_i64(w, "store_held", t->held);
  /* checkpoints taken in slices: times the input was held for one, held ones given up, bytes
   * of a source that cannot wait kept meanwhile (target.h tlc_target_freeze) */
  tlc_json_w_u64(w, "checkpoint_freezes", t->freezes);
  tlc_json_w_u64(w, "checkpoint_freeze_aborts", t->freeze_aborts);
  tlc_json_w_u64(w, "checkpoint_kept_bytes", t->freeze_bytes);
  w->o = NULL;
  return tlc_out_take(&o, len);
}

/* Appends s to the job's text. 0 or TLC_ENOMEM. */
static int job_text(tlc_dump_t *d, const char *s, size_t n) {
  char *p = tlc_realloc(d->job.text, d->job.textlen + n + 1);
  if (p == NULL)
    return TLC_ENOMEM;
  memcpy(p + d->job.textlen, s, n);
  d->job.textlen += n;
  p[d->job.textlen] = '\0';
  d->job.text = p;
  return 0;
}

/* The current target's entry ends with this job (`next`: the dump goes on with the next target). */
static void end_target(tlc_dump_t *d, int next) {
  d->job.close_target = 1;
  tlc_free(d->cur);
  d->cur = NULL;
  if (next)
    d->ti++;
}

/* Starts target t's entry: its head (target_head) is the job's text, and its name is kept to
 * find it again for each part. 0 or TLC_ENOMEM. */
static int begin_target(tlc_dump_t *d, const tlc_target_t *t) {
  char *h;
  size_t n;
  int r;
  if ((d->cur = tlc_strndup(t->name, strlen(t->name))) == NULL)
    return TLC_ENOMEM;
  if ((h = target_head(t, &d->js, &n)) == NULL)
    return TLC_ENOMEM;
  r = job_text(d, h, n);
  tlc_free(h);
  if (r < 0)
    return r;
  d->lo = 0;
  d->job.begin = 1;
  if ((d->job.name = tlc_strndup(t->name, strlen(t->name))) == NULL)
    return TLC_ENOMEM;
  return 0;
}

/* Takes target t's part that starts at handle d->lo into the job: its rows, the target's
 * counters, and the mapping entries the rows name; *hi is where the part ends. 0 or negative. */
static int take_part(tlc_dump_t *d, tlc_target_t *t, uint64_t *hi) {
  const tlc_mapping_t *names;
  int r = tlc_engine_handle_split(t->pipe.engine, d->lo, TLC_DUMP_PART_ROWS, hi);
  if (r != 0)
    return r;
  r = tlc_engine_snapshot_part(t->pipe.engine, &d->job.tab, NULL, d->lo, *hi);
  tlc_target_counters(t, &d->job.tab.counters);
  /* its mapping, or the names its evlog items gave (tlc_target_names) */
  if (r != 0 || (names = tlc_target_names(t)) == NULL)
    return r;
  r = map_subset(&d->job.map, names, &d->job.tab);
  d->job.has_map = r == 0;
  return r;
}

/* Fills the next job: the next part of the current target, or the next target's entry and its
 * first part, or the document's end. */
static int job_next(tlc_dump_t *d) {
  tlc_target_t *t;
  uint64_t hi;
  int r;
  job_clear(d);
  if (d->cur != NULL && (t = tlc_targets_find(d->reg, d->cur)) == NULL) {
    /* gone since its last part: its entry ends with what was written */
    d->job.end = 1;
    end_target(d, 0);
    d->lo = 0;
    return 0;
  }
  if (d->cur == NULL) {
    if (d->ti >= d->reg->n) {
      d->job.finish = 1;
      return 0;
    }
    t = d->reg->v[d->ti];
    if ((r = begin_target(d, t)) < 0)
      return r;
  }
  if ((r = take_part(d, t, &hi)) < 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_MAIN,
            "stats dump: target %s: statistics from handle %08" PRIX64 " left out: %s", t->name,
            d->lo, tlc_strerror(r));
    d->job.has_table = 0;
    if (d->job.begin) /* no statistics at all: the entry closes without them */
      d->job.begin = 0;
    else
      d->job.end = 1;
    end_target(d, 1);
    return 0;
  }
  d->job.has_table = 1;
  if (hi >= ((uint64_t)1 << 32)) { /* its last part */
    d->job.end = 1;
    end_target(d, 1);
  } else {
    d->lo = hi;
  }
  return 0;
}

static void queue_job(tlc_dump_t *d) {
  int r = uv_queue_work(d->loop, &d->req, work_cb, after_cb);
  if (r != 0) {
    /* cannot happen with a live loop; nothing was written by a thread meanwhile */
    tlc_log(TLC_LOG_ERR, TLC_LOGC_MAIN, "stats dump %s: %s", d->wpath, uv_strerror(r));
    if (d->f != NULL) {
      fclose(d->f);
      d->f = NULL;
      unlink(d->tmp);
    }
    job_clear(d);
    d->busy = 0;
  }
}

static void start(tlc_dump_t *d) {
  tlc_out_t o;
  d->busy = 1;
  d->again = 0;
  snprintf(d->wpath, sizeof(d->wpath), "%s", d->path);
  d->failed_errno = 0;
  d->ti = 0;
  d->lo = 0;
  tlc_free(d->cur);
  d->cur = NULL;
  d->req.data = d;
  job_clear(d);
  /* the document's start: its first members, and the target list opened */
  tlc_out_init(&o, 1u << 20, NULL, NULL);
  tlc_json_w_init(&d->js, &o, 0);
  tlc_json_w_open(&d->js, NULL, '{');
  if (d->head_cb != NULL)
    d->head_cb(d->head_ud, &d->js);
  tlc_json_w_open(&d->js, "targets", '[');
  d->js.o = NULL;
  d->job.text = tlc_out_take(&o, &d->job.textlen);
  if (d->job.text == NULL)
    d->failed_errno = ENOMEM; /* the first job removes the file */
  queue_job(d);
}

static void after_cb(uv_work_t *req, int status) {
  tlc_dump_t *d = req->data;
  int finished = d->job.finish;
  (void)status;
  if (d->failed_errno != 0 || status != 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_MAIN, "stats dump %s: %s", d->wpath,
            strerror(d->failed_errno ? d->failed_errno : EIO));
    if (d->f != NULL) { /* a cancelled job: the thread never ran it */
      fclose(d->f);
      d->f = NULL;
      unlink(d->tmp);
    }
    finished = 1;
  }
  if (finished) {
    job_clear(d);
    tlc_free(d->cur);
    d->cur = NULL;
    d->busy = 0;
    d->done++;
    if (d->again && d->path[0] != '\0')
      start(d);
    return;
  }
  if (job_next(d) < 0) {
    d->failed_errno = ENOMEM; /* the next job closes and removes the file */
    job_clear(d);
    d->job.finish = 1;
  }
  queue_job(d);
}

void tlc_dump_request(tlc_dump_t *d) {
  if (d->path[0] == '\0')
    return;
  if (d->busy) {
    d->again = 1;
    return;
  }
  start(d);
}
