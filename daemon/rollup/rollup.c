/* rollup.c - the rollup module's worker: minute and hour files, retention, queries (rollup.h).
 *
 * One thread takes jobs in order: a sealed minute (its slots become cells, one block per area
 * appended to the area's minute file, merged into the target's open hour), or a query (read
 * after every minute sealed before it). Answers go back to the loop through an async handle.
 * Appends are one write() of a whole block to a file opened O_APPEND: a crash tears at most the
 * last block, which readers skip (they resynchronise on the next magic).
 */
#include "rollup/rollup-int.h"

#include "base/alloc.h"
#include "base/fileread.h"
#include "base/err.h"
#include "base/log.h"
#include "formats/when.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A log line of the worker: queued under mu and written by the loop (on_done), since base/log
 * is the loop thread's alone. Past TLC_ROLLUP_WLOG lines waiting, lines are counted, and the
 * count is written with the next ones. Also safe on the loop thread (written at its next
 * turn). */
static void wlog(tlc_rollup_t *r, int level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void wlog(tlc_rollup_t *r, int level, const char *fmt, ...) {
  char line[240];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  uv_mutex_lock(&r->mu);
  if (r->wlog_n < TLC_ROLLUP_WLOG) {
    memcpy(r->wlog_line[r->wlog_n], line, sizeof line);
    r->wlog_level[r->wlog_n++] = level;
  } else {
    r->wlog_dropped++;
  }
  uv_mutex_unlock(&r->mu);
  uv_async_send(&r->done_async);
}

#define DAY_MIN        1440
#define HOURDIR_DAYS   32
#define RETENTION_MS   60000
#define MAX_FILE_BYTES (1ull << 30) /* a reader refuses larger files (bounded memory) */

static int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static void job_free(tlc_rollup_job_t *j) {
  if (j == NULL)
    return;
  tlc__rollup_slots_free(j->slots, j->nslots);
  tlc_free(j->samples);
  tlc_free(j->block);
  tlc_rollup_res_fini(&j->res[0]);
  tlc_rollup_res_fini(&j->res[1]);
  tlc_free(j->target);
  tlc_free(j);
}

void tlc_rollup_res_fini(tlc_rollup_res_t *res) {
  for (size_t i = 0; i < res->nsteps; i++)
    tlc_rollup_blk_fini(&res->steps[i]);
  tlc_free(res->steps);
  res->steps = NULL;
  res->nsteps = 0;
}

int64_t tlc_rollup_quantile(const tlc_rollup_cell_t *c, unsigned permille) {
  uint64_t lo, hi;
  int64_t v;
  int32_t b = tlc_rollup_rank(c, permille, 1000);
  if (b < 0)
    return c->d.min;
  tlc__hist_bounds((uint32_t)b, &lo, &hi);
  v = (int64_t)(lo + (hi - lo) / 2);
  return v < c->d.min ? c->d.min : v > c->d.max ? c->d.max : v;
}

/* ---- files ---- */

/* mkdir -p of path's directory part (path itself is a file). 0 or -errno. */
static int mkdirs_for(char *path) {
  for (char *p = path + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    if (mkdir(path, 0755) < 0 && errno != EEXIST) {
      int e = errno;
      *p = '/';
      return -e;
    }
    *p = '/';
  }
  return 0;
}

static int append_file(tlc_rollup_t *r, char *path, const uint8_t *p, size_t n) {
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0 && errno == ENOENT && mkdirs_for(path) == 0)
    fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    wlog(r, TLC_LOG_ERR, "rollup: cannot open %s: %s", path, strerror(errno));
    tlc__rollup_count(r, &r->st.write_errors, 1);
    return -1;
  }
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      wlog(r, TLC_LOG_ERR, "rollup: cannot write %s: %s", path,
           w < 0 ? strerror(errno) : "short write");
      tlc__rollup_count(r, &r->st.write_errors, 1);
      close(fd);
      return -1;
    }
    p += w;
    n -= (size_t)w;
  }
  close(fd);
  return 0;
}

/* Appends every area of blk (cells sorted) as its own block to DIR/<handle>.r. */
static void write_blk(tlc_rollup_t *r, const char *target, const tlc_rollup_blk_t *blk, int hour) {
  size_t i = 0;
  int64_t day = floor_div(blk->minute, DAY_MIN);
  while (i < blk->n) {
    size_t j = i;
    tlc_rollup_blk_t one = *blk;
    tlc_ckw_t w;
    char path[1400];
    while (j < blk->n && blk->cells[j].key.handle == blk->cells[i].key.handle)
      j++;
    one.cells = &blk->cells[i];
    one.n = one.cap = j - i;
    tlc_ckw_init(&w, 1u << 28);
    tlc_rollup_encode(&one, &w);
    snprintf(path, sizeof path, "%s/%s/e%" PRIu64 "/%c%" PRId64 "/%" PRIu32 ".r", r->root, target,
             blk->epoch, hour ? 'h' : 'm', hour ? floor_div(day, HOURDIR_DAYS) : day,
             blk->cells[i].key.handle);
    if (w.err == 0 && append_file(r, path, w.p, w.len) == 0) {
      uv_mutex_lock(&r->mu);
      r->st.blocks_written++;
      r->st.bytes_written += w.len;
      r->st.bytes_on_disk += w.len;
      uv_mutex_unlock(&r->mu);
    } else if (w.err != 0) {
      tlc__rollup_count(r, &r->st.write_errors, 1);
    }
    tlc_ckw_fini(&w);
    i = j;
  }
}

static int slot_cmp(const void *pa, const void *pb) {
  const tlc_rollup_slot_t *a = pa, *b = pb;
  tlc_rollup_key_t ka = { a->handle, a->context, a->state, a->kind, 0 };
  tlc_rollup_key_t kb = { b->handle, b->context, b->state, b->kind, 0 };
  return tlc_rollup_key_cmp(&ka, &kb);
}

/* The cells of a sealed minute (slots sorted). 0 or TLC_ENOMEM. */
static int minute_blk(tlc_rollup_job_t *j, tlc_rollup_blk_t *blk) {
  tlc_rollup_blk_init(blk);
  blk->epoch = j->epoch;
  blk->minute = j->minute;
  blk->span = 1;
  blk->wall_first = j->wall_first;
  blk->wall_last = j->wall_last;
  if (j->nslots > 1)
    qsort(j->slots, j->nslots, sizeof(*j->slots), slot_cmp);
  blk->cells = tlc_calloc(j->nslots ? j->nslots : 1, sizeof(*blk->cells));
  if (blk->cells == NULL)
    return TLC_ENOMEM;
  blk->cap = j->nslots;
  for (size_t i = 0; i < j->nslots; i++) {
    const tlc_rollup_slot_t *s = &j->slots[i];
    tlc_rollup_cell_t *c = &blk->cells[blk->n++];
    const tlc_hist_t *h = &s->h;
    c->key.handle = s->handle;
    c->key.context = s->context;
    c->key.state = s->state;
    c->key.kind = s->kind;
    c->key.row_kind = s->row_kind;
    c->d = s->d;
    c->tmin = s->tmin;
    c->tmax = s->tmax;
    c->violations = s->violations;
    if (s->nohist)
      continue;
    if (h->b != NULL) {
      for (uint32_t k = 0; k < h->nb; k++)
        if (tlc_rollup_cell_bin(c, h->lo + k, tlc__hist_count(h, k)) != 0)
          return TLC_ENOMEM;
    } else {
      uint32_t in[3] = { h->lo, h->nb, h->in2 };
      for (unsigned k = 0; k < h->nin; k++)
        if (tlc_rollup_cell_bin(c, in[k], 1) != 0)
          return TLC_ENOMEM;
    }
  }
  return 0;
}

static void mark_hour(tlc_rollup_t *r, const char *target, uint64_t epoch, int64_t hm);

static void hour_flush(tlc_rollup_t *r, tlc_rollup_hour_t *h) {
  if (h->blk.n > 0) {
    write_blk(r, h->target, &h->blk, 1);
    if (h->lane == 0)
      mark_hour(r, h->target, h->epoch, h->last_min);
  }
  tlc_rollup_blk_clear(&h->blk);
}

static tlc_rollup_hour_t *hour_of(tlc_rollup_t *r, const char *target, uint8_t lane) {
  for (size_t i = 0; i < r->nhours; i++)
    if (r->hours[i].lane == lane && strcmp(r->hours[i].target, target) == 0)
      return &r->hours[i];
  if (r->nhours == r->caphours) {
    size_t nc = r->caphours ? r->caphours * 2 : 8;
    tlc_rollup_hour_t *nv = tlc_realloc(r->hours, nc * sizeof(*nv));
    if (nv == NULL)
      return NULL;
    r->hours = nv;
    r->caphours = nc;
  }
  tlc_rollup_hour_t *h = &r->hours[r->nhours];
  memset(h, 0, sizeof(*h));
  h->lane = lane;
  tlc_rollup_blk_init(&h->blk);
  if ((h->target = tlc_strndup(target, strlen(target))) == NULL)
    return NULL;
  r->nhours++;
  return h;
}

static void do_minute(tlc_rollup_t *r, tlc_rollup_job_t *j);
static void hour_add(tlc_rollup_t *r, const char *target, uint8_t lane,
                     const tlc_rollup_blk_t *blk);
static void saved_drop(tlc_rollup_t *r, const char *target);
static void mark_minute(tlc_rollup_t *r, const char *target, uint64_t epoch, int64_t minute,
                        uint64_t n);

void tlc__rollup_minute(tlc_rollup_t *r, tlc_rollup_job_t *j) {
  do_minute(r, j);
  job_free(j);
}

static void do_minute(tlc_rollup_t *r, tlc_rollup_job_t *j) {
  tlc_rollup_blk_t blk;
  uint64_t ns = 0;
  for (size_t i = 0; i < j->nslots; i++)
    ns += j->slots[i].d.n;
  if (minute_blk(j, &blk) != 0) {
    wlog(r, TLC_LOG_ERR, "rollup %s: no memory for minute %" PRId64 " (lost)", j->target,
         j->minute);
    tlc__rollup_count(r, &r->st.samples_dropped, ns);
    tlc_rollup_blk_fini(&blk);
    return;
  }
  write_blk(r, j->target, &blk, 0);
  tlc__rollup_count(r, &r->st.samples, ns); /* once on disk (or its write error counted) */
  if (j->lane == 0) { /* the live minutes: the checkpoint's copy is of one of them */
    mark_minute(r, j->target, j->epoch, j->minute, ns);
    saved_drop(r, j->target);
  }
  hour_add(r, j->target, j->lane, &blk);
  tlc_rollup_blk_fini(&blk);
}

static void read_q(tlc_rollup_t *r, const char *state_dir, const tlc_rollup_q_t *q,
                   tlc_rollup_res_t *res);

/* The first hour of a target in this run, when an earlier run wrote minutes of it that no hour
 * written holds (a crash; the marks say the last hour written and its latest minute): the hour
 * starts as the merge of those minutes on disk (and of the one just written), so that it counts
 * each of them once. 1 when seeded. */
static int hour_seed(tlc_rollup_t *r, const char *target, tlc_rollup_hour_t *h) {
  tlc_rollup_open_t *o = tlc__rollup_open_of(r, target, 0);
  tlc_rollup_q_t q;
  tlc_rollup_res_t res;
  int64_t from = h->hour_minute, hh;
  int ok = 0;
  if (o == NULL || !o->mark_loaded || strlen(target) >= sizeof q.target)
    return 0;
  if (o->has_h) {
    hh = floor_div(o->h_min, 60) * 60;
    if (h->epoch < o->h_epoch || (h->epoch == o->h_epoch && h->hour_minute < hh))
      return 0; /* an hour before the last one written: not after a crash */
    if (h->epoch == o->h_epoch && h->hour_minute == hh)
      from = o->h_min + 1; /* the minutes of it the hour written lacks */
  }
  memset(&q, 0, sizeof q);
  snprintf(q.target, sizeof q.target, "%s", target);
  q.all_handles = 1;
  q.when = TLC_RQ_TARGET;
  q.epoch = (int64_t)h->epoch;
  q.has_since = q.has_until = 1;
  q.since = from * TLC_ROLLUP_MINUTE_NS;
  q.until = (h->hour_minute + 60) * TLC_ROLLUP_MINUTE_NS;
  q.step_min = 0;
  read_q(r, r->state_dir, &q, &res);
  if (res.status == 0 && res.nsteps == 1 && tlc_rollup_blk_merge(&h->blk, &res.steps[0]) == 0) {
    h->blk.epoch = h->epoch;
    h->blk.minute = h->hour_minute;
    h->blk.span = 60;
    ok = 1;
  } else {
    tlc_rollup_blk_clear(&h->blk);
    h->blk.epoch = h->epoch;
    h->blk.minute = h->hour_minute;
    h->blk.span = 60;
  }
  tlc_rollup_res_fini(&res);
  return ok;
}

/* Merges a written minute block into its target's open hour (writing the previous hour). */
static void hour_add(tlc_rollup_t *r, const char *target, uint8_t lane,
                     const tlc_rollup_blk_t *blk) {
  int64_t hm = floor_div(blk->minute, 60) * 60;
  tlc_rollup_hour_t *h = hour_of(r, target, lane);
  if (h != NULL) {
    if (h->blk.n > 0 && (h->epoch != blk->epoch || h->hour_minute != hm))
      hour_flush(r, h);
    if (h->blk.n == 0) {
      h->epoch = blk->epoch;
      h->hour_minute = hm;
      h->blk.epoch = blk->epoch;
      h->blk.minute = hm;
      h->blk.span = 60;
      h->last_min = blk->minute;
      if (lane == 0 && !h->began) {
        h->began = 1;
        if (hour_seed(r, target, h)) /* blk is on disk: among the minutes read */
          return;
      }
    }
    if (h->blk.n == 0 || blk->minute > h->last_min)
      h->last_min = blk->minute;
    if (tlc_rollup_blk_merge(&h->blk, blk) != 0) {
      wlog(r, TLC_LOG_ERR, "rollup %s: no memory for hour %" PRId64, target, hm);
      tlc_rollup_blk_clear(&h->blk);
    }
  }
}

/* ---- the open minute saved with a checkpoint ---- */

static void open_path(const tlc_rollup_t *r, const char *target, const char *sfx, char *p,
                      size_t n) {
  snprintf(p, n, "%s/%s/open-minute%s", r->root, target, sfx);
}

/* A minute of target was written: its saved open minute (a part of it, or of an earlier one)
 * is not needed any more. */
static void saved_drop(tlc_rollup_t *r, const char *target) {
  tlc_rollup_open_t *o = tlc__rollup_open_of(r, target, 0);
  if (o != NULL)
    o->pend_n = 0; /* a copy waiting for its position: its samples are written too */
  if (o == NULL || o->saved_n == 0)
    return;
  uv_mutex_lock(&r->mu);
  r->st.saved_samples -= o->saved_n;
  uv_mutex_unlock(&r->mu);
  o->saved_n = 0;
}

/* ---- the marks: what of a target is on disk (TARGET/written) ---- */

#define MARK_TAG "tlc-rollup-written 1"
#define COPY_TAG "tlc-rollup-copy 1"

/* Replaces path with data (temporary file, rename). 0 or -1 (logged, counted). */
static int replace_file(tlc_rollup_t *r, const char *path, const uint8_t *data, size_t len) {
  char t[1500];
  snprintf(t, sizeof t, "%s.tmp", path);
  (void)unlink(t);
  if (append_file(r, t, data, len) != 0)
    return -1;
  if (rename(t, path) != 0) {
    wlog(r, TLC_LOG_ERR, "rollup: cannot rename %s: %s", t, strerror(errno));
    tlc__rollup_count(r, &r->st.write_errors, 1);
    (void)unlink(t);
    return -1;
  }
  return 0;
}

static void mark_write(tlc_rollup_t *r, tlc_rollup_open_t *o) {
  char p[1400], line[200];
  int n = snprintf(line, sizeof line,
                   MARK_TAG " %d %" PRIu64 " %" PRId64 " %" PRIu64 " %d %" PRIu64 " %" PRId64 "\n",
                   o->has_w, o->w_epoch, o->w_min, o->w_n, o->has_h, o->h_epoch, o->h_min);
  snprintf(p, sizeof p, "%s/%s/written", r->root, o->name);
  (void)replace_file(r, p, (const uint8_t *)line, (size_t)n);
}

/* A minute (epoch, minute) of target's live lane written with n samples: the last written,
 * and how many of its samples are on disk (an earlier part of it counts on). */
static void mark_minute(tlc_rollup_t *r, const char *target, uint64_t epoch, int64_t minute,
                        uint64_t n) {
  tlc_rollup_open_t *o = tlc__rollup_open_of(r, target, 0);
  if (o == NULL)
    return;
  if (o->has_w && o->w_epoch == epoch && o->w_min == minute) {
    o->w_n += n;
  } else {
    o->has_w = 1;
    o->w_epoch = epoch;
    o->w_min = minute;
    o->w_n = n;
  }
  mark_write(r, o);
}

static void mark_hour(tlc_rollup_t *r, const char *target, uint64_t epoch, int64_t last) {
  tlc_rollup_open_t *o = tlc__rollup_open_of(r, target, 0);
  if (o == NULL)
    return;
  o->has_h = 1;
  o->h_epoch = epoch;
  o->h_min = last;
  mark_write(r, o);
}

/* Parses the marks' fields after tag from s (a line). 0 or -1. */
static int mark_parse(const char *s, size_t len, const char *tag, int *has_w, uint64_t *we,
                      int64_t *wm, uint64_t *wn, int *has_h, uint64_t *he, int64_t *hm) {
  char line[256];
  const char *nl = memchr(s, '\n', len < sizeof line ? len : sizeof line);
  size_t tl = strlen(tag);
  if (nl == NULL || (size_t)(nl - s) <= tl || memcmp(s, tag, tl) != 0 || s[tl] != ' ')
    return -1;
  memcpy(line, s + tl, (size_t)(nl - s) - tl);
  line[(size_t)(nl - s) - tl] = '\0';
  if (sscanf(line, " %d %" SCNu64 " %" SCNd64 " %" SCNu64 " %d %" SCNu64 " %" SCNd64, has_w, we, wm,
             wn, has_h, he, hm) != 7)
    return -1;
  return 0;
}

/* The target's marks as an earlier run left them (at the target's first job). */
static void mark_load(tlc_rollup_t *r, tlc_rollup_open_t *o) {
  char p[1400];
  char *data = NULL;
  size_t len = 0;
  snprintf(p, sizeof p, "%s/%s/written", r->root, o->name);
  if (tlc_file_read(p, 4096, &data, &len) != 0)
    return;
  if (mark_parse(data, len, MARK_TAG, &o->has_w, &o->w_epoch, &o->w_min, &o->w_n, &o->has_h,
                 &o->h_epoch, &o->h_min) == 0)
    o->mark_loaded = 1;
  else
    wlog(r, TLC_LOG_WARN, "rollup: %s: not a rollup mark (ignored)", p);
  tlc_free(data);
}

/* ---- the open minute's copy at a checkpoint ---- */

void tlc__rollup_open_save(tlc_rollup_t *r, tlc_rollup_open_t *o, uint64_t gen) {
  tlc_rollup_job_t tmp;
  tlc_rollup_blk_t blk;
  tlc_ckw_t w;
  char line[200];
  int rc = 0, n;
  /* the marks as of the checkpoint's position, then the open minute (if any) */
  n = snprintf(line, sizeof line, COPY_TAG " %d %" PRIu64 " %" PRId64 " %" PRIu64 " 0 0 0\n",
               o->has_w, o->w_epoch, o->w_min, o->w_n);
  tlc_ckw_init(&w, 1u << 30);
  tlc_ckw_bytes(&w, line, (size_t)n);
  tlc_rollup_blk_init(&blk);
  if (o->n > 0) {
    /* a shallow copy of the slots, sorted for the block (the open minute's index stays valid) */
    memset(&tmp, 0, sizeof tmp);
    tmp.epoch = o->epoch;
    tmp.minute = o->minute;
    tmp.wall_first = o->wall_first;
    tmp.wall_last = o->wall_last;
    tmp.nslots = o->n;
    if ((tmp.slots = tlc_malloc(o->n * sizeof(*tmp.slots))) == NULL) {
      rc = TLC_ENOMEM;
    } else {
      memcpy(tmp.slots, o->slots, o->n * sizeof(*tmp.slots));
      rc = minute_blk(&tmp, &blk);
      tlc_free(tmp.slots); /* only the array: the histograms are the open minute's */
      if (rc == 0)
        tlc_rollup_encode(&blk, &w);
    }
  }
  tlc_free(o->pend);
  o->pend = NULL;
  o->npend = 0;
  if (rc != 0 || w.err != 0) {
    wlog(r, TLC_LOG_ERR, "rollup: the open minute of %s not saved", o->name);
    tlc__rollup_count(r, &r->st.write_errors, 1);
  } else {
    o->pend = w.p; /* taken */
    o->npend = w.len;
    w.p = NULL;
    o->pend_gen = gen;
    o->pend_n = o->nsamples;
  }
  tlc_ckw_fini(&w);
  tlc_rollup_blk_fini(&blk);
}

static void copy_name(const tlc_rollup_pos_t *pos, char *n, size_t len) {
  snprintf(n, len, "ckpt-%" PRIu64 "-%" PRIu64 "-%" PRIu64, pos->seq, pos->bytes, pos->disconnects);
}

/* Removes the target's copies but keep0 and keep1 ("" for none). */
static void copies_prune(tlc_rollup_t *r, const char *target, const char *keep0,
                         const char *keep1) {
  char dir[1400], p[1700];
  DIR *d;
  struct dirent *de;
  snprintf(dir, sizeof dir, "%s/%s", r->root, target);
  if ((d = opendir(dir)) == NULL)
    return;
  while ((de = readdir(d)) != NULL) {
    if (strncmp(de->d_name, "ckpt-", 5) != 0 || strcmp(de->d_name, keep0) == 0 ||
        strcmp(de->d_name, keep1) == 0)
      continue;
    snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
    (void)unlink(p);
  }
  closedir(d);
}

void tlc__rollup_open_pos(tlc_rollup_t *r, tlc_rollup_open_t *o, uint64_t gen,
                          const tlc_rollup_pos_t *pos) {
  char name[96], p[1500];
  if (o->pend == NULL || o->pend_gen != gen)
    return; /* a later copy was taken meanwhile, or none */
  copy_name(pos, name, sizeof name);
  snprintf(p, sizeof p, "%s/%s/%s", r->root, o->name, name);
  if (replace_file(r, p, o->pend, o->npend) == 0) {
    if (o->pend_n > o->saved_n) {
      uv_mutex_lock(&r->mu);
      r->st.saved_samples += o->pend_n - o->saved_n;
      uv_mutex_unlock(&r->mu);
      o->saved_n = o->pend_n;
    }
    /* the checkpoint on disk is this one or (its file not yet renamed) the one before */
    copies_prune(r, o->name, name, o->kept);
    snprintf(o->kept, sizeof o->kept, "%s", name);
  }
  tlc_free(o->pend);
  o->pend = NULL;
  o->npend = 0;
}

void tlc__rollup_replay_begin(tlc_rollup_t *r, tlc_rollup_open_t *o, const tlc_rollup_pos_t *pos) {
  char name[96], p[1500], err[200];
  char *data = NULL;
  size_t len = 0, used = 0;
  int ph = 0, hh, copy = 0;
  uint64_t pe = 0, pn = 0, he, c = 0;
  int64_t pm = 0, hm;
  tlc_rollup_blk_t blk;
  tlc_rollup_blk_init(&blk);
  o->rp_in = o->rp_out = 0;
  copy_name(pos, name, sizeof name);
  snprintf(p, sizeof p, "%s/%s/%s", r->root, o->name, name);
  if (tlc_file_read(p, 1u << 30, &data, &len) == 0 &&
      mark_parse(data, len, COPY_TAG, &ph, &pe, &pm, &pn, &hh, &he, &hm) == 0) {
    const char *nl = memchr(data, '\n', len);
    size_t off = (size_t)(nl - data) + 1;
    copy = 1;
    if (off < len && tlc_rollup_decode(&blk, data + off, len - off, &used, err, sizeof err) != 0) {
      wlog(r, TLC_LOG_WARN, "rollup: %s: %s (its open minute dropped)", p, err);
      tlc__rollup_count(r, &r->st.blocks_refused, 1);
      tlc_rollup_blk_clear(&blk);
    }
    for (size_t i = 0; i < blk.n; i++)
      c += blk.cells[i].d.n;
    /* kept until the next checkpoint's copies replace it: a crash before them restarts here */
    copies_prune(r, o->name, name, "");
    snprintf(o->kept, sizeof o->kept, "%s", name);
  }
  if (copy && ph == o->has_w && pe == o->w_epoch && pm == o->w_min && pn == o->w_n) {
    /* nothing written since the checkpoint: its open minute is, then every replayed sample */
    o->rp = TLC_RP_ACCEPT;
    if (blk.n > 0 && blk.span == 1) {
      write_blk(r, o->name, &blk, 0);
      tlc__rollup_count(r, &r->st.samples, c);
      tlc__rollup_count(r, &r->st.restored, 1);
      mark_minute(r, o->name, blk.epoch, blk.minute, c);
      hour_add(r, o->name, 0, &blk);
      wlog(r, TLC_LOG_NOTICE,
           "rollup %s: the open minute saved with the last checkpoint written (%" PRIu64
           " samples)",
           o->name, c);
    }
  } else if (o->has_w) {
    /* the crashed run wrote minutes after the checkpoint (the copy's minute among them, when
     * there is one): replayed samples of earlier minutes are on disk, and of the last one
     * written the first rp_skip (its samples on disk but those before the checkpoint) */
    uint64_t before = 0;
    o->rp = TLC_RP_FILTER;
    o->rp_epoch = o->w_epoch;
    o->rp_min = o->w_min;
    if (!copy) {
      before = 0;
      o->rp_skip = UINT64_MAX; /* no copy of that checkpoint: all of it is taken as written */
    } else {
      if (ph && pe == o->w_epoch && pm == o->w_min)
        before += pn;
      if (blk.n > 0 && blk.epoch == o->w_epoch && blk.minute == o->w_min)
        before += c;
      o->rp_skip = o->w_n > before ? o->w_n - before : 0;
    }
  } else {
    o->rp = copy ? TLC_RP_ACCEPT : TLC_RP_DROP; /* no marks and no copy: nothing is known */
  }
  tlc_rollup_blk_fini(&blk);
  tlc_free(data);
}

int tlc__rollup_replay_keep(tlc_rollup_t *r, tlc_rollup_open_t *o, const tlc_rollup_sample_t *s) {
  int64_t m;
  (void)r;
  if (s->kind & TLC_ROLLUP_VIOL)
    return 1;
  if (o->rp == TLC_RP_ACCEPT) {
    o->rp_in++;
    return 1;
  }
  if (o->rp == TLC_RP_FILTER) {
    m = tlc_rollup_minute(s->end);
    if (s->epoch > o->rp_epoch || (s->epoch == o->rp_epoch && m > o->rp_min)) {
      o->rp_in++;
      return 1;
    }
    if (s->epoch == o->rp_epoch && m == o->rp_min) {
      if (o->rp_skip == 0) {
        o->rp_in++;
        return 1;
      }
      o->rp_skip--;
    }
  }
  o->rp_out++;
  return 0;
}

void tlc__rollup_replay_end(tlc_rollup_t *r, tlc_rollup_open_t *o) {
  tlc__rollup_count(r, &r->st.replayed, o->rp_in);
  tlc__rollup_count(r, &r->st.replay_dropped, o->rp_out);
  wlog(r, TLC_LOG_NOTICE,
       "rollup %s: the records after the checkpoint replayed: %" PRIu64 " samples counted, %" PRIu64
       " dropped (their minute written before the crash)",
       o->name, o->rp_in, o->rp_out);
  o->rp = TLC_RP_ACCEPT;
  o->rp_in = o->rp_out = 0;
}

void tlc__rollup_open_restore(tlc_rollup_t *r, tlc_rollup_open_t *o) {
  char p[1400], err[200];
  char *data = NULL;
  size_t len = 0;
  tlc_rollup_blk_t blk;
  int rc;
  open_path(r, o->name, "", p, sizeof p);
  if (tlc_file_read(p, 1u << 30, &data, &len) != 0)
    return; /* none (the usual case) */
  tlc_rollup_blk_init(&blk);
  rc = tlc_rollup_decode(&blk, data, len, NULL, err, sizeof err);
  if (rc == 0 && blk.span == 1) {
    uint64_t ns = 0;
    for (size_t i = 0; i < blk.n; i++)
      ns += blk.cells[i].d.n;
    write_blk(r, o->name, &blk, 0);
    mark_minute(r, o->name, blk.epoch, blk.minute, ns);
    hour_add(r, o->name, 0, &blk);
    tlc__rollup_count(r, &r->st.samples, ns);
    tlc__rollup_count(r, &r->st.restored, 1);
    wlog(r, TLC_LOG_NOTICE,
         "rollup %s: the open minute saved with the last checkpoint written (%" PRIu64 " samples)",
         o->name, ns);
  } else {
    wlog(r, TLC_LOG_WARN, "rollup: %s: %s (dropped)", p, rc == 0 ? "not a minute" : err);
    tlc__rollup_count(r, &r->st.blocks_refused, 1);
  }
  if (unlink(p) != 0)
    wlog(r, TLC_LOG_WARN, "rollup: cannot remove %s: %s", p, strerror(errno));
  tlc_rollup_blk_fini(&blk);
  tlc_free(data);
}

/* ---- retention ---- */

typedef struct rdir {
  char path[1400];
  int hour;
  int64_t mtime_ms;
  uint64_t bytes;
} rdir_t;

typedef struct rdirs {
  rdir_t *v;
  size_t n, cap;
} rdirs_t;

static int is_num_name(const char *s, char c) {
  if (s[0] != c || s[1] == '\0')
    return 0;
  s++;
  if (*s == '-')
    s++;
  for (; *s; s++)
    if (*s < '0' || *s > '9')
      return 0;
  return 1;
}

/* Sizes a minute or hour directory's files; mtime = the newest file's. */
static void size_dir(rdir_t *d) {
  DIR *dd = opendir(d->path);
  struct dirent *de;
  if (dd == NULL)
    return;
  while ((de = readdir(dd)) != NULL) {
    char p[1700];
    struct stat st;
    if (de->d_name[0] == '.')
      continue;
    snprintf(p, sizeof p, "%s/%s", d->path, de->d_name);
    if (lstat(p, &st) == 0 && S_ISREG(st.st_mode)) {
      int64_t mt = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
      d->bytes += (uint64_t)st.st_size;
      if (mt > d->mtime_ms)
        d->mtime_ms = mt;
    }
  }
  closedir(dd);
}

/* Collects the m/h directories under dir (a target's, or an efl source's: depth <= 3). */
static void collect(const char *dir, int depth, rdirs_t *out) {
  DIR *dd = opendir(dir);
  struct dirent *de;
  if (dd == NULL)
    return;
  while ((de = readdir(dd)) != NULL) {
    char p[1400];
    struct stat st;
    if (de->d_name[0] == '.')
      continue;
    snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
    if (lstat(p, &st) < 0 || !S_ISDIR(st.st_mode))
      continue;
    if ((is_num_name(de->d_name, 'm') || is_num_name(de->d_name, 'h')) && depth > 0) {
      if (out->n == out->cap) {
        size_t nc = out->cap ? out->cap * 2 : 64;
        rdir_t *nv = tlc_realloc(out->v, nc * sizeof(*nv));
        if (nv == NULL)
          break;
        out->v = nv;
        out->cap = nc;
      }
      rdir_t *d = &out->v[out->n++];
      memset(d, 0, sizeof(*d));
      snprintf(d->path, sizeof d->path, "%s", p);
      d->hour = de->d_name[0] == 'h';
      size_dir(d);
    } else if (depth < 3) {
      collect(p, depth + 1, out);
    }
  }
  closedir(dd);
}

static void remove_dir(tlc_rollup_t *r, const rdir_t *d, const char *why) {
  DIR *dd = opendir(d->path);
  struct dirent *de;
  if (dd != NULL) {
    while ((de = readdir(dd)) != NULL) {
      char p[1700];
      if (de->d_name[0] == '.' && (de->d_name[1] == '\0' || strcmp(de->d_name, "..") == 0))
        continue;
      snprintf(p, sizeof p, "%s/%s", d->path, de->d_name);
      (void)unlink(p);
    }
    closedir(dd);
  }
  if (rmdir(d->path) == 0) {
    wlog(r, TLC_LOG_INFO, "rollup: deleted %s (%" PRIu64 " bytes): %s", d->path, d->bytes, why);
    tlc__rollup_count(r, &r->st.dirs_deleted, 1);
  }
}

static int rdir_older(const void *pa, const void *pb) {
  const rdir_t *a = pa, *b = pb;
  if (a->hour != b->hour)
    return a->hour - b->hour; /* minutes go first */
  return a->mtime_ms < b->mtime_ms ? -1 : a->mtime_ms > b->mtime_ms;
}

static void retention(tlc_rollup_t *r, int64_t now_ms) {
  rdirs_t ds = { NULL, 0, 0 };
  uint64_t total = 0, km, kh, mb;
  uv_mutex_lock(&r->mu);
  km = r->keep_minutes_ms;
  kh = r->keep_hours_ms;
  mb = r->max_bytes;
  uv_mutex_unlock(&r->mu);
  collect(r->root, 0, &ds);
  if (ds.n > 1) /* qsort's base may not be NULL */
    qsort(ds.v, ds.n, sizeof(*ds.v), rdir_older);
  for (size_t i = 0; i < ds.n; i++) {
    rdir_t *d = &ds.v[i];
    uint64_t keep = d->hour ? kh : km;
    if (now_ms - d->mtime_ms > (int64_t)keep) {
      remove_dir(r, d, d->hour ? "older than rollup_hours" : "older than rollup_minutes");
      d->bytes = 0;
      d->path[0] = '\0';
    }
    total += d->bytes;
  }
  for (size_t i = 0; i < ds.n && total > mb; i++) {
    if (ds.v[i].path[0] == '\0')
      continue;
    total -= ds.v[i].bytes;
    remove_dir(r, &ds.v[i], "rollup_bytes reached");
  }
  uv_mutex_lock(&r->mu);
  r->st.bytes_on_disk = total;
  uv_mutex_unlock(&r->mu);
  tlc_free(ds.v);
}

/* ---- reading ---- */

typedef struct numdir {
  int64_t num;
  char name[64];
} numdir_t;

typedef struct reader {
  const tlc_rollup_q_t *q;
  tlc_rollup_res_t *res;
  size_t capsteps;
  int err;
  const numdir_t *mdays; /* reading hours: the days that have minutes (sorted), skipped */
  size_t nmdays;
  tlc_rollup_t *r; /* the module whose worker reads (its log goes through the loop), or NULL */
} reader_t;

static tlc_rollup_blk_t *step_get(reader_t *rd, int64_t minute) {
  tlc_rollup_res_t *res = rd->res;
  size_t a = 0, z = res->nsteps;
  while (a < z) {
    size_t m = a + (z - a) / 2;
    if (res->steps[m].minute < minute)
      a = m + 1;
    else
      z = m;
  }
  if (a < res->nsteps && res->steps[a].minute == minute)
    return &res->steps[a];
  if (res->nsteps == rd->capsteps) {
    size_t nc = rd->capsteps ? rd->capsteps * 2 : 64;
    tlc_rollup_blk_t *nv = tlc_realloc(res->steps, nc * sizeof(*nv));
    if (nv == NULL)
      return NULL;
    res->steps = nv;
    rd->capsteps = nc;
  }
  memmove(&res->steps[a + 1], &res->steps[a], (res->nsteps - a) * sizeof(*res->steps));
  tlc_rollup_blk_init(&res->steps[a]);
  res->steps[a].minute = minute;
  res->steps[a].span = (uint32_t)(rd->q->step_min > 0 ? rd->q->step_min : 0);
  res->nsteps++;
  return &res->steps[a];
}

/* Whether block b is in the query's range. */
static int blk_in_range(const tlc_rollup_q_t *q, const tlc_rollup_blk_t *b) {
  if (q->when == TLC_RQ_WALL)
    return (!q->has_since || b->wall_last >= q->since) &&
           (!q->has_until || b->wall_first < q->until);
  {
    /* [start, end) of the block in target ns, saturated */
    int64_t lo = b->minute, hi = b->minute + (int64_t)b->span;
    int64_t smin = q->has_since ? floor_div(q->since, TLC_ROLLUP_MINUTE_NS) : INT64_MIN;
    int64_t umin = q->has_until ? floor_div(q->until - 1, TLC_ROLLUP_MINUTE_NS) : INT64_MAX;
    return hi > smin && lo <= umin;
  }
}

static void add_blk(reader_t *rd, const tlc_rollup_blk_t *b) {
  const tlc_rollup_q_t *q = rd->q;
  int64_t m;
  tlc_rollup_blk_t *st;
  if (!blk_in_range(q, b))
    return;
  if (rd->mdays != NULL) {
    int64_t day = floor_div(b->minute, DAY_MIN);
    size_t a = 0, z = rd->nmdays;
    while (a < z) {
      size_t mid = a + (z - a) / 2;
      if (rd->mdays[mid].num < day)
        a = mid + 1;
      else
        z = mid;
    }
    if (a < rd->nmdays && rd->mdays[a].num == day)
      return; /* that day's minutes were read */
  }
  if (q->step_min <= 0)
    m = 0;
  else if (q->when == TLC_RQ_WALL)
    m = floor_div(floor_div(b->wall_first, TLC_ROLLUP_MINUTE_NS), q->step_min) * q->step_min;
  else
    m = floor_div(b->minute, q->step_min) * q->step_min;
  st = step_get(rd, m);
  if (st == NULL) {
    rd->err = TLC_ENOMEM;
    return;
  }
  if (q->has_context) {
    for (size_t i = 0; i < b->n; i++) {
      tlc_rollup_cell_t *c;
      if (b->cells[i].key.context != q->context)
        continue;
      if ((c = tlc_rollup_cell_get(st, &b->cells[i].key)) == NULL ||
          tlc_rollup_cell_merge(c, &b->cells[i]) != 0) {
        rd->err = TLC_ENOMEM;
        return;
      }
      c->key.row_kind = b->cells[i].key.row_kind;
    }
    if (st->n > 0) {
      if (st->wall_first == 0 || b->wall_first < st->wall_first)
        st->wall_first = b->wall_first;
      if (b->wall_last > st->wall_last)
        st->wall_last = b->wall_last;
    }
  } else if (tlc_rollup_blk_merge(st, b) != 0) {
    rd->err = TLC_ENOMEM;
  }
}

/* Reads every block of one file; a damaged one is skipped up to the next magic. */
static void read_file(reader_t *rd, const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  uint8_t *buf = NULL;
  size_t len = 0, off = 0;
  tlc_rollup_blk_t b;
  if (fd < 0)
    return;
  if (fstat(fd, &st) < 0 || (uint64_t)st.st_size > MAX_FILE_BYTES ||
      (buf = tlc_malloc((size_t)st.st_size + 1)) == NULL) {
    close(fd);
    return;
  }
  while (len < (size_t)st.st_size) {
    ssize_t n = read(fd, buf + len, (size_t)st.st_size - len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    len += (size_t)n;
  }
  close(fd);
  tlc_rollup_blk_init(&b);
  while (off + 4 <= len && rd->err == 0) {
    size_t used = 0;
    char why[200];
    int rc = tlc_rollup_decode(&b, buf + off, len - off, &used, why, sizeof why);
    if (rc == 0) {
      rd->res->blocks_read++;
      add_blk(rd, &b);
      off += used;
      continue;
    }
    if (rc == TLC_ENOMEM) {
      rd->err = rc;
      break;
    }
    rd->res->blocks_refused++;
    if (rd->r != NULL)
      wlog(rd->r, TLC_LOG_WARN, "rollup: %s at byte %zu: %s (skipped)", path, off, why);
    else
      tlc_log(TLC_LOG_WARN, TLC_LOGC_STORE, "rollup: %s at byte %zu: %s (skipped)", path, off, why);
    {
      uint32_t magic = TLC_ROLLUP_MAGIC;
      const uint8_t *nx = NULL;
      for (size_t k = off + 1; k + 4 <= len; k++)
        if (memcmp(buf + k, &magic, 4) == 0) {
          nx = buf + k;
          break;
        }
      if (nx == NULL)
        break;
      off = (size_t)(nx - buf);
    }
  }
  tlc_rollup_blk_fini(&b);
  tlc_free(buf);
}

/* Names of a directory's entries matching a prefix letter and a number (sorted by number). */
static int numdir_cmp(const void *pa, const void *pb) {
  const numdir_t *a = pa, *b = pb;
  return a->num < b->num ? -1 : a->num > b->num;
}

static size_t list_num(const char *dir, char c, numdir_t **out) {
  DIR *dd = opendir(dir);
  struct dirent *de;
  numdir_t *v = NULL;
  size_t n = 0, cap = 0;
  *out = NULL;
  if (dd == NULL)
    return 0;
  while ((de = readdir(dd)) != NULL) {
    if (!is_num_name(de->d_name, c) || strlen(de->d_name) >= sizeof(v->name))
      continue;
    if (n == cap) {
      size_t nc = cap ? cap * 2 : 32;
      numdir_t *nv = tlc_realloc(v, nc * sizeof(*nv));
      if (nv == NULL)
        break;
      v = nv;
      cap = nc;
    }
    v[n].num = strtoll(de->d_name + 1, NULL, 10);
    snprintf(v[n].name, sizeof v[n].name, "%s", de->d_name);
    n++;
  }
  closedir(dd);
  if (n > 1)
    qsort(v, n, sizeof(*v), numdir_cmp);
  *out = v;
  return n;
}

/* The files of one m/h directory: the area's, or every area's. */
static void read_dir(reader_t *rd, const char *dir) {
  char p[1700];
  if (!rd->q->all_handles) {
    snprintf(p, sizeof p, "%s/%" PRIu32 ".r", dir, rd->q->handle);
    read_file(rd, p);
    return;
  }
  DIR *dd = opendir(dir);
  struct dirent *de;
  if (dd == NULL)
    return;
  while ((de = readdir(dd)) != NULL && rd->err == 0) {
    size_t l = strlen(de->d_name);
    if (l < 3 || strcmp(de->d_name + l - 2, ".r") != 0)
      continue;
    snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
    read_file(rd, p);
  }
  closedir(dd);
}

/* One epoch directory: minute directories of the days in range; hours of the days that have
 * no minute directory any more. */
static void read_epoch(reader_t *rd, const char *edir) {
  const tlc_rollup_q_t *q = rd->q;
  numdir_t *md, *hd;
  size_t nm = list_num(edir, 'm', &md), nh = list_num(edir, 'h', &hd);
  int64_t dlo = INT64_MIN, dhi = INT64_MAX;
  char p[1500];
  if (q->when == TLC_RQ_TARGET) {
    if (q->has_since)
      dlo = floor_div(floor_div(q->since, TLC_ROLLUP_MINUTE_NS), DAY_MIN);
    if (q->has_until)
      dhi = floor_div(floor_div(q->until - 1, TLC_ROLLUP_MINUTE_NS), DAY_MIN);
  }
  for (size_t i = 0; i < nm && rd->err == 0; i++) {
    if (md[i].num < dlo || md[i].num > dhi)
      continue;
    snprintf(p, sizeof p, "%s/%s", edir, md[i].name);
    read_dir(rd, p);
  }
  rd->mdays = md;
  rd->nmdays = nm;
  for (size_t i = 0; i < nh && rd->err == 0; i++) {
    if (hd[i].num * HOURDIR_DAYS + HOURDIR_DAYS - 1 < dlo || hd[i].num * HOURDIR_DAYS > dhi)
      continue;
    snprintf(p, sizeof p, "%s/%s", edir, hd[i].name);
    read_dir(rd, p);
  }
  rd->mdays = NULL;
  rd->nmdays = 0;
  tlc_free(md);
  tlc_free(hd);
}

static void latest_epoch(const char *tdir, int64_t *epoch) {
  numdir_t *ed;
  size_t n = list_num(tdir, 'e', &ed);
  *epoch = n > 0 ? ed[n - 1].num : -1;
  tlc_free(ed);
}

/* tlc_rollup_read, its log through r's loop when r is not NULL (the worker). */
static void read_q(tlc_rollup_t *r, const char *state_dir, const tlc_rollup_q_t *q,
                   tlc_rollup_res_t *res) {
  reader_t rd;
  char tdir[1400], p[1500];
  memset(res, 0, sizeof(*res));
  memset(&rd, 0, sizeof rd);
  rd.q = q;
  rd.res = res;
  rd.r = r;
  if (q->target[0] == '\0' || strstr(q->target, "..") != NULL || q->target[0] == '/') {
    res->status = TLC_EINVAL;
    snprintf(res->err, sizeof res->err, "rollup: bad target name");
    return;
  }
  snprintf(tdir, sizeof tdir, "%s/.rollup/%s", state_dir, q->target);
  if (q->when == TLC_RQ_WALL) {
    numdir_t *ed;
    size_t n = list_num(tdir, 'e', &ed);
    for (size_t i = 0; i < n && rd.err == 0; i++) {
      snprintf(p, sizeof p, "%s/%s", tdir, ed[i].name);
      read_epoch(&rd, p);
    }
    tlc_free(ed);
  } else {
    int64_t e = q->epoch;
    if (e < 0)
      latest_epoch(tdir, &e);
    res->epoch = e < 0 ? 0 : (uint64_t)e;
    if (e >= 0) {
      snprintf(p, sizeof p, "%s/e%" PRId64, tdir, e);
      read_epoch(&rd, p);
    }
  }
  if (rd.err != 0) {
    tlc_rollup_res_fini(res);
    res->status = rd.err;
    snprintf(res->err, sizeof res->err, "rollup: %s reading the rollups of %.64s",
             tlc_strerror(rd.err), q->target);
  }
}

void tlc_rollup_read(const char *state_dir, const tlc_rollup_q_t *q, tlc_rollup_res_t *res) {
  read_q(NULL, state_dir, q, res);
}

/* ---- the worker ---- */

static void worker_main(void *arg) {
  tlc_rollup_t *r = arg;
  for (;;) {
    tlc_rollup_job_t *j;
    int64_t now = tlc_when_now() / 1000000;
    if (now - r->last_retention_ms >= RETENTION_MS) {
      r->last_retention_ms = now;
      retention(r, now);
    }
    uv_mutex_lock(&r->mu);
    while (r->head == NULL)
      if (uv_cond_timedwait(&r->cv, &r->mu, (uint64_t)RETENTION_MS * 1000000u) == UV_ETIMEDOUT)
        break;
    j = r->head;
    if (j != NULL) {
      r->head = j->next;
      if (r->head == NULL)
        r->tail = NULL;
    }
    uv_mutex_unlock(&r->mu);
    if (j == NULL)
      continue;
    if (j->kind == TLC_RJOB_CHUNK) {
      tlc_rollup_open_t *o = tlc__rollup_open_of(r, j->target, j->lane);
      uv_mutex_lock(&r->mu);
      r->queued -= j->nsamples;
      uv_mutex_unlock(&r->mu);
      if (o == NULL)
        tlc__rollup_count(r, &r->st.samples_dropped, j->nsamples);
      if (o != NULL) {
        o->chunk_wall0 = j->chunk_wall0;
        o->chunk_wall = j->chunk_wall;
      }
      for (size_t i = 0; o != NULL && i < j->nsamples; i++) {
        tlc_rollup_job_t *m;
        if (j->replay && !tlc__rollup_replay_keep(r, o, &j->samples[i]))
          continue;
        if (j->lane == 0) { /* in order with the sample log's blocks */
          tlc__rollup_hold(r, o, &j->samples[i]);
          continue;
        }
        m = tlc__rollup_open_add(o, &j->samples[i]);
        if (m != NULL)
          tlc__rollup_minute(r, m);
      }
      if (o != NULL && j->seal != TLC_RSEAL_NO)
        tlc__rollup_held_flush(r, o);
      if (o != NULL && j->seal == TLC_RSEAL_WRITE) {
        tlc_rollup_job_t *m = tlc__rollup_open_seal(o);
        if (m != NULL)
          tlc__rollup_minute(r, m);
      } else if (o != NULL && j->seal == TLC_RSEAL_SAVE) {
        tlc__rollup_open_save(r, o, j->gen);
      }
      tlc__rollup_chunk_put(r, j->samples);
      j->samples = NULL;
      job_free(j);
    } else if (j->kind == TLC_RJOB_BLOCK) {
      tlc_rollup_open_t *o = tlc__rollup_open_of(r, j->target, j->lane);
      uv_mutex_lock(&r->mu);
      r->queued -= TLC_SLOG_BLOCK;
      uv_mutex_unlock(&r->mu);
      if (o == NULL) {
        tlc__rollup_count(r, &r->st.samples_dropped, tlc_engine_slog_samples(j->block, j->nblock));
      } else {
        o->chunk_wall0 = j->chunk_wall0;
        o->chunk_wall = j->chunk_wall;
        tlc__rollup_open_block(r, o, j->block, j->nblock, j->replay);
      }
      tlc__rollup_bjob_put(r, j);
    } else if (j->kind == TLC_RJOB_RESTORE) {
      tlc_rollup_open_t *o = tlc__rollup_open_of(r, j->target, 0);
      if (o != NULL) {
        mark_load(r, o); /* what an earlier run wrote, before anything of this one */
        tlc__rollup_open_restore(r, o);
      }
      job_free(j);
    } else if (j->kind == TLC_RJOB_POS || j->kind == TLC_RJOB_REPLAY ||
               j->kind == TLC_RJOB_REPLAYED) {
      tlc_rollup_open_t *o = tlc__rollup_open_of(r, j->target, 0);
      if (o != NULL && j->kind != TLC_RJOB_POS) /* a chunk was all replayed or all live */
        tlc__rollup_held_flush(r, o);
      if (o != NULL && j->kind == TLC_RJOB_POS)
        tlc__rollup_open_pos(r, o, j->gen, &j->pos);
      else if (o != NULL && j->kind == TLC_RJOB_REPLAY)
        tlc__rollup_replay_begin(r, o, &j->pos);
      else if (o != NULL)
        tlc__rollup_replay_end(r, o);
      job_free(j);
    } else if (j->kind == TLC_RJOB_QUERY) {
      for (size_t i = 0; i < j->nq; i++)
        read_q(r, r->state_dir, &j->q[i], &j->res[i]);
      if (j->ans.encode != NULL) {
        j->ans.encode(j->ans.ctx, j->q, j->res, j->nq);
        /* the answer is encoded: its steps are freed here, not on the loop (a week by the
         * minute is 10,080 blocks, about 13 M instructions of free: bench/RESULTS.md
         * "Rollups", icount_trend_loop.py) */
        for (size_t i = 0; i < j->nq; i++)
          tlc_rollup_res_fini(&j->res[i]);
      }
      uv_mutex_lock(&r->mu);
      r->st.queries++;
      r->st.blocks_refused += j->res[0].blocks_refused + j->res[1].blocks_refused;
      j->next = NULL;
      if (r->done_tail)
        r->done_tail->next = j;
      else
        r->done_head = j;
      r->done_tail = j;
      uv_mutex_unlock(&r->mu);
      uv_async_send(&r->done_async);
    } else {
      for (size_t i = 0; i < r->nopens; i++) { /* all written, then freed (see saved_drop) */
        tlc_rollup_job_t *m;
        tlc__rollup_held_flush(r, r->opens[i]);
        m = tlc__rollup_open_seal(r->opens[i]);
        if (m != NULL)
          tlc__rollup_minute(r, m);
      }
      for (size_t i = 0; i < r->nhours; i++) /* before the opens go: they keep the marks */
        hour_flush(r, &r->hours[i]);
      for (size_t i = 0; i < r->nopens; i++)
        tlc__rollup_open_free(r->opens[i]);
      r->nopens = 0;
      job_free(j);
      return;
    }
  }
}

static void on_done(uv_async_t *h) {
  tlc_rollup_t *r = h->data;
  tlc_rollup_job_t *j;
  char(*lines)[240] = NULL;
  int levels[TLC_ROLLUP_WLOG];
  size_t nl = 0;
  uint64_t dropped = 0;
  uv_mutex_lock(&r->mu);
  j = r->done_head;
  r->done_head = r->done_tail = NULL;
  if (r->wlog_n > 0 && (lines = tlc_malloc(r->wlog_n * sizeof(*lines))) != NULL) {
    nl = r->wlog_n;
    memcpy(lines, r->wlog_line, nl * sizeof(*lines));
    memcpy(levels, r->wlog_level, nl * sizeof(levels[0]));
    dropped = r->wlog_dropped;
    r->wlog_n = 0;
    r->wlog_dropped = 0;
  }
  uv_mutex_unlock(&r->mu);
  for (size_t i = 0; i < nl; i++)
    tlc_log(levels[i], TLC_LOGC_STORE, "%s", lines[i]);
  if (dropped > 0)
    tlc_log(TLC_LOG_WARN, TLC_LOGC_STORE, "rollup: %" PRIu64 " more log lines not kept", dropped);
  tlc_free(lines);
  while (j != NULL) {
    tlc_rollup_job_t *nx = j->next;
    if (!j->cancelled && j->cb != NULL)
      j->cb(j->ud, j->res, j->nq);
    else if (j->ans.free != NULL)
      j->ans.free(j->ans.ctx);
    job_free(j);
    j = nx;
  }
}

int tlc_rollup_new(uv_loop_t *loop, const tlc_rollup_opts_t *o, tlc_rollup_t **out) {
  tlc_rollup_t *r;
  size_t l;
  *out = NULL;
  if (o == NULL || o->state_dir == NULL || o->state_dir[0] == '\0')
    return TLC_EINVAL;
  r = tlc_calloc(1, sizeof(*r));
  if (r == NULL)
    return TLC_ENOMEM;
  l = strlen(o->state_dir);
  r->loop = loop;
  r->state_dir = tlc_strndup(o->state_dir, l);
  r->root = tlc_malloc(l + 16);
  if (r->state_dir == NULL || r->root == NULL) {
    tlc_free(r->state_dir);
    tlc_free(r->root);
    tlc_free(r);
    return TLC_ENOMEM;
  }
  snprintf(r->root, l + 16, "%s/.rollup", o->state_dir);
  tlc_rollup_set_budget(r, o->keep_minutes_ms, o->keep_hours_ms, o->max_bytes);
  uv_mutex_init(&r->mu);
  uv_cond_init(&r->cv);
  uv_async_init(loop, &r->done_async, on_done);
  r->done_async.data = r;
  if (uv_thread_create(&r->thread, worker_main, r) != 0) {
    uv_close((uv_handle_t *)&r->done_async, NULL);
    /* the handle is closed on the next loop turn: r must outlive it */
    r->stopping = 1;
    *out = NULL;
    return TLC_ENOMEM;
  }
  r->started = 1;
  *out = r;
  return 0;
}

void tlc_rollup_set_budget(tlc_rollup_t *r, uint64_t keep_minutes_ms, uint64_t keep_hours_ms,
                           uint64_t max_bytes) {
  if (r->started)
    uv_mutex_lock(&r->mu);
  r->keep_minutes_ms = keep_minutes_ms ? keep_minutes_ms : 14ull * 86400000ull;
  r->keep_hours_ms = keep_hours_ms ? keep_hours_ms : 400ull * 86400000ull;
  r->max_bytes = max_bytes ? max_bytes : 1ull << 30;
  if (r->started)
    uv_mutex_unlock(&r->mu);
}

int tlc_rollup_exists(tlc_rollup_t *r, const char *name) {
  char path[1400];
  struct stat sb;
  snprintf(path, sizeof path, "%s/%s", r->root, name);
  return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

void tlc_rollup_get_stats(tlc_rollup_t *r, tlc_rollup_stats_t *out) {
  uv_mutex_lock(&r->mu);
  *out = r->st;
  uv_mutex_unlock(&r->mu);
}

int tlc_rollup_submit(tlc_rollup_t *r, tlc_rollup_acc_t *const *accs, const tlc_rollup_q_t *q,
                      size_t nq, const tlc_rollup_ans_t *ans, tlc_rollup_cb cb, void *ud,
                      tlc_rollup_job_t **job) {
  tlc_rollup_job_t *j;
  if (job != NULL)
    *job = NULL;
  if (r->stopping || nq < 1 || nq > 2)
    return TLC_EINVAL;
  j = tlc_calloc(1, sizeof(*j));
  if (j == NULL)
    return TLC_ENOMEM;
  j->kind = TLC_RJOB_QUERY;
  memcpy(j->q, q, nq * sizeof(*q));
  j->nq = nq;
  if (ans != NULL)
    j->ans = *ans;
  j->cb = cb;
  j->ud = ud;
  for (size_t i = 0; accs != NULL && i < nq; i++)
    if (accs[i] != NULL)
      tlc_rollup_acc_seal(accs[i]);
  tlc__rollup_push(r, j);
  if (job != NULL)
    *job = j;
  return 0;
}

void tlc_rollup_cancel(tlc_rollup_job_t *job) {
  if (job != NULL)
    job->cancelled = 1; /* read by on_done, on the loop thread as this */
}

static void on_closed(uv_handle_t *h) {
  tlc_rollup_t *r = h->data;
  while (r->npool > 0)
    tlc_free(r->pool[--r->npool]);
  while (r->nbpool > 0)
    tlc_free(r->bpool[--r->nbpool]);
  while (r->njpool > 0)
    job_free(r->jpool[--r->njpool]);
  uv_mutex_destroy(&r->mu);
  uv_cond_destroy(&r->cv);
  tlc_free(r->state_dir);
  tlc_free(r->root);
  tlc_free(r);
}

void tlc_rollup_close(tlc_rollup_t *r) {
  tlc_rollup_job_t *j;
  if (r == NULL)
    return;
  r->stopping = 1;
  j = tlc_calloc(1, sizeof(*j));
  if (j != NULL) {
    j->kind = TLC_RJOB_STOP;
    tlc__rollup_push(r, j);
  } else {
    uv_mutex_lock(&r->mu);
    r->head = r->tail = NULL; /* cannot happen in practice: the thread is then left waiting */
    uv_mutex_unlock(&r->mu);
  }
  uv_thread_join(&r->thread);
  /* queries answered but not yet delivered: their requesters get them now */
  on_done(&r->done_async);
  for (size_t i = 0; i < r->nhours; i++) {
    tlc_rollup_blk_fini(&r->hours[i].blk);
    tlc_free(r->hours[i].target);
  }
  tlc_free(r->hours);
  tlc_free(r->opens);
  uv_close((uv_handle_t *)&r->done_async, on_closed);
}
