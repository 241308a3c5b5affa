/* history.c - capture files to mapped events, and a target's past range to statistics.
 *
 * The stream is the pipeline `tlcapd replay` has always used, moved here so that the daemon's
 * range queries (GetStats with a range, `tlcap stats --since`, HTTP ?since=, Subscribe with
 * history) compute exactly what `tlcapd replay --state-dir --target --since --until` does:
 * files decoded strictly one after the other (a fresh decoder per file, the statistics carry
 * on), segments read through their index when a range is asked for (no scan of what precedes
 * it), one evlog mapping for the whole capture, a disconnect recorded at a segment boundary
 * made a gap only between events of the range.
 *
 * Cost: one read buffer (1 MiB) per stream, the engine of the range (capped by the target's
 * max_areas), the list of segments (at most 4 Mi entries). A range query reads only the
 * segments that can hold the range: all manifests (small), then from the first index entry
 * at or before `since` to the first record after `until` of each segment.
 *
 * Does not: read the live target's state (the range is what is on disk: records still queued
 * for the writer are not in it), or see resyncs (skipped bytes are not stored; docs/continuity.md
 * "Limits").
 */
#define _GNU_SOURCE /* timegm */
#include "history/history.h"

#include "base/fileread.h"
#include "store/seg/epochs.h"
#include "store/seg/segread.h"

#include "base/alloc.h"
#include "base/err.h"

#include <errno.h>
#include <sys/stat.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define HS_CHUNK    (1u << 20)
#define HS_MAX_SEGS ((size_t)1 << 22)
#define HS_MAX_MAP  (256u << 20) /* a mapping file is read whole, up to this */

static void say(tlc_hist_stream_t *s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void say(tlc_hist_stream_t *s, const char *fmt, ...) {
  char line[512];
  va_list ap;
  if (s->msg == NULL)
    return;
  va_start(ap, fmt);
  vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  s->msg(s->msg_ud, line);
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Segments are read through tlc_segread: compressed ones always, others when a time range is
 * asked for (its index then skips what precedes the range without a scan). */
static int use_segread(const tlc_hist_stream_t *s, const char *path) {
  if (ends_with(path, ".zst"))
    return 1;
  return (s->conf.has_from || s->conf.has_to || s->has_wall) &&
         (ends_with(path, ".BIN") || ends_with(path, ".log") || ends_with(path, ".part"));
}

static int stream_is_open(const tlc_hist_stream_t *s) {
  return s->f != NULL || s->seg != NULL;
}

static void stream_close_file(tlc_hist_stream_t *s);

static int stream_open_segment(tlc_hist_stream_t *s, const char *path) {
  char err[200] = "";
  int r = tlc_segread_open(path, s->conf.format, 0, &s->seg, err, sizeof(err));
  if (r == 0 && (s->conf.has_from || s->conf.has_to))
    r = tlc_segread_range(s->seg, s->conf.has_from ? s->conf.from : INT64_MIN,
                          s->conf.has_to ? s->conf.to : INT64_MAX);
  if (r == 0 && s->has_wall &&
      (r = tlc_segread_wall_range(s->seg, s->wall_since, s->wall_until)) > 0)
    r = 0; /* no arrival index: the whole segment (one written by an earlier version) */
  if (r < 0) {
    say(s, "%s: %s", path, err[0] ? err : tlc_strerror(r));
    if (s->seg != NULL)
      tlc_segread_close(s->seg);
    s->seg = NULL;
    s->io_err = 1;
    return -1;
  }
  return 0;
}

/* The segment `path` named when it was listed may have moved on since: an open `.part`
 * sealed (renamed without `.part`), a sealed one compressed (`.zst` added; the plain file goes
 * once the compressed one is whole). Its current name into buf, or path itself. */
static const char *moved_on(const char *path, char *buf, size_t len) {
  size_t n = strlen(path);
  struct stat st;
  if (stat(path, &st) == 0 || errno != ENOENT || n + 5 > len)
    return path;
  memcpy(buf, path, n + 1);
  if (ends_with(path, ".part")) {
    buf[n - 5] = '\0'; /* sealed */
    if (stat(buf, &st) == 0)
      return buf;
    n -= 5;
  }
  if (!ends_with(buf, ".zst")) {
    memcpy(buf + n, ".zst", 5); /* compressed */
    if (stat(buf, &st) == 0)
      return buf;
  }
  return path;
}

static int stream_open_file(tlc_hist_stream_t *s) {
  char moved[4096];
  const char *path = moved_on(s->files[s->fi], moved, sizeof(moved));
  int r;
  s->seg = NULL;
  if (use_segread(s, path)) {
    if (stream_open_segment(s, path) < 0)
      return -1;
  } else if ((s->f = fopen(path, "rb")) == NULL) {
    say(s, "%s: %s", path, strerror(errno));
    s->io_err = 1;
    return -1;
  }
  r = tlc_pipeline_restart(&s->pipe);
  if (r < 0) {
    say(s, "%s: %s", path, tlc_strerror(r));
    stream_close_file(s);
    s->io_err = 1;
    return -1;
  }
  s->eof = 0;
  s->blen = s->bpos = 0;
  if (s->gap_before != NULL && s->gap_before[s->fi]) {
    /* the live target made a gap here (a disconnect: it always ends a segment); the evlog
     * mapping forgets its stacks now, the engine at the next event in the range */
    tlc_pipeline_gap_mark(&s->pipe);
  }
  return 0;
}

static void stream_close_file(tlc_hist_stream_t *s) {
  if (s->seg != NULL) {
    tlc_segread_close(s->seg);
    s->seg = NULL;
  }
  if (s->f != NULL)
    fclose(s->f);
  s->f = NULL;
  s->fi++;
}

static void report(tlc_hist_stream_t *s, const char *what) {
  if (!s->report)
    return;
  say(s, "%s: byte %" PRIu64 ": %s", s->files[s->fi], s->pipe.dec.err_offset,
      s->pipe.dec.err_reason[0] ? s->pipe.dec.err_reason : what);
  s->bad_input = 1;
}

int tlc_hist_stream_next(void *ud, const tlc_event_t **evs) {
  tlc_hist_stream_t *s = ud;
  *evs = s->out;
  for (;;) {
    int n, k = 0;
    if (s->cancel != NULL && atomic_load_explicit(s->cancel, memory_order_relaxed))
      return -ECANCELED;
    if (!stream_is_open(s)) {
      if (s->fi >= s->nfiles || s->stopped || s->io_err)
        return 0;
      if (stream_open_file(s) < 0)
        return TLC_EIO;
    }
    if (s->bpos == s->blen && !s->eof && s->seg != NULL) {
      int64_t got = tlc_segread_read(s->seg, s->buf, HS_CHUNK);
      s->bpos = 0;
      s->blen = got > 0 ? (size_t)got : 0;
      if (got < 0) {
        char zw[200];
        const char *path = s->files[s->fi];
        if (ends_with(path, ".zst") && tlc_segread_zst_check(path, zw, sizeof(zw)) < 0)
          say(s, "%s: %s", path, zw);
        else
          say(s, "%s: %s", path, tlc_strerror((int)got));
        s->io_err = 1;
        return TLC_EIO;
      }
      if (got == 0)
        s->eof = 1;
    } else if (s->bpos == s->blen && !s->eof) {
      s->blen = fread(s->buf, 1, HS_CHUNK, s->f);
      s->bpos = 0;
      if (s->blen == 0) {
        if (ferror(s->f)) {
          say(s, "%s: read error", s->files[s->fi]);
          s->io_err = 1;
          return TLC_EIO;
        }
        s->eof = 1;
      }
    }
    if (s->bpos < s->blen) {
      size_t used = 0;
      n = tlc_pipeline_push(&s->pipe, s->buf + s->bpos, s->blen - s->bpos, &used, evs, &k);
      s->bpos += used;
      if (n < 0) {
        report(s, tlc_strerror(n));
        s->stopped = 1;
        stream_close_file(s);
        return 0;
      }
    } else {
      n = tlc_pipeline_finish(&s->pipe, evs, &k);
      if (n == 0 || n < 0) {
        if (n == TLC_ETRUNC)
          report(s, "truncated record");
        else if (n < 0)
          report(s, tlc_strerror(n));
        stream_close_file(s);
        continue;
      }
    }
    if (n > 0 && k != 0)
      return k; /* the events that came out of the mapping and the range, or its error */
  }
}

int tlc_hist_stream_rewind(void *ud) {
  tlc_hist_stream_t *s = ud;
  while (stream_is_open(s))
    stream_close_file(s);
  s->fi = 0;
  s->stopped = 0;
  s->io_err = 0;
  return tlc_pipeline_rewind(&s->pipe);
}

int tlc_hist_stream_init(tlc_hist_stream_t *s) {
  tlc_pipeline_io_t io;
  int r;
  s->fi = 0;
  s->f = NULL;
  s->seg = NULL;
  s->pipe_live = 0;
  s->buf = tlc_malloc(HS_CHUNK);
  if (s->buf == NULL)
    return TLC_ENOMEM;
  memset(&io, 0, sizeof(io));
  io.raw = s->raw;
  io.out = s->out;
  io.batch = TLC_HIST_BATCH;
  if ((r = tlc_pipeline_init(&s->pipe, &s->conf, &io)) < 0)
    return r;
  s->pipe_live = 1;
  return tlc_hist_stream_rewind(s);
}

void tlc_hist_stream_fini(tlc_hist_stream_t *s) {
  while (stream_is_open(s))
    stream_close_file(s);
  if (s->pipe_live)
    tlc_pipeline_fini(&s->pipe);
  s->pipe_live = 0;
  tlc_free(s->buf);
  s->buf = NULL;
}

void tlc_hist_stream_counters(const tlc_hist_stream_t *s, tlc_dec_counters_t *out) {
  if (s->pipe_live)
    tlc_pipeline_dec_counters(&s->pipe, out);
  else
    memset(out, 0, sizeof(*out));
}

tlc_timeline_t tlc_hist_stream_timeline(tlc_hist_stream_t *s) {
  tlc_timeline_t tl = { tlc_hist_stream_next, tlc_hist_stream_rewind, s };
  return tl;
}

/* ---- choosing a target's segments for a range ---- */

int64_t tlc_hist_name_time(const char *path) {
  const char *b = strrchr(path, '/');
  struct tm tm;
  memset(&tm, 0, sizeof(tm));
  if (sscanf(b != NULL ? b + 1 : path, "%4d%2d%2dT%2d%2d%2dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
             &tm.tm_hour, &tm.tm_min, &tm.tm_sec) != 6)
    return 0;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return (int64_t)timegm(&tm) * 1000000000ll;
}

void tlc_hist_files_fini(tlc_hist_files_t *f) {
  for (size_t i = 0; i < f->n; i++)
    tlc_free(f->files[i]);
  tlc_free(f->files);
  tlc_free(f->gap_before);
  memset(f, 0, sizeof(*f));
}

/* Target-time ranges: the clock epoch of each listed segment (v[0..n)) into ep[] (numbered as
 * `tlcap segments` numbers them), and the one the range is in into *want. An unreadable
 * segment counts as one without records (it is skipped later anyway). */
static int epochs_of(const tlc_segent_t *v, size_t n, const tlc_when_range_t *range,
                     const tlc_hist_epoch_ctx_t *ec, uint64_t *ep, uint64_t *want) {
  tlc_seg_epoch_in_t *in = tlc_calloc(n + 1, sizeof(*in));
  uint64_t newest, shift;
  if (in == NULL)
    return TLC_ENOMEM;
  for (size_t i = 0; i < n; i++) {
    tlc_segread_t *sr;
    tlc_seginfo_t info;
    char why[200];
    in[i].state = v[i].state;
    if (tlc_segread_open(v[i].path, TLC_FMT_NONE, 0, &sr, why, sizeof(why)) != 0)
      continue;
    tlc_segread_info(sr, &info);
    tlc_segread_close(sr);
    in[i].reason = v[i].state == TLC_SEGST_OPEN ? 0 : info.reason;
    in[i].records = info.items > 0 ? info.records : 0;
    in[i].first_time = info.first_time;
    in[i].max_time = info.max_time;
  }
  newest = tlc_seg_epochs(in, n, ec != NULL ? ec->threshold_ns : 1000000000, ep);
  shift = tlc_seg_epoch_shift(newest, ec != NULL ? ec->live_epoch : -1);
  for (size_t i = 0; i < n; i++)
    ep[i] += shift;
  *want = range->epoch >= 0 ? (uint64_t)range->epoch : newest + shift;
  tlc_free(in);
  return 0;
}

int tlc_hist_select(const char *state_dir, const char *target, const tlc_when_range_t *range,
                    const tlc_hist_epoch_ctx_t *ec, int64_t now_ns, tlc_hist_files_t *f,
                    tlc_hist_msg_cb skipped, void *ud, char *err, size_t errlen) {
  tlc_segent_t *v = NULL;
  uint64_t *ep = NULL, want = 0;
  size_t n = 0, i;
  int r = tlc_segread_list(state_dir, target, HS_MAX_SEGS, &v, &n);
  int prev_end_gap = 0, first = 1;
  int wall = range->kind == TLC_WHEN_WALL;
  memset(f, 0, sizeof(*f));
  if (r != 0) {
    snprintf(err, errlen, "%s/%s: %s", state_dir, target,
             r == -ENOENT ? "no segments of that target" : tlc_strerror(r));
    return r;
  }
  if (range->kind == TLC_WHEN_TARGET &&
      ((ep = tlc_calloc(n + 1, sizeof(*ep))) == NULL || epochs_of(v, n, range, ec, ep, &want) != 0))
    goto nomem;
  f->listed = n;
  if (wall) {
    f->has_wall = 1;
    f->wall_since = range->has_since ? range->since : INT64_MIN;
    f->wall_until = range->has_until ? range->until : INT64_MAX;
  }
  if (range->kind == TLC_WHEN_TARGET) {
    /* target time: records with since <= t < until */
    if (range->has_since) {
      f->has_from = 1;
      f->from = range->since;
    }
    if (range->has_until) {
      f->has_to = 1;
      f->to = range->until == INT64_MIN ? INT64_MIN : range->until - 1;
      if (f->has_from && f->to < f->from) { /* an empty range: nothing is in it */
        f->from = INT64_MAX;
        f->to = INT64_MIN;
      }
    }
  }
  f->files = tlc_calloc(n + 1, sizeof(char *));
  f->gap_before = tlc_calloc(n + 1, 1);
  if (f->files == NULL || f->gap_before == NULL) {
    tlc_free(v);
    tlc_hist_files_fini(f);
    snprintf(err, errlen, "%s", tlc_strerror(TLC_ENOMEM));
    return TLC_ENOMEM;
  }
  for (i = 0; i < n; i++) {
    tlc_segread_t *sr;
    tlc_seginfo_t info;
    char why[200];
    int start_gap = 0, end_gap = 0;
    int64_t opened, closed;
    if (ep != NULL && ep[i] != want) /* another clock epoch: its times are not this range's */
      continue;
    if (v[i].state == TLC_SEGST_OPEN && !first) {
      /* the open segment has no manifest yet (no gaps in it; opened: its name): opening it
       * here would scan its data once more than reading it does */
      opened = tlc_hist_name_time(v[i].path);
      if (wall && range->has_until && opened != 0 && opened >= range->until)
        continue;
      if ((f->files[f->n] = tlc_strndup(v[i].path, strlen(v[i].path))) == NULL)
        goto nomem;
      f->gap_before[f->n++] = (uint8_t)prev_end_gap;
      prev_end_gap = 0;
      continue;
    }
    if (tlc_segread_open(v[i].path, TLC_FMT_NONE, 0, &sr, why, sizeof(why)) != 0) {
      if (skipped != NULL) {
        char line[1500];
        snprintf(line, sizeof(line), "%s: %s (skipped)", v[i].path, why);
        skipped(ud, line);
      }
      continue;
    }
    tlc_segread_info(sr, &info);
    for (size_t g = 0; g < info.ngaps; g++) {
      const char *reason;
      uint64_t cnt, off;
      /* a disconnect or a clock restart in the stream: either ends the live statistics' run
       * with a gap (the engine then sees the restart at the next event) */
      if (tlc_segread_gap(sr, g, &reason, &cnt, &off) == 0 &&
          (strcmp(reason, "disconnect") == 0 || strcmp(reason, "clock-reset") == 0 ||
           strcmp(reason, "reset") == 0 || strcmp(reason, "restart") == 0)) {
        if (off == 0 && info.bytes > 0)
          start_gap = 1;
        if (off >= info.bytes)
          end_gap = 1;
      }
    }
    tlc_segread_close(sr);
    opened = info.opened_wall_ns != 0 ? info.opened_wall_ns : tlc_hist_name_time(v[i].path);
    closed =
        info.closed_wall_ns != 0 && v[i].state != TLC_SEGST_OPEN ? info.closed_wall_ns : now_ns;
    if (wall && ((range->has_since && closed < range->since) ||
                 (range->has_until && opened != 0 && opened >= range->until))) {
      prev_end_gap = end_gap;
      continue;
    }
    if (first)
      f->fmt = info.format;
    f->files[f->n] = tlc_strndup(v[i].path, strlen(v[i].path));
    if (f->files[f->n] == NULL)
      goto nomem;
    f->gap_before[f->n] = (uint8_t)(!first && (prev_end_gap || start_gap));
    f->n++;
    prev_end_gap = end_gap;
    first = 0;
  }
  tlc_free(v);
  tlc_free(ep);
  return 0;
nomem:
  tlc_free(v);
  tlc_free(ep);
  tlc_hist_files_fini(f);
  snprintf(err, errlen, "%s", tlc_strerror(TLC_ENOMEM));
  return TLC_ENOMEM;
}

/* ---- range statistics ---- */

/* The first message of the stream (decode or read error) is kept as the result's err. */
static void keep_first(void *ud, const char *msg) {
  tlc_hist_result_t *r = ud;
  if (r->err[0] == '\0')
    snprintf(r->err, sizeof(r->err), "%s", msg);
}

static int load_mapping(const char *path, tlc_mapping_t *m, char *err, size_t errlen) {
  char *data = NULL;
  size_t len = 0;
  tlc_parse_err_t pe;
  int r = tlc_file_read(path, HS_MAX_MAP, &data, &len);
  if (r < 0) {
    snprintf(err, errlen, "%s: %s", path, tlc_strerror(r));
    return r;
  }
  memset(&pe, 0, sizeof(pe));
  r = tlc_mapping_parse(m, data, len, &pe);
  tlc_free(data);
  if (r < 0) {
    snprintf(err, errlen, "%s: line %" PRIu64 ": %s", path, pe.line,
             pe.reason[0] ? pe.reason : tlc_strerror(r));
    return r;
  }
  tlc_mapping_finish(m);
  return 0;
}

/* The moment's export of the range (second pass over the stream, without its engine) into
 * r->moment. 0 or a negative error (TLC_ELIMIT: larger than q->moment_max). */
static int moment_out(const tlc_hist_query_t *q, tlc_hist_result_t *r, tlc_hist_stream_t *s) {
  tlc_out_t o;
  tlc_timeline_t tl = tlc_hist_stream_timeline(s);
  int rc;
  tlc_out_init(&o, q->moment_max, NULL, NULL);
  s->report = 0; /* told once, in the first pass */
  rc = tlc_moment_write(&o, q->moment_export, r->fmt, &q->moment, q->target, &r->t,
                        r->has_names ? &r->names : NULL, &tl);
  if (rc == 0 && o.err != 0)
    rc = o.err;
  if (rc == 0 && (r->moment = tlc_out_take(&o, &r->moment_len)) == NULL)
    rc = TLC_ENOMEM;
  if (rc == TLC_EFORMAT)
    snprintf(r->err, sizeof(r->err), "--export evlog needs an evlog capture");
  else if (rc == TLC_ENOMEM && q->moment_max != 0 && o.total > q->moment_max)
    rc = TLC_ELIMIT;
  tlc_out_fini(&o);
  return rc;
}

int tlc_hist_compute(const tlc_hist_query_t *q, tlc_hist_result_t *r) {
  tlc_hist_files_t f;
  tlc_hist_stream_t s;
  tlc_engine_t *e = NULL;
  tlc_dec_counters_t total;
  const tlc_event_t *evs;
  int n, rc;
  char why[300] = "";
  memset(&s, 0, sizeof(s));
  tlc_hist_epoch_ctx_t ec = { q->eo.clock_reset_ns, q->live_epoch };
  rc = tlc_hist_select(q->state_dir, q->target, &q->range, &ec, q->now_ns, &f, keep_first, r, why,
                       sizeof(why));
  if (rc != 0) {
    snprintf(r->err, sizeof(r->err), "%s", why);
    return r->status = rc;
  }
  if (f.n == 0) {
    snprintf(r->err, sizeof(r->err), "%s/%s: no segment in the range", q->state_dir, q->target);
    rc = TLC_ERANGE;
    goto done;
  }
  r->fmt = f.fmt;
  r->segments = f.n;
  if (q->mapping_path != NULL && q->mapping_path[0] != '\0') {
    if (load_mapping(q->mapping_path, &r->names, why, sizeof(why)) == 0)
      r->has_names = 1;
    else if (r->err[0] == '\0') /* the target works without it: so does its history */
      snprintf(r->err, sizeof(r->err), "%s", why);
  }
  s.files = f.files;
  s.nfiles = f.n;
  s.gap_before = f.gap_before;
  s.conf.format = f.fmt;
  s.conf.evmap = q->evopts;
  s.conf.has_from = f.has_from;
  s.conf.has_to = f.has_to;
  s.conf.from = f.from;
  s.conf.to = f.to;
  s.has_wall = f.has_wall;
  s.wall_since = f.wall_since;
  s.wall_until = f.wall_until;
  s.conf.stop_on_map_error = 1; /* as tlcapd replay */
  s.conf.with_engine = 1;
  s.conf.engine = q->eo;
  s.conf.engine.mapping = r->has_names ? &r->names : NULL;
  /* not charged to the daemon's memory budget: the target's max_areas caps it */
  memset(&s.conf.engine.acct, 0, sizeof(s.conf.engine.acct));
  s.msg = keep_first;
  s.msg_ud = r;
  s.report = 1;
  s.cancel = q->cancel;
  if ((rc = tlc_hist_stream_init(&s)) < 0)
    goto done;
  while ((n = tlc_hist_stream_next(&s, &evs)) > 0) /* the pipeline feeds its engine */
    ;
  e = tlc_pipeline_take_engine(&s.pipe);
  if (n < 0) {
    rc = n;
    if (rc != -ECANCELED && r->err[0] == '\0')
      snprintf(r->err, sizeof(r->err), "%s", tlc_strerror(rc));
    goto done;
  }
  if (e == NULL) {
    rc = TLC_ENOMEM;
    goto done;
  }
  if ((rc = tlc_engine_snapshot(e, &r->t, &q->so)) < 0)
    goto done;
  tlc_hist_stream_counters(&s, &total);
  r->t.counters.bytes = total.bytes;
  r->t.counters.records = total.records;
  r->t.counters.bytes_skipped = total.bytes_skipped;
  r->t.counters.resyncs = total.resyncs;
  r->t.counters.records_invalid = total.records_invalid;
  r->t.counters.truncated = total.truncated;
  r->t.counters.overflow_items = total.overflow_items;
  /* evlog names come from the mapping step when no mapping file was given */
  if (!r->has_names && s.pipe.evmap != NULL && tlc_evmap_export(s.pipe.evmap, &r->names) == 0) {
    tlc_mapping_finish(&r->names);
    r->has_names = 1;
  }
  if (q->moment_export != 0 && (rc = moment_out(q, r, &s)) < 0)
    goto done;
done:
  if (rc < 0 && rc != TLC_ERANGE && r->err[0] == '\0')
    snprintf(r->err, sizeof(r->err), "%s", rc == -ECANCELED ? "cancelled" : tlc_strerror(rc));
  if (e != NULL)
    tlc_engine_free(e);
  tlc_hist_stream_fini(&s);
  tlc_hist_files_fini(&f);
  return r->status = rc;
}
