/* test_pipeline.c - the pipeline object (decoder -> evlog mapping -> range -> engine): what comes
 * out of it for a stream pushed in odd chunks, checked against values derived from the input
 * (the records generated, their times), not against the pipeline's own output. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/err.h"
#include "engine/pipeline.h"
#include "formats/bin1x.h"

#include <stdlib.h>
#include <string.h>

#define N     1000
#define BATCH 64

static uint8_t stream[N * TLC_BIN1X_RECORD];
static int64_t times[N];

/* N bin11 records: calls and returns of 4 functions on core 0, times 1000 ns apart */
static void gen(void) {
  for (size_t i = 0; i < N; i++) {
    tlc_event_t e;
    memset(&e, 0, sizeof e);
    e.handle = (uint32_t)(i / 2 % 4);
    e.type = (uint8_t)(i % 2 == 0 ? TLC_EV_ENTRY : TLC_EV_EXIT);
    e.core = 0;
    e.raw = e.type;
    e.time_ns = times[i] = 1000 + (int64_t)i * 1000;
    tlc_bin1x_encode(TLC_FMT_BIN11, &e, stream + i * TLC_BIN1X_RECORD);
  }
}

typedef struct seen {
  size_t decoded, mapped, bytes, gaps;
  uint64_t next_off;
} seen_t;

static void on_bytes(void *ud, const uint8_t *buf, size_t len, uint64_t off) {
  seen_t *s = ud;
  assert_int_equal(off, s->next_off); /* every byte consumed, in stream order */
  assert_memory_equal(buf, stream + off, len);
  s->next_off = off + len;
  s->bytes += len;
}

static void on_decoded(void *ud, const tlc_event_t *ev, size_t n, const uint8_t *chunk, size_t clen,
                       uint64_t coff) {
  seen_t *s = ud;
  (void)ev;
  if (chunk != NULL)
    assert_memory_equal(chunk, stream + coff, clen);
  s->decoded += n;
}

static void on_mapped(void *ud, const tlc_event_t *ev, size_t n) {
  seen_t *s = ud;
  for (size_t i = 0; i < n; i++)
    s->gaps += (ev[i].flags & TLC_EVF_GAP) != 0;
  s->mapped += n;
}

/* pushes stream[a..b) in chunks of 7 bytes; returns the events that came out */
static size_t push(tlc_pipeline_t *p, size_t a, size_t b) {
  size_t out = 0;
  while (a < b) {
    size_t used = 0, k = b - a < 7 ? b - a : 7;
    int nout = 0;
    const tlc_event_t *ev;
    int n = tlc_pipeline_push(p, stream + a, k, &used, &ev, &nout);
    assert_true(n >= 0 && nout >= 0);
    out += (size_t)nout;
    a += used;
  }
  int n, nout;
  while ((n = tlc_pipeline_finish(p, NULL, &nout)) > 0)
    out += (size_t)nout;
  assert_int_equal(n, 0);
  return out;
}

static void setup_io(tlc_pipeline_io_t *io, seen_t *s, tlc_event_t *raw, tlc_event_t *out) {
  memset(io, 0, sizeof *io);
  memset(s, 0, sizeof *s);
  io->raw = raw;
  io->out = out;
  io->batch = BATCH;
  io->bytes_cb = on_bytes;
  io->decoded_cb = on_decoded;
  io->mapped_cb = on_mapped;
  io->ud = s;
}

/* every record reaches the engine once, whatever the chunking; the observers see the bytes and
 * batches in order */
static void test_whole_stream(void **state) {
  (void)state;
  tlc_pipeline_t p;
  tlc_pipeline_conf_t c;
  tlc_pipeline_io_t io;
  seen_t s;
  static tlc_event_t raw[BATCH], out[2 * BATCH];
  memset(&c, 0, sizeof c);
  c.format = TLC_FMT_BIN11;
  c.with_engine = 1;
  tlc_engine_opts_default(&c.engine);
  setup_io(&io, &s, raw, out);
  assert_int_equal(tlc_pipeline_init(&p, &c, &io), 0);
  assert_int_equal(push(&p, 0, sizeof stream), N);
  assert_int_equal(s.bytes, sizeof stream);
  assert_int_equal(s.decoded, N);
  assert_int_equal(s.mapped, N);
  assert_int_equal(tlc_engine_counters(p.engine)->events, N);
  tlc_dec_counters_t dc;
  tlc_pipeline_dec_counters(&p, &dc);
  assert_int_equal(dc.records, N);
  assert_int_equal(dc.bytes, sizeof stream);
  /* the engine can be taken: the pipeline goes on without one */
  tlc_engine_t *e = tlc_pipeline_take_engine(&p);
  assert_non_null(e);
  assert_null(p.engine);
  tlc_engine_free(e);
  tlc_pipeline_fini(&p);
  tlc_pipeline_fini(&p); /* safe twice */
}

/* pushes buf[0..len) (any offsets) in chunks of 7 bytes and finishes; returns events out */
static size_t push_buf(tlc_pipeline_t *p, const uint8_t *buf, size_t len) {
  size_t out = 0, off = 0;
  int n, nout;
  while (off < len) {
    size_t used = 0, k = len - off < 7 ? len - off : 7;
    n = tlc_pipeline_push(p, buf + off, k, &used, NULL, &nout);
    assert_true(n >= 0 && nout >= 0);
    out += (size_t)nout;
    off += used;
  }
  while ((n = tlc_pipeline_finish(p, NULL, &nout)) > 0)
    out += (size_t)nout;
  assert_int_equal(n, 0);
  return out;
}

/* a time range keeps exactly the records whose time lies in [from, to]; a gap marked between two
 * inputs (replay: a disconnect between two segments) is carried by the first event out after
 * it, and not when nothing came out before it; the decoder counters add up over the inputs */
static void test_range_and_gap(void **state) {
  (void)state;
  tlc_pipeline_t p;
  tlc_pipeline_conf_t c;
  tlc_pipeline_io_t io;
  seen_t s;
  static tlc_event_t raw[BATCH], out[2 * BATCH];
  memset(&c, 0, sizeof c);
  c.format = TLC_FMT_BIN11;
  c.with_engine = 1;
  tlc_engine_opts_default(&c.engine);
  c.has_from = c.has_to = 1;
  c.from = times[100];
  c.to = times[899] - 1; /* record 899 itself is out */
  size_t want = 0;
  for (size_t i = 0; i < N; i++)
    want += times[i] >= c.from && times[i] <= c.to;
  setup_io(&io, &s, raw, out);
  io.bytes_cb = NULL; /* two inputs: the decoder's offsets are not the stream's */
  io.decoded_cb = NULL;
  assert_int_equal(tlc_pipeline_init(&p, &c, &io), 0);
  tlc_pipeline_gap_mark(&p); /* nothing came out before it: not carried */
  size_t half = N / 2 * TLC_BIN1X_RECORD;
  size_t got = push_buf(&p, stream, half);
  assert_int_equal(s.gaps, 0);
  assert_int_equal(tlc_pipeline_restart(&p), 0); /* a fresh decoder for the next input */
  tlc_pipeline_gap_mark(&p);
  got += push_buf(&p, stream + half, sizeof stream - half);
  assert_int_equal(got, want);
  assert_int_equal(s.mapped, want);
  assert_int_equal(s.gaps, 1);
  assert_int_equal(tlc_engine_counters(p.engine)->events, want);
  tlc_dec_counters_t dc;
  tlc_pipeline_dec_counters(&p, &dc);
  assert_int_equal(dc.records, N);
  assert_int_equal(dc.bytes, sizeof stream);
  /* rewind: totals and the range's state start over */
  assert_int_equal(tlc_pipeline_rewind(&p), 0);
  tlc_pipeline_dec_counters(&p, &dc);
  assert_int_equal(dc.records, 0);
  tlc_pipeline_fini(&p);
}

/* an evlog pipeline (it maps) or a range needs its buffers: refused without them */
static void test_needs_buffers(void **state) {
  (void)state;
  tlc_pipeline_t p;
  tlc_pipeline_conf_t c;
  memset(&c, 0, sizeof c);
  c.format = TLC_FMT_EVLOG;
  assert_int_equal(tlc_pipeline_init(&p, &c, NULL), TLC_EINVAL);
  c.format = TLC_FMT_BIN11;
  c.has_to = 1;
  assert_int_equal(tlc_pipeline_init(&p, &c, NULL), TLC_EINVAL);
  c.has_to = 0;
  assert_int_equal(tlc_pipeline_init(&p, &c, NULL), 0); /* events only, as the store's export */
  tlc_pipeline_fini(&p);
}

int main(void) {
  gen();
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_whole_stream),
    cmocka_unit_test(test_range_and_gap),
    cmocka_unit_test(test_needs_buffers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
