/* segment.c - segment files on disk: open, append, sync, seal, crash recovery, deletion.
 *
 * Runs on the writer thread (open, append, sync), the sealer thread (seal, deletion by
 * retention) and the recovering thread in tlc_store_recover (before both exist); a segment is
 * owned by one of them at a time (the writer hands it over with tlc__seg_move). All I/O goes
 * through the shim (iofault.h).
 *
 * Invariants (R1, R2, R6):
 *  - a data file is either `<data>.part` (the one open segment of its target, or a crash
 *    leftover) or sealed under `<data>` with a manifest beside it; the rename is the commit;
 *  - a .part never holds a partial record in the middle: a failed write truncates back to the
 *    last whole record before anything else is written;
 *  - seal order: fdatasync(data) -> main export (tmp, fsync, rename) -> manifest (tmp, fsync,
 *    rename) -> rename .part -> data -> fsync(dir). A crash anywhere leaves a .part (recovered
 *    on the next start) or a sealed file with its manifest;
 *  - recovery of a .part never appends to it: whole prefix kept, torn tail copied to
 *    `<data>.torn` (rewritten from scratch each attempt), truncated, manifest rebuilt, renamed.
 *    A crash in the middle leaves a .part again, so recovery is idempotent. Its main export is
 *    the caller's (store.c writes it once the target's settings are known);
 *  - deletion order: data, export, torn, skipped, manifest, fsync(dir). An orphan manifest at
 *    start is a half-done deletion and is completed.
 *  - keep_skipped: bytes the segment does not hold go to <data>.skipped (written under its final
 *    name: it is an aside, not a record file); a seal fsyncs it before the data's rename.
 *
 * Cost: appends are one write(2) per chunk; sealing is 3 fsyncs (data, export, manifest) + 1
 * directory fsync. Memory: the manifest's index (records / interval entries).
 */
#include "base/alloc.h"
#include "base/err.h"
#include "formats/bin1x.h"
#include "store/seg/iofault.h"
#include "store/seg/segread.h"
#include "store/seg/seg-int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void tlc__seg_init(tlc_seg_t *s) {
  memset(s, 0, sizeof *s);
  s->fd = -1;
  s->skfd = -1;
  s->wfd = -1;
  tlc__manifest_init(&s->m);
}

void tlc__seg_move(tlc_seg_t *to, tlc_seg_t *from) {
  *to = *from;
  to->b.m = &to->m; /* the builder points at its own segment's manifest */
  tlc__seg_init(from);
}

void tlc__seg_fini(tlc_seg_t *s) {
  if (s->fd >= 0)
    tlc_io->close(s->fd);
  s->fd = -1;
  if (s->skfd >= 0)
    tlc_io->close(s->skfd);
  s->skfd = -1;
  if (s->wfd >= 0)
    tlc_io->close(s->wfd);
  s->wfd = -1;
  tlc__manifest_fini(&s->m);
  tlc__mbuild_free(&s->b);
}

int tlc__seg_open(tlc_seg_t *s, const char *dir, const char *target, tlc_format_t f, int xml,
                  uint64_t seq, int64_t wall_ns, int64_t mono_ns, uint32_t interval) {
  char path[2048];
  int rc;
  snprintf(s->dir, sizeof s->dir, "%s", dir);
  snprintf(s->target, sizeof s->target, "%s", target);
  s->format = f;
  s->seq = seq;
  s->xml = f != TLC_FMT_EVLOG && xml;
  tlc__segname_base(s->base, sizeof s->base, wall_ns, seq);
  tlc__segname_data(s->data, sizeof s->data, s->base, f, s->xml);
  rc = tlc__path(path, sizeof path, "%s/%s.part", dir, s->data);
  if (rc < 0)
    return rc;
  rc = tlc_io->open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (rc < 0)
    return rc;
  s->fd = rc;
  tlc__manifest_reset(&s->m);
  s->m.format = f;
  s->m.seq = seq;
  s->m.opened_wall_ns = wall_ns;
  snprintf(s->m.target, sizeof s->m.target, "%s", target);
  snprintf(s->m.data, sizeof s->m.data, "%s", s->data);
  tlc__mbuild_start(&s->b, &s->m, interval);
  s->durable = 0;
  s->since_sync = 0;
  s->last_sync_mono = mono_ns;
  s->opened_mono = mono_ns;
  s->suspect = 0;
  s->skfd = -1;
  s->wfd = -1;
  s->sk_bytes = 0;
  tlc_crashpoint("rotate.after_open_new");
  /* make the new name durable now, so that what fdatasync confirms is reachable */
  tlc_io_fsync_dir(dir);
  return 0;
}

void tlc__seg_wall(tlc_seg_t *s, int64_t wall_ns) {
  tlc_widx_t e;
  uint8_t b[24];
  uint64_t v[3];
  size_t w;
  size_t from;
  if (s->fd < 0 || tlc__manifest_add_wall(&s->m, wall_ns, &e) != 1 || s->m.nwidx < 2)
    return; /* one entry: the segment's name says it (tlc__manifest_wall_default) */
  from = s->m.nwidx - 1;
  if (s->wfd == -1) {
    char path[2048];
    if (tlc__path(path, sizeof path, "%s/%s.widx", s->dir, s->data) < 0)
      return;
    s->wfd = tlc_io->open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (s->wfd < 0) {
      s->wfd = -2; /* not again for this segment: readers of the .part see no arrival index */
      return;
    }
    from = 0; /* the entries so far */
  }
  if (s->wfd == -2)
    return;
  for (size_t i = from; i < s->m.nwidx; i++) {
    v[0] = s->m.widx[i].record;
    v[1] = s->m.widx[i].offset;
    v[2] = (uint64_t)s->m.widx[i].wall;
    for (int k = 0; k < 3; k++)
      for (int j = 0; j < 8; j++)
        b[8 * k + j] = (uint8_t)(v[k] >> (8 * j));
    (void)tlc_io_write_all(s->wfd, b, sizeof b, &w); /* a lost entry: that span is coarser */
  }
}

/* closes and removes the open segment's <data>.widx (its entries are in the manifest) */
static void seg_widx_drop(tlc_seg_t *s) {
  char p[2100];
  if (s->wfd >= 0)
    tlc_io->close(s->wfd);
  if (s->wfd != -1 && tlc__path(p, sizeof p, "%s/%s.widx", s->dir, s->data) == 0)
    tlc_io->unlink(p);
  s->wfd = -1;
}

int tlc__seg_append(tlc_seg_t *s, const uint8_t *buf, size_t len, uint64_t *wrec,
                    uint64_t *wbytes) {
  size_t written = 0;
  int rc = tlc_io_write_all(s->fd, buf, len, &written);
  /* account the whole records that made it */
  size_t pos = 0;
  uint64_t nrec = 0;
  while (pos < written) {
    tlc_rec_t r;
    size_t need;
    if (tlc_scan_record(s->format, buf + pos, len - pos, s->max_block, &r, &need) != 1)
      break;
    if (pos + r.len > written)
      break;
    tlc__mbuild_add(&s->b, buf + pos, &r);
    pos += r.len;
    nrec++;
  }
  *wrec = nrec;
  *wbytes = pos;
  s->since_sync += pos;
  if (rc < 0 && written != pos) {
    /* R6: a partial record must never stay; cut back to the last whole one */
    int trc = tlc_io->ftruncate(s->fd, (int64_t)s->m.bytes);
    if (trc < 0)
      s->suspect = 1;
    /* the file position is past the end now: reposition for later appends */
    if (lseek(s->fd, (off_t)s->m.bytes, SEEK_SET) < 0)
      s->suspect = 1;
  }
  return rc;
}

int tlc__seg_append_recs(tlc_seg_t *s, const uint8_t *buf, size_t len, const tlc_rec_t *recs,
                         size_t n, uint64_t *wrec, uint64_t *wbytes) {
  size_t written = 0;
  int rc = tlc_io_write_all(s->fd, buf, len, &written);
  size_t pos = 0, i = 0;
  for (; i < n && pos + recs[i].len <= written; i++) {
    tlc__mbuild_add(&s->b, buf + pos, &recs[i]);
    pos += recs[i].len;
  }
  *wrec = i;
  *wbytes = pos;
  s->since_sync += pos;
  if (rc < 0 && written != pos) {
    /* R6: a partial record must never stay; cut back to the last whole one */
    if (tlc_io->ftruncate(s->fd, (int64_t)s->m.bytes) < 0)
      s->suspect = 1;
    if (lseek(s->fd, (off_t)s->m.bytes, SEEK_SET) < 0)
      s->suspect = 1;
  }
  return rc;
}

int tlc__seg_append_fixed(tlc_seg_t *s, const uint8_t *buf, size_t n, const int64_t *times,
                          uint64_t *wrec, uint64_t *wbytes) {
  size_t written = 0;
  int rc = tlc_io_write_all(s->fd, buf, n * TLC_BIN1X_RECORD, &written);
  size_t whole = written / TLC_BIN1X_RECORD;
  tlc__mbuild_add_fixed(&s->b, buf, whole, times);
  *wrec = whole;
  *wbytes = whole * TLC_BIN1X_RECORD;
  s->since_sync += *wbytes;
  if (rc < 0 && written != *wbytes) {
    /* R6: a partial record must never stay; cut back to the last whole one */
    if (tlc_io->ftruncate(s->fd, (int64_t)s->m.bytes) < 0)
      s->suspect = 1;
    if (lseek(s->fd, (off_t)s->m.bytes, SEEK_SET) < 0)
      s->suspect = 1;
  }
  return rc;
}

int64_t tlc__seg_skipped(tlc_seg_t *s, const uint8_t *buf, size_t len, uint64_t room) {
  char path[2048];
  size_t k = len < room ? len : (size_t)room;
  if (k == 0)
    return 0;
  if (s->skfd < 0) {
    int rc = tlc__path(path, sizeof path, "%s/%s.skipped", s->dir, s->data);
    if (rc < 0)
      return rc;
    rc = tlc_io->open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (rc < 0)
      return rc;
    s->skfd = rc;
  }
  size_t w = 0;
  int rc = tlc_io_write_all(s->skfd, buf, k, &w);
  s->sk_bytes += w;
  return rc < 0 && w == 0 ? rc : (int64_t)w;
}

int tlc__seg_sync(tlc_seg_t *s, int64_t mono_ns) {
  if (s->fd < 0)
    return 0;
  s->last_sync_mono = mono_ns;
  s->since_sync = 0;
  if (s->suspect)
    return TLC_EIO; /* never trust a file whose sync failed once */
  int rc = tlc_io->fdatasync(s->fd);
  if (rc < 0) {
    s->suspect = 1;
    return rc;
  }
  s->durable = s->m.bytes;
  return 0;
}

/* out callback: write to an fd through the shim */
static int fd_write_cb(void *ud, const void *buf, size_t len) {
  size_t w;
  return tlc_io_write_all(*(int *)ud, buf, len, &w);
}

/* The export's timeline: the segment's records read straight from its data file (complete,
 * whole records; a trailing partial record is not read) in chunks of FTL_RECS records, fields
 * read by the format's own reader (tlc_bin1x_read_records): one read(2) and no per-record
 * framing work, so that the seal's engine pass costs about what the engine does. */
#define FTL_RECS 1024
typedef struct ftl {
  int fd;
  tlc_format_t format;
  uint64_t off;
  uint8_t buf[FTL_RECS * TLC_BIN1X_RECORD];
  tlc_event_t ev[FTL_RECS];
} ftl_t;

static int ftl_next(void *ud, const tlc_event_t **evs) {
  ftl_t *r = ud;
  size_t have = 0;
  while (have < sizeof r->buf) {
    ssize_t n = tlc_io->pread(r->fd, r->buf + have, sizeof r->buf - have, (int64_t)(r->off + have));
    if (n == -EINTR)
      continue;
    if (n < 0)
      return (int)n;
    if (n == 0)
      break;
    have += (size_t)n;
  }
  size_t nrec = have / TLC_BIN1X_RECORD;
  tlc_bin1x_read_records(r->format, r->buf, nrec, r->off, r->ev);
  r->off += nrec * TLC_BIN1X_RECORD;
  *evs = r->ev;
  return (int)nrec;
}

static int ftl_rewind(void *ud) {
  ((ftl_t *)ud)->off = 0;
  return 0;
}

static void ftl_close(ftl_t *r) {
  tlc_io->close(r->fd);
  tlc_free(r);
}

int tlc__segment_write_export(const char *dir, const char *base, const char *target, tlc_format_t f,
                              int xml, uint64_t seq, const char *data_path, int recovered,
                              const tlc_exset_t *ex, tlc_store_export_fn cb, void *ud) {
  char path[2048], tmp[2100], dname[TLC_SEG_NAME_MAX];
  int rc;
  if (!cb || f == TLC_FMT_EVLOG)
    return 0;
  tlc__segname_data(dname, sizeof dname, base, f, xml);
  rc = tlc__path(path, sizeof path, "%s/%s%s", dir, base, xml ? ".xml" : ".txt");
  if (rc < 0)
    return rc;
  rc = tlc__path(tmp, sizeof tmp, "%s.tmp", path);
  if (rc < 0)
    return rc;
  ftl_t *r = tlc_malloc(sizeof *r);
  if (!r)
    return TLC_ENOMEM;
  r->format = f;
  r->off = 0;
  r->fd = tlc_io->open(data_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0);
  if (r->fd < 0) {
    rc = r->fd;
    tlc_free(r);
    return rc;
  }
  tlc_timeline_t tl = { ftl_next, ftl_rewind, r };
  int fd = tlc_io->open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    ftl_close(r);
    return fd;
  }
  tlc_out_t o;
  tlc_out_init(&o, 0, fd_write_cb, &fd);
  tlc_store_export_t x = { target, f, seq, data_path, &tl,   &o,   recovered,
                           NULL,   0, 0,   xml,       dname, { 0 } };
  if (ex) {
    x.mapping = ex->mapping;
    x.has_context_area = ex->has_context_area;
    x.context_area = ex->context_area;
    x.pack = ex->pack;
  }
  rc = cb(ud, &x);
  int frc = tlc_out_fini(&o);
  if (rc == 0)
    rc = frc;
  ftl_close(r);
  if (rc == 0)
    rc = tlc_io->fsync(fd);
  tlc_io->close(fd);
  if (rc == 0)
    rc = tlc_io->rename(tmp, path);
  if (rc < 0)
    tlc_io->unlink(tmp);
  return rc;
}

int tlc__seg_seal(tlc_seg_t *s, int reason, int64_t wall_ns, const tlc_exset_t *ex,
                  tlc_store_export_fn cb, void *ud, tlc_catent_t *ent) {
  char part[2048], data[2048], mpath[2048];
  int rc;
  if (s->fd < 0)
    return TLC_EINVAL;
  if (tlc__path(part, sizeof part, "%s/%s.part", s->dir, s->data) < 0 ||
      tlc__path(data, sizeof data, "%s/%s", s->dir, s->data) < 0 ||
      tlc__path(mpath, sizeof mpath, "%s/%s.manifest", s->dir, s->base) < 0)
    return TLC_ERANGE;
  if (s->m.records == 0 && s->m.ngaps == 0) {
    tlc_io->close(s->fd);
    s->fd = -1;
    tlc_io->unlink(part);
    seg_widx_drop(s);
    if (s->skfd >= 0) {
      char sk[2100];
      tlc_io->close(s->skfd);
      s->skfd = -1;
      if (tlc__path(sk, sizeof sk, "%s/%s.skipped", s->dir, s->data) == 0)
        tlc_io->unlink(sk);
    }
    tlc_io_fsync_dir(s->dir);
    return 1;
  }
  tlc_crashpoint("seal.before_trailer");
  int src = 0;
  s->seal_err = 0;
  s->mf_err = 0;
  if (!s->suspect) {
    src = tlc_io->fdatasync(s->fd);
    if (src < 0)
      s->suspect = 1; /* R5: not retried */
    else
      s->durable = s->m.bytes;
  }
  tlc_crashpoint("seal.after_fdatasync");
  tlc_io->close(s->fd);
  s->fd = -1;
  if (s->skfd >= 0) {
    /* the aside file is durable before the segment is sealed (errors: the bytes are extra) */
    tlc_io->fsync(s->skfd);
    tlc_io->close(s->skfd);
    s->skfd = -1;
  }
  tlc__mbuild_finish(&s->b);
  s->m.closed_wall_ns = wall_ns;
  s->m.reason = reason;
  s->m.suspect = s->suspect;
  s->ex_err = 0;
  if (s->format != TLC_FMT_EVLOG && cb && s->m.records > 0) {
    /* a failure leaves the manifest's `export -`; the caller writes it later (store.c) */
    s->ex_err = tlc__segment_write_export(s->dir, s->base, s->target, s->format, s->xml, s->seq,
                                          part, 0, ex, cb, ud);
    if (s->ex_err == 0)
      snprintf(s->m.exportf, sizeof s->m.exportf, "%s%s", s->base, s->xml ? ".xml" : ".txt");
  }
  rc = tlc__manifest_store(mpath, &s->m);
  s->mf_err = rc < 0 ? rc : 0;
  /* a manifest that could not be written is rebuilt from the data on the next load (R9) */
  tlc_crashpoint("seal.after_manifest_write");
  int rrc = tlc_io->rename(part, data);
  if (rrc < 0)
    return rrc; /* stays .part: recovered on the next start */
  tlc_crashpoint("rotate.after_rename");
  seg_widx_drop(s); /* the manifest has the arrival index now */
  tlc_crashpoint("rotate.before_dir_fsync");
  tlc_io_fsync_dir(s->dir);
  if (ent) {
    memset(ent, 0, sizeof *ent);
    snprintf(ent->target, sizeof ent->target, "%s", s->target);
    snprintf(ent->base, sizeof ent->base, "%s", s->base);
    snprintf(ent->data, sizeof ent->data, "%s", s->data);
    ent->seq = s->seq;
    ent->opened_wall_ns = s->m.opened_wall_ns;
    ent->closed_wall_ns = wall_ns;
    ent->bytes = tlc__segment_disk_bytes(s->dir, s->base, s->data);
  }
  s->seal_err = src < 0 ? src : rc; /* a failed fdatasync first: the more serious */
  return 0;
}

/* ---- sizes and deletion ---- */

static uint64_t lsize(const char *path) {
  struct stat st;
  if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode))
    return 0;
  return (uint64_t)st.st_size;
}

uint64_t tlc__segment_disk_bytes(const char *dir, const char *base, const char *data) {
  char p[2048];
  uint64_t t = 0;
  static const char *sfx[] = { "", ".zst", ".torn", ".skipped" };
  for (size_t i = 0; i < 4; i++)
    if (tlc__path(p, sizeof p, "%s/%s%s", dir, data, sfx[i]) == 0)
      t += lsize(p);
  if (tlc__path(p, sizeof p, "%s/%s%s", dir, base, tlc__segname_export_ext(data)) == 0)
    t += lsize(p);
  if (tlc__path(p, sizeof p, "%s/%s.manifest", dir, base) == 0)
    t += lsize(p);
  return t;
}

int tlc__segment_delete(const char *dir, const tlc_catent_t *e) {
  char p[2048];
  int first = 1;
  static const char *dsfx[] = { "", ".zst" };
  for (size_t i = 0; i < 2; i++)
    if (tlc__path(p, sizeof p, "%s/%s%s", dir, e->data, dsfx[i]) == 0 && tlc_io->unlink(p) == 0 &&
        first) {
      first = 0;
      tlc_crashpoint("retention.after_unlink_before_manifest");
    }
  if (tlc__path(p, sizeof p, "%s/%s%s", dir, e->base, tlc__segname_export_ext(e->data)) == 0)
    tlc_io->unlink(p);
  if (tlc__path(p, sizeof p, "%s/%s.torn", dir, e->data) == 0)
    tlc_io->unlink(p);
  if (tlc__path(p, sizeof p, "%s/%s.skipped", dir, e->data) == 0)
    tlc_io->unlink(p);
  if (tlc__path(p, sizeof p, "%s/%s.widx", dir, e->data) == 0)
    tlc_io->unlink(p);
  if (tlc__path(p, sizeof p, "%s/%s.manifest", dir, e->base) == 0)
    tlc_io->unlink(p);
  tlc_io_fsync_dir(dir);
  return 0;
}

/* ---- crash recovery of one .part ---- */

/* copies part[from..end) into torn (truncating torn first) and fsyncs it */
static int copy_tail(const char *part, const char *torn, uint64_t from, uint64_t len) {
  int in = tlc_io->open(part, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0);
  if (in < 0)
    return in;
  int out = tlc_io->open(torn, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (out < 0) {
    tlc_io->close(in);
    return out;
  }
  uint8_t buf[65536];
  int rc = 0;
  uint64_t done = 0;
  while (done < len) {
    size_t k = len - done < sizeof buf ? (size_t)(len - done) : sizeof buf;
    int64_t n = tlc_io_pread_all(in, buf, k, (int64_t)(from + done));
    if (n <= 0) {
      rc = n < 0 ? (int)n : TLC_EIO;
      break;
    }
    size_t w;
    rc = tlc_io_write_all(out, buf, (size_t)n, &w);
    if (rc < 0)
      break;
    done += (uint64_t)n;
  }
  if (rc == 0)
    rc = tlc_io->fsync(out);
  tlc_io->close(out);
  tlc_io->close(in);
  return rc;
}

/* bin1x: start of the run of all-zero records that ends the whole prefix [0, whole) */
static uint64_t zero_suffix_start(const char *part, tlc_format_t f, uint64_t whole) {
  if (f == TLC_FMT_EVLOG || whole == 0)
    return whole;
  int fd = tlc_io->open(part, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0);
  if (fd < 0)
    return whole;
  uint64_t end = whole;
  uint8_t buf[24 * 1024];
  while (end > 0) {
    uint64_t from = end > sizeof buf ? end - sizeof buf : 0;
    int64_t n = tlc_io_pread_all(fd, buf, (size_t)(end - from), (int64_t)from);
    if (n != (int64_t)(end - from))
      break;
    size_t k = (size_t)n;
    while (k >= 24) {
      int zero = 1;
      for (size_t i = k - 24; i < k; i++)
        if (buf[i]) {
          zero = 0;
          break;
        }
      if (!zero)
        break;
      k -= 24;
    }
    end = from + k;
    if (k > 0)
      break;
  }
  tlc_io->close(fd);
  return end;
}

int tlc__segment_recover_part(const char *dir, const char *target, const tlc_segname_t *sn,
                              tlc_format_t f, uint32_t interval, uint32_t max_block, int last,
                              tlc_manifest_t *m, uint64_t *torn_bytes) {
  char data[TLC_SEG_NAME_MAX], part[2048], dpath[2048], torn[2048], mpath[2048], xpath[2048],
      wpath[2048];
  int rc;
  *torn_bytes = 0;
  tlc__segname_data(data, sizeof data, sn->base, f, sn->xml);
  if (tlc__path(part, sizeof part, "%s/%s.part", dir, data) < 0 ||
      tlc__path(dpath, sizeof dpath, "%s/%s", dir, data) < 0 ||
      tlc__path(torn, sizeof torn, "%s/%s.torn", dir, data) < 0 ||
      tlc__path(mpath, sizeof mpath, "%s/%s.manifest", dir, sn->base) < 0 ||
      tlc__path(xpath, sizeof xpath, "%s/%s%s", dir, sn->base, sn->xml ? ".xml" : ".txt") < 0 ||
      tlc__path(wpath, sizeof wpath, "%s/%s.widx", dir, data) < 0)
    return TLC_ERANGE;
  /* a manifest written by a seal that crashed before its rename: keep it if it matches */
  tlc_manifest_t old;
  tlc__manifest_init(&old);
  int have_old = tlc__manifest_load(mpath, &old, NULL, 0) == 0;
  uint64_t whole = 0, flen = 0;
  /* checksummed like the old manifest, so that one written by an older version still matches */
  int csum = have_old ? old.csum : TLC_CSUM_XXH3;
  rc = tlc__manifest_build_file_csum(part, 0, f, interval, max_block, csum, m, &whole, &flen);
  if (rc < 0) {
    tlc__manifest_fini(&old);
    return rc;
  }
  uint64_t zw = zero_suffix_start(part, f, whole);
  int rebuild = 0;
  if (zw < whole) {
    /* zero-filled records at the end: a power cut under delayed allocation, not data */
    whole = zw;
    rebuild = 1;
  }
  if (whole < flen) {
    rc = copy_tail(part, torn, whole, flen - whole);
    if (rc < 0) {
      tlc__manifest_fini(&old);
      return rc;
    }
    *torn_bytes = flen - whole;
    int fd = tlc_io->open(part, O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0) {
      tlc__manifest_fini(&old);
      return fd;
    }
    tlc_crashpoint("startup.recovery_mid_truncate");
    rc = tlc_io->ftruncate(fd, (int64_t)whole);
    if (rc == 0)
      rc = tlc_io->fsync(fd);
    tlc_io->close(fd);
    if (rc < 0) {
      tlc__manifest_fini(&old);
      return rc;
    }
  }
  if (rebuild) {
    rc = tlc__manifest_build_file_csum(part, 0, f, interval, max_block, csum, m, &whole, &flen);
    if (rc < 0) {
      tlc__manifest_fini(&old);
      return rc;
    }
  }
  if (m->records == 0) {
    /* Not one whole record (a kill right after the segment opened, or inside its first
     * record): nothing to keep, so no segment (not a 13-byte .zst without an export).
     * Unless resync-skipped bytes were kept aside for it (keep_skipped): then it stays. */
    char sk[2100];
    struct stat st;
    if (tlc__path(sk, sizeof sk, "%s/%s.skipped", dir, data) == 0 && lstat(sk, &st) != 0) {
      tlc__manifest_fini(&old);
      tlc_io->unlink(part);
      tlc_io->unlink(mpath);
      tlc_io->unlink(xpath);
      tlc_io->unlink(torn);
      tlc_io->unlink(wpath);
      tlc_io_fsync_dir(dir);
      return 1;
    }
  }
  if (have_old && old.bytes == m->bytes && old.sum == m->sum && old.records == m->records &&
      old.format == f) {
    /* keep the sealed manifest (it has the gaps); nothing to rewrite */
    tlc_gap_t *g = m->gaps;
    tlc_idx_t *x = m->idx;
    tlc_widx_t *w = m->widx;
    *m = old; /* take ownership of old's arrays */
    tlc_free(g);
    tlc_free(x);
    tlc_free(w);
    tlc__manifest_init(&old);
    if (last && (m->ngaps == 0 || strcmp(m->gaps[m->ngaps - 1].reason, "restart") != 0 ||
                 m->gaps[m->ngaps - 1].offset != m->bytes)) {
      /* the stream was cut here by the crash (see below) */
      tlc__manifest_add_gap(m, "restart", 1);
      rc = tlc__manifest_store(mpath, m);
      if (rc < 0)
        return rc;
    }
  } else {
    int64_t now = tlc__wall_ns();
    m->format = f;
    m->seq = sn->seq;
    snprintf(m->target, sizeof m->target, "%s", target);
    snprintf(m->data, sizeof m->data, "%s", data);
    m->recovered = 1;
    m->rebuilt = 1;
    m->reason = TLC_ROT_RECOVERED;
    m->torn_bytes = *torn_bytes;
    m->closed_wall_ns = now;
    if (have_old)
      m->opened_wall_ns = old.opened_wall_ns;
    /* the crash itself is a gap at the end: whatever was in flight is unknown */
    tlc__manifest_add_gap(m, "crash", *torn_bytes);
    /* The target's last segment: its stream ended here with the crash, and the restarted
     * daemon's live statistics have a gap here (the restart gap, or the disconnect this
     * segment's lost manifest held); history makes the same gap (docs/continuity.md). */
    if (last)
      tlc__manifest_add_gap(m, "restart", 1);
    /* the arrival index the writer kept beside the open segment (none: its opening second) */
    if (tlc__manifest_load_widx(m, wpath) < 0)
      m->nwidx = 0;
    tlc__manifest_wall_default(m, tlc__segname_time(sn->base));
    /* an export of the interrupted seal may describe bytes that are not kept: the caller
     * writes it again (with the target's settings when it has them) */
    if (f != TLC_FMT_EVLOG)
      tlc_io->unlink(xpath);
    rc = tlc__manifest_store(mpath, m);
    if (rc < 0) {
      tlc__manifest_fini(&old);
      return rc;
    }
  }
  tlc__manifest_fini(&old);
  rc = tlc_io->rename(part, dpath);
  if (rc < 0)
    return rc;
  tlc_io->unlink(wpath);
  tlc_io_fsync_dir(dir);
  return 0;
}
