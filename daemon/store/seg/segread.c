/* segread.c - segment reader: byte source (plain or zstd), record reader, manifest checks,
 * time-range reads through the sparse index, and a timeline for exporters.
 *
 * Design: three layers.
 *  1. tlc_src_t: sequential bytes of a data file, plain (pread) or zstd (streaming
 *     ZSTD_decompressStream, 128 KiB input buffer). Rewind restarts from byte 0.
 *  2. tlc_recrd_t: a window over the source that always holds one whole record/block
 *     (tlc__rec_scan), growing up to max_block + 12 bytes (never beyond: a size field larger
 *     than that is TLC_EFRAME, not an allocation).
 *  3. tlc_segread_t: manifest + record reader + range. Seeking uses the index: the entry with
 *     the largest `maxb < from` is the first place a record in range can be; reading stops at
 *     the first entry whose `mina > to`. Skipping in a plain file is a position change; in a
 *     .zst it decompresses and discards.
 *
 * Checks on open (R9): manifest self-checksum, data length (plain: file size, zstd: the frame's
 * content size), and the index's times at their offsets (plain files, up to 64 entries). With
 * TLC_SEGREAD_VERIFY a full pass recomputes counts and the checksum.
 *
 * Cost: O(records in range) + one index lookup. Memory: the window (one block at most) and
 * the manifest. Not thread-safe per reader.
 */
#include "store/seg/segread.h"

#include "base/alloc.h"
#include "base/err.h"
#include "formats/dec.h"
#include "store/seg/iofault.h"
#include "store/seg/seg-int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#define SRC_IN_CAP (128u * 1024u)

/* ---- layer 1: byte source ---- */

int tlc__src_open(tlc_src_t *s, const char *path, int zst) {
  memset(s, 0, sizeof *s);
  s->fd = tlc_io->open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0);
  if (s->fd < 0)
    return s->fd;
  struct stat st;
  if (fstat(s->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
    tlc_io->close(s->fd);
    s->fd = -1;
    return -EINVAL;
  }
  s->zst = zst;
  if (zst) {
    s->dctx = ZSTD_createDCtx();
    s->in = tlc_malloc(SRC_IN_CAP);
    if (!s->dctx || !s->in) {
      tlc__src_close(s);
      return TLC_ENOMEM;
    }
    s->in_cap = SRC_IN_CAP;
  }
  return 0;
}

int tlc__src_rewind(tlc_src_t *s) {
  s->pos = 0;
  s->in_off = 0;
  s->zst_error = NULL;
  s->in_len = s->in_pos = 0;
  s->in_eof = 0;
  s->frame_done = 0;
  if (s->zst)
    ZSTD_DCtx_reset(s->dctx, ZSTD_reset_session_only);
  return 0;
}

int64_t tlc__src_read(tlc_src_t *s, void *buf, size_t n) {
  if (!s->zst) {
    int64_t r = tlc_io_pread_all(s->fd, buf, n, (int64_t)s->pos);
    if (r > 0)
      s->pos += (uint64_t)r;
    return r;
  }
  ZSTD_outBuffer out = { buf, n, 0 };
  while (out.pos < out.size) {
    size_t before_out = out.pos, before_in;
    if (s->in_pos == s->in_len && !s->in_eof) {
      int64_t r = tlc_io->read(s->fd, s->in, s->in_cap);
      while (r == -EINTR)
        r = tlc_io->read(s->fd, s->in, s->in_cap);
      if (r < 0)
        return r;
      s->in_len = (size_t)r;
      s->in_pos = 0;
      if (r == 0)
        s->in_eof = 1;
    }
    /* also called with no input left: the decoder may still hold output to flush */
    ZSTD_inBuffer in = { s->in, s->in_len, s->in_pos };
    before_in = s->in_pos;
    size_t rc = ZSTD_decompressStream(s->dctx, &out, &in);
    s->in_pos = in.pos;
    s->in_off += in.pos - before_in;
    if (ZSTD_isError(rc)) {
      s->zst_error = ZSTD_getErrorName(rc);
      return TLC_EFRAME;
    }
    if (rc == 0)
      s->frame_done = 1; /* a whole frame: the end of the file may come now */
    else if (in.pos > before_in || out.pos > before_out)
      s->frame_done = 0; /* inside a frame (an empty call after a frame's end changes nothing) */
    if (s->in_eof && s->in_pos == s->in_len && out.pos == before_out) {
      /* nothing more will come: the end of the file must be the end of a frame */
      if (!s->frame_done && out.pos == 0)
        return TLC_ETRUNC;
      break;
    }
  }
  s->pos += out.pos;
  return (int64_t)out.pos;
}

void tlc__src_close(tlc_src_t *s) {
  if (s->dctx)
    ZSTD_freeDCtx(s->dctx);
  tlc_free(s->in);
  if (s->fd >= 0)
    tlc_io->close(s->fd);
  memset(s, 0, sizeof *s);
  s->fd = -1;
}

/* zstd sources read sequentially with read(2): rewinding needs the file position reset */
static int src_restart(tlc_src_t *s) {
  if (s->zst && lseek(s->fd, 0, SEEK_SET) < 0)
    return -errno;
  return tlc__src_rewind(s);
}

/* ---- layer 2: record reader ---- */

int tlc__recrd_open(tlc_recrd_t *rd, const char *path, int zst, tlc_format_t f,
                    uint32_t max_block) {
  memset(rd, 0, sizeof *rd);
  rd->format = f;
  rd->max_block = max_block ? max_block : TLC_MAX_BLOCK_DEFAULT;
  int rc = tlc__src_open(&rd->src, path, zst);
  if (rc < 0)
    return rc;
  rd->cap = 256u * 1024u;
  rd->buf = tlc_malloc(rd->cap);
  if (!rd->buf) {
    tlc__src_close(&rd->src);
    return TLC_ENOMEM;
  }
  return 0;
}

static int recrd_fill(tlc_recrd_t *rd, size_t want) {
  /* make buf[pos..len) hold at least `want` bytes, or reach eof */
  if (rd->len - rd->pos >= want)
    return 0;
  if (rd->pos > 0) {
    memmove(rd->buf, rd->buf + rd->pos, rd->len - rd->pos);
    rd->len -= rd->pos;
    rd->pos = 0;
  }
  if (want > rd->cap) {
    size_t nc = rd->cap;
    while (nc < want)
      nc *= 2;
    uint8_t *nb = tlc_realloc(rd->buf, nc);
    if (!nb)
      return TLC_ENOMEM;
    rd->buf = nb;
    rd->cap = nc;
  }
  while (rd->len < want && !rd->eof) {
    int64_t n = tlc__src_read(&rd->src, rd->buf + rd->len, rd->cap - rd->len);
    if (n < 0)
      return (int)n;
    if (n == 0)
      rd->eof = 1;
    rd->len += (size_t)n;
  }
  return 0;
}

int tlc__recrd_next(tlc_recrd_t *rd, const uint8_t **rec, tlc_rec_t *r, uint64_t *off) {
  size_t need = 24;
  for (unsigned guard = 0; guard < 8; guard++) {
    int rc =
        tlc_scan_record(rd->format, rd->buf + rd->pos, rd->len - rd->pos, rd->max_block, r, &need);
    *off = rd->offset;
    if (rc == 1) {
      *rec = rd->buf + rd->pos;
      rd->pos += r->len;
      rd->offset += r->len;
      return 1;
    }
    if (rc < 0)
      return TLC_EFRAME;
    if (rd->eof)
      return rd->len == rd->pos ? 0 : TLC_ETRUNC;
    rc = recrd_fill(rd, need);
    if (rc < 0)
      return rc;
  }
  return TLC_EFRAME;
}

int tlc__recrd_skip_to(tlc_recrd_t *rd, uint64_t off) {
  if (off < rd->offset)
    return TLC_EINVAL;
  uint64_t d = off - rd->offset;
  if (d <= rd->len - rd->pos) {
    rd->pos += (size_t)d;
    rd->offset = off;
    return 0;
  }
  d -= rd->len - rd->pos;
  rd->pos = rd->len = 0;
  if (!rd->src.zst) {
    rd->src.pos += d;
  } else {
    while (d > 0) {
      size_t k = d < rd->cap ? (size_t)d : rd->cap;
      int64_t n = tlc__src_read(&rd->src, rd->buf, k);
      if (n < 0)
        return (int)n;
      if (n == 0)
        return TLC_ETRUNC;
      d -= (uint64_t)n;
    }
  }
  rd->offset = off;
  return 0;
}

int tlc__recrd_rewind(tlc_recrd_t *rd) {
  rd->pos = rd->len = 0;
  rd->offset = 0;
  rd->eof = 0;
  return src_restart(&rd->src);
}

void tlc__recrd_close(tlc_recrd_t *rd) {
  tlc__src_close(&rd->src);
  tlc_free(rd->buf);
  rd->buf = NULL;
}

/* ---- a manifest rebuilt from a data file ---- */

int tlc__manifest_build_file(const char *path, int zst, tlc_format_t f, uint32_t interval,
                             uint32_t max_block, tlc_manifest_t *m, uint64_t *whole_len,
                             uint64_t *file_len) {
  return tlc__manifest_build_file_csum(path, zst, f, interval, max_block, TLC_CSUM_XXH3, m,
                                       whole_len, file_len);
}

int tlc__manifest_build_file_csum(const char *path, int zst, tlc_format_t f, uint32_t interval,
                                  uint32_t max_block, int csum, tlc_manifest_t *m,
                                  uint64_t *whole_len, uint64_t *file_len) {
  tlc_recrd_t rd;
  int rc = tlc__recrd_open(&rd, path, zst, f, max_block);
  if (rc < 0)
    return rc;
  tlc_mbuild_t b = { 0 };
  tlc__manifest_reset(m);
  m->format = f;
  m->csum = csum;
  tlc__mbuild_start(&b, m, interval);
  const uint8_t *rec;
  tlc_rec_t r;
  uint64_t off = 0;
  for (;;) {
    rc = tlc__recrd_next(&rd, &rec, &r, &off);
    if (rc <= 0)
      break;
    rc = tlc__mbuild_add(&b, rec, &r);
    if (rc < 0)
      break;
  }
  tlc__mbuild_finish(&b);
  tlc__mbuild_free(&b);
  *whole_len = m->bytes;
  if (rc == TLC_ETRUNC || rc == TLC_EFRAME || rc == 0) {
    /* the data length: what the source holds in total */
    uint8_t tmp[65536];
    int64_t n;
    uint64_t total = rd.offset + (rd.len - rd.pos);
    while ((n = tlc__src_read(&rd.src, tmp, sizeof tmp)) > 0)
      total += (uint64_t)n;
    if (n < 0)
      rc = (int)n;
    else
      rc = 0;
    *file_len = total;
  }
  tlc__recrd_close(&rd);
  return rc;
}

/* ---- layer 3: segment reader ---- */

struct tlc_segread {
  tlc_manifest_t m;
  tlc_recrd_t rd;
  int zst;
  int rebuilt;
  uint64_t file_bytes;
  char why[160];
  int64_t from, to;
  size_t next_idx;   /* next index entry ahead of the position */
  uint64_t stop_off; /* an arrival range: reading ends at this byte offset (else UINT64_MAX) */
  int done;
  int end_checked;     /* .zst: the end of the compressed data was checked */
  int end_rc;          /* .zst: 0, or the error found there */
  const uint8_t *pend; /* tlc_segread_read: a record that did not fit the caller's buffer */
  size_t pend_len;
  uint64_t pend_off;
  tlc_event_t evs[256];
};

static int ends_with(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && strcmp(s + a - b, suf) == 0;
}

/* Guess bin10 vs bin11 from the first records (bin10: event word's low 24 bits are zero). */
static tlc_format_t guess_bin(const char *path, int zst) {
  tlc_src_t s;
  uint8_t b[24 * 16];
  if (tlc__src_open(&s, path, zst) < 0)
    return TLC_FMT_BIN11;
  int64_t n = tlc__src_read(&s, b, sizeof b);
  tlc__src_close(&s);
  if (n < 24)
    return TLC_FMT_BIN11;
  int v10 = 1;
  for (int64_t i = 0; i + 24 <= n; i += 24) {
    uint32_t ev = (uint32_t)b[i + 4] | (uint32_t)b[i + 5] << 8 | (uint32_t)b[i + 6] << 16 |
                  (uint32_t)b[i + 7] << 24;
    if ((ev & 0x00FFFFFFu) != 0 || ((ev >> 24) & 0xF) > 4)
      v10 = 0;
  }
  return v10 ? TLC_FMT_BIN10 : TLC_FMT_BIN11;
}

/* quick checks of a loaded manifest against the data; 0 ok, else fills why */
static int quick_check(tlc_segread_t *r, const char *path, char *why, size_t wl) {
  tlc_manifest_t *m = &r->m;
  if (!r->zst) {
    struct stat st;
    if (fstat(r->rd.src.fd, &st) < 0)
      return -errno;
    r->file_bytes = (uint64_t)st.st_size;
    if ((uint64_t)st.st_size != m->bytes) {
      snprintf(why, wl, "data is %lld bytes, manifest says %llu", (long long)st.st_size,
               (unsigned long long)m->bytes);
      return TLC_EFRAME;
    }
    size_t step = m->nidx > 64 ? m->nidx / 64 : 1;
    for (size_t i = 0; i < m->nidx; i += step) {
      uint8_t hdr[24];
      int64_t n = tlc_io_pread_all(r->rd.src.fd, hdr, sizeof hdr, (int64_t)m->idx[i].offset);
      tlc_rec_t rec;
      size_t need;
      if (n < 0)
        return (int)n;
      if (m->format != TLC_FMT_EVLOG) {
        if (n < 24 || tlc_scan_record(m->format, hdr, 24, 0, &rec, &need) != 1 ||
            rec.tmin != m->idx[i].time) {
          snprintf(why, wl, "index entry %zu does not match the record at offset %llu", i,
                   (unsigned long long)m->idx[i].offset);
          return TLC_EFRAME;
        }
      } else if (n < 12 || tlc_scan_record(m->format, hdr, 12, 0, &rec, &need) < 0) {
        snprintf(why, wl, "index entry %zu: no block header at offset %llu", i,
                 (unsigned long long)m->idx[i].offset);
        return TLC_EFRAME;
      }
    }
  } else {
    uint8_t hdr[32];
    int64_t n = tlc_io_pread_all(r->rd.src.fd, hdr, sizeof hdr, 0);
    if (n < 0)
      return (int)n;
    unsigned long long cs = ZSTD_getFrameContentSize(hdr, (size_t)n);
    if (cs == ZSTD_CONTENTSIZE_ERROR || (cs != ZSTD_CONTENTSIZE_UNKNOWN && cs != m->bytes)) {
      snprintf(why, wl, "compressed frame holds %llu bytes, manifest says %llu", cs,
               (unsigned long long)m->bytes);
      return TLC_EFRAME;
    }
    r->file_bytes = m->bytes;
  }
  (void)path;
  return 0;
}

int tlc_segread_zst_check(const char *path, char *why, size_t wl) {
  tlc_src_t s;
  uint8_t tmp[65536];
  int64_t n;
  int rc = tlc__src_open(&s, path, 1);
  if (rc < 0)
    return rc;
  while ((n = tlc__src_read(&s, tmp, sizeof tmp)) > 0)
    ;
  if (n < 0)
    snprintf(why, wl, "byte %llu of the compressed file: %s (%llu bytes decompressed before it)",
             (unsigned long long)s.in_off,
             n == TLC_ETRUNC       ? "zstd frame cut short (file truncated)"
             : s.zst_error != NULL ? s.zst_error
                                   : tlc_strerror((int)n),
             (unsigned long long)s.pos);
  tlc__src_close(&s);
  return n < 0 ? (int)n : 0;
}

int tlc_segread_open(const char *path, tlc_format_t format, unsigned flags, tlc_segread_t **out,
                     char *err, size_t errlen) {
  char mpath[4096], data[4096];
  int rc;
  *out = NULL;
  tlc_segread_t *r = tlc_calloc(1, sizeof *r);
  if (!r)
    return TLC_ENOMEM;
  tlc__manifest_init(&r->m);
  r->from = INT64_MIN;
  r->to = INT64_MAX;
  r->stop_off = UINT64_MAX;
  r->zst = ends_with(path, ".zst");
  /* data name without .zst/.part, then the base */
  snprintf(data, sizeof data, "%s", path);
  if (ends_with(data, ".zst"))
    data[strlen(data) - 4] = 0;
  else if (ends_with(data, ".part"))
    data[strlen(data) - 5] = 0;
  int is_evlog = ends_with(data, ".log");
  size_t dl = strlen(data);
  if (ends_with(data, ".txt.BIN") || ends_with(data, ".xml.BIN"))
    data[dl - 8] = 0;
  else if (is_evlog)
    data[dl - 4] = 0;
  rc = tlc__path(mpath, sizeof mpath, "%s.manifest", data);
  if (rc < 0)
    goto fail;
  char why[160] = "";
  int have = 0;
  if (!ends_with(path, ".part")) {
    int lr = tlc__manifest_load(mpath, &r->m, why, sizeof why);
    if (lr == 0)
      have = 1;
    else if (lr == -ENOENT)
      snprintf(why, sizeof why, "no manifest");
  } else {
    snprintf(why, sizeof why, "open segment (.part)");
  }
  if (have) {
    rc = tlc__recrd_open(&r->rd, path, r->zst, r->m.format, 0);
    if (rc < 0)
      goto fail;
    int q = quick_check(r, path, why, sizeof why);
    if (q < 0 && q != TLC_EFRAME) {
      rc = q;
      goto fail;
    }
    if (q == 0 && (flags & TLC_SEGREAD_VERIFY)) {
      tlc_manifest_t chk;
      uint64_t whole, flen;
      tlc__manifest_init(&chk);
      rc = tlc__manifest_build_file_csum(path, r->zst, r->m.format, r->m.index_interval, 0,
                                         r->m.csum, &chk, &whole, &flen);
      if (rc == 0 && (chk.sum != r->m.sum || chk.records != r->m.records || whole != flen)) {
        snprintf(err, errlen,
                 "%s: content does not match its manifest (checksum %016llx, manifest %016llx; "
                 "%llu whole bytes of %llu)",
                 path, (unsigned long long)chk.sum, (unsigned long long)r->m.sum,
                 (unsigned long long)whole, (unsigned long long)flen);
        rc = TLC_EFRAME;
      }
      tlc__manifest_fini(&chk);
      if (rc < 0)
        goto fail;
    }
    if (q == TLC_EFRAME && (flags & TLC_SEGREAD_VERIFY)) {
      /* a manifest that is valid in itself but disagrees with the data: the data changed */
      snprintf(err, errlen, "%s: does not match its manifest: %s", path, why);
      rc = TLC_EFRAME;
      goto fail;
    }
    if (q == TLC_EFRAME) {
      have = 0;
      tlc__recrd_close(&r->rd);
    }
  }
  if (!have) {
    tlc_format_t f = format;
    if (f == TLC_FMT_NONE)
      f = is_evlog ? TLC_FMT_EVLOG : guess_bin(path, r->zst);
    uint64_t whole, flen;
    rc = tlc__manifest_build_file(path, r->zst, f, 0, 0, &r->m, &whole, &flen);
    if (rc < 0)
      goto fail;
    r->rebuilt = 1;
    r->m.rebuilt = 1;
    r->file_bytes = flen;
    snprintf(r->m.data, sizeof r->m.data, "%s", strrchr(path, '/') ? strrchr(path, '/') + 1 : path);
    if (whole != flen && !ends_with(path, ".part")) {
      snprintf(err, errlen, "%s: offset %llu: not a whole %s record (%llu bytes follow)", path,
               (unsigned long long)whole, tlc_format_name(f), (unsigned long long)(flen - whole));
      rc = TLC_EFRAME;
      goto fail;
    }
    rc = tlc__recrd_open(&r->rd, path, r->zst, f, 0);
    if (rc < 0)
      goto fail;
    if (ends_with(path, ".part")) {
      /* the open segment's arrival index, which the writer keeps beside it */
      char wp[4200];
      snprintf(wp, sizeof wp, "%.*s.widx", (int)(strlen(path) - 5), path);
      const char *b = strrchr(path, '/');
      if (tlc__manifest_load_widx(&r->m, wp) < 0)
        r->m.nwidx = 0;
      tlc__manifest_wall_default(&r->m, tlc__segname_time(b != NULL ? b + 1 : path));
    }
  }
  snprintf(r->why, sizeof r->why, "%s", r->rebuilt ? why : "");
  *out = r;
  return 0;
fail:
  if (err && errlen && r->zst && (rc == TLC_ETRUNC || rc == TLC_EFRAME)) {
    /* damaged compressed data: say where, whatever else failed on it */
    char zw[200];
    if (tlc_segread_zst_check(path, zw, sizeof zw) < 0)
      snprintf(err, errlen, "%s: %s", path, zw);
    else if (rc != TLC_EFRAME)
      snprintf(err, errlen, "%s: %s", path, tlc_strerror(rc));
  } else if (err && errlen && rc != TLC_EFRAME)
    snprintf(err, errlen, "%s: %s", path, tlc_strerror(rc));
  if (r->rd.buf)
    tlc__recrd_close(&r->rd);
  tlc__manifest_fini(&r->m);
  tlc_free(r);
  return rc;
}

void tlc_segread_info(const tlc_segread_t *r, tlc_seginfo_t *o) {
  memset(o, 0, sizeof *o);
  o->format = r->m.format;
  o->seq = r->m.seq;
  snprintf(o->target, sizeof o->target, "%s", r->m.target);
  o->bytes = r->m.bytes;
  o->file_bytes = r->file_bytes;
  o->records = r->m.records;
  o->items = r->m.items;
  o->first_time = r->m.first_time;
  o->last_time = r->m.last_time;
  o->min_time = r->m.min_time;
  o->max_time = r->m.max_time;
  o->checksum = r->m.sum;
  o->ngaps = r->m.ngaps;
  o->compressed = r->zst;
  o->rebuilt = r->rebuilt;
  o->suspect = r->m.suspect;
  o->recovered = r->m.recovered;
  snprintf(o->why, sizeof o->why, "%s", r->why);
  o->opened_wall_ns = r->m.opened_wall_ns;
  o->closed_wall_ns = r->m.closed_wall_ns;
  o->reason = r->m.reason;
}

int tlc_segread_gap(const tlc_segread_t *r, size_t i, const char **reason, uint64_t *count,
                    uint64_t *offset) {
  if (i >= r->m.ngaps)
    return TLC_ERANGE;
  *reason = r->m.gaps[i].reason;
  *count = r->m.gaps[i].count;
  *offset = r->m.gaps[i].offset;
  return 0;
}

int tlc_segread_range(tlc_segread_t *r, int64_t from, int64_t to) {
  int rc = tlc__recrd_rewind(&r->rd);
  if (rc < 0)
    return rc;
  r->from = from;
  r->to = to;
  r->pend = NULL;
  r->done = from > to;
  r->next_idx = 0;
  r->stop_off = UINT64_MAX;
  r->end_checked = 0;
  r->end_rc = 0;
  /* largest entry with maxb < from */
  size_t best = SIZE_MAX;
  size_t lo = 0, hi = r->m.nidx;
  while (lo < hi) { /* maxb is non-decreasing: binary search */
    size_t mid = lo + (hi - lo) / 2;
    if (r->m.idx[mid].maxb < from) {
      best = mid;
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (best != SIZE_MAX && r->m.idx[best].offset > 0) {
    rc = tlc__recrd_skip_to(&r->rd, r->m.idx[best].offset);
    if (rc < 0)
      return rc;
    r->next_idx = best;
  }
  return 0;
}

int tlc_segread_wall_range(tlc_segread_t *r, int64_t since, int64_t until) {
  const tlc_widx_t *w = r->m.widx;
  size_t n = r->m.nwidx, first = SIZE_MAX, last = SIZE_MAX;
  uint64_t lo, hi;
  int rc;
  if (n == 0 || w[0].offset != 0)
    return 1; /* no arrival index (a segment of an older version, or rebuilt): whole */
  for (size_t i = 0; i < n; i++)
    if (w[i].wall >= since && w[i].wall < until) {
      if (first == SIZE_MAX)
        first = i;
      last = i;
    }
  if (first == SIZE_MAX) {
    lo = hi = 0; /* nothing of it arrived in the range */
  } else {
    lo = w[first].offset;
    /* the last entry's records run to the end; of an open segment, to its end when opened
     * unless the range is open-ended (what was appended since arrived later) */
    hi = last + 1 < n ? w[last + 1].offset : until == INT64_MAX ? UINT64_MAX : r->m.bytes;
  }
  if ((rc = tlc_segread_range(r, INT64_MIN, INT64_MAX)) < 0)
    return rc;
  if (first == SIZE_MAX) {
    r->done = 1;
    return 0;
  }
  if (lo > 0 && (rc = tlc__recrd_skip_to(&r->rd, lo)) < 0)
    return rc;
  r->stop_off = hi;
  return 0;
}

int tlc_segread_next(tlc_segread_t *r, const uint8_t **rec, size_t *len, uint64_t *off) {
  const uint8_t *p;
  tlc_rec_t x;
  uint64_t o;
  if (r->pend) { /* the record tlc_segread_read could not fit */
    *rec = r->pend;
    *len = r->pend_len;
    if (off)
      *off = r->pend_off;
    r->pend = NULL;
    return 1;
  }
  while (!r->done) {
    if (r->rd.offset >= r->stop_off)
      return 0; /* the end of an arrival range */
    /* crossing an index entry: can anything from here on be in range? */
    while (r->next_idx < r->m.nidx && r->m.idx[r->next_idx].offset <= r->rd.offset) {
      if (r->m.idx[r->next_idx].offset == r->rd.offset && r->m.idx[r->next_idx].mina > r->to &&
          !r->rebuilt) {
        r->done = 1;
        return 0;
      }
      r->next_idx++;
    }
    if (!r->rebuilt && r->rd.offset >= r->m.bytes) {
      /* a .part may hold a torn tail after the manifest's bytes; a .zst must end here, its
       * frame whole (a cut inside the frame's checksum is damage too) */
      if (r->zst && !r->end_checked) {
        uint8_t b;
        int64_t tail = r->rd.len > r->rd.pos ? 1 : tlc__src_read(&r->rd.src, &b, 1);
        r->end_checked = 1;
        /* kept: tlc_segread_read returns the bytes before it first, the error on its next call */
        r->end_rc = tail < 0 ? (int)tail : tail > 0 ? TLC_EFRAME : 0;
      }
      if (r->zst && r->end_rc < 0)
        return r->end_rc;
      return 0;
    }
    int rc = tlc__recrd_next(&r->rd, &p, &x, &o);
    if (rc == 0)
      return 0;
    if (rc == TLC_ETRUNC && r->rebuilt)
      return 0; /* torn tail of an open segment: not part of it */
    if (rc < 0)
      return rc;
    if (x.items == 0 || x.tmax < r->from || x.tmin > r->to)
      continue;
    *rec = p;
    *len = x.len;
    if (off)
      *off = o;
    return 1;
  }
  return 0;
}

int64_t tlc_segread_read(tlc_segread_t *r, void *buf, size_t len) {
  size_t done = 0;
  uint8_t *b = buf;
  while (done < len) {
    const uint8_t *p;
    size_t n;
    uint64_t o;
    int rc = tlc_segread_next(r, &p, &n, &o);
    if (rc <= 0)
      return done > 0 ? (int64_t)done : rc;
    if (n > len - done) {
      /* keep it: the window is untouched until the next call into the reader */
      r->pend = p;
      r->pend_len = n;
      r->pend_off = o;
      return done > 0 ? (int64_t)done : TLC_ERANGE;
    }
    memcpy(b + done, p, n);
    done += n;
  }
  return (int64_t)done;
}

/* timeline over bin1x records */
static int tl_next(void *ud, const tlc_event_t **evs) {
  tlc_segread_t *r = ud;
  size_t n = 0;
  while (n < sizeof r->evs / sizeof r->evs[0]) {
    const uint8_t *p;
    size_t len;
    uint64_t off;
    int rc = tlc_segread_next(r, &p, &len, &off);
    if (rc < 0)
      return rc;
    if (rc == 0)
      break;
    tlc_event_t *e = &r->evs[n++];
    memset(e, 0, sizeof *e);
    e->handle = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    e->raw = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
    uint64_t d = 0, t = 0;
    for (int i = 7; i >= 0; i--) {
      d = d << 8 | p[8 + i];
      t = t << 8 | p[16 + i];
    }
    e->data = d;
    e->time_ns = (int64_t)t;
    e->offset = off;
    if (r->m.format == TLC_FMT_BIN11) {
      e->type = (uint8_t)(e->raw & 0xF);
      e->core = (uint8_t)((e->raw & 0xFF0) >> 4);
    } else {
      e->type = (uint8_t)((e->raw >> 24) & 0xF);
      e->core = TLC_CORE_UNKNOWN;
    }
  }
  *evs = r->evs;
  return (int)n;
}

static int tl_rewind(void *ud) {
  tlc_segread_t *r = ud;
  return tlc_segread_range(r, r->from, r->to);
}

int tlc_segread_timeline(tlc_segread_t *r, tlc_timeline_t *tl) {
  if (r->m.format != TLC_FMT_BIN10 && r->m.format != TLC_FMT_BIN11)
    return TLC_EFORMAT;
  tl->next = tl_next;
  tl->rewind = tl_rewind;
  tl->ud = r;
  return 0;
}

void tlc_segread_close(tlc_segread_t *r) {
  if (!r)
    return;
  tlc__recrd_close(&r->rd);
  tlc__manifest_fini(&r->m);
  tlc_free(r);
}

/* ---- listing ---- */

static int cmp_segent(const void *a, const void *b) {
  const tlc_segent_t *x = a, *y = b;
  if (x->seq != y->seq)
    return x->seq < y->seq ? -1 : 1;
  return x->state < y->state ? -1 : x->state > y->state; /* OPEN, SEALED before COMPRESSED */
}

int tlc_segread_list(const char *state_dir, const char *target, size_t max, tlc_segent_t **out,
                     size_t *n) {
  char dir[1100];
  DIR *d;
  struct dirent *de;
  tlc_segent_t *v = NULL;
  size_t nv = 0, cap = 0, i, j;
  *out = NULL;
  *n = 0;
  if (snprintf(dir, sizeof dir, "%s/%s", state_dir, target) >= (int)sizeof dir)
    return TLC_ERANGE;
  d = opendir(dir);
  if (d == NULL)
    return -errno;
  while ((de = readdir(d)) != NULL) {
    tlc_segname_t sn;
    int k = tlc__segname_parse(de->d_name, &sn), st;
    if (k == TLC_SK_DATA)
      st = TLC_SEGST_SEALED;
    else if (k == TLC_SK_PART)
      st = TLC_SEGST_OPEN;
    else if (k == TLC_SK_ZST)
      st = TLC_SEGST_COMPRESSED;
    else
      continue;
    if (nv == cap) {
      size_t nc = cap ? cap * 2 : 64;
      tlc_segent_t *nvp;
      if (nc > max + 1)
        nc = max + 1;
      if (nc <= cap) { /* over max: keep the highest sequences */
        qsort(v, nv, sizeof *v, cmp_segent);
        memmove(v, v + 1, (nv - 1) * sizeof *v);
        nv--;
      } else {
        nvp = tlc_realloc(v, nc * sizeof *v);
        if (nvp == NULL) {
          tlc_free(v);
          closedir(d);
          return TLC_ENOMEM;
        }
        v = nvp;
        cap = nc;
      }
    }
    v[nv].seq = sn.seq;
    v[nv].state = st;
    if (strlen(dir) + strlen(de->d_name) + 2 > sizeof v[nv].path)
      continue;
    memcpy(v[nv].path, dir, strlen(dir));
    v[nv].path[strlen(dir)] = '/';
    memcpy(v[nv].path + strlen(dir) + 1, de->d_name, strlen(de->d_name) + 1);
    nv++;
  }
  closedir(d);
  if (nv == 0) { /* no segment (retention took them all): v may be NULL, qsort wants none */
    tlc_free(v);
    return 0;
  }
  qsort(v, nv, sizeof *v, cmp_segent);
  for (i = 0, j = 0; i < nv; i++) /* one entry per sequence: the first (plain before .zst) */
    if (j == 0 || v[j - 1].seq != v[i].seq)
      v[j++] = v[i];
  nv = j;
  if (nv > max) {
    memmove(v, v + (nv - max), max * sizeof *v);
    nv = max;
  }
  if (nv == 0) { /* max 0 */
    tlc_free(v);
    v = NULL;
  }
  *out = v;
  *n = nv;
  return 0;
}
