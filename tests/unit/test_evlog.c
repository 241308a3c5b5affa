/* test_evlog.c - the evlog decoder and encoder: hand-made golden vectors in every byte order,
 * every invalid-field case in strict and resync mode, truncation, chunking invariance,
 * resynchronisation after random damage, round trips and byte-identical re-encoding, and the
 * allocation rules (none while pushing, none live after fini). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/out.h"
#include "evlog_gen.h"
#include "formats/dec.h"
#include "formats/evlog.h"
#include "rng.h"
#include "testalloc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- golden vectors (written by hand; field values worked out in the comments) ----------- */

/* x86 efl_debug: everything little-endian. One block of 104 bytes, two items.
 * item A @12: tim 1.5 (0x3ff8000000000000), srctim 0, thread 0x7f0012345678, obj 0,
 *             event_offset 40, detail_offset 0, event_next 48, "+main\0" + 2 padding.
 * item B @60: tim 2.25 (0x4002000000000000), srctim 0.5 (0x3fe0000000000000), same thread,
 *             obj 0x1000, detail_offset 46, event_next 56 (40+6+3 = 49 -> 56),
 *             "-main\0" "ok\0" + 7 padding. */
static const char V1[] = "11 e2 fe 0f 68 00 00 00 00 00 00 00"
                         "00 00 00 00 00 00 f8 3f 00 00 00 00 00 00 00 00"
                         "78 56 34 12 00 7f 00 00 00 00 00 00 00 00 00 00"
                         "28 00 00 00 30 00 00 00 2b 6d 61 69 6e 00 00 00"
                         "00 00 00 00 00 00 02 40 00 00 00 00 00 00 e0 3f"
                         "78 56 34 12 00 7f 00 00 00 10 00 00 00 00 00 00"
                         "28 00 2e 00 38 00 00 00 2d 6d 61 69 6e 00 6f 6b"
                         "00 00 00 00 00 00 00 00";

/* efl_debug on a big-endian host: magic, size and overflow (3) big-endian, items as V1
 * (eina stores them little-endian everywhere). */
static const char V2_HDR[] = "0f fe e2 11 00 00 00 68 00 00 00 03";

/* A non-eina writer, all big-endian: one item of exactly 48 bytes (no padding):
 * tim 0.125 (0x3fc0000000000000) -> 125000000 ns, thread 0x1122334455667788, obj 42,
 * "+abcdef\0" (40 + 8 = 48). */
static const char V4[] = "0f fe e2 11 00 00 00 30 00 00 00 00"
                         "3f c0 00 00 00 00 00 00 00 00 00 00 00 00 00 00"
                         "11 22 33 44 55 66 77 88 00 00 00 00 00 00 00 2a"
                         "00 28 00 00 00 30 00 00 2b 61 62 63 64 65 66 00";

/* Magic big-endian, sizes little-endian (size 0x60 = 96; read big-endian 0x60000000 is over the
 * limit), stale padding everywhere:
 * item 1 @12: tim 4.0 (0x4010000000000000), thread 1, obj 0xdeadbeef, event_next 48, struct
 *             padding de ad, "+x\0" + five a5 bytes.
 * item 2 @60: tim 4.5 (0x4012000000000000), thread 1, obj 0, detail_offset 44, event_next 48,
 *             struct padding 77 77, "+ab\0" "xyz\0" = exactly 48. */
static const char V5[] = "0f fe e2 11 60 00 00 00 00 00 00 00"
                         "00 00 00 00 00 00 10 40 00 00 00 00 00 00 00 00"
                         "01 00 00 00 00 00 00 00 ef be ad de 00 00 00 00"
                         "28 00 00 00 30 00 de ad 2b 78 00 a5 a5 a5 a5 a5"
                         "00 00 00 00 00 00 12 40 00 00 00 00 00 00 00 00"
                         "01 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00"
                         "28 00 2c 00 30 00 77 77 2b 61 62 00 78 79 7a 00";

static size_t hex(const char *s, uint8_t *out, size_t cap) {
  size_t n = 0;
  unsigned v;
  while (*s != '\0') {
    if (*s == ' ') {
      s++;
      continue;
    }
    assert_int_equal(sscanf(s, "%2x", &v), 1);
    assert_true(n < cap);
    out[n++] = (uint8_t)v;
    s += 2;
  }
  return n;
}

/* ---- a decoded-event record and a decode driver ------------------------------------------ */

typedef struct rec {
  int64_t time_ns;
  uint64_t thread, offset, obj, block_offset;
  double tim, srctim;
  uint16_t flags, item_len, event_len, detail_len;
  uint32_t block_size, block_overflow, block_seq;
  uint8_t item_be, header_be, sizes_be, type, core, has_detail;
  char event[80], detail[80];
  uint64_t item_hash; /* FNV-1a of the raw item bytes */
} rec_t;

typedef struct run {
  rec_t *r;
  size_t n, cap;
  int err;   /* first negative return (push, or finish) */
  int trunc; /* finish returned TLC_ETRUNC */
  uint64_t err_offset;
  char reason[160];
  tlc_dec_counters_t c;
} run_t;

static uint64_t fnv(const uint8_t *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  size_t i;
  for (i = 0; i < n; i++) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

static void add(run_t *o, const tlc_event_t *e) {
  rec_t *r;
  const tlc_evlog_ext_t *x = e->evlog;
  if (o->n == o->cap) {
    o->cap = o->cap ? o->cap * 2 : 64;
    o->r = realloc(o->r, o->cap * sizeof(*o->r));
    assert_non_null(o->r);
  }
  r = &o->r[o->n++];
  memset(r, 0, sizeof(*r));
  assert_non_null(x);
  r->time_ns = e->time_ns;
  r->thread = e->thread;
  r->offset = e->offset;
  r->flags = e->flags;
  r->type = e->type;
  r->core = e->core;
  assert_int_equal(e->handle, 0);
  assert_int_equal(e->data, 0);
  r->tim = x->tim;
  r->srctim = x->srctim;
  r->obj = x->obj;
  r->block_offset = x->block_offset;
  r->block_size = x->block_size;
  r->block_overflow = x->block_overflow;
  r->block_seq = x->block_seq;
  r->item_len = x->item_len;
  r->event_len = x->event_len;
  r->detail_len = x->detail_len;
  r->item_be = x->item_be;
  r->header_be = x->header_be;
  r->sizes_be = x->sizes_be;
  assert_int_equal(strlen(x->event), x->event_len);
  snprintf(r->event, sizeof(r->event), "%s", x->event);
  if (x->detail != NULL) {
    r->has_detail = 1;
    assert_int_equal(strlen(x->detail), x->detail_len);
    snprintf(r->detail, sizeof(r->detail), "%s", x->detail);
  }
  r->item_hash = fnv(x->item, x->item_len);
}

/* Decodes buf[0..len) with a fresh decoder. seed 0: one push of everything with room for 256
 * events; otherwise random chunk sizes (often 1 byte) and random output room. */
static void decode(const uint8_t *buf, size_t len, int resync, uint64_t seed, run_t *o) {
  tlc_dec_t d;
  tlc_dec_opts_t opts;
  tlc_event_t ev[300];
  size_t pos = 0;
  rng_t rng;
  int n;
  memset(o, 0, sizeof(*o));
  memset(&opts, 0, sizeof(opts));
  opts.resync = resync;
  rng_seed(&rng, seed);
  assert_int_equal(tlc_dec_init(&d, TLC_FMT_EVLOG, &opts), 0);
  while (pos < len && o->err == 0) {
    size_t chunk = len - pos;
    if (seed != 0) {
      uint64_t lim = rng_chance(&rng, 1, 3) ? 1 : rng_chance(&rng, 1, 2) ? 64 : 5000;
      chunk = 1 + (size_t)rng_below(&rng, lim);
      if (chunk > len - pos)
        chunk = len - pos;
    }
    while (chunk > 0) {
      size_t used, max = seed ? 1 + (size_t)rng_below(&rng, 300) : 256, i;
      n = tlc_dec_push(&d, buf + pos, chunk, &used, ev, max);
      if (n < 0) {
        o->err = n;
        break;
      }
      assert_true(n > 0 || used > 0);
      assert_true((size_t)n <= max && n <= TLC_EVLOG_BATCH);
      for (i = 0; i < (size_t)n; i++)
        add(o, &ev[i]);
      pos += used;
      chunk -= used;
    }
  }
  if (o->err == 0) {
    while ((n = tlc_dec_finish(&d, ev, seed ? 7 : 256)) > 0) {
      int i;
      for (i = 0; i < n; i++)
        add(o, &ev[i]);
    }
    if (n == TLC_ETRUNC)
      o->trunc = 1;
    else if (n < 0)
      o->err = n;
  }
  o->err_offset = d.err_offset;
  snprintf(o->reason, sizeof(o->reason), "%s", d.err_reason);
  o->c = d.c;
  tlc_dec_fini(&d);
}

static void run_free(run_t *o) {
  free(o->r);
  o->r = NULL;
}

static void same_events(const run_t *a, const run_t *b) {
  size_t i;
  assert_int_equal(a->n, b->n);
  for (i = 0; i < a->n; i++) {
    const rec_t *x = &a->r[i], *y = &b->r[i];
    assert_int_equal(x->time_ns, y->time_ns);
    assert_int_equal(x->thread, y->thread);
    assert_int_equal(x->offset, y->offset);
    assert_int_equal(x->flags, y->flags);
    assert_int_equal(x->item_hash, y->item_hash);
    assert_string_equal(x->event, y->event);
    assert_string_equal(x->detail, y->detail);
    assert_int_equal(x->block_seq, y->block_seq);
    assert_int_equal(x->block_offset, y->block_offset);
  }
}

/* ---- golden vectors ---------------------------------------------------------------------- */

static void check_v1_items(const run_t *o, size_t i, uint64_t base) {
  const rec_t *a = &o->r[i], *b = &o->r[i + 1];
  assert_int_equal(a->time_ns, 1500000000);
  assert_int_equal(a->thread, 0x7f0012345678ull);
  assert_int_equal(a->offset, base + 12);
  assert_true(a->tim == 1.5 && a->srctim == 0.0);
  assert_int_equal(a->obj, 0);
  assert_string_equal(a->event, "+main");
  assert_int_equal(a->event_len, 5);
  assert_int_equal(a->has_detail, 0);
  assert_int_equal(a->detail_len, 0);
  assert_int_equal(a->item_len, 48);
  assert_int_equal(a->item_be, 0);
  assert_int_equal(a->type, TLC_EV_NONE);
  assert_int_equal(a->core, TLC_CORE_UNKNOWN);
  assert_int_equal(a->block_offset, base);
  assert_int_equal(a->block_size, 104);
  assert_int_equal(a->flags & TLC_EVF_BLOCK_END, 0);

  assert_int_equal(b->time_ns, 2250000000);
  assert_int_equal(b->offset, base + 60);
  assert_true(b->tim == 2.25 && b->srctim == 0.5);
  assert_int_equal(b->obj, 0x1000);
  assert_string_equal(b->event, "-main");
  assert_int_equal(b->has_detail, 1);
  assert_string_equal(b->detail, "ok");
  assert_int_equal(b->detail_len, 2);
  assert_int_equal(b->item_len, 56);
  assert_int_equal(b->flags, TLC_EVF_BLOCK_END);
}

static void test_golden_le(void **state) {
  uint8_t b[256];
  size_t n = hex(V1, b, sizeof(b));
  run_t o;
  (void)state;
  assert_int_equal(n, 116);
  decode(b, n, 0, 0, &o);
  assert_int_equal(o.err, 0);
  assert_int_equal(o.trunc, 0);
  assert_int_equal(o.n, 2);
  check_v1_items(&o, 0, 0);
  assert_int_equal(o.r[0].flags, 0);
  assert_int_equal(o.r[0].header_be, 0);
  assert_int_equal(o.r[0].sizes_be, 0);
  assert_int_equal(o.r[0].block_overflow, 0);
  assert_int_equal(o.c.blocks, 1);
  assert_int_equal(o.c.records, 2);
  assert_int_equal(o.c.bytes, 116);
  assert_int_equal(o.c.overflow_blocks, 0);
  run_free(&o);
}

static void test_golden_be_host(void **state) {
  uint8_t b[256];
  size_t n = hex(V1, b, sizeof(b));
  run_t o;
  (void)state;
  hex(V2_HDR, b, 12);
  decode(b, n, 0, 0, &o);
  assert_int_equal(o.err, 0);
  assert_int_equal(o.n, 2);
  check_v1_items(&o, 0, 0);
  assert_int_equal(o.r[0].header_be, 1);
  assert_int_equal(o.r[0].sizes_be, 1);
  assert_int_equal(o.r[0].item_be, 0);
  assert_int_equal(o.r[0].block_overflow, 3);
  /* items were lost before this block's first one */
  assert_int_equal(o.r[0].flags, TLC_EVF_GAP);
  assert_int_equal(o.c.overflow_blocks, 1);
  assert_int_equal(o.c.overflow_items, 3);
  run_free(&o);
}

static void test_golden_all_be(void **state) {
  uint8_t b[256];
  size_t n = hex(V4, b, sizeof(b));
  run_t o;
  (void)state;
  assert_int_equal(n, 60);
  decode(b, n, 0, 0, &o);
  assert_int_equal(o.err, 0);
  assert_int_equal(o.n, 1);
  assert_int_equal(o.r[0].time_ns, 125000000);
  assert_int_equal(o.r[0].thread, 0x1122334455667788ull);
  assert_int_equal(o.r[0].obj, 42);
  assert_string_equal(o.r[0].event, "+abcdef");
  assert_int_equal(o.r[0].item_len, 48);
  assert_int_equal(o.r[0].item_be, 1);
  assert_int_equal(o.r[0].header_be, 1);
  assert_int_equal(o.r[0].sizes_be, 1);
  assert_int_equal(o.r[0].flags, TLC_EVF_BLOCK_END);
  run_free(&o);
}

static void test_golden_mixed_stale(void **state) {
  uint8_t b[256];
  size_t n = hex(V5, b, sizeof(b));
  run_t o;
  (void)state;
  assert_int_equal(n, 108);
  decode(b, n, 0, 0, &o);
  assert_int_equal(o.err, 0);
  assert_int_equal(o.n, 2);
  assert_int_equal(o.r[0].header_be, 1);
  assert_int_equal(o.r[0].sizes_be, 0);
  assert_int_equal(o.r[0].block_size, 96);
  assert_int_equal(o.r[0].time_ns, 4000000000);
  assert_int_equal(o.r[0].thread, 1);
  assert_int_equal(o.r[0].obj, 0xdeadbeef);
  assert_string_equal(o.r[0].event, "+x");
  assert_int_equal(o.r[0].has_detail, 0);
  assert_int_equal(o.r[1].time_ns, 4500000000);
  assert_string_equal(o.r[1].event, "+ab");
  assert_string_equal(o.r[1].detail, "xyz");
  assert_int_equal(o.r[1].item_len, 48);
  assert_int_equal(o.r[1].flags, TLC_EVF_BLOCK_END);
  run_free(&o);
}

/* An empty block (size 0) is valid and yields nothing; with an overflow count its GAP goes on
 * the next block's first event. */
static void test_empty_block(void **state) {
  uint8_t b[256];
  size_t n;
  run_t o;
  (void)state;
  hex("11 e2 fe 0f 00 00 00 00 05 00 00 00", b, 12);
  n = 12 + hex(V1, b + 12, sizeof(b) - 12);
  decode(b, n, 0, 0, &o);
  assert_int_equal(o.err, 0);
  assert_int_equal(o.n, 2);
  check_v1_items(&o, 0, 12);
  assert_int_equal(o.r[0].flags, TLC_EVF_GAP);
  assert_int_equal(o.r[0].block_seq, 1);
  assert_int_equal(o.c.blocks, 2);
  assert_int_equal(o.c.overflow_items, 5);
  run_free(&o);
}

static void test_detect(void **state) {
  uint8_t b[256];
  char why[128];
  (void)state;
  hex(V1, b, sizeof(b));
  assert_int_equal(tlc_dec_detect(b, 116, why, sizeof(why)), TLC_FMT_EVLOG);
  assert_true(tlc_evlog_looks_like(b, 4));
  assert_false(tlc_evlog_looks_like(b, 3));
  hex(V4, b, sizeof(b));
  assert_int_equal(tlc_dec_detect(b, 60, why, sizeof(why)), TLC_FMT_EVLOG);
  b[0] = 0;
  assert_false(tlc_evlog_looks_like(b, 60));
}

/* ---- invalid input ----------------------------------------------------------------------- */

typedef struct bad {
  const char *name;
  unsigned at[10]; /* byte positions to patch in V1 (+ trailing), end with 0 */
  uint8_t val[10];
  size_t extra;        /* bytes appended (zeros) */
  size_t events;       /* events delivered before the error */
  uint64_t err_offset; /* expected */
  const char *reason;  /* expected err_reason */
} bad_t;

static const bad_t BAD[] = {
  { "event_offset 41",
    { 44 },
    { 0x29 },
    0,
    0,
    12,
    "evlog item at byte 12: event_offset 0x0029 is not 40" },
  { "event_next 50",
    { 48 },
    { 0x32 },
    0,
    0,
    12,
    "evlog item at byte 12: event_next 50 is not a multiple of 8" },
  { "event_next 40",
    { 48 },
    { 0x28 },
    0,
    0,
    12,
    "evlog item at byte 12: event_next 40 leaves no room for the event" },
  { "event_next 112",
    { 48 },
    { 0x70 },
    0,
    0,
    12,
    "evlog item at byte 12: event_next 112 runs past the block end (104 bytes left in the "
    "block at byte 0)" },
  { "detail_offset 39",
    { 46 },
    { 0x27 },
    0,
    0,
    12,
    "evlog item at byte 12: detail_offset 39 outside the item (40..47)" },
  { "detail_offset 48",
    { 46 },
    { 0x30 },
    0,
    0,
    12,
    "evlog item at byte 12: detail_offset 48 outside the item (40..47)" },
  { "event unterminated",
    { 57, 58, 59 },
    { 'x', 'y', 'z' },
    0,
    0,
    12,
    "evlog item at byte 12: event string not terminated within item" },
  { "detail unterminated",
    { 108, 109, 110, 111, 112, 113, 114, 115 },
    { 'z', 'z', 'z', 'z', 'z', 'z', 'z', 'z' },
    0,
    1,
    60,
    "evlog item at byte 60: detail string not terminated within item" },
  { "time NaN",
    { 66, 67 },
    { 0xf8, 0x7f },
    0,
    1,
    60,
    "evlog item at byte 60: time nan s is not a finite nanosecond count" },
  { "time inf",
    { 66, 67 },
    { 0xf0, 0x7f },
    0,
    1,
    60,
    "evlog item at byte 60: time inf s is not a finite nanosecond count" },
  /* 1e10 s = 0x4202a05f20000000: 1e19 ns is beyond int64 */
  { "time 1e10 s",
    { 63, 64, 65, 66, 67 },
    { 0x20, 0x5f, 0xa0, 0x02, 0x42 },
    0,
    1,
    60,
    "evlog item at byte 60: time 1e+10 s is not a finite nanosecond count" },
  { "second item big-endian",
    { 92, 93 },
    { 0x00, 0x28 },
    0,
    1,
    60,
    "evlog item at byte 60: event_offset 10240 is not 40" },
  { "trailing 8 bytes",
    { 4 },
    { 0x70 },
    8,
    2,
    116,
    "evlog block at byte 0: 8 bytes left at byte 116, fewer than an item" },
  { "size 49", { 4 }, { 0x31 }, 0, 0, 0, "evlog block at byte 0: size 49 is not a multiple of 8" },
  { "size 40",
    { 4 },
    { 0x28 },
    0,
    0,
    0,
    "evlog block at byte 0: size 40 is smaller than one item" },
  { "bad magic", { 1 }, { 0xe3 }, 0, 0, 0, "evlog block at byte 0: bad magic 0x0ffee311" },
  { "size 0xfffffffc",
    { 4, 5, 6, 7 },
    { 0xfc, 0xff, 0xff, 0xff },
    0,
    0,
    0,
    "evlog block at byte 0: size 0xfffffffc: an empty efl_debug capture (no CPU/Freq/on "
    "handler)" },
};

static size_t make_bad(const bad_t *t, uint8_t *b, size_t cap) {
  size_t n = hex(V1, b, cap), k;
  for (k = 0; k < 10 && (k == 0 || t->at[k] != 0); k++)
    b[t->at[k]] = t->val[k];
  memset(b + n, 0, t->extra);
  return n + t->extra;
}

static void test_invalid_strict(void **state) {
  size_t i;
  (void)state;
  for (i = 0; i < sizeof(BAD) / sizeof(BAD[0]); i++) {
    uint8_t b[256];
    size_t n = make_bad(&BAD[i], b, sizeof(b));
    uint64_t seed;
    for (seed = 0; seed < 20; seed++) {
      run_t o;
      decode(b, n, 0, seed, &o);
      if (o.err != TLC_EFRAME || o.n != BAD[i].events)
        fail_msg("%s (seed %llu): err %d, %zu events", BAD[i].name, (unsigned long long)seed, o.err,
                 o.n);
      assert_int_equal(o.err_offset, BAD[i].err_offset);
      assert_string_equal(o.reason, BAD[i].reason);
      assert_int_equal(o.c.records_invalid, 1);
      run_free(&o);
    }
  }
}

/* Resync: each damaged block followed by an intact copy of V1; every case delivers the events
 * before the damage, then exactly the intact block's two events, the first with GAP. */
static void test_invalid_resync(void **state) {
  size_t i;
  (void)state;
  for (i = 0; i < sizeof(BAD) / sizeof(BAD[0]); i++) {
    uint8_t b[512];
    size_t n = make_bad(&BAD[i], b, sizeof(b)), m;
    uint64_t seed;
    m = n + hex(V1, b + n, sizeof(b) - n);
    for (seed = 0; seed < 20; seed++) {
      run_t o;
      decode(b, m, 1, seed, &o);
      if (o.err != 0 || o.trunc || o.n != BAD[i].events + 2)
        fail_msg("%s (seed %llu): err %d trunc %d, %zu events", BAD[i].name,
                 (unsigned long long)seed, o.err, o.trunc, o.n);
      check_v1_items(&o, BAD[i].events, n);
      assert_int_equal(o.r[BAD[i].events].flags, TLC_EVF_GAP);
      assert_int_equal(o.c.resyncs, 1);
      assert_true(o.c.records_invalid >= 1);
      /* everything between the last good unit and the intact block was skipped */
      if (BAD[i].events == 0 && BAD[i].err_offset == 0)
        assert_int_equal(o.c.bytes_skipped, n);
      else
        assert_int_equal(o.c.bytes_skipped, n - BAD[i].err_offset);
      run_free(&o);
    }
  }
}

/* The bogus empty-capture block of efl_debug alone: an error, never an allocation or a wait. */
static void test_bogus_size_alone(void **state) {
  uint8_t b[16];
  run_t o;
  (void)state;
  hex("11 e2 fe 0f fc ff ff ff 00 00 00 00", b, sizeof(b));
  testalloc_install();
  decode(b, 12, 0, 0, &o);
  assert_int_equal(o.err, TLC_EFRAME);
  assert_true(testalloc_max_request() <= TLC_EVLOG_CARRY);
  run_free(&o);
  decode(b, 12, 1, 0, &o);
  assert_int_equal(o.err, 0);
  assert_int_equal(o.trunc, 0);
  assert_int_equal(o.n, 0);
  assert_int_equal(o.c.bytes_skipped, 12);
  assert_int_equal(o.c.records_invalid, 1);
  run_free(&o);
  assert_int_equal(testalloc_live_bytes(), 0);
  testalloc_uninstall();
}

static void test_truncated(void **state) {
  uint8_t b[256];
  size_t n = hex(V1, b, sizeof(b));
  uint64_t seed;
  (void)state;
  (void)n;
  for (seed = 0; seed < 10; seed++) {
    run_t o;
    decode(b, 70, 0, seed, &o);
    assert_int_equal(o.err, 0);
    assert_int_equal(o.trunc, 1);
    assert_int_equal(o.n, 1); /* item A was whole */
    assert_int_equal(o.err_offset, 0);
    assert_string_equal(o.reason, "truncated evlog block at byte 0: 70 of 116 bytes");
    assert_int_equal(o.c.truncated, 70);
    run_free(&o);
    decode(b, 5, seed & 1, seed, &o);
    assert_int_equal(o.trunc, 1);
    assert_int_equal(o.n, 0);
    assert_string_equal(o.reason, "truncated evlog block at byte 0: 5 of 12 header bytes");
    run_free(&o);
    /* cut right after the header */
    decode(b, 12, 0, seed, &o);
    assert_int_equal(o.trunc, 1);
    assert_string_equal(o.reason, "truncated evlog block at byte 0: 12 of 116 bytes");
    run_free(&o);
  }
}

/* After finish (truncated or not) the decoder takes a new stream; a reset mid-block loses the
 * partial block and marks the next event with GAP. */
static void test_finish_reset(void **state) {
  uint8_t b[256];
  size_t n = hex(V1, b, sizeof(b)), used;
  tlc_dec_t d;
  tlc_event_t ev[8];
  (void)state;
  assert_int_equal(tlc_dec_init(&d, TLC_FMT_EVLOG, NULL), 0);
  assert_int_equal(tlc_dec_push(&d, b, 70, &used, ev, 8), 1);
  assert_int_equal(used, 70);
  assert_int_equal(tlc_dec_finish(&d, ev, 8), TLC_ETRUNC);
  assert_int_equal(tlc_dec_finish(&d, ev, 8), 0);
  assert_int_equal(tlc_dec_push(&d, b, n, &used, ev, 8), 2);
  assert_int_equal(ev[0].flags, TLC_EVF_GAP);
  assert_int_equal(ev[0].offset, 70 + 12);
  assert_int_equal(tlc_dec_finish(&d, ev, 8), 0);
  /* reset mid-block */
  assert_int_equal(tlc_dec_push(&d, b, 30, &used, ev, 8), 0);
  tlc_dec_reset(&d);
  assert_int_equal(tlc_dec_push(&d, b, n, &used, ev, 8), 2);
  assert_int_equal(ev[0].flags, TLC_EVF_GAP);
  assert_int_equal(ev[1].flags, TLC_EVF_BLOCK_END);
  /* reset at a block boundary loses nothing */
  tlc_dec_reset(&d);
  assert_int_equal(tlc_dec_push(&d, b, n, &used, ev, 8), 2);
  assert_int_equal(ev[0].flags, 0);
  /* a strict error is sticky until reset */
  b[1] = 0;
  assert_int_equal(tlc_dec_push(&d, b, n, &used, ev, 8), TLC_EFRAME);
  assert_int_equal(tlc_dec_push(&d, b, n, &used, ev, 8), TLC_EFRAME);
  assert_int_equal(used, 0);
  assert_int_equal(tlc_dec_finish(&d, ev, 8), TLC_EFRAME);
  tlc_dec_reset(&d);
  b[1] = 0xe2;
  assert_int_equal(tlc_dec_push(&d, b, n, &used, ev, 8), 2);
  tlc_dec_fini(&d);
  tlc_dec_fini(&d);
}

/* A writer with a little-endian magic and big-endian sizes: block 1's size (48) reads plausibly
 * only big-endian, which is learned; block 2's size 256 (00 00 01 00) would also read as 65536
 * little-endian, and the learned order resolves it. Starting with the ambiguous block instead
 * misreads it as 65536 bytes, which ends in an error or a truncation, never silently. */
static void build_mixed(evgen_t *g, int ambiguous_first) {
  int b, i;
  evgen_init(g, EVGEN_SIZES_BE);
  for (b = 0; b < 2; b++) {
    evgen_block(g, 0);
    if (b == ambiguous_first) {
      for (i = 0; i < 4; i++)
        evgen_item(g, 1.0 + i, 0.0, 9, 0, "+a", NULL);          /* 48 each */
      evgen_item(g, 5.0, 0.0, 9, 0, "+abcdefghijklmnop", NULL); /* 40 + 18 -> 64 */
    } else {
      evgen_item(g, 0.5, 0.0, 9, 0, "-a", NULL);
    }
  }
  evgen_end(g);
}

static void test_mixed_sizes(void **state) {
  evgen_t g;
  run_t o;
  (void)state;
  build_mixed(&g, 1);
  assert_int_equal(g.buf[0], 0x11);
  assert_int_equal(g.buf[12 + 48 + 4 + 2], 0x01); /* block 2's size, big-endian 256 */
  decode(g.buf, g.len, 0, 0, &o);
  assert_int_equal(o.err, 0);
  assert_int_equal(o.trunc, 0);
  assert_int_equal(o.n, 6);
  assert_int_equal(o.r[0].sizes_be, 1);
  assert_int_equal(o.r[0].header_be, 0);
  assert_int_equal(o.r[1].block_size, 256);
  assert_int_equal(o.r[5].sizes_be, 1);
  run_free(&o);
  evgen_free(&g);
  build_mixed(&g, 0);
  decode(g.buf, g.len, 0, 0, &o);
  assert_true(o.err == TLC_EFRAME || o.trunc);
  run_free(&o);
  evgen_free(&g);
}

/* ---- random streams ---------------------------------------------------------------------- */

/* Flags from 3 bits: item order, header order (magic and sizes alike, as efl_debug writes
 * them), stale padding. Mixed header orders are tested on their own (test_mixed_sizes). */
static unsigned gen_flags(uint64_t v) {
  return ((v & 1) ? EVGEN_ITEM_BE : 0) | ((v & 2) ? EVGEN_MAGIC_BE | EVGEN_SIZES_BE : 0) |
         ((v & 4) ? EVGEN_STALE_PAD : 0);
}

static void gen_stream(evgen_t *g, uint64_t seed, unsigned flags, size_t items, size_t per) {
  evgen_init(g, flags);
  evgen_random(g, seed, items, per);
}

static void test_chunking_invariance(void **state) {
  uint64_t s;
  (void)state;
  for (s = 1; s <= 24; s++) {
    evgen_t g;
    run_t whole, part;
    uint64_t k;
    gen_stream(&g, s, gen_flags(s), 200 + (size_t)(s * 37 % 500), 1 + (size_t)(s % 40));
    decode(g.buf, g.len, (int)(s & 1), 0, &whole);
    if (whole.err != 0 || whole.trunc)
      fail_msg("seed %llu: %s", (unsigned long long)s, whole.reason);
    assert_int_equal(whole.n, g.items);
    assert_int_equal(whole.c.blocks, g.blocks);
    assert_int_equal(whole.c.bytes_skipped, 0);
    for (k = 0; k < 6; k++) {
      decode(g.buf, g.len, (int)(s & 1), s * 100 + k + 1, &part);
      same_events(&whole, &part);
      run_free(&part);
    }
    run_free(&whole);
    evgen_free(&g);
  }
}

/* Large items (near the u16 limit) straddling many chunks, and max 1. */
static void test_large_items(void **state) {
  evgen_t g;
  char *big = malloc(65528 - 40 - 1 + 1);
  run_t whole, part;
  uint64_t k;
  (void)state;
  memset(big, 'q', 65528 - 41);
  big[0] = '+';
  big[65528 - 41] = '\0';
  evgen_init(&g, EVGEN_STALE_PAD);
  evgen_item(&g, 1.0, 0.0, 7, 0, big, NULL);
  evgen_item(&g, 2.0, 0.0, 7, 0, "-x", "d");
  evgen_block(&g, 0);
  big[1000] = '\0';
  evgen_item(&g, 3.0, 0.0, 7, 0, "+y", big + 1);
  evgen_end(&g);
  decode(g.buf, g.len, 0, 0, &whole);
  assert_int_equal(whole.err, 0);
  assert_int_equal(whole.n, 3);
  assert_int_equal(whole.r[0].item_len, 65528);
  assert_int_equal(whole.r[0].event_len, 65528 - 41);
  assert_int_equal(whole.r[2].detail_len, 999);
  for (k = 1; k < 12; k++) {
    decode(g.buf, g.len, (int)(k & 1), k, &part);
    same_events(&whole, &part);
    run_free(&part);
  }
  run_free(&whole);
  evgen_free(&g);
  free(big);
}

/* Prints both decodes of a failed damage case. */
static void dump(const run_t *clean, const run_t *dmg, size_t start, size_t end, size_t off,
                 size_t dlen, size_t cut) {
  size_t q;
  for (q = 0; q < clean->n; q++)
    fprintf(stderr, "clean %zu: @%llu block @%llu %s\n", q, (unsigned long long)clean->r[q].offset,
            (unsigned long long)clean->r[q].block_offset, clean->r[q].event);
  for (q = 0; q < dmg->n; q++)
    fprintf(stderr, "damaged %zu: @%llu block @%llu %s\n", q, (unsigned long long)dmg->r[q].offset,
            (unsigned long long)dmg->r[q].block_offset, dmg->r[q].event);
  fprintf(stderr, "damaged block %zu..%zu at %zu (+%zu), next block at %zu; skipped %llu\n", start,
          end, off, dlen, cut, (unsigned long long)dmg->c.bytes_skipped);
}

/* Random damage in resync mode: every block after the damaged one is delivered exactly. */
static void test_resync_damage(void **state) {
  uint64_t s;
  (void)state;
  for (s = 1; s <= 3000; s++) {
    evgen_t g;
    rng_t r;
    size_t nb = 6, starts[7], i, j, cut, dlen = 0, off;
    size_t ev_after = 0, ev_before = 0;
    run_t clean, dmg;
    uint8_t *buf;
    size_t len;
    unsigned kind;
    rng_seed(&r, s);
    evgen_init(&g, gen_flags(rng_next(&r)));
    for (i = 0; i < nb; i++) {
      evgen_t one;
      gen_stream(&one, s * 10 + i, g.flags, 1 + (size_t)rng_below(&r, 20), 1000);
      starts[i] = g.len;
      evgen_raw(&g, one.buf, one.len);
      evgen_free(&one);
    }
    starts[nb] = g.len;
    decode(g.buf, g.len, 1, 0, &clean);
    assert_int_equal(clean.err, 0);
    /* damage block j (not the first, so that earlier events are checked too) */
    j = 1 + (size_t)rng_below(&r, nb - 2);
    buf = malloc(g.len + 64);
    kind = (unsigned)rng_below(&r, 3);
    off = starts[j] + (size_t)rng_below(&r, starts[j + 1] - starts[j]);
    if (kind == 0) { /* flip one byte */
      memcpy(buf, g.buf, g.len);
      buf[off] ^= (uint8_t)(1 + rng_below(&r, 255));
      len = g.len;
    } else if (kind == 1) { /* delete a run inside block j */
      dlen = 1 + (size_t)rng_below(&r, starts[j + 1] - off);
      memcpy(buf, g.buf, off);
      memcpy(buf + off, g.buf + off + dlen, g.len - off - dlen);
      len = g.len - dlen;
    } else { /* insert garbage inside block j */
      dlen = 1 + (size_t)rng_below(&r, 64);
      memcpy(buf, g.buf, off);
      for (i = 0; i < dlen; i++)
        buf[off + i] = (uint8_t)rng_below(&r, 256);
      memcpy(buf + off + dlen, g.buf + off, g.len - off);
      len = g.len + dlen;
    }
    cut = len - (g.len - starts[j + 1]); /* where block j+1 starts in the damaged stream */
    decode(buf, len, 1, s, &dmg);
    assert_int_equal(dmg.err, 0);
    for (i = 0; i < clean.n; i++) {
      if (clean.r[i].block_offset < starts[j])
        ev_before++;
      if (clean.r[i].block_offset >= starts[j + 1])
        ev_after++;
    }
    if (dmg.n < ev_before + ev_after) {
      dump(&clean, &dmg, starts[j], starts[j + 1], off, dlen, cut);
      fail_msg("seed %llu kind %u: %zu events, want at least %zu", (unsigned long long)s, kind,
               dmg.n, ev_before + ev_after);
    }
    for (i = 0; i < ev_before; i++) {
      assert_int_equal(dmg.r[i].item_hash, clean.r[i].item_hash);
      assert_int_equal(dmg.r[i].offset, clean.r[i].offset);
    }
    for (i = 0; i < ev_after; i++) {
      const rec_t *x = &dmg.r[dmg.n - ev_after + i], *y = &clean.r[clean.n - ev_after + i];
      if (x->item_hash != y->item_hash || x->offset - cut != y->offset - starts[j + 1]) {
        dump(&clean, &dmg, starts[j], starts[j + 1], off, dlen, cut);
        fail_msg("seed %llu kind %u: event %zu after the damage differs", (unsigned long long)s,
                 kind, i);
      }
      assert_int_equal(x->time_ns, y->time_ns);
      assert_int_equal(x->flags & ~TLC_EVF_GAP, y->flags);
    }
    run_free(&clean);
    run_free(&dmg);
    free(buf);
    evgen_free(&g);
  }
}

/* Garbage before, between and after blocks: skipped and counted exactly. */
static void test_resync_garbage(void **state) {
  uint8_t b[512];
  size_t n = 0, v;
  run_t o;
  uint64_t seed;
  (void)state;
  memcpy(b, "garbage\x11\xe2\xfe", 10); /* a partial magic too */
  n = 10;
  v = hex(V1, b + n, sizeof(b) - n);
  n += v;
  memcpy(b + n, "\x0f\xfe\xe2\x11zz", 6); /* a false magic with a bad size, then junk */
  n += 6;
  n += hex(V1, b + n, sizeof(b) - n);
  memcpy(b + n, "\x11\xe2", 2);
  n += 2;
  for (seed = 0; seed < 30; seed++) {
    decode(b, n, 1, seed, &o);
    assert_int_equal(o.err, 0);
    assert_int_equal(o.n, 4);
    check_v1_items(&o, 0, 10);
    check_v1_items(&o, 2, 10 + v + 6);
    assert_int_equal(o.r[0].flags, TLC_EVF_GAP);
    assert_int_equal(o.r[2].flags, TLC_EVF_GAP);
    assert_int_equal(o.c.bytes_skipped, 10 + 6);
    /* the 2 bytes at the end stand where a header should: a truncated header */
    assert_int_equal(o.trunc, 1);
    assert_int_equal(o.c.truncated, 2);
    assert_int_equal(o.c.resyncs, 2);
    run_free(&o);
  }
  /* strict: garbage first is an error at byte 0 */
  decode(b, n, 0, 0, &o);
  assert_int_equal(o.err, TLC_EFRAME);
  assert_int_equal(o.err_offset, 0);
  run_free(&o);
}

/* ---- encoder ----------------------------------------------------------------------------- */

/* Decodes buf and re-encodes every event; returns the bytes (tlc_free). */
static char *reencode(const uint8_t *buf, size_t len, const tlc_evlog_enc_opts_t *eo,
                      size_t *outlen, int strip_raw) {
  tlc_dec_t d;
  tlc_evlog_enc_t e;
  tlc_out_t o;
  tlc_event_t ev[64];
  size_t pos = 0, used;
  int n, i;
  assert_int_equal(tlc_dec_init(&d, TLC_FMT_EVLOG, NULL), 0);
  assert_int_equal(tlc_evlog_enc_init(&e, eo), 0);
  tlc_out_init(&o, 0, NULL, NULL);
  while (pos < len) {
    size_t chunk = len - pos > 777 ? 777 : len - pos;
    n = tlc_dec_push(&d, buf + pos, chunk, &used, ev, 64);
    assert_true(n >= 0);
    for (i = 0; i < n; i++) {
      if (strip_raw) {
        tlc_evlog_ext_t x = *ev[i].evlog;
        tlc_event_t c = ev[i];
        x.item = NULL;
        c.evlog = &x;
        assert_int_equal(tlc_evlog_enc_add(&e, &c, &o), 0);
      } else {
        assert_int_equal(tlc_evlog_enc_add(&e, &ev[i], &o), 0);
      }
    }
    pos += used;
  }
  assert_int_equal(tlc_dec_finish(&d, ev, 64), 0);
  assert_int_equal(tlc_evlog_enc_flush(&e, &o), 0);
  tlc_evlog_enc_fini(&e);
  tlc_dec_fini(&d);
  return tlc_out_take(&o, outlen);
}

/* A hand-built "real-looking" capture: V2 (big-endian host, overflow 3), V5 (mixed orders,
 * stale padding), V1, V4 (all big-endian): re-encoding is byte-identical. */
static void test_reencode_identical(void **state) {
  uint8_t b[1024];
  size_t n = 0, olen;
  char *out;
  (void)state;
  n += hex(V1, b + n, sizeof(b) - n);
  hex(V2_HDR, b, 12);
  n += hex(V5, b + n, sizeof(b) - n);
  n += hex(V1, b + n, sizeof(b) - n);
  n += hex(V4, b + n, sizeof(b) - n);
  out = reencode(b, n, NULL, &olen, 0);
  assert_non_null(out);
  assert_int_equal(olen, n);
  assert_memory_equal(out, b, n);
  tlc_free(out);
}

static void test_reencode_random(void **state) {
  uint64_t s;
  (void)state;
  for (s = 1; s <= 12; s++) {
    evgen_t g;
    size_t olen;
    char *out;
    gen_stream(&g, s, gen_flags(s), 500, 1 + (size_t)(s * 7 % 100));
    out = reencode(g.buf, g.len, NULL, &olen, 0);
    assert_int_equal(olen, g.len);
    assert_memory_equal(out, g.buf, g.len);
    tlc_free(out);
    /* without raw bytes: identical except the (stale) padding, so equal when it was zero */
    if ((gen_flags(s) & EVGEN_STALE_PAD) == 0) {
      out = reencode(g.buf, g.len, NULL, &olen, 1);
      assert_int_equal(olen, g.len);
      assert_memory_equal(out, g.buf, g.len);
      tlc_free(out);
    }
    evgen_free(&g);
  }
}

/* decode(encode(x)) == x for items built from fields, in both orders, with a block cap. */
static void test_encode_decode(void **state) {
  static const struct {
    double tim;
    uint64_t thread;
    const char *event, *detail;
  } X[] = {
    { 0.000000001, 1, "+a", NULL },
    { 1.25, 2, "+abcdef", NULL },
    { 2.5, 1, "-a", "" },
    { 3.0, 3, "*CPUFREQ 0", "2400" },
    { -1.5, 3, "!x", "detail of seven" },
    { 1e6, 0xffffffffffffffffull, ">s", NULL },
    { 123.456789012, 4, "<s", "0123456" },
  };
  unsigned be;
  (void)state;
  for (be = 0; be < 4; be++) {
    tlc_evlog_enc_t e;
    tlc_evlog_enc_opts_t eo;
    tlc_out_t o;
    size_t len, i;
    char *buf;
    run_t r;
    memset(&eo, 0, sizeof(eo));
    eo.item_be = (uint8_t)(be & 1);
    eo.header_be = (uint8_t)(be >> 1);
    /* items of 48, 48, 48 | 56, 64 | 48, 56 bytes: three blocks under 150 */
    eo.max_block = 150;
    assert_int_equal(tlc_evlog_enc_init(&e, &eo), 0);
    tlc_out_init(&o, 0, NULL, NULL);
    for (i = 0; i < sizeof(X) / sizeof(X[0]); i++)
      assert_int_equal(
          tlc_evlog_enc_add_item(&e, X[i].tim, 0.25, X[i].thread, i, X[i].event, X[i].detail, &o),
          0);
    assert_int_equal(tlc_evlog_enc_flush(&e, &o), 0);
    assert_int_equal(e.blocks, 3);
    tlc_evlog_enc_fini(&e);
    buf = tlc_out_take(&o, &len);
    decode((const uint8_t *)buf, len, 0, be + 1, &r);
    assert_int_equal(r.err, 0);
    assert_int_equal(r.n, sizeof(X) / sizeof(X[0]));
    for (i = 0; i < r.n; i++) {
      assert_true(r.r[i].tim == X[i].tim);
      assert_int_equal(r.r[i].time_ns, llround(X[i].tim * 1e9));
      assert_true(r.r[i].srctim == 0.25);
      assert_int_equal(r.r[i].thread, X[i].thread);
      assert_int_equal(r.r[i].obj, i);
      assert_string_equal(r.r[i].event, X[i].event);
      assert_int_equal(r.r[i].has_detail, X[i].detail != NULL);
      if (X[i].detail)
        assert_string_equal(r.r[i].detail, X[i].detail);
      assert_int_equal(r.r[i].item_be, be & 1);
      assert_int_equal(r.r[i].header_be, be >> 1);
      assert_true(r.r[i].block_size <= 150);
    }
    assert_int_equal(r.r[0].time_ns, 1);
    assert_int_equal(r.r[4].time_ns, -1500000000);
    run_free(&r);
    tlc_free(buf);
  }
}

/* The encoder's own item layout, checked byte for byte against a hand-written item. */
static void test_item_build(void **state) {
  uint8_t want[64], got[64];
  (void)state;
  /* tim 2.25, srctim 0.5, thread 0x7f0012345678, obj 0x1000, "-main" "ok" = item B of V1 */
  hex("00 00 00 00 00 00 02 40 00 00 00 00 00 00 e0 3f"
      "78 56 34 12 00 7f 00 00 00 10 00 00 00 00 00 00"
      "28 00 2e 00 38 00 00 00 2d 6d 61 69 6e 00 6f 6b"
      "00 00 00 00 00 00 00 00",
      want, sizeof(want));
  assert_int_equal(tlc_evlog_item_build(got, sizeof(got), 2.25, 0.5, 0x7f0012345678ull, 0x1000,
                                        "-main", "ok", 0),
                   56);
  assert_memory_equal(got, want, 56);
  assert_int_equal(tlc_evlog_item_build(got, 55, 2.25, 0.5, 1, 0, "-main", "ok", 0), TLC_ERANGE);
  /* the all-big-endian item of V4 */
  hex("3f c0 00 00 00 00 00 00 00 00 00 00 00 00 00 00"
      "11 22 33 44 55 66 77 88 00 00 00 00 00 00 00 2a"
      "00 28 00 00 00 30 00 00 2b 61 62 63 64 65 66 00",
      want, sizeof(want));
  assert_int_equal(tlc_evlog_item_build(got, sizeof(got), 0.125, 0.0, 0x1122334455667788ull, 42,
                                        "+abcdef", NULL, 1),
                   48);
  assert_memory_equal(got, want, 48);
}

static void test_encoder_limits(void **state) {
  tlc_evlog_enc_t e;
  tlc_evlog_enc_opts_t eo;
  tlc_out_t o;
  tlc_event_t ev;
  char *big = malloc(70000);
  (void)state;
  memset(&eo, 0, sizeof(eo));
  eo.max_block = 47;
  assert_int_equal(tlc_evlog_enc_init(&e, &eo), TLC_EINVAL);
  eo.max_block = (64u << 20) + 1;
  assert_int_equal(tlc_evlog_enc_init(&e, &eo), TLC_EINVAL);
  assert_int_equal(tlc_evlog_enc_init(&e, NULL), 0);
  tlc_out_init(&o, 0, NULL, NULL);
  memset(big, 'x', 70000);
  big[65528 - 40] = '\0'; /* 65488 chars + NUL = 65529 > 65528 */
  assert_int_equal(tlc_evlog_enc_add_item(&e, 1, 0, 1, 0, big, NULL, &o), TLC_ERANGE);
  big[65528 - 41] = '\0';
  assert_int_equal(tlc_evlog_enc_add_item(&e, 1, 0, 1, 0, big, NULL, &o), 0);
  memset(&ev, 0, sizeof(ev));
  assert_int_equal(tlc_evlog_enc_add(&e, &ev, &o), TLC_EINVAL);
  assert_int_equal(tlc_evlog_enc_flush(&e, &o), 0);
  assert_int_equal(o.len, 12 + 65528);
  tlc_evlog_enc_fini(&e);
  tlc_evlog_enc_fini(&e);
  tlc_out_fini(&o);
  free(big);
}

/* The encoder's one allocation (its block buffer) failing: TLC_ENOMEM, nothing written, and
 * the next add works. */
static void test_encoder_alloc_failure(void **state) {
  tlc_evlog_enc_t e;
  tlc_out_t o;
  char *bytes;
  size_t len;
  (void)state;
  testalloc_install();
  assert_int_equal(tlc_evlog_enc_init(&e, NULL), 0);
  tlc_out_init(&o, 0, NULL, NULL);
  testalloc_fail_at(1);
  assert_int_equal(tlc_evlog_enc_add_item(&e, 1.0, 0.0, 1, 0, "+a", NULL, &o), TLC_ENOMEM);
  assert_int_equal(e.items, 0);
  assert_int_equal(tlc_evlog_enc_flush(&e, &o), 0); /* no empty block written */
  assert_int_equal(o.len, 0);
  assert_int_equal(tlc_evlog_enc_add_item(&e, 1.0, 0.0, 1, 0, "+a", NULL, &o), 0);
  assert_int_equal(tlc_evlog_enc_flush(&e, &o), 0);
  tlc_evlog_enc_fini(&e);
  bytes = tlc_out_take(&o, &len);
  assert_int_equal(len, 12 + 48);
  tlc_free(bytes);
  tlc_out_fini(&o);
  assert_int_equal(testalloc_live_bytes(), 0);
  testalloc_uninstall();
}

/* ---- allocation rules -------------------------------------------------------------------- */

static void test_no_alloc_in_push(void **state) {
  evgen_t g;
  tlc_dec_t d;
  tlc_dec_opts_t opts;
  tlc_event_t ev[64];
  rng_t r;
  uint64_t before;
  size_t pos = 0, used;
  int n, mode;
  (void)state;
  gen_stream(&g, 99, EVGEN_STALE_PAD, 5000, 37);
  for (mode = 0; mode < 2; mode++) {
    testalloc_install();
    memset(&opts, 0, sizeof(opts));
    opts.resync = mode;
    assert_int_equal(tlc_dec_init(&d, TLC_FMT_EVLOG, &opts), 0);
    before = testalloc_count();
    rng_seed(&r, 5);
    pos = 0;
    while (pos < g.len) {
      size_t chunk = 1 + (size_t)rng_below(&r, 3000);
      if (chunk > g.len - pos)
        chunk = g.len - pos;
      n = tlc_dec_push(&d, g.buf + pos, chunk, &used, ev, 64);
      assert_true(n >= 0);
      pos += used;
    }
    assert_int_equal(tlc_dec_finish(&d, ev, 64), 0);
    assert_int_equal(testalloc_count(), before);
    assert_int_equal(d.c.records, g.items);
    tlc_dec_fini(&d);
    assert_int_equal(testalloc_live_bytes(), 0);
    testalloc_uninstall();
  }
  evgen_free(&g);
}

static void test_init_alloc_failure(void **state) {
  tlc_dec_t d;
  uint64_t k;
  tlc_dec_opts_t opts;
  (void)state;
  for (k = 1; k <= 2; k++) {
    testalloc_install();
    testalloc_fail_at(k);
    assert_int_equal(tlc_dec_init(&d, TLC_FMT_EVLOG, NULL), TLC_ENOMEM);
    tlc_dec_fini(&d);
    assert_int_equal(testalloc_live_bytes(), 0);
    testalloc_uninstall();
  }
  memset(&opts, 0, sizeof(opts));
  opts.max_block = (64u << 20) + 8;
  assert_int_equal(tlc_dec_init(&d, TLC_FMT_EVLOG, &opts), TLC_EINVAL);
  tlc_dec_fini(&d);
}

/* A smaller max_block rejects a block the default accepts; the other byte order is tried. */
static void test_max_block(void **state) {
  uint8_t b[256];
  size_t n = hex(V1, b, sizeof(b)), used;
  tlc_dec_t d;
  tlc_dec_opts_t opts;
  tlc_event_t ev[4];
  (void)state;
  memset(&opts, 0, sizeof(opts));
  opts.max_block = 96;
  assert_int_equal(tlc_dec_init(&d, TLC_FMT_EVLOG, &opts), 0);
  assert_int_equal(tlc_dec_push(&d, b, n, &used, ev, 4), TLC_EFRAME);
  assert_string_equal(d.err_reason, "evlog block at byte 0: size 104 exceeds limit 96");
  tlc_dec_fini(&d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_golden_le),           cmocka_unit_test(test_golden_be_host),
    cmocka_unit_test(test_golden_all_be),       cmocka_unit_test(test_golden_mixed_stale),
    cmocka_unit_test(test_empty_block),         cmocka_unit_test(test_detect),
    cmocka_unit_test(test_invalid_strict),      cmocka_unit_test(test_invalid_resync),
    cmocka_unit_test(test_bogus_size_alone),    cmocka_unit_test(test_truncated),
    cmocka_unit_test(test_finish_reset),        cmocka_unit_test(test_mixed_sizes),
    cmocka_unit_test(test_chunking_invariance), cmocka_unit_test(test_large_items),
    cmocka_unit_test(test_resync_damage),       cmocka_unit_test(test_resync_garbage),
    cmocka_unit_test(test_reencode_identical),  cmocka_unit_test(test_reencode_random),
    cmocka_unit_test(test_encode_decode),       cmocka_unit_test(test_item_build),
    cmocka_unit_test(test_encoder_limits),      cmocka_unit_test(test_encoder_alloc_failure),
    cmocka_unit_test(test_no_alloc_in_push),    cmocka_unit_test(test_init_alloc_failure),
    cmocka_unit_test(test_max_block),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
