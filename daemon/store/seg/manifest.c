/* manifest.c - the per-segment manifest, the record scanner and segment file names.
 *
 * A manifest is a small key/value text file beside each sealed segment (format in
 * docs/storage.md): format, byte length, record count, first/last/min/max time, a 64-bit
 * checksum of the content (`xxh3`: XXH3-64 of the bytes in order; manifests of earlier
 * versions carry the FNV-1a kinds `fnv1a64w` or `fnv1a64`, still read and verified with their
 * own kind: tlc_manifest_t.csum), the gap list and a sparse index (every N records:
 * record number, byte offset, its time, the largest time before it and the smallest time from
 * it to the end, so a time-range read is exact even when times are not monotonic, as in evlog).
 * Its last line carries the FNV-1a of every byte before it, so a bit flip anywhere in the
 * manifest is detected; the content fields are then checked against the data on load (R9).
 *
 * The scanner knows the two data shapes: bin1x (fixed 24-byte records, time at +16) and evlog
 * (12-byte header in either byte order, whole blocks; item times from `tim`, in the item's byte
 * order taken from event_offset == 40). It never trusts a size beyond max_block.
 *
 * Pure except tlc__manifest_load/store (I/O through the shim). Any thread.
 */
#include "base/alloc.h"
#include "base/err.h"
#include "formats/bin1x.h"
#include "formats/evlog.h"
#include "store/seg/iofault.h"
#include "store/seg/seg-int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
/* XXH3 from Debian's libxxhash-dev, compiled in (the header carries the implementation): the
 * state's layout is then the one this file was built with, and the state is allocated through
 * tlc_malloc like every other allocation. */
#define XXH_INLINE_ALL
#include <xxhash.h>

uint64_t tlc__fnv1a(uint64_t h, const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t tlc__fnv1a_w(uint64_t h, const void *p, size_t n) {
  const uint8_t *b = p;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint8_t *q = b + i;
    h ^= (uint64_t)q[0] | (uint64_t)q[1] << 8 | (uint64_t)q[2] << 16 | (uint64_t)q[3] << 24 |
         (uint64_t)q[4] << 32 | (uint64_t)q[5] << 40 | (uint64_t)q[6] << 48 | (uint64_t)q[7] << 56;
    h *= 0x100000001b3ull;
  }
  for (; i < n; i++) {
    h ^= b[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

/* ---- names ---- */

static int all_digits(const char *s, size_t n) {
  if (n == 0)
    return 0;
  for (size_t i = 0; i < n; i++)
    if (s[i] < '0' || s[i] > '9')
      return 0;
  return 1;
}

int tlc__segname_parse(const char *name, tlc_segname_t *out) {
  /* base: YYYYMMDDTHHMMSSZ-<digits> */
  memset(out, 0, sizeof *out);
  size_t n = strlen(name);
  if (n < 18 || n >= TLC_SEG_NAME_MAX)
    return TLC_SK_NONE;
  if (!all_digits(name, 8) || name[8] != 'T' || !all_digits(name + 9, 6) || name[15] != 'Z' ||
      name[16] != '-')
    return TLC_SK_NONE;
  size_t d = 17;
  while (d < n && name[d] >= '0' && name[d] <= '9')
    d++;
  if (d == 17 || d - 17 > 19 || d >= n || name[d] != '.')
    return TLC_SK_NONE;
  if (d >= TLC_SEG_BASE_MAX)
    return TLC_SK_NONE;
  memcpy(out->base, name, d);
  out->base[d] = 0;
  out->seq = strtoull(name + 17, NULL, 10);
  const char *ext = name + d; /* starts with '.' */
  /* data file extension (.txt.BIN, .xml.BIN, .log), then what follows it */
  static const struct {
    const char *ext;
    int evlog, xml;
  } dext[] = { { ".txt.BIN", 0, 0 }, { ".xml.BIN", 0, 1 }, { ".log", 1, 0 } };
  static const struct {
    const char *suffix;
    int kind;
  } after[] = { { "", TLC_SK_DATA },      { ".part", TLC_SK_PART },
                { ".zst", TLC_SK_ZST },   { ".zst.part", TLC_SK_ZSTPART },
                { ".torn", TLC_SK_TORN }, { ".skipped", TLC_SK_SKIPPED },
                { ".widx", TLC_SK_WIDX } };
  for (size_t i = 0; i < sizeof dext / sizeof dext[0]; i++) {
    size_t el = strlen(dext[i].ext);
    if (strncmp(ext, dext[i].ext, el) != 0)
      continue;
    for (size_t k = 0; k < sizeof after / sizeof after[0]; k++)
      if (strcmp(ext + el, after[k].suffix) == 0) {
        out->kind = after[k].kind;
        out->evlog = dext[i].evlog;
        out->xml = dext[i].xml;
        return out->kind;
      }
  }
  if (strcmp(ext, ".txt") == 0 || strcmp(ext, ".xml") == 0) {
    out->kind = TLC_SK_EXPORT;
    out->xml = ext[1] == 'x';
    return out->kind;
  }
  if (strcmp(ext, ".manifest") == 0) {
    out->kind = TLC_SK_MANIFEST;
    return out->kind;
  }
  size_t el = strlen(ext);
  if (el > 4 && strcmp(ext + el - 4, ".tmp") == 0) {
    out->kind = TLC_SK_TMP;
    return out->kind;
  }
  return TLC_SK_NONE;
}

void tlc__segname_base(char *out, size_t len, int64_t wall_ns, uint64_t seq) {
  time_t t = (time_t)(wall_ns / 1000000000);
  struct tm tm;
  if (wall_ns < 0 || !gmtime_r(&t, &tm))
    memset(&tm, 0, sizeof tm);
  if (tm.tm_year + 1900 > 9999 || tm.tm_year + 1900 < 0)
    memset(&tm, 0, sizeof tm);
  snprintf(out, len, "%04d%02d%02dT%02d%02d%02dZ-%08" PRIu64, (tm.tm_year + 1900) % 10000,
           (tm.tm_mon + 1) % 100, tm.tm_mday % 100, tm.tm_hour % 100, tm.tm_min % 100,
           tm.tm_sec % 100, seq);
}

static int add_widx(tlc_manifest_t *m, const tlc_widx_t *e);

int64_t tlc__segname_time(const char *name) {
  int v[6], w[6] = { 4, 2, 2, 2, 2, 2 };
  const char *p = name;
  for (int i = 0; i < 6; i++) {
    v[i] = 0;
    for (int k = 0; k < w[i]; k++, p++) {
      if (*p < '0' || *p > '9')
        return 0;
      v[i] = v[i] * 10 + (*p - '0');
    }
    if (i == 2 && *p++ != 'T')
      return 0;
  }
  if (*p != 'Z' || v[1] < 1 || v[1] > 12 || v[2] < 1 || v[2] > 31 || v[3] > 23 || v[4] > 59 ||
      v[5] > 60)
    return 0;
  /* days from 1970-01-01 of the civil date (proleptic Gregorian) */
  int64_t y = v[0] - (v[1] <= 2), era = y / 400, yoe = y - era * 400;
  int64_t doy = (153 * (v[1] + (v[1] > 2 ? -3 : 9)) + 2) / 5 + v[2] - 1;
  int64_t days = era * 146097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719468;
  return ((days * 24 + v[3]) * 60 + v[4]) * 60000000000ll + v[5] * 1000000000ll;
}

void tlc__manifest_wall_default(tlc_manifest_t *m, int64_t opened_ns) {
  tlc_widx_t e = { 0, 0, opened_ns };
  if (m->nwidx == 0 && m->records > 0 && opened_ns != 0)
    (void)add_widx(m, &e); /* out of memory: no arrival index (read whole) */
}

void tlc__segname_data(char *out, size_t len, const char *base, tlc_format_t f, int xml) {
  snprintf(out, len, "%s%s", base, f == TLC_FMT_EVLOG ? ".log" : xml ? ".xml.BIN" : ".txt.BIN");
}

const char *tlc__segname_export_ext(const char *data) {
  size_t n = strlen(data);
  return n >= 8 && strcmp(data + n - 8, ".xml.BIN") == 0 ? ".xml" : ".txt";
}

int tlc__path(char *out, size_t len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(out, len, fmt, ap);
  va_end(ap);
  return (n < 0 || (size_t)n >= len) ? TLC_ERANGE : 0;
}

int64_t tlc__wall_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
int64_t tlc__mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- manifest object ---- */

void tlc__manifest_init(tlc_manifest_t *m) {
  memset(m, 0, sizeof *m);
}
void tlc__manifest_fini(tlc_manifest_t *m) {
  tlc_free(m->gaps);
  tlc_free(m->idx);
  tlc_free(m->widx);
  memset(m, 0, sizeof *m);
}
void tlc__manifest_reset(tlc_manifest_t *m) {
  tlc_gap_t *g = m->gaps;
  tlc_idx_t *x = m->idx;
  tlc_widx_t *w = m->widx;
  size_t cg = m->capgaps, cx = m->capidx, cw = m->capwidx;
  memset(m, 0, sizeof *m);
  m->gaps = g;
  m->capgaps = cg;
  m->idx = x;
  m->capidx = cx;
  m->widx = w;
  m->capwidx = cw;
}

static int add_widx(tlc_manifest_t *m, const tlc_widx_t *e) {
  if (m->nwidx == m->capwidx) {
    tlc_widx_t *x = tlc_grow(m->widx, &m->capwidx, m->nwidx + 1, sizeof *x, 16);
    if (!x)
      return TLC_ENOMEM;
    m->widx = x;
  }
  m->widx[m->nwidx++] = *e;
  return 0;
}

int tlc__manifest_add_wall(tlc_manifest_t *m, int64_t wall_ns, tlc_widx_t *out) {
  tlc_widx_t e = { m->records, m->bytes, wall_ns };
  if (m->nwidx > 0) {
    tlc_widx_t *l = &m->widx[m->nwidx - 1];
    if (l->offset == m->bytes) { /* no record arrived since it: these arrive now */
      if (l->wall == wall_ns)
        return 0;
      l->wall = wall_ns;
      *out = *l;
      return 1;
    }
    if (wall_ns >= l->wall && wall_ns / 1000000000 == l->wall / 1000000000)
      return 0; /* within the (calendar) second of the last entry */
  }
  if (add_widx(m, &e) < 0)
    return TLC_ENOMEM;
  *out = e;
  return 1;
}

int tlc__manifest_widx_decode(tlc_manifest_t *m, const uint8_t *b, size_t n) {
  for (size_t i = 0; i + 24 <= n; i += 24) {
    tlc_widx_t e;
    uint64_t v[3];
    for (int k = 0; k < 3; k++) {
      v[k] = 0;
      for (int j = 7; j >= 0; j--)
        v[k] = v[k] << 8 | b[i + 8 * (size_t)k + (size_t)j];
    }
    e.record = v[0];
    e.offset = v[1];
    e.wall = (int64_t)v[2];
    if (e.offset >= m->bytes || e.record >= m->records)
      return 1; /* past the records read: the rest too */
    if (m->nwidx > 0 &&
        (e.offset <= m->widx[m->nwidx - 1].offset || e.record <= m->widx[m->nwidx - 1].record)) {
      if (e.offset == m->widx[m->nwidx - 1].offset && e.record == m->widx[m->nwidx - 1].record)
        m->widx[m->nwidx - 1] = e; /* rewritten: no record followed the last one */
      continue;                    /* out of order: not an entry of ours */
    }
    if (add_widx(m, &e) < 0)
      return TLC_ENOMEM;
  }
  return 0;
}

int tlc__manifest_load_widx(tlc_manifest_t *m, const char *path) {
  int fd = tlc_io->open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0);
  uint8_t b[24 * 256];
  int64_t at = 0;
  int rc = 0;
  if (fd < 0)
    return 0;
  for (;;) {
    int64_t n = tlc_io_pread_all(fd, b, sizeof b, at);
    if (n <= 0 || (rc = tlc__manifest_widx_decode(m, b, (size_t)n)) != 0 || n < (int64_t)sizeof b)
      break;
    at += n;
  }
  tlc_io->close(fd);
  return rc < 0 ? rc : 0;
}

int tlc__manifest_add_gap(tlc_manifest_t *m, const char *reason, uint64_t count) {
  /* Same reason at the same place as the last gap: merge. Over the cap: into the latest gap of
   * the same reason (its place is then approximate, its count stays right); a reason not seen
   * yet still gets an entry of its own, up to TLC_GAP_MAX + TLC_GAP_REASONS entries, after which
   * (more distinct reasons than tlcapd has) it goes into the last entry. */
  if (m->ngaps > 0) {
    tlc_gap_t *l = &m->gaps[m->ngaps - 1];
    if (strcmp(l->reason, reason) == 0 && l->offset == m->bytes) {
      l->count += count;
      return 0;
    }
  }
  if (m->ngaps >= TLC_GAP_MAX) {
    for (size_t i = m->ngaps; i-- > 0;)
      if (strcmp(m->gaps[i].reason, reason) == 0) {
        m->gaps[i].count += count;
        return 0;
      }
    if (m->ngaps >= TLC_GAP_MAX + TLC_GAP_REASONS) {
      m->gaps[m->ngaps - 1].count += count;
      return 0;
    }
  }
  if (m->ngaps == m->capgaps) {
    tlc_gap_t *g = tlc_grow(m->gaps, &m->capgaps, m->ngaps + 1, sizeof *g, 8);
    if (!g)
      return TLC_ENOMEM;
    m->gaps = g;
  }
  tlc_gap_t *g = &m->gaps[m->ngaps++];
  memset(g, 0, sizeof *g);
  snprintf(g->reason, sizeof g->reason, "%s", reason);
  for (char *c = g->reason; *c; c++)
    if (*c == ' ' || *c == '\n' || *c == '\r' || *c == '\t')
      *c = '_';
  if (g->reason[0] == 0)
    snprintf(g->reason, sizeof g->reason, "unknown");
  g->count = count;
  g->offset = m->bytes;
  g->record = m->records;
  return 0;
}

static int add_idx(tlc_manifest_t *m, const tlc_idx_t *e) {
  if (m->nidx == m->capidx) {
    tlc_idx_t *x = tlc_grow(m->idx, &m->capidx, m->nidx + 1, sizeof *x, 16);
    if (!x)
      return TLC_ENOMEM;
    m->idx = x;
  }
  m->idx[m->nidx++] = *e;
  return 0;
}

/* the builder's XXH3 state: the state wants 64-byte alignment, more than malloc promises */
static XXH3_state_t *xstate(const tlc_mbuild_t *b) {
  return (XXH3_state_t *)(((uintptr_t)b->xsmem + 63) & ~(uintptr_t)63);
}

void tlc__mbuild_start(tlc_mbuild_t *b, tlc_manifest_t *m, uint32_t interval) {
  b->m = m;
  b->interval = interval ? interval : 1024;
  b->running_max = INT64_MIN;
  m->index_interval = b->interval;
  if (m->csum == TLC_CSUM_XXH3) {
    if (!b->xsmem) {
      b->xsmem = tlc_malloc(sizeof(XXH3_state_t) + 63);
      if (b->xsmem)
        XXH3_INITSTATE(xstate(b));
    }
    if (b->xsmem) {
      (void)XXH3_64bits_reset(xstate(b)); /* fails only on a NULL state */
      return;
    }
    m->csum = TLC_CSUM_FNV1A64W; /* no memory for the state: the older kind, named as such */
  }
  m->sum = TLC_FNV_INIT;
}

void tlc__mbuild_free(tlc_mbuild_t *b) {
  tlc_free(b->xsmem);
  b->xsmem = NULL;
}

/* the content checksum over the next bytes of the segment, of the manifest's kind */
static void csum_add(tlc_mbuild_t *b, const uint8_t *p, size_t n) {
  tlc_manifest_t *m = b->m;
  if (m->csum == TLC_CSUM_XXH3)
    (void)XXH3_64bits_update(xstate(b), p, n); /* fails only on a NULL state, never here */
  else if (m->csum == TLC_CSUM_FNV1A64W)
    m->sum = tlc__fnv1a_w(m->sum, p, n);
  else
    m->sum = tlc__fnv1a(m->sum, p, n);
}

int tlc__mbuild_add(tlc_mbuild_t *b, const uint8_t *rec, const tlc_rec_t *r) {
  tlc_manifest_t *m = b->m;
  int rc = 0;
  if (m->records % b->interval == 0) {
    tlc_idx_t e = { m->records, m->bytes, r->tmin, b->running_max, INT64_MAX };
    rc = add_idx(m, &e); /* on failure the index is only sparser: reads stay correct */
    if (rc < 0 && m->nidx > 0)
      rc = 0;
  }
  if (m->nidx > 0 && r->tmin < m->idx[m->nidx - 1].mina)
    m->idx[m->nidx - 1].mina = r->tmin; /* per-interval minimum; suffix min at finish */
  if (r->items > 0 && r->tmin <= r->tmax) {
    if (m->records == 0 || m->items == 0) {
      m->first_time = r->tmin;
      m->min_time = r->tmin;
      m->max_time = r->tmax;
    }
    if (r->tmin < m->min_time)
      m->min_time = r->tmin;
    if (r->tmax > m->max_time)
      m->max_time = r->tmax;
    m->last_time = r->tmax;
    if (r->tmax > b->running_max)
      b->running_max = r->tmax;
  }
  csum_add(b, rec, r->len);
  m->bytes += r->len;
  m->records++;
  m->items += r->items;
  return rc;
}

int tlc__mbuild_add_fixed(tlc_mbuild_t *b, const uint8_t *buf, size_t n, const int64_t *times) {
  tlc_manifest_t *m = b->m;
  int rc = 0;
  size_t i = 0;
  /* in runs that stay within one index interval: one index entry at most per run, and the
   * run's smallest and largest time in a tight loop */
  while (i < n) {
    uint64_t into = m->records % b->interval;
    size_t k = n - i;
    if (k > b->interval - into)
      k = (size_t)(b->interval - into);
    const int64_t *t = times + i;
    if (into == 0) {
      tlc_idx_t e = { m->records, m->bytes, t[0], b->running_max, INT64_MAX };
      int r = add_idx(m, &e); /* on failure the index is only sparser: reads stay correct */
      if (r < 0 && m->nidx == 0)
        rc = r;
    }
    int64_t mn = t[0], mx = t[0];
    for (size_t j = 1; j < k; j++) {
      mn = t[j] < mn ? t[j] : mn;
      mx = t[j] > mx ? t[j] : mx;
    }
    if (m->nidx > 0 && mn < m->idx[m->nidx - 1].mina)
      m->idx[m->nidx - 1].mina = mn;
    if (m->records == 0 || m->items == 0) {
      m->first_time = t[0];
      m->min_time = mn;
      m->max_time = mx;
    }
    if (mn < m->min_time)
      m->min_time = mn;
    if (mx > m->max_time)
      m->max_time = mx;
    m->last_time = t[k - 1];
    if (mx > b->running_max)
      b->running_max = mx;
    m->bytes += (uint64_t)k * TLC_BIN1X_RECORD;
    m->records += k;
    m->items += k;
    i += k;
  }
  /* every checksum kind runs over whole records the same in one call (24 is a multiple of
   * fnv1a64w's 8-byte words) */
  csum_add(b, buf, n * TLC_BIN1X_RECORD);
  return rc;
}

void tlc__mbuild_finish(tlc_mbuild_t *b) {
  tlc_manifest_t *m = b->m;
  int64_t run = INT64_MAX;
  for (size_t i = m->nidx; i-- > 0;) {
    if (m->idx[i].mina < run)
      run = m->idx[i].mina;
    m->idx[i].mina = run;
  }
  if (m->csum == TLC_CSUM_XXH3)
    m->sum = XXH3_64bits_digest(xstate(b));
}

/* ---- text codec ---- */

#define NNAMES(a) ((int)(sizeof(a) / sizeof *(a)))

/* the index of `s` in names[0..n), or -1 */
static int name_index(const char *const *names, int n, const char *s) {
  for (int i = 0; i < n; i++)
    if (strcmp(s, names[i]) == 0)
      return i;
  return -1;
}

static const char *const csum_names[] = { "xxh3", "fnv1a64w", "fnv1a64" }; /* by TLC_CSUM_* */

static const char *const reason_names[] = { "none",      "size",    "age",         "reconnect",
                                            "sighup",    "command", "shutdown",    "io_error",
                                            "recovered", "idle",    "clock-reset", "reset" };

const char *tlc_store_reason_name(int reason) {
  if (reason < 0 || reason > TLC_ROT_RESET)
    return "none";
  return reason_names[reason];
}

char *tlc__manifest_format(const tlc_manifest_t *m, size_t *len) {
  tlc_out_t o;
  tlc_out_init(&o, 0, NULL, NULL);
  tlc_out_printf(&o, "tlcap-manifest 1\n");
  tlc_out_printf(&o, "format %s\n",
                 m->format == TLC_FMT_BIN10   ? "bin10"
                 : m->format == TLC_FMT_BIN11 ? "bin11"
                                              : "evlog");
  tlc_out_printf(&o, "target %s\n", m->target[0] ? m->target : "-");
  tlc_out_printf(&o, "seq %" PRIu64 "\n", m->seq);
  tlc_out_printf(&o, "data %s\n", m->data);
  tlc_out_printf(&o, "export %s\n", m->exportf[0] ? m->exportf : "-");
  tlc_out_printf(&o, "bytes %" PRIu64 "\nrecords %" PRIu64 "\nitems %" PRIu64 "\n", m->bytes,
                 m->records, m->items);
  tlc_out_printf(&o,
                 "first_time %" PRId64 "\nlast_time %" PRId64 "\nmin_time %" PRId64
                 "\nmax_time %" PRId64 "\n",
                 m->first_time, m->last_time, m->min_time, m->max_time);
  tlc_out_printf(&o, "%s %016" PRIx64 "\n", csum_names[m->csum], m->sum);
  tlc_out_printf(&o, "opened_wall_ns %" PRId64 "\nclosed_wall_ns %" PRId64 "\n", m->opened_wall_ns,
                 m->closed_wall_ns);
  tlc_out_printf(&o, "reason %s\n", tlc_store_reason_name(m->reason));
  tlc_out_printf(&o, "recovered %d\nrebuilt %d\nsuspect %d\ntorn_bytes %" PRIu64 "\n", m->recovered,
                 m->rebuilt, m->suspect, m->torn_bytes);
  tlc_out_printf(&o, "index_interval %u\n", m->index_interval);
  for (size_t i = 0; i < m->ngaps; i++)
    tlc_out_printf(&o, "gap %s %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", m->gaps[i].reason,
                   m->gaps[i].count, m->gaps[i].offset, m->gaps[i].record);
  for (size_t i = 0; i < m->nidx; i++)
    tlc_out_printf(&o, "idx %" PRIu64 " %" PRIu64 " %" PRId64 " %" PRId64 " %" PRId64 "\n",
                   m->idx[i].record, m->idx[i].offset, m->idx[i].time, m->idx[i].maxb,
                   m->idx[i].mina);
  for (size_t i = 0; i < m->nwidx; i++)
    /* an entry that no record followed (an append that failed) is not written */
    if (m->widx[i].offset < m->bytes && m->widx[i].record < m->records)
      tlc_out_printf(&o, "wall %" PRIu64 " %" PRIu64 " %" PRId64 "\n", m->widx[i].record,
                     m->widx[i].offset, m->widx[i].wall);
  size_t n;
  char *body = tlc_out_take(&o, &n);
  tlc_out_fini(&o);
  if (!body)
    return NULL;
  uint64_t h = tlc__fnv1a(TLC_FNV_INIT, body, n);
  char tail[40];
  int tl = snprintf(tail, sizeof tail, "end %016" PRIx64 "\n", h);
  char *all = tlc_realloc(body, n + (size_t)tl + 1);
  if (!all) {
    tlc_free(body);
    return NULL;
  }
  memcpy(all + n, tail, (size_t)tl + 1);
  *len = n + (size_t)tl;
  return all;
}

static int why_set(char *why, size_t whylen, int rc, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static int why_set(char *why, size_t whylen, int rc, const char *fmt, ...) {
  if (why && whylen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
  }
  return rc;
}

static int p_u64(const char *s, uint64_t *v) {
  char *e;
  if (!*s || *s == '-')
    return -1;
  errno = 0;
  *v = strtoull(s, &e, 10);
  return (errno || *e) ? -1 : 0;
}
static int p_i64(const char *s, int64_t *v) {
  char *e;
  if (!*s)
    return -1;
  errno = 0;
  *v = strtoll(s, &e, 10);
  return (errno || *e) ? -1 : 0;
}

int tlc__manifest_parse(tlc_manifest_t *m, const char *buf, size_t len, char *why, size_t whylen) {
  tlc__manifest_reset(m);
  /* the last line must be "end <hex16>" over everything before it */
  if (len < 22 || buf[len - 1] != '\n')
    return why_set(why, whylen, TLC_ESYNTAX, "manifest truncated (%zu bytes)", len);
  size_t ls = len - 1;
  while (ls > 0 && buf[ls - 1] != '\n')
    ls--;
  if (len - ls != 21 || memcmp(buf + ls, "end ", 4) != 0)
    return why_set(why, whylen, TLC_ESYNTAX, "manifest has no end line");
  uint64_t want = 0;
  for (size_t i = ls + 4; i < len - 1; i++) {
    char c = buf[i];
    int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
    if (d < 0)
      return why_set(why, whylen, TLC_ESYNTAX, "manifest end line: bad checksum text");
    want = want << 4 | (uint64_t)d;
  }
  uint64_t got = tlc__fnv1a(TLC_FNV_INIT, buf, ls);
  if (got != want)
    return why_set(why, whylen, TLC_ESYNTAX,
                   "manifest checksum mismatch (stored %016" PRIx64 ", computed %016" PRIx64 ")",
                   want, got);
  size_t pos = 0, lineno = 0;
  int have_magic = 0, have_format = 0, have_bytes = 0, have_sum = 0;
  char line[512];
  while (pos < ls) {
    size_t e = pos;
    while (e < ls && buf[e] != '\n')
      e++;
    lineno++;
    size_t n = e - pos;
    if (n >= sizeof line)
      return why_set(why, whylen, TLC_ESYNTAX, "manifest line %zu too long", lineno);
    memcpy(line, buf + pos, n);
    line[n] = 0;
    pos = e + 1;
    char *f[6];
    size_t nf = 0;
    char *save = NULL;
    for (char *t = strtok_r(line, " ", &save); t && nf < 6; t = strtok_r(NULL, " ", &save))
      f[nf++] = t;
    if (nf == 0)
      return why_set(why, whylen, TLC_ESYNTAX, "manifest line %zu empty", lineno);
    int bad = 0, k;
    if (lineno == 1) {
      if (nf != 2 || strcmp(f[0], "tlcap-manifest") != 0)
        return why_set(why, whylen, TLC_ESYNTAX, "not a tlcap manifest");
      if (strcmp(f[1], "1") != 0)
        return why_set(why, whylen, TLC_EVERSION, "manifest version %s unsupported", f[1]);
      have_magic = 1;
      continue;
    }
    if (strcmp(f[0], "gap") == 0) {
      uint64_t c, o, r;
      if (nf != 5 || p_u64(f[2], &c) || p_u64(f[3], &o) || p_u64(f[4], &r))
        bad = 1;
      else {
        uint64_t sb = m->bytes, sr = m->records;
        m->bytes = o;
        m->records = r;
        size_t before = m->ngaps;
        if (tlc__manifest_add_gap(m, f[1], c) < 0)
          return TLC_ENOMEM;
        if (m->ngaps != before + 1)
          bad = 1; /* merged into an earlier entry: we never write those */
        m->bytes = sb;
        m->records = sr;
      }
    } else if (strcmp(f[0], "idx") == 0) {
      tlc_idx_t x;
      if (nf != 6 || p_u64(f[1], &x.record) || p_u64(f[2], &x.offset) || p_i64(f[3], &x.time) ||
          p_i64(f[4], &x.maxb) || p_i64(f[5], &x.mina))
        bad = 1;
      else if (add_idx(m, &x) < 0)
        return TLC_ENOMEM;
    } else if (strcmp(f[0], "wall") == 0) {
      tlc_widx_t x;
      if (nf != 4 || p_u64(f[1], &x.record) || p_u64(f[2], &x.offset) || p_i64(f[3], &x.wall))
        bad = 1;
      else if (add_widx(m, &x) < 0)
        return TLC_ENOMEM;
    } else if (nf != 2) {
      bad = 1;
    } else if (strcmp(f[0], "format") == 0) {
      m->format = strcmp(f[1], "bin10") == 0   ? TLC_FMT_BIN10
                  : strcmp(f[1], "bin11") == 0 ? TLC_FMT_BIN11
                  : strcmp(f[1], "evlog") == 0 ? TLC_FMT_EVLOG
                                               : TLC_FMT_NONE;
      bad = m->format == TLC_FMT_NONE;
      have_format = 1;
    } else if (strcmp(f[0], "target") == 0) {
      bad = strlen(f[1]) > TLC_TARGET_NAME_MAX_;
      if (!bad)
        snprintf(m->target, sizeof m->target, "%s", strcmp(f[1], "-") ? f[1] : "");
    } else if (strcmp(f[0], "data") == 0) {
      bad = strlen(f[1]) >= sizeof m->data;
      if (!bad)
        snprintf(m->data, sizeof m->data, "%s", f[1]);
    } else if (strcmp(f[0], "export") == 0) {
      bad = strlen(f[1]) >= sizeof m->exportf;
      if (!bad)
        snprintf(m->exportf, sizeof m->exportf, "%s", strcmp(f[1], "-") ? f[1] : "");
    } else if ((k = name_index(csum_names, NNAMES(csum_names), f[0])) >= 0) {
      char *end;
      m->sum = strtoull(f[1], &end, 16);
      m->csum = k;
      bad = *end != 0 || strlen(f[1]) != 16 || have_sum;
      have_sum = 1;
    } else if (strcmp(f[0], "reason") == 0) {
      m->reason = name_index(reason_names, NNAMES(reason_names), f[1]);
      bad = m->reason < 0;
    } else {
      static const struct {
        const char *k;
        size_t off;
        int sgn;
      } nums[] = {
        { "seq", offsetof(tlc_manifest_t, seq), 0 },
        { "bytes", offsetof(tlc_manifest_t, bytes), 0 },
        { "records", offsetof(tlc_manifest_t, records), 0 },
        { "items", offsetof(tlc_manifest_t, items), 0 },
        { "torn_bytes", offsetof(tlc_manifest_t, torn_bytes), 0 },
        { "first_time", offsetof(tlc_manifest_t, first_time), 1 },
        { "last_time", offsetof(tlc_manifest_t, last_time), 1 },
        { "min_time", offsetof(tlc_manifest_t, min_time), 1 },
        { "max_time", offsetof(tlc_manifest_t, max_time), 1 },
        { "opened_wall_ns", offsetof(tlc_manifest_t, opened_wall_ns), 1 },
        { "closed_wall_ns", offsetof(tlc_manifest_t, closed_wall_ns), 1 },
      };
      int found = 0;
      for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
        if (strcmp(f[0], nums[i].k) == 0) {
          found = 1;
          if (nums[i].sgn)
            bad = p_i64(f[1], (int64_t *)(void *)((char *)m + nums[i].off));
          else
            bad = p_u64(f[1], (uint64_t *)(void *)((char *)m + nums[i].off));
          if (strcmp(f[0], "bytes") == 0)
            have_bytes = 1;
        }
      if (!found) {
        uint64_t v;
        if (p_u64(f[1], &v))
          bad = 1;
        else if (strcmp(f[0], "recovered") == 0)
          m->recovered = v != 0;
        else if (strcmp(f[0], "rebuilt") == 0)
          m->rebuilt = v != 0;
        else if (strcmp(f[0], "suspect") == 0)
          m->suspect = v != 0;
        else if (strcmp(f[0], "index_interval") == 0)
          m->index_interval = (uint32_t)v;
        /* unknown keys with a number: ignored (forward compatible) */
      }
    }
    if (bad)
      return why_set(why, whylen, TLC_ESYNTAX, "manifest line %zu: bad '%s'", lineno, f[0]);
  }
  if (!have_magic || !have_format || !have_bytes || !have_sum || m->data[0] == 0)
    return why_set(why, whylen, TLC_ESYNTAX, "manifest misses a required field");
  /* self-consistency of the index */
  for (size_t i = 0; i < m->nidx; i++) {
    if (m->idx[i].offset >= m->bytes || m->idx[i].record >= m->records ||
        (i > 0 &&
         (m->idx[i].offset <= m->idx[i - 1].offset || m->idx[i].record <= m->idx[i - 1].record)))
      return why_set(why, whylen, TLC_ESYNTAX, "manifest index entry %zu inconsistent", i);
  }
  for (size_t i = 0; i < m->nwidx; i++) {
    if (m->widx[i].offset >= m->bytes || m->widx[i].record >= m->records ||
        (i > 0 && (m->widx[i].offset <= m->widx[i - 1].offset ||
                   m->widx[i].record <= m->widx[i - 1].record)))
      return why_set(why, whylen, TLC_ESYNTAX, "manifest arrival entry %zu inconsistent", i);
  }
  if ((m->format != TLC_FMT_EVLOG && m->bytes != m->records * 24) || m->index_interval == 0)
    return why_set(why, whylen, TLC_ESYNTAX, "manifest counts inconsistent");
  return 0;
}

int tlc__manifest_load(const char *path, tlc_manifest_t *m, char *why, size_t whylen) {
  int fd = tlc_io->open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0);
  if (fd < 0)
    return why_set(why, whylen, fd, "cannot open: %s", tlc_strerror(fd));
  size_t cap = 1u << 16, max = 64u << 20, len = 0;
  char *buf = tlc_malloc(cap);
  int rc = 0;
  if (!buf) {
    tlc_io->close(fd);
    return TLC_ENOMEM;
  }
  for (;;) {
    if (len == cap) {
      if (cap >= max) {
        rc = why_set(why, whylen, TLC_ESYNTAX, "manifest larger than %zu bytes", max);
        break;
      }
      char *nb = tlc_grow(buf, &cap, cap + 1, 1, 0);
      if (!nb) {
        rc = TLC_ENOMEM;
        break;
      }
      buf = nb;
    }
    int64_t n = tlc_io_pread_all(fd, buf + len, cap - len, (int64_t)len);
    if (n < 0) {
      rc = why_set(why, whylen, (int)n, "read: %s", tlc_strerror((int)n));
      break;
    }
    len += (size_t)n;
    if ((size_t)n < cap - (len - (size_t)n))
      break;
  }
  tlc_io->close(fd);
  if (rc == 0)
    rc = tlc__manifest_parse(m, buf, len, why, whylen);
  tlc_free(buf);
  return rc;
}

int tlc__manifest_store(const char *path, const tlc_manifest_t *m) {
  char tmp[4096];
  size_t len;
  int rc = tlc__path(tmp, sizeof tmp, "%s.tmp", path);
  if (rc < 0)
    return rc;
  char *txt = tlc__manifest_format(m, &len);
  if (!txt)
    return TLC_ENOMEM;
  int fd = tlc_io->open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    tlc_free(txt);
    return fd;
  }
  size_t w;
  rc = tlc_io_write_all(fd, txt, len, &w);
  tlc_free(txt);
  if (rc == 0)
    rc = tlc_io->fsync(fd);
  int crc = tlc_io->close(fd);
  if (rc == 0)
    rc = crc;
  if (rc == 0)
    rc = tlc_io->rename(tmp, path);
  if (rc < 0)
    tlc_io->unlink(tmp);
  return rc;
}
