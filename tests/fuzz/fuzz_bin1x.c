/* fuzz_bin1x.c - libFuzzer harness for the bin10/bin11 decoder (dec.h) and the encoder.
 *
 * Input: byte 0 picks the case (bit 0: bin10/bin11, bit 1: strict/resync, bits 2-4: confirm
 * 1..8, bits 5-7: batch size and tolerance), byte 1 seeds the chunk sizes, the rest is the
 * stream. The stream is decoded once in one push and once in chunks derived from the input,
 * and the two must agree exactly. Invariants checked (abort on violation):
 *  - every push takes no more than it was given and makes progress; bytes taken == bytes fed
 *    unless strict mode stopped with an error; after a strict-mode error every call returns
 *    it again with nothing taken and no event;
 *  - events lie inside the stream, in increasing offset order, with type <= 4, area <= 5;
 *  - resync mode: 24 * records + bytes_skipped + truncated == bytes fed;
 *  - re-encoding each event gives back the stream bytes at its offset;
 *  - with tlc_dec_idle after every chunk (an idle line): the same accounting, order and bytes;
 *  - the bytes told through skipped_cb are the stream's bytes at the offsets told, in increasing
 *    order without overlap, and (resync, no error) as many as bytes_skipped + truncated.
 */
#include "base/err.h"
#include "formats/dec.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAXEV 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct run_out {
  tlc_event_t ev[MAXEV];
  size_t n;
  int err;
  uint64_t err_offset;
  tlc_dec_counters_t c;
} run_out_t;

static run_out_t one, many, idle;

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

#define CHECK(x)                                                                                   \
  do {                                                                                             \
    if (!(x))                                                                                      \
      abort();                                                                                     \
  } while (0)

static void keep(run_out_t *o, const tlc_event_t *ev, size_t n) {
  size_t i;
  for (i = 0; i < n && o->n < MAXEV; i++)
    o->ev[o->n++] = ev[i];
}

static void run(tlc_format_t f, const tlc_dec_opts_t *opts0, const uint8_t *in, size_t len,
                uint8_t chunk_seed, size_t batch, int idle_calls, run_out_t *o) {
  tlc_dec_opts_t dopts = *opts0, *opts = &dopts;
  tlc_dec_t d;
  tlc_event_t ev[64];
  uint64_t fed = 0;
  uint32_t x = chunk_seed * 2654435761u + 1;
  size_t off = 0;
  int rc;
  o->n = 0;
  o->err = 0;
  dopts.skipped_cb = on_skipped;
  sk.in = in;
  sk.len = len;
  sk.told = sk.next = 0;
  CHECK(tlc_dec_init(&d, f, opts) == 0);
  while (off < len) {
    size_t chunk = len - off, used;
    if (chunk_seed != 0) {
      x = x * 1103515245u + 12345u;
      chunk = 1 + (x >> 16) % ((x & 0x10000) ? 7 : 300);
      if (chunk > len - off)
        chunk = len - off;
    }
    rc = tlc_dec_push(&d, in + off, chunk, &used, ev, batch);
    CHECK(used <= chunk);
    if (rc < 0) {
      CHECK(rc == TLC_EFRAME && !opts->resync);
      o->err = rc;
      o->err_offset = d.err_offset;
      CHECK(d.err_offset % 24 == 0 && d.err_offset + 24 <= fed + used);
      /* sticky, and nothing more comes out */
      CHECK(tlc_dec_push(&d, in + off, len - off, &used, ev, batch) == rc && used == 0);
      CHECK(tlc_dec_finish(&d, ev, batch) == rc);
      break;
    }
    CHECK(rc > 0 || used > 0);
    CHECK((size_t)rc <= batch);
    keep(o, ev, (size_t)rc);
    off += used;
    fed += used;
    if (idle_calls) { /* the line went idle after this chunk (tlc_dec_idle) */
      rc = tlc_dec_idle(&d, ev, batch);
      CHECK(rc >= 0 && (size_t)rc <= batch && (opts->resync || rc == 0));
      keep(o, ev, (size_t)rc);
    }
  }
  if (o->err == 0) {
    int truncs = 0;
    CHECK(fed == len && d.c.bytes == len);
    while ((rc = tlc_dec_finish(&d, ev, batch)) != 0) {
      if (rc == TLC_ETRUNC) {
        CHECK(++truncs == 1);
        CHECK(d.c.truncated > 0 && d.c.truncated < 24 && d.err_offset == len - d.c.truncated);
        continue;
      }
      if (rc < 0) { /* a strict error found among records held by a push that stopped at max */
        CHECK(rc == TLC_EFRAME && !opts->resync);
        o->err = rc;
        o->err_offset = d.err_offset;
        break;
      }
      CHECK((size_t)rc <= batch);
      keep(o, ev, (size_t)rc);
    }
    if (opts->resync)
      CHECK(24 * d.c.records + d.c.bytes_skipped + d.c.truncated == len);
    if (opts->resync && o->err == 0)
      CHECK(sk.told == d.c.bytes_skipped + d.c.truncated);
  }
  o->c = d.c;
  tlc_dec_reset(&d);
  tlc_dec_fini(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tlc_dec_opts_t opts;
  tlc_format_t f;
  size_t batch, i;
  const uint8_t *in;
  size_t len;
  if (size < 2)
    return 0;
  memset(&opts, 0, sizeof(opts));
  f = (data[0] & 1) ? TLC_FMT_BIN11 : TLC_FMT_BIN10;
  opts.resync = (data[0] >> 1) & 1;
  opts.confirm = 1 + ((data[0] >> 2) & 7);
  batch = (size_t)1 << ((data[0] >> 5) & 7); /* 1 .. 128, capped below */
  if (batch > 64)
    batch = 64;
  opts.time_tolerance_ns = (data[0] & 0x80) ? 1000 : 0;
  in = data + 2;
  len = size - 2;
  if (len / 24 > MAXEV)
    len = MAXEV * 24;

  run(f, &opts, in, len, 0, 64, 0, &one);
  run(f, &opts, in, len, (uint8_t)(data[1] | 1), batch, 0, &many);
  /* the same chunks with an idle line after each: records may come earlier (and a record a
   * late successor would have contradicted is taken), but every byte is still accounted for
   * once, events keep stream order and re-encode to their bytes */
  run(f, &opts, in, len, (uint8_t)(data[1] | 1), batch, 1, &idle);
  if (!idle.err && opts.resync)
    CHECK(24 * idle.c.records + idle.c.bytes_skipped + idle.c.truncated == len);
  for (i = 0; i < idle.n; i++) {
    uint8_t rec[24];
    CHECK(idle.ev[i].offset + 24 <= len);
    CHECK(i == 0 || idle.ev[i].offset >= idle.ev[i - 1].offset + 24);
    tlc_bin1x_encode(f, &idle.ev[i], rec);
    CHECK(memcmp(rec, in + idle.ev[i].offset, 24) == 0);
  }
  CHECK(idle.n == idle.c.records || idle.n == MAXEV);

  CHECK(one.n == many.n && one.err == many.err);
  if (one.err)
    CHECK(one.err_offset == many.err_offset);
  CHECK(one.c.records == many.c.records && one.c.bytes_skipped == many.c.bytes_skipped &&
        one.c.resyncs == many.c.resyncs && one.c.records_invalid == many.c.records_invalid &&
        one.c.truncated == many.c.truncated);
  for (i = 0; i < one.n; i++) {
    const tlc_event_t *a = &one.ev[i], *b = &many.ev[i];
    uint8_t rec[24];
    CHECK(a->offset == b->offset && a->time_ns == b->time_ns && a->data == b->data &&
          a->handle == b->handle && a->raw == b->raw && a->type == b->type && a->core == b->core &&
          a->flags == b->flags);
    CHECK(a->offset + 24 <= len);
    CHECK(i == 0 || a->offset >= one.ev[i - 1].offset + 24);
    CHECK(a->type <= TLC_EV_WRITE && (a->handle >> 28) <= TLC_AREA_AUXSTATE);
    CHECK(a->thread == 0 && a->evlog == NULL);
    CHECK(f == TLC_FMT_BIN10 ? a->core == TLC_CORE_UNKNOWN : a->core == ((a->raw >> 4) & 0xFF));
    CHECK(opts.resync || a->offset == 24 * i);
    CHECK(opts.resync || a->flags == 0 || a->flags == TLC_EVF_RESTART); /* strict: no gap */
    tlc_bin1x_encode(f, a, rec);
    CHECK(memcmp(rec, in + a->offset, 24) == 0);
  }
  /* detection never reads past the end and never claims more records than there are */
  CHECK(tlc_bin1x_plausible_run(f, in, len) <= len / 24);
  return 0;
}
