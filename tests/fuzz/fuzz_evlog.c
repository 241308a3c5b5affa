/* fuzz_evlog.c - libFuzzer harness for the evlog decoder and encoder.
 *
 * Input: byte 0 = mode (bit 0: resync; bits 1-7 and byte 1: seed of the chunk splits and batch
 * sizes), the rest = the stream. The stream is decoded once in one push and once in chunks of
 * 1..N bytes (derived from the seed) with random batch sizes; both must give the same events,
 * the same error (offset and reason) and the same counters. Every event is checked against
 * its item's bounds (strings NUL-terminated inside the item). The events are re-encoded (raw
 * items, recorded blocks); for a wholly valid stream (strict, no error, no truncation) the
 * encoding must decode again to the same items.
 * Must never crash, leak, or allocate after init.
 */
#include "base/alloc.h"
#include "base/err.h"
#include "base/out.h"
#include "formats/dec.h"
#include "formats/evlog.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct sum {
  uint64_t h;  /* running hash over every event's fields and bytes */
  uint64_t ih; /* hash over the items' bytes only */
  size_t n;
  int err, trunc;
  uint64_t err_offset;
  char reason[160];
  tlc_dec_counters_t c;
} sum_t;

static uint64_t mixin(uint64_t h, const void *p, size_t n) {
  const uint8_t *b = p;
  size_t i;
  for (i = 0; i < n; i++) {
    h ^= b[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

static void check_event(const tlc_event_t *e) {
  const tlc_evlog_ext_t *x = e->evlog;
  if (x == NULL || x->item_len < TLC_EVLOG_MIN_ITEM || x->item_len % 8 != 0 ||
      x->event != (const char *)x->item + TLC_EVLOG_ITEM ||
      x->event_len >= x->item_len - TLC_EVLOG_ITEM || x->event[x->event_len] != '\0' ||
      strlen(x->event) != x->event_len)
    abort();
  if (x->detail != NULL) {
    size_t off = (size_t)((const uint8_t *)x->detail - x->item);
    if (off < TLC_EVLOG_ITEM || off + x->detail_len >= x->item_len ||
        strlen(x->detail) != x->detail_len)
      abort();
  }
  if (e->core != TLC_CORE_UNKNOWN || e->type != TLC_EV_NONE || e->handle != 0)
    abort();
}

static uint64_t hash_event(uint64_t h, const tlc_event_t *e) {
  const tlc_evlog_ext_t *x = e->evlog;
  h = mixin(h, &e->time_ns, sizeof(e->time_ns));
  h = mixin(h, &e->thread, sizeof(e->thread));
  h = mixin(h, &e->offset, sizeof(e->offset));
  h = mixin(h, &e->flags, sizeof(e->flags));
  h = mixin(h, &x->block_seq, sizeof(x->block_seq));
  h = mixin(h, &x->block_offset, sizeof(x->block_offset));
  h = mixin(h, x->item, x->item_len);
  return h;
}

static uint64_t xs(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* skipped_cb's bytes: checked against the stream as they are told */
static struct {
  const uint8_t *in;
  size_t len;
  uint64_t told, next;
} sk;

static void on_skipped(void *ud, uint64_t off, const uint8_t *buf, size_t n) {
  (void)ud;
  if (!(n > 0 && off >= sk.next && off + n <= sk.len && memcmp(buf, sk.in + off, n) == 0))
    abort();
  sk.next = off + n;
  sk.told += n;
}

/* Decodes buf; seed 0: one push. With enc, every event is also re-encoded into o. The bytes
 * told through skipped_cb are the stream's at their offsets, in order, and as many as
 * bytes_skipped plus (at most) the truncated ones. */
static void decode(const uint8_t *buf, size_t len, int resync, uint64_t seed, sum_t *s,
                   tlc_evlog_enc_t *enc, tlc_out_t *o) {
  tlc_dec_t d;
  tlc_dec_opts_t opts;
  tlc_event_t ev[TLC_EVLOG_BATCH];
  size_t pos = 0, used, i;
  int n;
  memset(s, 0, sizeof(*s));
  memset(&opts, 0, sizeof(opts));
  opts.resync = resync;
  opts.max_block = 1u << 20;
  opts.skipped_cb = on_skipped;
  sk.in = buf;
  sk.len = len;
  sk.told = sk.next = 0;
  if (tlc_dec_init(&d, TLC_FMT_EVLOG, &opts) != 0)
    abort();
  s->h = s->ih = 0xcbf29ce484222325ull;
  while (pos < len) {
    size_t chunk = len - pos, max = TLC_EVLOG_BATCH;
    if (seed != 0) {
      uint64_t r = xs(&seed);
      chunk = 1 + (size_t)(r % ((r >> 20) % 3 == 0 ? 3 : 700));
      if (chunk > len - pos)
        chunk = len - pos;
      max = 1 + (size_t)((r >> 32) % 300);
    }
    n = tlc_dec_push(&d, buf + pos, chunk, &used, ev, max);
    if (n < 0) {
      s->err = n;
      break;
    }
    if (n == 0 && used == 0)
      abort(); /* no progress */
    for (i = 0; i < (size_t)n; i++) {
      check_event(&ev[i]);
      s->h = hash_event(s->h, &ev[i]);
      s->ih = mixin(s->ih, ev[i].evlog->item, ev[i].evlog->item_len);
      if (enc != NULL && tlc_evlog_enc_add(enc, &ev[i], o) != 0)
        abort();
    }
    s->n += (size_t)n;
    pos += used;
  }
  if (s->err == 0) {
    while ((n = tlc_dec_finish(&d, ev, seed ? 5 : TLC_EVLOG_BATCH)) > 0) {
      for (i = 0; i < (size_t)n; i++) {
        check_event(&ev[i]);
        s->h = hash_event(s->h, &ev[i]);
        s->ih = mixin(s->ih, ev[i].evlog->item, ev[i].evlog->item_len);
        if (enc != NULL && tlc_evlog_enc_add(enc, &ev[i], o) != 0)
          abort();
      }
      s->n += (size_t)n;
    }
    if (n == TLC_ETRUNC)
      s->trunc = 1;
    else if (n < 0)
      s->err = n;
  }
  s->err_offset = d.err_offset;
  memcpy(s->reason, d.err_reason, sizeof(s->reason));
  s->c = d.c;
  if (s->err == 0 &&
      !(sk.told >= d.c.bytes_skipped && sk.told <= d.c.bytes_skipped + d.c.truncated))
    abort();
  tlc_dec_fini(&d);
}

/* Hash of the items only (for the round trip, where offsets and block numbers change). */
static uint64_t items_hash(const uint8_t *buf, size_t len, size_t *n) {
  tlc_dec_t d;
  tlc_event_t ev[TLC_EVLOG_BATCH];
  size_t pos = 0, used, i;
  uint64_t h = 0xcbf29ce484222325ull;
  int k;
  *n = 0;
  if (tlc_dec_init(&d, TLC_FMT_EVLOG, NULL) != 0)
    abort();
  while (pos < len) {
    k = tlc_dec_push(&d, buf + pos, len - pos, &used, ev, TLC_EVLOG_BATCH);
    if (k < 0)
      abort(); /* the encoder wrote something the decoder rejects */
    for (i = 0; i < (size_t)k; i++)
      h = mixin(h, ev[i].evlog->item, ev[i].evlog->item_len);
    *n += (size_t)k;
    pos += used;
  }
  if (tlc_dec_finish(&d, ev, TLC_EVLOG_BATCH) != 0)
    abort();
  tlc_dec_fini(&d);
  return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  sum_t a, b;
  uint64_t seed;
  int resync;
  tlc_evlog_enc_t enc;
  tlc_out_t o;
  if (size < 2)
    return 0;
  resync = data[0] & 1;
  seed = ((uint64_t)data[0] << 8 | data[1]) * 0x9E3779B97F4A7C15ull + 1;
  data += 2;
  size -= 2;

  if (tlc_evlog_enc_init(&enc, NULL) != 0)
    abort();
  tlc_out_init(&o, 0, NULL, NULL);
  decode(data, size, resync, 0, &a, &enc, &o);
  if (tlc_evlog_enc_flush(&enc, &o) != 0)
    abort();
  tlc_evlog_enc_fini(&enc);
  if (!resync && a.err == 0 && !a.trunc) {
    /* A wholly valid stream re-encodes (raw items, recorded blocks) to the same items. */
    size_t len, n;
    char *bytes = tlc_out_take(&o, &len);
    if (bytes == NULL || items_hash((const uint8_t *)bytes, len, &n) != a.ih || n != a.n)
      abort();
    tlc_free(bytes);
  }
  tlc_out_fini(&o);

  decode(data, size, resync, seed, &b, NULL, NULL);
  /* After a strict error, how much input was taken (into the carry) depends on the chunks. */
  if (a.err != 0)
    a.c.bytes = b.c.bytes = 0;
  if (a.n != b.n || a.h != b.h || a.err != b.err || a.trunc != b.trunc ||
      a.err_offset != b.err_offset || strcmp(a.reason, b.reason) != 0 ||
      memcmp(&a.c, &b.c, sizeof(a.c)) != 0)
    abort();
  return 0;
}
