/* frame.c - varint length-delimited framing (see frame.h).
 *
 * Invariants: a payload buffer is allocated only after the whole header is read and its value
 * checked against `max`, and it is exactly the announced size, so a decoder never holds more
 * than max + 10 bytes. A frame that arrives whole inside one fed chunk is returned in place
 * (zero copy); only frames split across chunks are gathered. Cost: O(bytes fed).
 * Not done here: protobuf decoding (the caller's) and any I/O.
 */
#include "proto/frame.h"

#include "base/alloc.h"
#include "base/err.h"

#include <string.h>

size_t tlc_frame_header(uint8_t *out, uint64_t len) {
  size_t n = 0;
  while (len >= 0x80) {
    out[n++] = (uint8_t)(len | 0x80);
    len >>= 7;
  }
  out[n++] = (uint8_t)len;
  return n;
}

int tlc_frame_varint(const uint8_t *p, size_t n, uint64_t *v) {
  uint64_t x = 0;
  size_t i;
  for (i = 0; i < n && i < TLC_FRAME_MAX_HEADER; i++) {
    uint64_t b = p[i] & 0x7F;
    if (i == 9 && (p[i] & 0xFE) != 0) /* 10th byte may only hold bit 63, and must end */
      return TLC_EFRAME;
    x |= b << (7 * i);
    if ((p[i] & 0x80) == 0) {
      *v = x;
      return (int)(i + 1);
    }
  }
  return i >= TLC_FRAME_MAX_HEADER ? TLC_EFRAME : 0;
}

int tlc_frame_dec_init(tlc_frame_dec_t *d, size_t max) {
  memset(d, 0, sizeof(*d));
  d->max = max;
  return 0;
}

void tlc_frame_dec_fini(tlc_frame_dec_t *d) {
  tlc_free(d->buf);
  d->buf = NULL;
  d->have = 0;
}

void tlc_frame_dec_set_max(tlc_frame_dec_t *d, size_t max) {
  d->max = max;
}

size_t tlc_frame_dec_pending(const tlc_frame_dec_t *d) {
  return d->buf != NULL ? (size_t)d->len : 0;
}

int tlc_frame_dec_feed(tlc_frame_dec_t *d, const uint8_t *p, size_t n, size_t *used,
                       const uint8_t **frame, size_t *flen) {
  size_t off = 0;
  *used = 0;
  if (d->err != 0)
    return d->err;
  if (d->buf != NULL && d->have == d->len) { /* the previous call returned this frame */
    tlc_free(d->buf);
    d->buf = NULL;
    d->have = 0;
    d->in_payload = 0;
  }
  while (!d->in_payload) {
    int r;
    if (off == n) {
      *used = off;
      return 0;
    }
    d->hdr[d->nhdr++] = p[off++];
    r = tlc_frame_varint(d->hdr, d->nhdr, &d->len);
    if (r < 0)
      return d->err = r;
    if (r == 0)
      continue;
    d->nhdr = 0;
    if (d->len == 0)
      return d->err = TLC_EFRAME;
    if (d->len > d->max)
      return d->err = TLC_ELIMIT;
    d->in_payload = 1;
    d->have = 0;
  }
  if (d->buf == NULL && n - off >= d->len) { /* whole payload in this chunk: no copy */
    *frame = p + off;
    *flen = (size_t)d->len;
    *used = off + (size_t)d->len;
    d->in_payload = 0;
    return 1;
  }
  if (d->buf == NULL && off == n) { /* header only so far: allocate when payload arrives */
    *used = off;
    return 0;
  }
  if (d->buf == NULL) {
    d->buf = tlc_malloc((size_t)d->len);
    if (d->buf == NULL)
      return d->err = TLC_ENOMEM;
    d->have = 0;
  }
  {
    size_t want = (size_t)d->len - d->have, take = n - off < want ? n - off : want;
    memcpy(d->buf + d->have, p + off, take);
    d->have += take;
    off += take;
  }
  *used = off;
  if (d->have < d->len)
    return 0;
  *frame = d->buf;
  *flen = (size_t)d->len;
  return 1; /* buffer freed on the next call */
}
