/* test_bin1x.c - the bin10/bin11 codec: hand-written golden records, strict-mode errors,
 * truncation, the encoder, format detection, no allocation, and resynchronisation (wild times,
 * reboots, garbage prefixes, and a random-damage property test over many seeds).
 *
 * Expected values come from the seed's record table, written out by hand below; the random
 * streams are built with the encoder, whose own output is checked against the golden bytes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "base/err.h"
#include "formats/dec.h"
#include "rng.h"
#include "testalloc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------------------------ */

typedef struct result {
  tlc_event_t *ev;
  size_t n, cap;
  int err;  /* first negative return of push or finish (strict error or ETRUNC) */
  int errs; /* how many negative returns */
  uint64_t err_offset;
  char reason[160];
  tlc_dec_counters_t c;
} result_t;

static void res_free(result_t *r) {
  free(r->ev);
  memset(r, 0, sizeof(*r));
}

static void res_add(result_t *r, const tlc_event_t *ev, size_t n) {
  if (n == 0)
    return;
  if (r->n + n > r->cap) {
    r->cap = (r->n + n) * 2 + 64;
    r->ev = realloc(r->ev, r->cap * sizeof(*r->ev));
    assert_non_null(r->ev);
  }
  memcpy(r->ev + r->n, ev, n * sizeof(*ev));
  r->n += n;
}

static void res_err(result_t *r, const tlc_dec_t *d, int rc) {
  if (r->errs++ == 0) {
    r->err = rc;
    r->err_offset = d->err_offset;
    snprintf(r->reason, sizeof(r->reason), "%s", d->err_reason);
  }
}

/* Decodes buf in chunks (random sizes from g when non-NULL, else one push) with batches of at
 * most `batch` events, then finishes. Stops pushing at a strict-mode error. */
static void decode(tlc_format_t f, const tlc_dec_opts_t *o, const uint8_t *buf, size_t len,
                   rng_t *g, size_t batch, result_t *r) {
  tlc_dec_t d;
  tlc_event_t ev[64];
  size_t off = 0;
  int rc;
  memset(r, 0, sizeof(*r));
  assert_true(batch >= 1 && batch <= 64);
  assert_int_equal(tlc_dec_init(&d, f, o), 0);
  while (off < len) {
    size_t chunk = len - off, used;
    if (g != NULL) {
      size_t c = rng_chance(g, 1, 4) ? 1 + rng_below(g, 30) : 1 + rng_below(g, 3000);
      if (c < chunk)
        chunk = c;
    }
    rc = tlc_dec_push(&d, buf + off, chunk, &used, ev, batch);
    if (rc < 0) {
      res_err(r, &d, rc);
      break;
    }
    assert_true(rc > 0 || used > 0);
    assert_true(used <= chunk);
    res_add(r, ev, (size_t)rc);
    off += used;
  }
  if (r->errs == 0) {
    while ((rc = tlc_dec_finish(&d, ev, batch)) != 0) {
      if (rc < 0) {
        res_err(r, &d, rc);
        if (rc != TLC_ETRUNC)
          break; /* a strict-mode error deferred by the last push */
        continue;
      }
      res_add(r, ev, (size_t)rc);
    }
    assert_int_equal(d.c.bytes, len);
  }
  r->c = d.c;
  tlc_dec_fini(&d);
}

static void hex(uint8_t *out, const char *s) {
  size_t n = 0;
  while (*s) {
    unsigned v;
    if (*s == ' ' || *s == '|') {
      s++;
      continue;
    }
    assert_int_equal(sscanf(s, "%2x", &v), 1);
    out[n++] = (uint8_t)v;
    s += 2;
  }
  assert_int_equal(n % 24, 0);
}

static void expect(const tlc_event_t *e, uint32_t handle, uint32_t raw, unsigned type,
                   unsigned core, uint64_t data, int64_t time, uint64_t offset) {
  assert_int_equal(e->handle, handle);
  assert_int_equal(e->raw, raw);
  assert_int_equal(e->type, type);
  assert_int_equal(e->core, core);
  assert_int_equal(e->data, data);
  assert_int_equal((uint64_t)e->time_ns, (uint64_t)time);
  assert_int_equal(e->offset, offset);
  assert_int_equal(e->thread, 0);
  assert_null(e->evlog);
}

/* ---- golden vectors (seed table: handle, flags/event, data, time; all LSB first) ---------- */

/* bin11: flags = core << 4 | type; core 0xFF is unknown; bits above 0xFFF are kept in raw. */
static const char *const golden11 =
    /* 0: handle 0x00000012 function, flags 0x023 core 2 Entry, data 0, time 1000 */
    "12000000 23000000 0000000000000000 E803000000000000"
    /* 1: handle 0x20000005 variable, flags 0xFF4 core unknown Write, data 0x1122334455667788,
     *    time INT64_MAX */
    "05000020 F40F0000 8877665544332211 FFFFFFFFFFFFFF7F"
    /* 2: handle 0x5ABCDEF0 AUX state, flags 0 core 0 Exit, data all ones, time INT64_MIN */
    "F0DEBC5A 00000000 FFFFFFFFFFFFFFFF 0000000000000080"
    /* 3: handle 0x10000001 line, flags 0x011 core 1 Suspend, data 0, time -1 */
    "01000010 11000000 0000000000000000 FFFFFFFFFFFFFFFF"
    /* 4: handle 0x30000000 var state, flags 0xABC00FE2 core 0xFE Resume (unknown high bits),
     *    data 5, time 0x0123456789ABCDEF */
    "00000030 E20FC0AB 0500000000000000 EFCDAB8967452301"
    /* 5: handle 0x40000007 AUX, flags 0x034 core 3 Write, data 0xDEADBEEF, time 4336 */
    "07000040 34000000 EFBEADDE00000000 F010000000000000";

/* bin10: event word with the type in bits 24-27; core unknown. */
static const char *const golden10 =
    /* 0: handle 0x00000012, event 0x03000000 Entry, data 0, time 1000 */
    "12000000 00000003 0000000000000000 E803000000000000"
    /* 1: handle 0x20000005, event 0x04000000 Write, data 0x1122334455667788, time INT64_MAX */
    "05000020 00000004 8877665544332211 FFFFFFFFFFFFFF7F"
    /* 2: handle 0x10000001, event 0x01000000 Suspend, data 0, time INT64_MIN */
    "01000010 00000001 0000000000000000 0000000000000080"
    /* 3: handle 0x00000012, event 0x02000000 Resume, data 0, time -1 */
    "12000000 00000002 0000000000000000 FFFFFFFFFFFFFFFF"
    /* 4: handle 0x00000012, event 0 Exit, data 0, time 0 */
    "12000000 00000000 0000000000000000 0000000000000000"
    /* 5: handle 0x50000009 AUX state, event 0xF3000010 Entry (bits 28-31 and 4 set), data
     *    0x00000000FFFFFFFF, time 0x7FFFFFFF00000000 */
    "09000050 100000F3 FFFFFFFF00000000 00000000FFFFFF7F";

static void check_golden11(const tlc_event_t *e) {
  expect(&e[0], 0x00000012, 0x023, TLC_EV_ENTRY, 2, 0, 1000, 0);
  expect(&e[1], 0x20000005, 0xFF4, TLC_EV_WRITE, TLC_CORE_UNKNOWN, 0x1122334455667788ull, INT64_MAX,
         24);
  expect(&e[2], 0x5ABCDEF0, 0, TLC_EV_EXIT, 0, UINT64_MAX, INT64_MIN, 48);
  expect(&e[3], 0x10000001, 0x011, TLC_EV_SUSPEND, 1, 0, -1, 72);
  expect(&e[4], 0x30000000, 0xABC00FE2u, TLC_EV_RESUME, 0xFE, 5, 0x0123456789ABCDEFll, 96);
  expect(&e[5], 0x40000007, 0x034, TLC_EV_WRITE, 3, 0xDEADBEEFull, 4336, 120);
}

static void check_golden10(const tlc_event_t *e) {
  expect(&e[0], 0x00000012, 0x03000000, TLC_EV_ENTRY, TLC_CORE_UNKNOWN, 0, 1000, 0);
  expect(&e[1], 0x20000005, 0x04000000, TLC_EV_WRITE, TLC_CORE_UNKNOWN, 0x1122334455667788ull,
         INT64_MAX, 24);
  expect(&e[2], 0x10000001, 0x01000000, TLC_EV_SUSPEND, TLC_CORE_UNKNOWN, 0, INT64_MIN, 48);
  expect(&e[3], 0x00000012, 0x02000000, TLC_EV_RESUME, TLC_CORE_UNKNOWN, 0, -1, 72);
  expect(&e[4], 0x00000012, 0, TLC_EV_EXIT, TLC_CORE_UNKNOWN, 0, 0, 96);
  expect(&e[5], 0x50000009, 0xF3000010u, TLC_EV_ENTRY, TLC_CORE_UNKNOWN, 0xFFFFFFFFull,
         0x7FFFFFFF00000000ll, 120);
}

static void test_golden_bin11(void **state) {
  uint8_t buf[6 * 24], out[24];
  result_t r;
  size_t i;
  (void)state;
  hex(buf, golden11);
  decode(TLC_FMT_BIN11, NULL, buf, sizeof(buf), NULL, 64, &r);
  assert_int_equal(r.errs, 0);
  assert_int_equal(r.n, 6);
  check_golden11(r.ev);
  assert_int_equal(r.c.records, 6);
  /* encode(decode(x)) is byte-identical, unknown flag bits included */
  for (i = 0; i < 6; i++) {
    tlc_bin1x_encode(TLC_FMT_BIN11, &r.ev[i], out);
    assert_memory_equal(out, buf + i * 24, 24);
  }
  res_free(&r);
}

static void test_golden_bin10(void **state) {
  uint8_t buf[6 * 24], out[24];
  result_t r;
  size_t i;
  (void)state;
  hex(buf, golden10);
  decode(TLC_FMT_BIN10, NULL, buf, sizeof(buf), NULL, 64, &r);
  assert_int_equal(r.errs, 0);
  assert_int_equal(r.n, 6);
  check_golden10(r.ev);
  for (i = 0; i < 6; i++) {
    tlc_bin1x_encode(TLC_FMT_BIN10, &r.ev[i], out);
    assert_memory_equal(out, buf + i * 24, 24);
  }
  res_free(&r);
}

/* The same golden records through every chunking and batch size, and in resync mode (the times
 * of the golden records jump around, so resync mode is only checked on the first record). */
static void test_golden_chunked(void **state) {
  uint8_t buf[6 * 24];
  result_t r;
  uint64_t seed;
  (void)state;
  hex(buf, golden11);
  for (seed = 1; seed <= 200; seed++) {
    rng_t g;
    rng_seed(&g, seed);
    decode(TLC_FMT_BIN11, NULL, buf, sizeof(buf), &g, 1 + (size_t)(seed % 7), &r);
    assert_int_equal(r.n, 6);
    check_golden11(r.ev);
    res_free(&r);
  }
  hex(buf, golden10);
  for (seed = 1; seed <= 200; seed++) {
    rng_t g;
    rng_seed(&g, seed);
    decode(TLC_FMT_BIN10, NULL, buf, sizeof(buf), &g, 1 + (size_t)(seed % 7), &r);
    assert_int_equal(r.n, 6);
    check_golden10(r.ev);
    res_free(&r);
  }
}

static void test_byte_at_a_time(void **state) {
  uint8_t buf[6 * 24];
  tlc_dec_t d;
  tlc_event_t ev[8];
  size_t i, used, n = 0;
  (void)state;
  hex(buf, golden11);
  assert_int_equal(tlc_dec_init(&d, TLC_FMT_BIN11, NULL), 0);
  for (i = 0; i < sizeof(buf); i++) {
    int rc = tlc_dec_push(&d, buf + i, 1, &used, ev + n, 1);
    assert_int_equal(used, 1);
    /* each record as soon as it is whole, but the last: its time is more than 1 s below the
     * one before, so it waits for the records after it (a clock restart needs them) */
    assert_true(rc == ((i % 24) == 23 && i < sizeof(buf) - 1 ? 1 : 0));
    n += (size_t)rc;
  }
  assert_int_equal(n, 5);
  assert_int_equal(tlc_dec_pending(&d), 24);
  assert_int_equal(tlc_dec_finish(&d, ev + n, 1), 1); /* the end of the stream decides it */
  n++;
  check_golden11(ev);
  assert_int_equal(ev[5].flags, 0); /* alone: not a restart */
  assert_int_equal(tlc_dec_finish(&d, ev, 8), 0);
  tlc_dec_fini(&d);
}

/* ---- strict mode -------------------------------------------------------------------------- */

static void test_strict_bad_type(void **state) {
  uint8_t buf[4 * 24];
  tlc_dec_t d;
  tlc_event_t ev[8];
  size_t used;
  int rc;
  (void)state;
  hex(buf, "12000000 23000000 0000000000000000 E803000000000000"
           "12000000 20000000 0000000000000000 E903000000000000"
           "12000000 27000000 0000000000000000 EA03000000000000" /* type 7 at byte 48 */
           "12000000 23000000 0000000000000000 EB03000000000000");
  assert_int_equal(tlc_dec_init(&d, TLC_FMT_BIN11, NULL), 0);
  rc = tlc_dec_push(&d, buf, sizeof(buf), &used, ev, 8);
  assert_int_equal(rc, 2); /* the records before the bad one come first */
  assert_int_equal(ev[1].offset, 24);
  assert_int_equal(used, 72);
  rc = tlc_dec_push(&d, buf + used, sizeof(buf) - used, &used, ev, 8);
  assert_int_equal(rc, TLC_EFRAME);
  assert_int_equal(used, 0);
  assert_int_equal(d.err_offset, 48);
  assert_string_equal(d.err_reason, "bin11 record at byte 48: event type 7 (valid 0..4)");
  assert_int_equal(tlc_dec_finish(&d, ev, 8), TLC_EFRAME); /* sticky */
  assert_int_equal(d.c.records_invalid, 1);
  /* reset clears the error; the decoder takes a new stream */
  tlc_dec_reset(&d);
  rc = tlc_dec_push(&d, buf, 24, &used, ev, 8);
  assert_int_equal(rc, 1);
  tlc_dec_fini(&d);
}

static void test_strict_bad_area_first(void **state) {
  uint8_t buf[2 * 24];
  tlc_dec_t d;
  tlc_event_t ev[8];
  size_t used;
  (void)state;
  hex(buf, "01000060 00000003 0000000000000000 0000000000000000" /* area 6, bin10 */
           "12000000 00000003 0000000000000000 E803000000000000");
  assert_int_equal(tlc_dec_init(&d, TLC_FMT_BIN10, NULL), 0);
  assert_int_equal(tlc_dec_push(&d, buf, sizeof(buf), &used, ev, 8), TLC_EFRAME);
  assert_int_equal(d.err_offset, 0);
  assert_string_equal(d.err_reason,
                      "bin10 record at byte 0: handle 0x60000001 has area type 6 (valid 0..5)");
  tlc_dec_fini(&d);
}

/* The bin10 type lives in bits 24-27: a bin11-style low nibble 7 is not an error there, and a
 * bin10 type 5 is. */
static void test_strict_bin10_type_bits(void **state) {
  uint8_t buf[2 * 24];
  result_t r;
  (void)state;
  hex(buf, "12000000 07000000 0000000000000000 0000000000000000"
           "12000000 00000005 0000000000000000 0000000000000000");
  decode(TLC_FMT_BIN10, NULL, buf, sizeof(buf), NULL, 8, &r);
  assert_int_equal(r.n, 1);
  assert_int_equal(r.ev[0].type, TLC_EV_EXIT);
  assert_int_equal(r.err, TLC_EFRAME);
  assert_int_equal(r.err_offset, 24);
  assert_string_equal(r.reason, "bin10 record at byte 24: event type 5 (valid 0..4)");
  res_free(&r);
}

static void test_strict_time_backwards_ok(void **state) {
  uint8_t buf[3 * 24];
  result_t r;
  (void)state;
  hex(buf, "12000000 23000000 0000000000000000 00E40B5402000000" /* 10 s */
           "12000000 20000000 0000000000000000 0500000000000000" /* 5 ns: reboot */
           "12000000 23000000 0000000000000000 0600000000000000");
  decode(TLC_FMT_BIN11, NULL, buf, sizeof(buf), NULL, 8, &r);
  assert_int_equal(r.errs, 0);
  assert_int_equal(r.n, 3);
  assert_true(r.ev[0].time_ns == 10000000000ll);
  assert_true(r.ev[1].time_ns == 5);
  res_free(&r);
}

static void test_truncated(void **state) {
  uint8_t buf[6 * 24];
  tlc_dec_t d;
  tlc_event_t ev[8];
  size_t used;
  int mode;
  (void)state;
  hex(buf, golden11);
  for (mode = 0; mode < 2; mode++) {
    tlc_dec_opts_t o = { .resync = mode };
    assert_int_equal(tlc_dec_init(&d, TLC_FMT_BIN11, &o), 0);
    /* two monotone records (0 and 5 of the golden set are 1000 and 4336 ns) + 7 bytes */
    {
      uint8_t s[55];
      hex(s, "12000000 23000000 0000000000000000 E803000000000000"
             "07000040 34000000 EFBEADDE00000000 F010000000000000");
      memcpy(s + 48, buf, 7);
      int n = tlc_dec_push(&d, s, sizeof(s), &used, ev, 8), rc;
      assert_int_equal(n, mode ? 0 : 2); /* resync mode holds records back for confirmation */
      assert_int_equal(used, 55);
      while ((rc = tlc_dec_finish(&d, ev + n, 8)) > 0)
        n += rc;
      assert_int_equal(n, 2);
      assert_int_equal(rc, TLC_ETRUNC);
      assert_int_equal(ev[1].time_ns, 4336);
    }
    assert_int_equal(d.err_offset, 48);
    assert_string_equal(d.err_reason, "truncated record at byte 48: 7 of 24 bytes");
    assert_int_equal(d.c.truncated, 7);
    assert_int_equal(d.c.records, 2);
    /* once only; then a fresh stream with the counters kept */
    assert_int_equal(tlc_dec_finish(&d, ev, 8), 0);
    assert_int_equal(tlc_dec_push(&d, buf, 24, &used, ev, 8), mode ? 0 : 1);
    if (mode) {
      assert_int_equal(tlc_dec_finish(&d, ev, 8), 0); /* one record alone cannot be confirmed */
      assert_int_equal(d.c.bytes_skipped, 24);
    }
    assert_int_equal(d.c.truncated, 7);
    tlc_dec_fini(&d);
  }
}

static void test_max_and_progress(void **state) {
  uint8_t buf[6 * 24];
  tlc_dec_t d;
  tlc_event_t ev[6];
  size_t used, off = 0, n = 0;
  (void)state;
  hex(buf, golden11);
  assert_int_equal(tlc_dec_init(&d, TLC_FMT_BIN11, NULL), 0);
  assert_int_equal(tlc_dec_push(&d, buf, sizeof(buf), &used, ev, 0), 0);
  assert_int_equal(used, 0);
  assert_int_equal(tlc_dec_push(&d, buf, 0, &used, ev, 4), 0);
  while (off < sizeof(buf)) {
    int rc = tlc_dec_push(&d, buf + off, sizeof(buf) - off, &used, ev + n, 2);
    assert_true(rc >= 0 && rc <= 2);
    assert_true(rc > 0 || used > 0);
    n += (size_t)rc;
    off += used;
  }
  assert_int_equal(n, 5); /* the last steps back: held for the records after it */
  assert_int_equal(tlc_dec_finish(&d, ev + n, 1), 1);
  n++;
  check_golden11(ev);
  tlc_dec_fini(&d);
}

/* ---- encoder ------------------------------------------------------------------------------ */

static void test_encode_compose(void **state) {
  tlc_event_t e;
  uint8_t out[24], want[24];
  (void)state;
  memset(&e, 0, sizeof(e));
  e.handle = 0x20000005;
  e.type = TLC_EV_WRITE;
  e.core = TLC_CORE_UNKNOWN;
  e.data = 0x1122334455667788ull;
  e.time_ns = INT64_MAX;
  e.raw = 0xFFFFFFFF; /* disagrees with type: composed from type and core */
  tlc_bin1x_encode(TLC_FMT_BIN11, &e, out);
  hex(want, "05000020 F40F0000 8877665544332211 FFFFFFFFFFFFFF7F");
  assert_memory_equal(out, want, 24);
  tlc_bin1x_encode(TLC_FMT_BIN10, &e, out);
  hex(want, "05000020 00000004 8877665544332211 FFFFFFFFFFFFFF7F");
  assert_memory_equal(out, want, 24);
  /* raw agreeing with the type but not the core (bin11): composed */
  e.raw = 0x00000204;
  e.core = 1;
  tlc_bin1x_encode(TLC_FMT_BIN11, &e, out);
  assert_int_equal(out[4], 0x14);
  assert_int_equal(out[5], 0x00);
  /* bin10 keeps raw when its bits 24-27 agree, core ignored */
  e.raw = 0x84000001;
  tlc_bin1x_encode(TLC_FMT_BIN10, &e, out);
  hex(want, "05000020 01000084 8877665544332211 FFFFFFFFFFFFFF7F");
  assert_memory_equal(out, want, 24);
}

static void test_encode_decode_roundtrip(void **state) {
  rng_t g;
  int i, f;
  (void)state;
  rng_seed(&g, 77);
  for (f = 0; f < 2; f++) {
    tlc_format_t fmt = f ? TLC_FMT_BIN11 : TLC_FMT_BIN10;
    for (i = 0; i < 2000; i++) {
      tlc_event_t e, back[2];
      uint8_t rec[24];
      tlc_dec_t d;
      size_t used;
      memset(&e, 0, sizeof(e));
      e.handle = (uint32_t)rng_below(&g, 6) << 28 | (uint32_t)rng_below(&g, 1u << 28);
      e.type = (uint8_t)rng_below(&g, 5);
      e.core = fmt == TLC_FMT_BIN10 ? TLC_CORE_UNKNOWN : (uint8_t)rng_below(&g, 256);
      e.data = rng_next(&g);
      e.time_ns = (int64_t)rng_next(&g);
      e.raw = (uint32_t)rng_next(&g); /* mostly disagreeing: composed */
      tlc_bin1x_encode(fmt, &e, rec);
      assert_int_equal(tlc_dec_init(&d, fmt, NULL), 0);
      assert_int_equal(tlc_dec_push(&d, rec, 24, &used, back, 2), 1);
      assert_int_equal(back[0].handle, e.handle);
      assert_int_equal(back[0].type, e.type);
      assert_int_equal(back[0].core, e.core);
      assert_int_equal(back[0].data, e.data);
      assert_true(back[0].time_ns == e.time_ns);
      tlc_dec_fini(&d);
    }
  }
}

/* ---- stream generation -------------------------------------------------------------------- */

/* A realistic stream: handles of every area with 16-bit indexes, mixed types, bin11 cores
 * 0..3 or unknown, data only on writes, time starting anywhere in 1 s .. 1000 s and rising by
 * 0..20 us per record. */
static uint8_t *gen_stream(tlc_format_t f, rng_t *g, size_t n, tlc_event_t *evs) {
  static const uint8_t cores[] = { 0, 1, 2, 3, TLC_CORE_UNKNOWN };
  uint8_t *buf = malloc(n * 24 + 1);
  int64_t t = rng_range(g, 1000000000ll, 1000000000000ll);
  size_t i;
  assert_non_null(buf);
  for (i = 0; i < n; i++) {
    tlc_event_t e;
    memset(&e, 0, sizeof(e));
    e.handle = (uint32_t)rng_below(g, 6) << 28 | (uint32_t)rng_range(g, 1, 0xFFFF);
    e.type = (uint8_t)rng_below(g, 5);
    e.core = f == TLC_FMT_BIN11 ? cores[rng_below(g, 5)] : TLC_CORE_UNKNOWN;
    e.data = e.type == TLC_EV_WRITE ? rng_next(g) & 0xFFFFFFFFu : 0;
    t += rng_range(g, 0, 20000);
    e.time_ns = t;
    e.raw = f == TLC_FMT_BIN11 ? (uint32_t)e.core << 4 | e.type : (uint32_t)e.type << 24;
    e.offset = i * 24;
    tlc_bin1x_encode(f, &e, buf + i * 24);
    if (evs != NULL)
      evs[i] = e;
  }
  return buf;
}

static int same_record(const tlc_event_t *a, const tlc_event_t *b) {
  return a->handle == b->handle && a->raw == b->raw && a->type == b->type && a->core == b->core &&
         a->data == b->data && a->time_ns == b->time_ns;
}

static void check_accounting(const result_t *r, size_t len) {
  size_t i, gaps = 0;
  assert_int_equal(r->c.bytes, len);
  assert_int_equal(r->c.records, r->n);
  assert_int_equal(24 * r->c.records + r->c.bytes_skipped + r->c.truncated, len);
  for (i = 0; i < r->n; i++) {
    gaps += (r->ev[i].flags & TLC_EVF_GAP) != 0;
    if (i > 0)
      assert_true(r->ev[i].offset >= r->ev[i - 1].offset + 24);
    assert_true(r->ev[i].offset + 24 <= len);
  }
  assert_int_equal(gaps, r->c.resyncs);
}

/* ---- resync mode -------------------------------------------------------------------------- */

static const tlc_dec_opts_t resync_opts = { .resync = 1 };

static void test_resync_clean(void **state) {
  rng_t g;
  tlc_event_t want[500];
  uint8_t *buf;
  result_t r;
  size_t i;
  int f;
  (void)state;
  for (f = 0; f < 2; f++) {
    tlc_format_t fmt = f ? TLC_FMT_BIN11 : TLC_FMT_BIN10;
    rng_seed(&g, 5);
    buf = gen_stream(fmt, &g, 500, want);
    decode(fmt, &resync_opts, buf, 500 * 24, &g, 17, &r);
    assert_int_equal(r.errs, 0);
    assert_int_equal(r.n, 500);
    for (i = 0; i < 500; i++) {
      assert_true(same_record(&r.ev[i], &want[i]));
      assert_int_equal(r.ev[i].offset, i * 24);
      assert_int_equal(r.ev[i].flags, 0);
    }
    assert_int_equal(r.c.bytes_skipped, 0);
    assert_int_equal(r.c.resyncs, 0);
    assert_int_equal(r.c.records_invalid, 0);
    res_free(&r);
    free(buf);
  }
}

/* Idle line: in sync, the record held only for its successor is delivered by
 * tlc_dec_idle; a partial record and a stream not yet in sync stay held; nothing is lost or
 * delivered twice when the stream goes on. */
static void test_resync_idle(void **state) {
  rng_t g;
  tlc_event_t want[40], ev[64];
  tlc_dec_t d;
  uint8_t *buf;
  size_t used, got = 0;
  int n;
  (void)state;
  rng_seed(&g, 9);
  buf = gen_stream(TLC_FMT_BIN11, &g, 40, want);
  assert_int_equal(tlc_dec_init(&d, TLC_FMT_BIN11, &resync_opts), 0);
  /* one record only: not in sync yet, nothing to take alone */
  n = tlc_dec_push(&d, buf, 24, &used, ev, 64);
  assert_int_equal(n, 0);
  assert_int_equal(tlc_dec_idle(&d, ev, 64), 0);
  /* 20 records and 10 bytes of the 21st: 19 delivered, the 20th waits for its successor */
  n = tlc_dec_push(&d, buf + 24, 20 * 24 - 24 + 10, &used, ev, 64);
  assert_true(n >= 0);
  got += (size_t)n;
  assert_int_equal(got, 19);
  n = tlc_dec_idle(&d, ev, 64);
  assert_int_equal(n, 1); /* the 20th: plausible, near the last one, in the locked alignment */
  assert_true(same_record(&ev[0], &want[19]));
  assert_int_equal(ev[0].offset, 19 * 24);
  got += (size_t)n;
  assert_int_equal(tlc_dec_idle(&d, ev, 64), 0); /* the partial 21st stays */
  /* the rest of the stream: each record once */
  n = tlc_dec_push(&d, buf + 20 * 24 + 10, 20 * 24 - 10, &used, ev, 64);
  assert_true(n >= 0);
  assert_true(same_record(&ev[0], &want[20]));
  got += (size_t)n;
  n = tlc_dec_finish(&d, ev, 64);
  got += (size_t)(n > 0 ? n : 0);
  assert_int_equal(got, 40);
  assert_int_equal(d.c.records, 40);
  assert_int_equal(d.c.bytes_skipped, 0);
  /* strict mode: nothing is held, idle is a no-op */
  tlc_dec_fini(&d);
  assert_int_equal(tlc_dec_init(&d, TLC_FMT_BIN11, NULL), 0);
  assert_int_equal(tlc_dec_idle(&d, ev, 64), 0);
  tlc_dec_fini(&d);
  free(buf);
}

/* A record whose time is wild (far future, or within the forward step but contradicted by its
 * successor, or far past) is dropped alone; the records after it are delivered. */
static void test_resync_wild_time(void **state) {
  static const int64_t wild[] = { INT64_MAX, 1500000000 /* +1.5 s */, -5, INT64_MIN };
  tlc_event_t want[40];
  uint8_t *buf;
  result_t r;
  size_t i, w;
  (void)state;
  for (w = 0; w < sizeof(wild) / sizeof(wild[0]); w++) {
    rng_t g;
    rng_seed(&g, 11);
    buf = gen_stream(TLC_FMT_BIN11, &g, 40, want);
    /* record 20's time field: bytes 16..23 */
    {
      int64_t t = wild[w] == 1500000000 ? want[20].time_ns + wild[w] : wild[w];
      for (i = 0; i < 8; i++)
        buf[20 * 24 + 16 + i] = (uint8_t)((uint64_t)t >> (8 * i));
    }
    decode(TLC_FMT_BIN11, &resync_opts, buf, 40 * 24, NULL, 64, &r);
    assert_int_equal(r.n, 39);
    for (i = 0; i < 39; i++)
      assert_true(same_record(&r.ev[i], &want[i < 20 ? i : i + 1]));
    assert_int_equal(r.ev[20].flags, TLC_EVF_GAP);
    assert_int_equal(r.ev[20].offset, 21 * 24);
    assert_int_equal(r.c.bytes_skipped, 24);
    assert_int_equal(r.c.resyncs, 1);
    assert_int_equal(r.c.records_invalid, 1);
    check_accounting(&r, 40 * 24);
    res_free(&r);
    free(buf);
  }
}

/* A target reboot restarts time: resync mode loses nothing (it takes the self-consistent run at
 * the loss point at once), reports no gap, and flags the first restarted record
 * TLC_EVF_RESTART for the engine. */
static void test_resync_reboot(void **state) {
  tlc_event_t want[300];
  uint8_t *buf;
  result_t r;
  size_t i;
  rng_t g;
  (void)state;
  rng_seed(&g, 3);
  buf = gen_stream(TLC_FMT_BIN11, &g, 300, want);
  {
    int64_t shift = want[150].time_ns - 1000; /* time restarts at 1000 ns at record 150 */
    for (i = 150; i < 300; i++) {
      want[i].time_ns -= shift;
      tlc_bin1x_encode(TLC_FMT_BIN11, &want[i], buf + i * 24);
    }
  }
  decode(TLC_FMT_BIN11, &resync_opts, buf, 300 * 24, &g, 7, &r);
  assert_int_equal(r.n, 300);
  for (i = 0; i < 300; i++) {
    assert_true(same_record(&r.ev[i], &want[i]));
    assert_int_equal(r.ev[i].flags, i == 150 ? TLC_EVF_RESTART : 0);
  }
  assert_int_equal(r.c.bytes_skipped, 0);
  assert_int_equal(r.c.resyncs, 0);
  assert_int_equal(r.c.records_invalid, 0);
  res_free(&r);
  free(buf);
}

/* Strict mode (TCP): a board reset while its connection stays open. The first record of a run
 * of confirm + 1 records that all lie more than the tolerance below the record before it, and
 * agree with each other, carries TLC_EVF_RESTART (the engine then starts a clock epoch); a lone
 * wild time does not; a restart in the last two records of a stream is flagged at its end;
 * every chunking gives the same events. */
static void test_strict_reboot(void **state) {
  tlc_event_t want[300];
  uint8_t *buf;
  result_t r;
  size_t i, k;
  int64_t shift;
  rng_t g;
  (void)state;
  for (k = 0; k < 3; k++) {
    size_t at = k == 2 ? 298 : 150; /* where the clock restarts (298: two records left) */
    rng_seed(&g, 13 + k);
    buf = gen_stream(TLC_FMT_BIN11, &g, 300, want);
    shift = want[at].time_ns - 1000;
    for (i = 0; i < 300; i++) {
      if (i < at)
        want[i].time_ns += 10000000000ll; /* the old clock: past 10 s */
      else
        want[i].time_ns -= shift; /* the new clock, from 1000 ns */
      if (k == 1 && i == 60)
        want[i].time_ns = 5; /* a lone wild time, far below the others */
      tlc_bin1x_encode(TLC_FMT_BIN11, &want[i], buf + i * 24);
    }
    for (unsigned chunking = 0; chunking < 2; chunking++) {
      decode(TLC_FMT_BIN11, NULL, buf, 300 * 24, chunking ? &g : NULL, chunking ? 7 : 64, &r);
      assert_int_equal(r.n, 300);
      for (i = 0; i < 300; i++) {
        assert_true(same_record(&r.ev[i], &want[i]));
        assert_int_equal(r.ev[i].flags, i == at ? TLC_EVF_RESTART : 0);
      }
      assert_int_equal(r.c.records_invalid, 0);
      res_free(&r);
    }
    free(buf);
  }
}

/* A pause longer than TLC_BIN1X_MAX_STEP_NS (the target stopped at a breakpoint for a minute)
 * and small backward steps within the tolerance (events of several cores merged) cost no
 * records and report no gap. */
static void test_resync_pause_and_jitter(void **state) {
  tlc_event_t want[300];
  uint8_t *buf;
  result_t r;
  size_t i;
  rng_t g;
  (void)state;
  rng_seed(&g, 6);
  buf = gen_stream(TLC_FMT_BIN11, &g, 300, want);
  for (i = 100; i < 300; i++)
    want[i].time_ns += 60000000000ll; /* +60 s from record 100 on */
  for (i = 200; i < 300; i += 7)
    want[i].time_ns -= 500000000; /* 0.5 s early, within the default 1 s tolerance */
  for (i = 0; i < 300; i++)
    tlc_bin1x_encode(TLC_FMT_BIN11, &want[i], buf + i * 24);
  decode(TLC_FMT_BIN11, &resync_opts, buf, 300 * 24, &g, 5, &r);
  assert_int_equal(r.n, 300);
  for (i = 0; i < 300; i++) {
    assert_true(same_record(&r.ev[i], &want[i]));
    assert_int_equal(r.ev[i].flags, 0);
  }
  assert_int_equal(r.c.bytes_skipped, 0);
  assert_int_equal(r.c.resyncs, 0);
  assert_int_equal(r.c.records_invalid, 0);
  res_free(&r);
  free(buf);
}

/* A stream picked up mid-record (a serial port opened late): the partial record is skipped. */
static void test_resync_garbage_prefix(void **state) {
  tlc_event_t want[50];
  uint8_t *buf, *in;
  result_t r;
  size_t i;
  rng_t g;
  (void)state;
  rng_seed(&g, 9);
  buf = gen_stream(TLC_FMT_BIN10, &g, 50, want);
  in = buf + 24 - 5; /* the last 5 bytes of record 0 */
  decode(TLC_FMT_BIN10, &resync_opts, in, 49 * 24 + 5, &g, 3, &r);
  assert_int_equal(r.n, 49);
  for (i = 0; i < 49; i++)
    assert_true(same_record(&r.ev[i], &want[i + 1]));
  assert_int_equal(r.ev[0].flags, TLC_EVF_GAP);
  assert_int_equal(r.ev[0].offset, 5);
  assert_int_equal(r.c.bytes_skipped, 5);
  assert_int_equal(r.c.resyncs, 1);
  assert_int_equal(r.c.records_invalid, 0);
  res_free(&r);
  free(buf);
}

/* Only garbage: everything skipped, nothing delivered, bounded state. */
static void test_resync_all_garbage(void **state) {
  uint8_t buf[5000];
  result_t r;
  rng_t g;
  size_t i;
  (void)state;
  rng_seed(&g, 21);
  for (i = 0; i < sizeof(buf); i++)
    buf[i] = (uint8_t)(0xF0 | rng_below(&g, 16)); /* every handle nibble and type is 0xF */
  decode(TLC_FMT_BIN11, &resync_opts, buf, sizeof(buf), &g, 8, &r);
  assert_int_equal(r.n, 0);
  assert_int_equal(r.c.bytes_skipped, sizeof(buf));
  assert_int_equal(r.c.resyncs, 0);
  res_free(&r);
}

/* tlc_dec_reset drops held bytes (counted as skipped) and marks the next event as a gap. */
static void test_reset(void **state) {
  tlc_event_t want[10], ev[16];
  uint8_t *buf;
  tlc_dec_t d;
  size_t used;
  rng_t g;
  int n = 0, rc;
  (void)state;
  rng_seed(&g, 4);
  buf = gen_stream(TLC_FMT_BIN11, &g, 10, want);
  assert_int_equal(tlc_dec_init(&d, TLC_FMT_BIN11, NULL), 0);
  assert_int_equal(tlc_dec_push(&d, buf, 30, &used, ev, 16), 1);
  assert_int_equal(used, 30);
  tlc_dec_reset(&d);
  assert_int_equal(d.c.bytes_skipped, 6);
  assert_int_equal(tlc_dec_push(&d, buf + 48, 48, &used, ev, 16), 2);
  assert_int_equal(ev[0].flags, TLC_EVF_GAP);
  assert_int_equal(ev[1].flags, 0);
  assert_true(same_record(&ev[0], &want[2]));
  tlc_dec_fini(&d);
  /* resync mode: held-back records are dropped too */
  assert_int_equal(tlc_dec_init(&d, TLC_FMT_BIN11, &resync_opts), 0);
  assert_int_equal(tlc_dec_push(&d, buf, 72, &used, ev, 16), 0);
  tlc_dec_reset(&d);
  assert_int_equal(d.c.bytes_skipped, 72);
  /* records 3..9: 3 is confirmed by 4..6; each later one by its successor; 9 waits for finish */
  assert_int_equal(tlc_dec_push(&d, buf + 72, 7 * 24, &used, ev, 16), 6);
  while ((rc = tlc_dec_finish(&d, ev + 6 + n, 16)) > 0)
    n += rc;
  assert_int_equal(n, 1);
  assert_true(same_record(&ev[6], &want[9]));
  assert_true(same_record(&ev[0], &want[3]));
  assert_int_equal(ev[0].flags, TLC_EVF_GAP);
  tlc_dec_fini(&d);
  free(buf);
}

/* ---- random damage ------------------------------------------------------------------------ */

#define DMG_RECORDS 3000
#define DMG_SITES   8
#define DMG_SPACING 40 /* records between damage sites at least */
#ifndef DMG_SEEDS
#define DMG_SEEDS 60
#endif

enum { DMG_FLIP, DMG_DROP, DMG_INSERT };

/* Damages a copy of `src` at `k` sites. Marks the original records touched by damage in
 * `touched` and records the first original record of each site in `site`. Returns the new
 * length; `out` has room for the source plus 8 bytes per site. */
static size_t damage(const uint8_t *src, size_t n, int kind, unsigned k, rng_t *g, uint8_t *out,
                     uint8_t *touched, size_t *site) {
  size_t len = 0, prev = 0, s;
  size_t slot = n / k;
  memset(touched, 0, n);
  for (s = 0; s < k; s++) {
    size_t rec = s * slot + (size_t)rng_below(g, slot - DMG_SPACING);
    size_t at = rec * 24 + (size_t)rng_below(g, 24), m;
    site[s] = rec;
    touched[rec] = 1;
    memcpy(out + len, src + prev, at - prev);
    len += at - prev;
    prev = at;
    m = 1 + (size_t)rng_below(g, 8);
    if (kind == DMG_FLIP) {
      /* bytes are flipped in place below, once the copy is complete */
    } else if (kind == DMG_DROP) {
      if (at + m > (rec + 1) * 24)
        m = (rec + 1) * 24 - at;
      prev += m;
    } else {
      for (; m > 0; m--)
        out[len++] = (uint8_t)rng_next(g);
    }
  }
  memcpy(out + len, src + prev, n * 24 - prev);
  len += n * 24 - prev;
  if (kind == DMG_FLIP) { /* same length: flip bytes of each damaged record in place */
    for (s = 0; s < k; s++) {
      size_t j, m = 1 + (size_t)rng_below(g, 4);
      for (j = 0; j < m; j++)
        out[site[s] * 24 + rng_below(g, 24)] ^= (uint8_t)(1 + rng_below(g, 255));
    }
  }
  return len;
}

static void test_random_damage(void **state) {
  static const char *const kinds[] = { "flip", "drop", "insert" };
  const unsigned bound = 3 + 1; /* confirm + 1 neighbours lost per site at most */
  tlc_event_t *want = malloc(DMG_RECORDS * sizeof(*want));
  uint8_t *out = malloc(DMG_RECORDS * 24 + DMG_SITES * 8), *touched = malloc(DMG_RECORDS);
  uint64_t seed, worst = 0, total_lost = 0, total_extra = 0;
  int kind, f;
  (void)state;
  assert_non_null(want);
  assert_non_null(out);
  assert_non_null(touched);
  for (f = 0; f < 2; f++)
    for (kind = 0; kind < 3; kind++)
      for (seed = 1; seed <= DMG_SEEDS; seed++) {
        tlc_format_t fmt = f ? TLC_FMT_BIN11 : TLC_FMT_BIN10;
        rng_t g;
        uint8_t *src;
        size_t site[DMG_SITES], len, i, j = 0, s, lost[DMG_SITES] = { 0 };
        unsigned k;
        result_t r;
        uint64_t full = seed * 1000003u + (uint64_t)kind * 101 + (uint64_t)f;
        rng_seed(&g, full);
        k = 1 + (unsigned)rng_below(&g, DMG_SITES);
        src = gen_stream(fmt, &g, DMG_RECORDS, want);
        len = damage(src, DMG_RECORDS, kind, k, &g, out, touched, site);
        decode(fmt, &resync_opts, out, len, &g, 1 + (size_t)rng_below(&g, 64), &r);
        check_accounting(&r, len);
        /* every untouched record, in order, exact, except a few around each site */
        s = 0;
        for (i = 0; i < DMG_RECORDS; i++) {
          size_t at;
          while (s + 1 < k && i >= site[s + 1])
            s++;
          if (touched[i])
            continue;
          for (at = j; at < r.n && !same_record(&r.ev[at], &want[i]); at++)
            ;
          if (at == r.n) {
            lost[i < site[0] ? 0 : s]++;
            continue;
          }
          total_extra += at - j;
          j = at + 1;
        }
        for (s = 0; s < k; s++) {
          if (lost[s] > worst)
            worst = lost[s];
          total_lost += lost[s];
          if (lost[s] > bound)
            fail_msg("%s %s seed %" PRIu64 " (rng seed %" PRIu64 "): %zu records lost at site %zu "
                     "(record %zu), bound %u",
                     tlc_format_name(fmt), kinds[kind], seed, full, lost[s], s, site[s], bound);
        }
        res_free(&r);
        free(src);
      }
  printf("random damage: %d streams, worst site lost %" PRIu64 " untouched records, %" PRIu64
         " lost in all, %" PRIu64 " extra events\n",
         6 * DMG_SEEDS, worst, total_lost, total_extra);
  free(want);
  free(out);
  free(touched);
}

/* ---- detection ---------------------------------------------------------------------------- */

static void test_plausible_run(void **state) {
  uint8_t buf[6 * 24];
  (void)state;
  hex(buf, golden11);
  /* record 1 has time INT64_MAX, record 2 INT64_MIN: the run ends at record 2 */
  assert_int_equal(tlc_bin1x_plausible_run(TLC_FMT_BIN11, buf, sizeof(buf)), 2);
  assert_int_equal(tlc_bin1x_plausible_run(TLC_FMT_BIN10, buf, sizeof(buf)), 0);
  assert_int_equal(tlc_bin1x_plausible_run(TLC_FMT_BIN11, buf, 47), 1);
  assert_int_equal(tlc_bin1x_plausible_run(TLC_FMT_NONE, buf, sizeof(buf)), 0);
  hex(buf, golden10);
  assert_int_equal(tlc_bin1x_plausible_run(TLC_FMT_BIN10, buf, sizeof(buf)), 2);
  assert_int_equal(tlc_bin1x_plausible_run(TLC_FMT_BIN11, buf, sizeof(buf)), 0);
}

static void test_detect(void **state) {
  tlc_event_t want[200];
  uint8_t *buf;
  char why[200];
  rng_t g;
  size_t i;
  (void)state;
  rng_seed(&g, 31);
  buf = gen_stream(TLC_FMT_BIN11, &g, 200, want);
  assert_int_equal(tlc_dec_detect(buf, 200 * 24, why, sizeof(why)), TLC_FMT_BIN11);
  assert_string_equal(why, "bin11: 200 of 200 records plausible (bin10: 0)");
  free(buf);
  buf = gen_stream(TLC_FMT_BIN10, &g, 200, want);
  assert_int_equal(tlc_dec_detect(buf, 200 * 24, why, sizeof(why)), TLC_FMT_BIN10);
  free(buf);
  /* all-exit streams. bin11 on a known core other than 0: flags 0x0n0 fails as bin10. */
  buf = gen_stream(TLC_FMT_BIN11, &g, 200, want);
  for (i = 0; i < 200; i++) {
    want[i].type = TLC_EV_EXIT;
    want[i].core = want[i].core == 0 ? 1 : want[i].core;
    want[i].raw = (uint32_t)want[i].core << 4;
    tlc_bin1x_encode(TLC_FMT_BIN11, &want[i], buf + i * 24);
  }
  assert_int_equal(tlc_dec_detect(buf, 200 * 24, why, sizeof(why)), TLC_FMT_BIN11);
  assert_string_equal(why, "bin11: 200 of 200 records plausible (bin10: 0)");
  /* All-exit on core 0 (bin11) and all-exit bin10 are the same bytes (word 0): a tie, which
   * dec.c gives to bin11; the events differ only in core (0 instead of unknown). */
  for (i = 0; i < 200; i++) {
    want[i].core = 0;
    want[i].raw = 0;
    tlc_bin1x_encode(TLC_FMT_BIN11, &want[i], buf + i * 24);
  }
  assert_int_equal(tlc_dec_detect(buf, 200 * 24, why, sizeof(why)), TLC_FMT_BIN11);
  assert_string_equal(why, "bin11: 200 of 200 records plausible (bin10: 200)");
  /* a bin10 stream that is all exits but one entry late on is still bin10 */
  want[150].type = TLC_EV_ENTRY;
  want[150].raw = 0x03000000;
  tlc_bin1x_encode(TLC_FMT_BIN10, &want[150], buf + 150 * 24);
  assert_int_equal(tlc_dec_detect(buf, 200 * 24, why, sizeof(why)), TLC_FMT_BIN10);
  assert_string_equal(why, "bin10: 200 of 200 records plausible (bin11: 150)");
  /* garbage */
  memset(buf, 0xEE, 200 * 24);
  assert_int_equal(tlc_dec_detect(buf, 200 * 24, why, sizeof(why)), TLC_FMT_NONE);
  assert_int_equal(tlc_dec_detect(buf, 10, why, sizeof(why)), TLC_FMT_NONE);
  free(buf);
}

/* ---- allocation --------------------------------------------------------------------------- */

static void test_no_allocation(void **state) {
  tlc_event_t want[400], ev[16];
  uint8_t *buf;
  rng_t g;
  int mode, f;
  (void)state;
  rng_seed(&g, 8);
  for (f = 0; f < 2; f++)
    for (mode = 0; mode < 2; mode++) {
      tlc_format_t fmt = f ? TLC_FMT_BIN11 : TLC_FMT_BIN10;
      tlc_dec_opts_t o = { .resync = mode };
      tlc_dec_t d;
      size_t off = 0, used;
      buf = gen_stream(fmt, &g, 400, want);
      buf[100 * 24 + 7] ^= 0x5A; /* some damage for the resync path */
      testalloc_install();
      assert_int_equal(tlc_dec_init(&d, fmt, &o), 0);
      while (off < 400 * 24) {
        size_t c = 1 + (size_t)rng_below(&g, 100);
        if (c > 400 * 24 - off)
          c = 400 * 24 - off;
        if (tlc_dec_push(&d, buf + off, c, &used, ev, 16) < 0)
          break;
        off += used;
      }
      while (tlc_dec_finish(&d, ev, 16) > 0)
        ;
      tlc_dec_reset(&d);
      tlc_dec_fini(&d);
      assert_int_equal(testalloc_count(), 0);
      testalloc_uninstall();
      free(buf);
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_golden_bin11),
    cmocka_unit_test(test_golden_bin10),
    cmocka_unit_test(test_golden_chunked),
    cmocka_unit_test(test_byte_at_a_time),
    cmocka_unit_test(test_strict_bad_type),
    cmocka_unit_test(test_strict_bad_area_first),
    cmocka_unit_test(test_strict_bin10_type_bits),
    cmocka_unit_test(test_strict_time_backwards_ok),
    cmocka_unit_test(test_truncated),
    cmocka_unit_test(test_max_and_progress),
    cmocka_unit_test(test_encode_compose),
    cmocka_unit_test(test_encode_decode_roundtrip),
    cmocka_unit_test(test_resync_clean),
    cmocka_unit_test(test_resync_idle),
    cmocka_unit_test(test_resync_wild_time),
    cmocka_unit_test(test_resync_reboot),
    cmocka_unit_test(test_resync_pause_and_jitter),
    cmocka_unit_test(test_resync_garbage_prefix),
    cmocka_unit_test(test_resync_all_garbage),
    cmocka_unit_test(test_reset),
    cmocka_unit_test(test_random_damage),
    cmocka_unit_test(test_strict_reboot),
    cmocka_unit_test(test_plausible_run),
    cmocka_unit_test(test_detect),
    cmocka_unit_test(test_no_allocation),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
