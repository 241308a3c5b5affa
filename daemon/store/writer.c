/* writer.c - the storage module's writer thread: commands in order, appends, rotation, sync, disk
 * full (see the design note in store.c).
 */
#include "store/store.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/log_level.h"
#include "formats/bin1x.h"
#include "formats/dec.h"
#include "formats/evlog.h"
#include "store/seg/iofault.h"
#include "store/seg/segread.h"
#include "store/store-int.h"

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
#include <zstd.h>

/* ---- writer: segments ---- */

static void w_retention(tlc_store_t *s) {
  tlc__store_retention_pass(s);
  s->w.next_retention = tlc__store_mono(s) + s->o.retention_interval_ms * 1000000;
}

/* highest sequence used in a target directory (names of ours only) */
static uint64_t dir_max_seq(const char *dir) {
  uint64_t mx = 0;
  DIR *d = opendir(dir);
  if (!d)
    return 0;
  struct dirent *e;
  unsigned long guard = 0;
  while ((e = readdir(d)) != NULL && guard++ < 10000000ul) {
    tlc_segname_t sn;
    if (tlc__segname_parse(e->d_name, &sn) != TLC_SK_NONE && sn.seq > mx)
      mx = sn.seq;
  }
  closedir(d);
  return mx;
}

static void w_count_drop(tlc_store_t *s, tlc_store_target_t *t, int why, uint64_t rec,
                         uint64_t bytes) {
  uv_mutex_lock(&s->mu);
  if (why == 1) {
    s->c.dropped_disk_full_records += rec;
    s->c.dropped_disk_full_bytes += bytes;
  } else {
    s->c.dropped_io_error_records += rec;
    s->c.dropped_io_error_bytes += bytes;
  }
  t->c.dropped_records += rec;
  t->c.dropped_bytes += bytes;
  uv_mutex_unlock(&s->mu);
}

static void w_add_gap(tlc_store_target_t *t, const char *reason, uint64_t count) {
  if (t->seg.fd >= 0) {
    tlc__manifest_add_gap(&t->seg.m, reason, count);
    return;
  }
  if (t->npg > 0 && strcmp(t->pg[t->npg - 1].reason, reason) == 0) {
    t->pg[t->npg - 1].count += count;
    return;
  }
  if (t->npg == PGAP_MAX) {
    /* full: one entry per reason (at its first place), so every reason's count stays right */
    size_t n = 0;
    for (size_t i = 0; i < t->npg; i++) {
      size_t j = 0;
      while (j < n && strcmp(t->pg[j].reason, t->pg[i].reason) != 0)
        j++;
      if (j < n)
        t->pg[j].count += t->pg[i].count;
      else
        t->pg[n++] = t->pg[i];
    }
    t->npg = n;
    for (size_t j = 0; j < n; j++)
      if (strcmp(t->pg[j].reason, reason) == 0) {
        t->pg[j].count += count;
        return;
      }
    if (n == PGAP_MAX) {
      t->pg[PGAP_MAX - 1].count += count; /* more distinct reasons than tlcapd has */
      return;
    }
  }
  snprintf(t->pg[t->npg].reason, sizeof t->pg[0].reason, "%s", reason);
  t->pg[t->npg].count = count;
  t->npg++;
}

static void w_disk_full(tlc_store_t *s, tlc_store_target_t *t, int rc) {
  int64_t now = tlc__store_mono(s);
  if (!s->w.disk_full) {
    s->w.disk_full = 1;
    LOCKED(s, s->c.disk_full = 1; s->c.disk_full_events++);
    tlc__store_wevent(s, TLC_SEV_DISK_FULL, t->name, t->dir, 0, 0);
    s->w.next_probe = now + s->o.probe_interval_ms * 1000000;
    w_retention(s); /* may free space at once; the probe decides when to resume */
  }
  if (s->w.df_log_last == 0 || now - s->w.df_log_last >= DISKFULL_LOG_NS) {
    tlc__store_wlog(
        s, TLC_LOG_ERR,
        "DISK FULL (%s) writing %s: capture paused, records are dropped and counted until "
        "space returns (%" PRIu64 " similar messages suppressed)",
        tlc_strerror(rc), t->name, s->w.df_suppressed);
    s->w.df_log_last = now;
    s->w.df_suppressed = 0;
  } else {
    s->w.df_suppressed++;
  }
}

/* writer: waits until at most `n` seal jobs are in flight (the sealer signals cv per job) */
static void w_wait_sealer(tlc_store_t *s, uint32_t n) {
  uv_mutex_lock(&s->mu);
  if (s->sealing > n)
    s->c.seal_waits++;
  while (s->sealing > n)
    uv_cond_wait(&s->cv, &s->mu);
  uv_mutex_unlock(&s->mu);
}

/* Closes the target's open segment: hands it to the sealer (waiting for room when max_sealing
 * segments are in flight); the next record opens a new segment. */
static void w_seal(tlc_store_t *s, tlc_store_target_t *t, int reason) {
  if (t->seg.fd < 0)
    return;
  int64_t now = tlc__store_wall(s);
  t->last_valid = 1;
  t->last_seq = t->seg.seq;
  t->last_bytes = t->seg.m.bytes;
  LOCKED(s, t->c.segment_seq = 0; t->c.segment_bytes = 0; t->c.durable_bytes = 0);
  sjob_t *j = tlc_calloc(1, sizeof *j);
  if (!j) {
    /* out of memory: seal here, after the sealer's jobs (a target's seals stay in order) */
    w_wait_sealer(s, 0);
    tlc__store_seal_now(s, &t->seg, reason, now, t->wmap, &t->tc, NULL);
    return;
  }
  w_wait_sealer(s, s->o.max_sealing - 1);
  j->kind = J_SEAL;
  tlc__seg_move(&j->seg, &t->seg);
  j->reason = reason;
  j->wall_ns = now;
  j->map = tlc__store_tmap_ref(s, t->wmap);
  j->tc = t->tc;
  tlc__store_push_job(s, j);
}

/* writer: hands the exports recovery deferred to the sealer: those of target t's name, with t's
 * settings (C_RECEXPORT, after its first configuration), or every one left, without settings
 * (t NULL: shutdown) */
static void w_release_rx(tlc_store_t *s, tlc_store_target_t *t) {
  size_t n = 0;
  pend_t *p, *nx;
  for (p = TAILQ_FIRST(&s->w.rx); p; p = nx) {
    nx = TAILQ_NEXT(p, link);
    sjob_t *j = !t || strcmp(p->target, t->name) == 0 ? tlc_calloc(1, sizeof *j) : NULL;
    if (!j) /* another target's (or no memory: at shutdown, or the next start) */
      continue;
    TAILQ_REMOVE(&s->w.rx, p, link);
    s->w.nrx--;
    if (t) {
      p->map = tlc__store_tmap_ref(s, t->wmap);
      p->tc = t->tc;
    }
    j->kind = J_EXPORT;
    j->p = p;
    tlc__store_push_job(s, j);
    n++;
  }
  if (n > 0 && t)
    tlc__store_wlog(s, TLC_LOG_INFO,
                    "%s: exporting %zu segment(s) recovered at start with the target's settings",
                    t->name, n);
  else if (n > 0)
    tlc__store_wlog(
        s, TLC_LOG_NOTICE,
        "exporting %zu segment(s) recovered at start without target settings (no target of "
        "that name was configured)",
        n);
}

/* keep_skipped, writer: bytes the segment does not hold, into <data>.skipped of the open segment
 * (or kept in memory for the next one), at most keep_skipped per segment; what does not fit or
 * cannot be written is counted and recorded as a `skipped_unkept` gap. */
static void w_skip(tlc_store_t *s, tlc_store_target_t *t, const uint8_t *buf, size_t len,
                   uint64_t unkept) {
  uint64_t keep = s->o.keep_skipped, kept = 0;
  if (len > 0 && t->seg.fd >= 0 && !s->w.disk_full) {
    int64_t w =
        tlc__seg_skipped(&t->seg, buf, len, t->seg.sk_bytes < keep ? keep - t->seg.sk_bytes : 0);
    kept = w > 0 ? (uint64_t)w : 0;
  } else if (len > 0 && t->seg.fd < 0) {
    size_t room = keep > t->skpend_len ? (size_t)(keep - t->skpend_len) : 0;
    size_t k = len < room ? len : room;
    uint8_t *nb = k > 0 ? tlc_realloc(t->skpend, t->skpend_len + k) : NULL;
    if (nb) {
      t->skpend = nb;
      memcpy(nb + t->skpend_len, buf, k);
      t->skpend_len += k;
      kept = k;
    }
  }
  unkept += len - kept;
  if (unkept > 0)
    w_add_gap(t, "skipped_unkept", unkept);
  LOCKED(s, s->c.skipped_kept_bytes += (t->seg.fd >= 0 ? kept : 0);
         s->c.skipped_unkept_bytes += unkept);
}

/* The target's next segment sequence, learnt once: one past the highest of its directory and
 * of the catalogue (writer thread). */
static void learn_next_seq(tlc_store_t *s, tlc_store_target_t *t) {
  if (t->seq_known)
    return;
  {
    uint64_t mx = dir_max_seq(t->dir);
    uv_mutex_lock(&s->cat.mu);
    for (size_t i = 0; i < s->cat.n; i++)
      if (strcmp(s->cat.v[i].target, t->name) == 0 && s->cat.v[i].seq > mx)
        mx = s->cat.v[i].seq;
    uv_mutex_unlock(&s->cat.mu);
    t->next_seq = mx + 1;
    t->seq_known = 1;
  }
}

static int w_open_seg(tlc_store_t *s, tlc_store_target_t *t) {
  int rc = tlc__store_ensure_dirs(t->dir, strlen(s->state_dir));
  if (rc < 0)
    return rc;
  learn_next_seq(s, t);
  for (int tries = 0; tries < 100; tries++) {
    rc = tlc__seg_open(&t->seg, t->dir, t->name, t->format, t->tc.main_export == TLC_MAIN_XML,
                       t->next_seq++, tlc__store_wall(s), tlc__store_mono(s), s->o.index_interval);
    if (rc != -EEXIST)
      break;
  }
  if (rc < 0)
    return rc;
  t->seg.max_block = s->o.max_block;
  for (size_t i = 0; i < t->npg; i++)
    tlc__manifest_add_gap(&t->seg.m, t->pg[i].reason, t->pg[i].count);
  t->npg = 0;
  if (t->skpend_len > 0) {
    /* skipped bytes that came while no segment was open belong to this one */
    int64_t w = tlc__seg_skipped(&t->seg, t->skpend, t->skpend_len, s->o.keep_skipped);
    uint64_t kept = w > 0 ? (uint64_t)w : 0;
    if (kept < t->skpend_len)
      tlc__manifest_add_gap(&t->seg.m, "skipped_unkept", t->skpend_len - kept);
    LOCKED(s, s->c.skipped_kept_bytes += kept; s->c.skipped_unkept_bytes += t->skpend_len - kept);
    t->skpend_len = 0;
  }
  LOCKED(s, s->c.segments_opened++; t->c.segment_seq = t->seg.seq; t->c.segment_bytes = 0;
         t->c.durable_bytes = 0);
  return 0;
}

static void w_sync_policy(tlc_store_t *s, tlc_store_target_t *t, int64_t now) {
  if (t->seg.fd < 0 || s->o.sync_mode != TLC_SYNC_PERIODIC || t->seg.since_sync == 0)
    return;
  int due =
      (s->o.sync_bytes > 0 && t->seg.since_sync >= s->o.sync_bytes) ||
      (s->o.sync_interval_ms > 0 && now - t->seg.last_sync_mono >= s->o.sync_interval_ms * 1000000);
  if (!due)
    return;
  int rc = tlc__seg_sync(&t->seg, now);
  if (rc < 0) {
    /* R5: never retried; the file is suspect: seal it and start a new one */
    LOCKED(s, s->c.io_errors++; s->c.fsync_errors++);
    tlc__store_wlog(s, TLC_LOG_ERR,
                    "%s: fdatasync of %s/%s.part failed (%s): sealing it as suspect and rotating",
                    t->name, t->dir, t->seg.data, tlc_strerror(rc));
    w_seal(s, t, TLC_ROT_IO_ERROR);
    return;
  }
  LOCKED(s, t->c.durable_bytes = t->seg.durable);
}

/* appends the n whole blocks buf[0..len) described by recs to the open segment; returns 0, or
 * the error after counting drops */
static int w_append(tlc_store_t *s, tlc_store_target_t *t, const uint8_t *buf, size_t len,
                    const tlc_rec_t *recs, size_t n, int64_t wall) {
  uint64_t wrec, wbytes;
  int rc;
  tlc__seg_wall(&t->seg, wall);
  rc = tlc__seg_append_recs(&t->seg, buf, len, recs, n, &wrec, &wbytes);
  LOCKED(s, s->c.records_written += wrec; s->c.bytes_written += wbytes;
         t->c.records_written += wrec; t->c.bytes_written += wbytes;
         t->c.segment_bytes = t->seg.m.bytes);
  if (rc == 0)
    return 0;
  uint64_t lost = n - wrec;
  if (tlc__store_is_nospace(rc)) {
    w_count_drop(s, t, 1, lost, len - wbytes);
    t->pause_rec += lost;
    w_disk_full(s, t, rc);
  } else {
    w_count_drop(s, t, 2, lost, len - wbytes);
    tlc__manifest_add_gap(&t->seg.m, "io_error", lost);
    LOCKED(s, s->c.io_errors++);
    t->seg.suspect = 1;
    tlc__store_wlog(s, TLC_LOG_ERR,
                    "%s: write to %s/%s.part failed (%s): %" PRIu64 " records dropped; rotating",
                    t->name, t->dir, t->seg.data, tlc_strerror(rc), lost);
    w_seal(s, t, TLC_ROT_IO_ERROR);
  }
  return rc;
}

/* evlog blocks with the lengths, times and item counts the loop found (recs[0..nrec)): no
 * scan; a size rotation cuts between blocks */
static void w_data(tlc_store_t *s, tlc_store_target_t *t, const uint8_t *buf, size_t len,
                   uint64_t nrec, const tlc_rec_t *recs) {
  if (s->w.disk_full) {
    w_count_drop(s, t, 1, nrec, len);
    t->pause_rec += nrec;
    return;
  }
  uint64_t maxseg = s->o.max_segment_bytes;
  size_t pos = 0, run = 0, i = 0, i0 = 0;
  int64_t wall = tlc__store_wall(s); /* their arrival, for the arrival index */
  while (i < nrec) {
    const tlc_rec_t *r = &recs[i];
    if (t->seg.fd < 0) {
      int rc = w_open_seg(s, t);
      if (rc < 0) {
        uint64_t lost = nrec - i;
        if (tlc__store_is_nospace(rc)) {
          w_count_drop(s, t, 1, lost, len - pos);
          t->pause_rec += lost;
          w_disk_full(s, t, rc);
        } else {
          w_count_drop(s, t, 2, lost, len - pos);
          w_add_gap(t, "io_error", lost);
          LOCKED(s, s->c.io_errors++);
          tlc__store_wlog(s, TLC_LOG_ERR,
                          "%s: cannot open a segment in %s: %s; %" PRIu64 " records dropped",
                          t->name, t->dir, tlc_strerror(rc), lost);
        }
        return;
      }
    }
    uint64_t cur = t->seg.m.bytes + (pos - run);
    if (cur > 0 && cur + r->len > maxseg) {
      int arc = pos > run ? w_append(s, t, buf + run, pos - run, recs + i0, i - i0, wall) : 0;
      if (arc < 0) {
        /* w_append counted what it could not write; the rest of the chunk is lost too */
        uint64_t lost = nrec - i;
        w_count_drop(s, t, tlc__store_is_nospace(arc) ? 1 : 2, lost, len - pos);
        if (tlc__store_is_nospace(arc))
          t->pause_rec += lost;
        else
          w_add_gap(t, "io_error", lost);
        return;
      }
      run = pos;
      i0 = i;
      w_seal(s, t, TLC_ROT_SIZE);
      continue; /* reopens at the top */
    }
    pos += r->len;
    i++;
  }
  if (pos > run && t->seg.fd >= 0 &&
      w_append(s, t, buf + run, pos - run, recs + i0, i - i0, wall) < 0)
    return;
  w_sync_policy(s, t, tlc__store_mono(s));
}

/* bin1x records with their times (tlc_store_write_chunk): no scan; a size rotation cuts at a
 * multiple of 24 bytes */
static void w_data_fixed(tlc_store_t *s, tlc_store_target_t *t, const uint8_t *buf, size_t nrec,
                         const int64_t *times) {
  const size_t R = TLC_BIN1X_RECORD;
  if (s->w.disk_full) {
    w_count_drop(s, t, 1, nrec, nrec * R);
    t->pause_rec += nrec;
    return;
  }
  uint64_t maxseg = s->o.max_segment_bytes;
  size_t pos = 0;
  int64_t wall = tlc__store_wall(s); /* their arrival, for the arrival index */
  while (pos < nrec) {
    if (t->seg.fd < 0) {
      int rc = w_open_seg(s, t);
      if (rc < 0) {
        uint64_t lost = nrec - pos;
        if (tlc__store_is_nospace(rc)) {
          w_count_drop(s, t, 1, lost, lost * R);
          t->pause_rec += lost;
          w_disk_full(s, t, rc);
        } else {
          w_count_drop(s, t, 2, lost, lost * R);
          w_add_gap(t, "io_error", lost);
          LOCKED(s, s->c.io_errors++);
          tlc__store_wlog(s, TLC_LOG_ERR,
                          "%s: cannot open a segment in %s: %s; %" PRIu64 " records dropped",
                          t->name, t->dir, tlc_strerror(rc), lost);
        }
        return;
      }
    }
    uint64_t cur = t->seg.m.bytes;
    size_t k = nrec - pos;
    if (cur + k * R > maxseg) {
      uint64_t room = maxseg > cur ? (maxseg - cur) / R : 0;
      k = room > 0 ? (size_t)room : cur == 0 ? 1 : 0;
    }
    if (k > 0) {
      uint64_t wrec, wbytes;
      tlc__seg_wall(&t->seg, wall);
      int rc = tlc__seg_append_fixed(&t->seg, buf + pos * R, k, times + pos, &wrec, &wbytes);
      LOCKED(s, s->c.records_written += wrec; s->c.bytes_written += wbytes;
             t->c.records_written += wrec; t->c.bytes_written += wbytes;
             t->c.segment_bytes = t->seg.m.bytes);
      if (rc < 0) {
        uint64_t lost = nrec - pos - wrec; /* this write's rest and the chunk's */
        if (tlc__store_is_nospace(rc)) {
          w_count_drop(s, t, 1, lost, lost * R);
          t->pause_rec += lost;
          w_disk_full(s, t, rc);
        } else {
          w_count_drop(s, t, 2, lost, lost * R);
          tlc__manifest_add_gap(&t->seg.m, "io_error", lost);
          LOCKED(s, s->c.io_errors++);
          t->seg.suspect = 1;
          tlc__store_wlog(s, TLC_LOG_ERR,
                          "%s: write to %s/%s.part failed (%s): %" PRIu64
                          " records dropped; rotating",
                          t->name, t->dir, t->seg.data, tlc_strerror(rc), lost);
          w_seal(s, t, TLC_ROT_IO_ERROR);
        }
        return;
      }
      pos += k;
    }
    if (pos < nrec)
      w_seal(s, t, TLC_ROT_SIZE); /* reopens at the top */
  }
  w_sync_policy(s, t, tlc__store_mono(s));
}

static void w_probe(tlc_store_t *s, int64_t now) {
  if (!s->w.disk_full || now < s->w.next_probe)
    return;
  s->w.next_probe = now + s->o.probe_interval_ms * 1000000;
  w_retention(s);
  tlc_io_space_t sp;
  int rc = tlc_io->statvfs(s->state_dir, &sp);
  if (rc == 0 && (sp.avail_bytes < s->o.resume_free_bytes || sp.avail_inodes < 4))
    return;
  s->w.disk_full = 0;
  uint64_t lost = 0;
  for (tlc_store_target_t *t = TAILQ_FIRST(&s->w.wlist); t; t = TAILQ_NEXT(t, wlink)) {
    if (t->pause_rec > 0)
      w_add_gap(t, "disk_full", t->pause_rec);
    lost += t->pause_rec;
    t->pause_rec = 0;
  }
  LOCKED(s, s->c.disk_full = 0);
  sjob_t *j = tlc_calloc(1, sizeof *j);
  if (j) { /* the sealer writes the manifests it could not write */
    j->kind = J_RETRY;
    tlc__store_push_job(s, j);
  }
  tlc__store_wlog(s, TLC_LOG_NOTICE,
                  "disk space is back: capture resumed (%" PRIu64 " records were dropped)", lost);
  tlc__store_wevent(s, TLC_SEV_RESUMED, NULL, s->state_dir, 0, 0);
  s->w.df_log_last = 0;
}

static void w_tick(tlc_store_t *s) {
  int64_t now = tlc__store_mono(s);
  if (now < s->w.next_tick)
    return;
  s->w.next_tick = now + TICK_NS / 2;
  for (tlc_store_target_t *t = TAILQ_FIRST(&s->w.wlist); t; t = TAILQ_NEXT(t, wlink)) {
    if (t->seg.fd >= 0 && s->o.max_segment_age_ms > 0 &&
        now - t->seg.opened_mono >= s->o.max_segment_age_ms * 1000000)
      w_seal(s, t, TLC_ROT_AGE);
    w_sync_policy(s, t, now);
  }
  w_probe(s, now);
  if (now >= s->w.next_retention)
    w_retention(s);
}

/* The storage position of everything queued before a mark: in the open segment, or (none open)
 * at the start of the next one, whose sequence is fixed now. Disconnect gaps recorded there so
 * far are counted, so that a replay from the position skips exactly them. */
static uint64_t disc_count(const tlc_gap_t *g, size_t n) {
  uint64_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (strcmp(g[i].reason, "disconnect") == 0)
      k += g[i].count;
  return k;
}

static void w_mark(tlc_store_t *s, tlc_store_target_t *t, cmd_t *c) {
  res_t *r = tlc_calloc(1, sizeof *r);
  if (!r)
    return; /* the caller's mark is lost: it counts a checkpoint without a position */
  r->type = R_MARK;
  r->mcb = c->mcb;
  r->ud = c->ud;
  if (t->seg.fd >= 0) {
    r->pos.seq = t->seg.seq;
    r->pos.bytes = t->seg.m.bytes;
    r->pos.disconnects = disc_count(t->seg.m.gaps, t->seg.m.ngaps);
    r->pos.prev_valid = t->last_valid && t->last_seq < t->seg.seq;
  } else {
    learn_next_seq(s, t);
    r->pos.seq = t->next_seq;
    r->pos.bytes = 0;
    for (size_t i = 0; i < t->npg; i++)
      if (strcmp(t->pg[i].reason, "disconnect") == 0)
        r->pos.disconnects += t->pg[i].count;
    r->pos.prev_valid = t->last_valid && t->last_seq < r->pos.seq;
  }
  if (r->pos.prev_valid) {
    r->pos.prev_seq = t->last_seq;
    r->pos.prev_bytes = t->last_bytes;
  }
  r->pos.valid = 1;
  tlc__store_push_res(s, r);
}

static void w_cmd(tlc_store_t *s, cmd_t *c) {
  tlc_store_target_t *t = c->t;
  switch (c->type) {
  case C_OPEN:
    TAILQ_INSERT_HEAD(&s->w.wlist, t, wlink);
    break;
  case C_DATA:
    if (c->times)
      w_data_fixed(s, t, c->buf, (size_t)c->nrec, c->times);
    else
      w_data(s, t, c->buf, c->len, c->nrec, c->recs);
    break;
  case C_GAP:
    w_add_gap(t, c->reason, c->count);
    break;
  case C_ROTATE:
    w_seal(s, t, c->rot);
    break;
  case C_CLOSE: {
    w_seal(s, t, TLC_ROT_SHUTDOWN);
    TAILQ_REMOVE(&s->w.wlist, t, wlink);
    res_t *r = tlc_calloc(1, sizeof *r);
    if (r) { /* without it the target leaks until tlc_store_close frees the rest */
      r->type = R_CLOSED;
      r->t = t;
      tlc__store_push_res(s, r);
    }
    break;
  }
  case C_RETENTION:
    w_retention(s);
    break;
  case C_SETMAP:
    tlc__store_tmap_unref(s, t->wmap);
    t->wmap = c->map; /* the command's reference */
    c->map = NULL;
    break;
  case C_SETCONF:
    t->tc = c->tc;
    break;
  case C_SKIP:
    w_skip(s, t, c->buf, c->len, c->count);
    break;
  case C_RECEXPORT:
    if (!TAILQ_EMPTY(&s->w.rx))
      w_release_rx(s, t);
    break;
  case C_MARK:
    w_mark(s, t, c);
    break;
  case C_BARRIER:
  case C_BARRIER_WRITTEN: {
    res_t *r = tlc_calloc(1, sizeof *r);
    if (!r)
      break;
    r->type = R_BARRIER;
    r->cb = c->cb;
    r->ud = c->ud;
    /* written: answered now; else through the sealer's queue, answered once the seals before
     * it are done too */
    sjob_t *j = c->type == C_BARRIER ? tlc_calloc(1, sizeof *j) : NULL;
    if (j) {
      j->kind = J_BARRIER;
      j->res = r;
      tlc__store_push_job(s, j);
      break;
    }
    if (c->type == C_BARRIER) { /* no memory for a job: wait for the seals and exports here */
      w_wait_sealer(s, 0);
      tlc__store_wait_exports(s);
    }
    tlc__store_push_res(s, r);
    break;
  }
  case C_RECONF: {
    tlc_store_opts_t *n = c->conf;
    uv_mutex_lock(&s->mu); /* the sealer reads the retention budgets */
    s->o.max_segment_bytes = n->max_segment_bytes;
    s->o.max_segment_age_ms = n->max_segment_age_ms;
    s->o.max_total_bytes = n->max_total_bytes;
    s->o.max_target_bytes = n->max_target_bytes;
    s->o.max_segments = n->max_segments;
    s->o.max_age_ms = n->max_age_ms;
    s->o.min_free_bytes = n->min_free_bytes;
    s->o.sync_mode = n->sync_mode;
    s->o.sync_interval_ms = n->sync_interval_ms;
    s->o.sync_bytes = n->sync_bytes;
    s->o.retention_interval_ms = n->retention_interval_ms;
    tlc__store_apply_defaults(&s->o);
    uv_mutex_unlock(&s->mu);
    w_retention(s);
    break;
  }
  default:
    break;
  }
}

void tlc__store_writer_main(void *arg) {
  tlc_store_t *s = arg;
  s->w.next_tick = 0;
  s->w.next_retention = tlc__store_mono(s) + s->o.retention_interval_ms * 1000000;
  for (;;) {
    int flow_wake = 0;
    uv_mutex_lock(&s->mu);
    if (STAILQ_EMPTY(&s->q)) {
      /* busy (w_poll): a short wait, data may come without a signal (enqueue_raw); when none
       * came, idle: the next data signals, and the wait is the tick's */
      uv_cond_timedwait(&s->cv, &s->mu, s->w_poll ? (uint64_t)WPOLL_NS : (uint64_t)TICK_NS);
      if (STAILQ_EMPTY(&s->q))
        s->w_poll = 0;
    }
    cmd_t *c = STAILQ_FIRST(&s->q);
    if (c) {
      s->w_poll = 1;
      STAILQ_REMOVE_HEAD(&s->q, link);
      s->qbytes -= c->len;
      if (c->t) {
        c->t->qb -= c->len;
        if (c->t->paused && !c->t->resume_due && tlc__store_flow_low(s, c->t)) {
          c->t->resume_due = 1;
          flow_wake = 1;
        }
      }
      s->c.queue_bytes = s->qbytes;
    }
    uv_mutex_unlock(&s->mu);
    if (flow_wake)
      uv_async_send(&s->async); /* the loop resumes the target (tlc__store_flow_resume) */
    if (c) {
      int stop = c->type == C_STOP;
      if (!stop) {
        w_cmd(s, c);
      } else {
        w_release_rx(s, NULL);     /* no target of theirs was configured: without settings */
        tlc__store_stop_worker(s); /* seals, exports, compresses what it holds first */
      }
      if (c->type == C_DATA && c->times && c->buf) {
        /* a gather buffer (store.c): back to the loop for its next records */
        uv_mutex_lock(&s->mu);
        if (s->ngpool < s->gpool_keep) {
          s->gpool_b[s->ngpool] = c->buf;
          s->gpool_t[s->ngpool] = c->times;
          s->ngpool++;
          c->buf = NULL;
          c->times = NULL;
        }
        uv_mutex_unlock(&s->mu);
      }
      tlc_free(c->buf);
      tlc_free(c->times);
      tlc_free(c->recs);
      tlc_free(c->conf);
      tlc__store_tmap_unref(s, c->map);
      tlc_free(c);
      if (stop)
        break;
    }
    w_tick(s);
    int64_t hb = tlc__store_mono(s);
    LOCKED(s, s->c.writer_heartbeat_ns = hb);
  }
  res_t *r = tlc_calloc(1, sizeof *r);
  uv_mutex_lock(&s->mu);
  s->thr_exited = 1;
  uv_mutex_unlock(&s->mu);
  if (r) {
    r->type = R_STOPPED;
    tlc__store_push_res(s, r);
  } else {
    uv_async_send(&s->async);
  }
}
