/* out.c - the bounded output buffer (see out.h).
 *
 * Invariants: len <= cap; in callback mode len < max after every public call returns (the
 * buffer is flushed when an append would exceed max); in memory mode total == len.
 * Cost: appends are memcpy into the buffer; growth doubles up to `max`. Numbers are formatted
 * by hand because Text1/JSON exports print hundreds of millions of them.
 */
#include "base/out.h"

#include "base/alloc.h"
#include "base/err.h"

#include <stdio.h>
#include <string.h>

#define OUT_DEFAULT_FLUSH (64u * 1024u)
#define OUT_DEFAULT_MEM   ((size_t)1 << 30)

int tlc_out_init(tlc_out_t *o, size_t max, tlc_out_write_cb cb, void *ud) {
  memset(o, 0, sizeof(*o));
  o->write = cb;
  o->ud = ud;
  o->max = max ? max : (cb ? OUT_DEFAULT_FLUSH : OUT_DEFAULT_MEM);
  return 0;
}

int tlc_out_flush(tlc_out_t *o) {
  int r;
  if (o->err)
    return o->err;
  if (o->write == NULL || o->len == 0)
    return 0;
  r = o->write(o->ud, o->buf, o->len);
  o->len = 0;
  if (r < 0)
    o->err = r;
  return o->err;
}

int tlc_out_fini(tlc_out_t *o) {
  int r = 0;
  if (o->write != NULL)
    r = tlc_out_flush(o);
  else
    r = o->err;
  tlc_free(o->buf);
  o->buf = NULL;
  o->len = o->cap = 0;
  return r;
}

char *tlc_out_take(tlc_out_t *o, size_t *len) {
  char *p;
  if (o->err)
    return NULL;
  if (o->buf == NULL || o->len == o->cap) {
    /* make room for the NUL */
    size_t ncap = o->cap ? o->cap + 1 : 1;
    char *nb = tlc_realloc(o->buf, ncap);
    if (nb == NULL) {
      o->err = TLC_ENOMEM;
      return NULL;
    }
    o->buf = nb;
    o->cap = ncap;
  }
  o->buf[o->len] = '\0';
  p = o->buf;
  if (len)
    *len = o->len;
  o->buf = NULL;
  o->len = o->cap = 0;
  o->total = 0;
  return p;
}

/* Makes room for n more bytes; returns 0 or sets the sticky error. */
static int reserve(tlc_out_t *o, size_t n) {
  size_t need, ncap;
  char *nb;
  if (o->err)
    return o->err;
  if (o->write != NULL && o->len + n > o->max && o->len > 0) {
    if (tlc_out_flush(o) < 0)
      return o->err;
  }
  need = o->len + n;
  if (need < o->len) {
    o->err = TLC_ENOMEM;
    return o->err;
  }
  if (o->write == NULL && need > o->max) {
    o->err = TLC_ELIMIT;
    return o->err;
  }
  if (need <= o->cap)
    return 0;
  ncap = o->cap ? o->cap : 256;
  while (ncap < need)
    ncap = ncap * 2 < ncap ? need : ncap * 2;
  if (o->write == NULL && ncap > o->max)
    ncap = o->max < need ? need : o->max;
  else if (o->write != NULL && ncap > o->max && need <= o->max)
    ncap = o->max;
  nb = tlc_realloc(o->buf, ncap);
  if (nb == NULL) {
    o->err = TLC_ENOMEM;
    return o->err;
  }
  o->buf = nb;
  o->cap = ncap;
  return 0;
}

void tlc_out_write(tlc_out_t *o, const void *p, size_t n) {
  if (n == 0)
    return;
  /* A large write in callback mode goes straight through once the buffer is flushed. */
  if (o->write != NULL && n >= o->max) {
    if (tlc_out_flush(o) < 0)
      return;
    int r = o->write(o->ud, p, n);
    if (r < 0)
      o->err = r;
    o->total += n;
    return;
  }
  if (reserve(o, n) < 0)
    return;
  memcpy(o->buf + o->len, p, n);
  o->len += n;
  o->total += n;
}

void tlc_out_putc(tlc_out_t *o, char c) {
  if (!o->err && o->len < o->cap && o->len < o->max) {
    o->buf[o->len++] = c;
    o->total++;
    return;
  }
  tlc_out_write(o, &c, 1);
}

void tlc_out_puts(tlc_out_t *o, const char *s) {
  tlc_out_write(o, s, strlen(s));
}

void tlc_out_vprintf(tlc_out_t *o, const char *fmt, va_list ap) {
  char small[256];
  va_list ap2;
  int n;
  if (o->err)
    return;
  va_copy(ap2, ap);
  n = vsnprintf(small, sizeof(small), fmt, ap2);
  va_end(ap2);
  if (n < 0) {
    o->err = TLC_EINVAL;
    return;
  }
  if ((size_t)n < sizeof(small)) {
    tlc_out_write(o, small, (size_t)n);
    return;
  }
  {
    char *big = tlc_malloc((size_t)n + 1);
    if (big == NULL) {
      o->err = TLC_ENOMEM;
      return;
    }
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    tlc_out_write(o, big, (size_t)n);
    tlc_free(big);
  }
}

void tlc_out_printf(tlc_out_t *o, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tlc_out_vprintf(o, fmt, ap);
  va_end(ap);
}

void tlc_out_u64(tlc_out_t *o, uint64_t v) {
  char b[20];
  size_t i = sizeof(b);
  do {
    b[--i] = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  tlc_out_write(o, b + i, sizeof(b) - i);
}

void tlc_out_i64(tlc_out_t *o, int64_t v) {
  if (v < 0) {
    tlc_out_putc(o, '-');
    tlc_out_u64(o, (uint64_t)0 - (uint64_t)v);
  } else {
    tlc_out_u64(o, (uint64_t)v);
  }
}

void tlc_out_hex(tlc_out_t *o, uint64_t v, unsigned width) {
  static const char digits[] = "0123456789ABCDEF";
  char b[16];
  size_t i = sizeof(b);
  if (width > 16)
    width = 16;
  do {
    b[--i] = digits[v & 0xF];
    v >>= 4;
  } while (v != 0);
  while (sizeof(b) - i < width)
    b[--i] = '0';
  tlc_out_write(o, b + i, sizeof(b) - i);
}

size_t tlc_utf8_len(const unsigned char *s) {
  unsigned c = s[0];
  size_t n, i;
  uint32_t cp;
  if (c < 0x80)
    return 1;
  if (c >= 0xC2 && c <= 0xDF)
    n = 2, cp = c & 0x1F;
  else if (c >= 0xE0 && c <= 0xEF)
    n = 3, cp = c & 0x0F;
  else if (c >= 0xF0 && c <= 0xF4)
    n = 4, cp = c & 0x07;
  else
    return 0;
  for (i = 1; i < n; i++) {
    if ((s[i] & 0xC0) != 0x80)
      return 0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
      (cp >= 0xD800 && cp <= 0xDFFF) || cp == 0xFFFE || cp == 0xFFFF)
    return 0;
  return n;
}
