/* ckbuf.h - the byte buffers checkpoints are written into and read from (header only).
 *
 * Writer (tlc_ckw_t): appends fixed-width fields in the host's byte order (a checkpoint
 * carries an endianness mark and is refused on a host of the other order: it is a daemon's
 * own state, not an interchange format) into one growing buffer with a cap set at init. Any
 * failure (no memory, over the cap) is sticky in `err`: later appends are no-ops, so a caller
 * checks once at the end.
 *
 * Reader (tlc_ckr_t): takes fields off a borrowed buffer with every length checked; reading
 * past the end sets `err` (TLC_EFRAME) and yields zeros, so a reader can decode a whole
 * section and check once. tlc_ckr_room(r, n, size) tells whether n items of `size` bytes can
 * still follow (checked before allocating for a count read from the input).
 *
 * Pure: no I/O, no globals. Not thread-safe per object.
 */
#ifndef TLC_CKBUF_H
#define TLC_CKBUF_H

#include "base/alloc.h"
#include "base/err.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct tlc_ckw {
  uint8_t *p; /* tlc_malloc'd; owned (release with tlc_ckw_fini or take it) */
  size_t len, cap;
  size_t max; /* hard cap on len */
  int err;    /* 0, TLC_ENOMEM or TLC_ELIMIT (sticky) */
} tlc_ckw_t;

static inline void tlc_ckw_init(tlc_ckw_t *w, size_t max) {
  memset(w, 0, sizeof(*w));
  w->max = max;
}

static inline void tlc_ckw_fini(tlc_ckw_t *w) {
  tlc_free(w->p);
  w->p = NULL;
  w->len = w->cap = 0;
}

/* Makes room for n more bytes; returns a pointer to them or NULL (err set). */
static inline uint8_t *tlc_ckw_room(tlc_ckw_t *w, size_t n) {
  if (w->err != 0)
    return NULL;
  if (n > w->max - w->len) {
    w->err = TLC_ELIMIT;
    return NULL;
  }
  if (w->len + n > w->cap) {
    size_t nc = w->cap != 0 ? w->cap : 4096;
    uint8_t *np;
    while (nc < w->len + n)
      nc = nc > w->max / 2 ? w->max : nc * 2;
    np = tlc_realloc(w->p, nc);
    if (np == NULL) {
      w->err = TLC_ENOMEM;
      return NULL;
    }
    w->p = np;
    w->cap = nc;
  }
  w->len += n;
  return w->p + w->len - n;
}

/* Grows the buffer to hold at least n bytes in all (an estimate made before a large encoding:
 * appends then never copy what is there). A failure is not sticky: growth is tried again by
 * the appends. */
static inline void tlc_ckw_reserve(tlc_ckw_t *w, size_t n) {
  uint8_t *np;
  if (w->err != 0 || n <= w->cap)
    return;
  if (n > w->max)
    n = w->max;
  np = tlc_realloc(w->p, n);
  if (np != NULL) {
    w->p = np;
    w->cap = n;
  }
}

static inline void tlc_ckw_bytes(tlc_ckw_t *w, const void *d, size_t n) {
  uint8_t *p = tlc_ckw_room(w, n);
  if (p != NULL && n > 0)
    memcpy(p, d, n);
}
static inline void tlc_ckw_u8(tlc_ckw_t *w, uint8_t v) {
  tlc_ckw_bytes(w, &v, 1);
}
static inline void tlc_ckw_u16(tlc_ckw_t *w, uint16_t v) {
  tlc_ckw_bytes(w, &v, 2);
}
static inline void tlc_ckw_u32(tlc_ckw_t *w, uint32_t v) {
  tlc_ckw_bytes(w, &v, 4);
}
static inline void tlc_ckw_u64(tlc_ckw_t *w, uint64_t v) {
  tlc_ckw_bytes(w, &v, 8);
}
static inline void tlc_ckw_i64(tlc_ckw_t *w, int64_t v) {
  tlc_ckw_bytes(w, &v, 8);
}
/* A string: u32 length, then its bytes (no NUL). NULL is written as length 0. */
static inline void tlc_ckw_str(tlc_ckw_t *w, const char *s) {
  size_t n = s != NULL ? strlen(s) : 0;
  tlc_ckw_u32(w, (uint32_t)n);
  tlc_ckw_bytes(w, s, n);
}

typedef struct tlc_ckr {
  const uint8_t *p; /* borrowed */
  size_t len, off;
  int err; /* 0 or TLC_EFRAME (sticky) */
} tlc_ckr_t;

static inline void tlc_ckr_init(tlc_ckr_t *r, const void *p, size_t len) {
  r->p = p;
  r->len = len;
  r->off = 0;
  r->err = 0;
}

/* 1 when n items of `size` bytes fit in what is left (and no error so far). */
static inline int tlc_ckr_room(const tlc_ckr_t *r, uint64_t n, size_t size) {
  return r->err == 0 && (size == 0 || n <= (r->len - r->off) / size);
}

static inline const uint8_t *tlc_ckr_take(tlc_ckr_t *r, size_t n) {
  if (r->err != 0 || n > r->len - r->off) {
    r->err = TLC_EFRAME;
    return NULL;
  }
  r->off += n;
  return r->p + r->off - n;
}

static inline void tlc_ckr_bytes(tlc_ckr_t *r, void *d, size_t n) {
  const uint8_t *p = tlc_ckr_take(r, n);
  if (p != NULL)
    memcpy(d, p, n);
  else
    memset(d, 0, n);
}
static inline uint8_t tlc_ckr_u8(tlc_ckr_t *r) {
  uint8_t v;
  tlc_ckr_bytes(r, &v, 1);
  return v;
}
static inline uint16_t tlc_ckr_u16(tlc_ckr_t *r) {
  uint16_t v;
  tlc_ckr_bytes(r, &v, 2);
  return v;
}
static inline uint32_t tlc_ckr_u32(tlc_ckr_t *r) {
  uint32_t v;
  tlc_ckr_bytes(r, &v, 4);
  return v;
}
static inline uint64_t tlc_ckr_u64(tlc_ckr_t *r) {
  uint64_t v;
  tlc_ckr_bytes(r, &v, 8);
  return v;
}
static inline int64_t tlc_ckr_i64(tlc_ckr_t *r) {
  int64_t v;
  tlc_ckr_bytes(r, &v, 8);
  return v;
}
/* A string written by tlc_ckw_str into out[cap] (NUL-terminated); longer than cap - 1, or
 * holding a NUL: err set. */
static inline void tlc_ckr_str(tlc_ckr_t *r, char *out, size_t cap) {
  uint32_t n = tlc_ckr_u32(r);
  const uint8_t *p;
  out[0] = '\0';
  if (r->err != 0)
    return;
  if (n >= cap) {
    r->err = TLC_EFRAME;
    return;
  }
  p = tlc_ckr_take(r, n);
  if (p == NULL)
    return;
  if (n > 0 && memchr(p, 0, n) != NULL) {
    r->err = TLC_EFRAME;
    return;
  }
  memcpy(out, p, n);
  out[n] = '\0';
}

/* 64-bit FNV-1a over 8-byte words (then the tail bytes one at a time), as the manifests'
 * fnv1a64w: the checkpoint file's checksum. */
#define TLC_CK_FNV_BASIS 0xcbf29ce484222325ull

/* tlc_ck_fnv continued: the checksum h of what came before, then data[0..len). Data checksummed
 * in pieces gives tlc_ck_fnv of the whole when every piece but the last is a multiple of 8
 * bytes long. */
static inline uint64_t tlc_ck_fnv_more(uint64_t h, const void *data, size_t len) {
  const uint8_t *p = data;
  uint64_t v;
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    memcpy(&v, p + i, 8);
    h = (h ^ v) * 0x100000001b3ull;
  }
  for (; i < len; i++)
    h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

static inline uint64_t tlc_ck_fnv(const void *data, size_t len) {
  return tlc_ck_fnv_more(TLC_CK_FNV_BASIS, data, len);
}

#endif
