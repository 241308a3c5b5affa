/* test_chunking.c - chunking invariance of the streaming decoders (dec.h).
 *
 * Property: for any input, decoding it in one push, one byte at a time, or in random chunks,
 * with any batch size, gives the same events (every field) in the same order, the same
 * counters, and the same errors (code, offset, reason). Inputs are clean streams, damaged
 * streams and pure noise, in strict and resync mode.
 *
 * To add a format: write a generator `gen_<fmt>(rng_t *, size_t *len)` returning a malloc'd
 * buffer and add a row to `cases[]`. Events are compared field by field; an evlog extension
 * points into the decoder's buffers and does not outlive the call, so a format with one must
 * copy what it wants compared in out_add (only its presence is compared here).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/err.h"
#include "formats/dec.h"
#include "rng.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct outcome {
  tlc_event_t *ev;
  size_t n, cap;
  int errs[4]; /* negative returns, in order (at most 4 kept) */
  uint64_t err_offsets[4];
  char reasons[4][160];
  size_t nerr;
  tlc_dec_counters_t c;
} outcome_t;

static void out_add(outcome_t *o, const tlc_event_t *ev, size_t n) {
  if (n == 0)
    return;
  if (o->n + n > o->cap) {
    o->cap = (o->n + n) * 2 + 64;
    o->ev = realloc(o->ev, o->cap * sizeof(*o->ev));
    assert_non_null(o->ev);
  }
  memcpy(o->ev + o->n, ev, n * sizeof(*ev));
  o->n += n;
}

static void out_err(outcome_t *o, const tlc_dec_t *d, int rc) {
  if (o->nerr < 4) {
    o->errs[o->nerr] = rc;
    o->err_offsets[o->nerr] = d->err_offset;
    snprintf(o->reasons[o->nerr], sizeof(o->reasons[0]), "%s", d->err_reason);
  }
  o->nerr++;
}

/* chunking: 0 one push, 1 byte at a time, 2 random (from g). batch: events per call. */
static void run_decoder(tlc_format_t f, const tlc_dec_opts_t *opts, const uint8_t *buf, size_t len,
                        int chunking, rng_t *g, size_t batch, outcome_t *o) {
  tlc_dec_t d;
  tlc_event_t ev[64];
  size_t off = 0;
  int rc;
  memset(o, 0, sizeof(*o));
  assert_int_equal(tlc_dec_init(&d, f, opts), 0);
  while (off < len) {
    size_t chunk = len - off, used;
    if (chunking == 1)
      chunk = 1;
    else if (chunking == 2) {
      size_t c = rng_chance(g, 1, 3) ? 1 + rng_below(g, 24) : 1 + rng_below(g, 2000);
      chunk = c < chunk ? c : chunk;
    }
    rc = tlc_dec_push(&d, buf + off, chunk, &used, ev, batch);
    if (rc < 0) {
      out_err(o, &d, rc);
      break;
    }
    assert_true(rc > 0 || used > 0);
    out_add(o, ev, (size_t)rc);
    off += used;
  }
  if (o->nerr == 0) {
    while ((rc = tlc_dec_finish(&d, ev, batch)) != 0) {
      if (rc < 0) {
        out_err(o, &d, rc);
        assert_true(o->nerr < 100);
        if (rc != TLC_ETRUNC)
          break;
        continue;
      }
      out_add(o, ev, (size_t)rc);
    }
  }
  o->c = d.c;
  tlc_dec_fini(&d);
}

static void same_outcome(const outcome_t *a, const outcome_t *b, const char *what) {
  size_t i;
  if (a->n != b->n)
    fail_msg("%s: %zu events vs %zu", what, a->n, b->n);
  for (i = 0; i < a->n; i++) {
    const tlc_event_t *x = &a->ev[i], *y = &b->ev[i];
    if (x->time_ns != y->time_ns || x->data != y->data || x->thread != y->thread ||
        x->offset != y->offset || x->handle != y->handle || x->raw != y->raw ||
        x->type != y->type || x->core != y->core || x->flags != y->flags ||
        (x->evlog == NULL) != (y->evlog == NULL))
      fail_msg("%s: event %zu differs (offset %" PRIu64 " vs %" PRIu64 ")", what, i, x->offset,
               y->offset);
  }
  assert_int_equal(a->nerr, b->nerr);
  for (i = 0; i < a->nerr && i < 4; i++) {
    assert_int_equal(a->errs[i], b->errs[i]);
    assert_int_equal(a->err_offsets[i], b->err_offsets[i]);
    assert_string_equal(a->reasons[i], b->reasons[i]);
  }
  /* `bytes` counts bytes taken, which after a strict-mode error depends on the chunking */
  if (a->nerr == 0 || a->errs[0] == TLC_ETRUNC)
    assert_int_equal(a->c.bytes, b->c.bytes);
  assert_int_equal(a->c.records, b->c.records);
  assert_int_equal(a->c.bytes_skipped, b->c.bytes_skipped);
  assert_int_equal(a->c.resyncs, b->c.resyncs);
  assert_int_equal(a->c.records_invalid, b->c.records_invalid);
  assert_int_equal(a->c.truncated, b->c.truncated);
}

/* ---- generators --------------------------------------------------------------------------- */

static uint8_t *gen_bin1x(tlc_format_t f, rng_t *g, size_t *len) {
  size_t n = 1 + (size_t)rng_below(g, 600), i, extra = (size_t)rng_below(g, 24);
  uint8_t *buf = malloc(n * 24 + extra + 64);
  int64_t t = rng_range(g, -1000000, 1000000000000ll);
  int style = (int)rng_below(g, 4); /* 0 clean, 1 damaged, 2 reboots, 3 noise */
  assert_non_null(buf);
  for (i = 0; i < n; i++) {
    tlc_event_t e;
    memset(&e, 0, sizeof(e));
    e.handle = (uint32_t)rng_below(g, 6) << 28 | (uint32_t)rng_below(g, 0x10000);
    e.type = (uint8_t)rng_below(g, 5);
    e.core = (uint8_t)(rng_chance(g, 1, 4) ? TLC_CORE_UNKNOWN : rng_below(g, 4));
    e.data = e.type == TLC_EV_WRITE ? rng_next(g) : 0;
    t += rng_range(g, 0, 50000);
    if (style == 2 && rng_chance(g, 1, 100))
      t = rng_range(g, 0, 1000); /* reboot */
    e.time_ns = t;
    e.raw = f == TLC_FMT_BIN11 ? (uint32_t)e.core << 4 | e.type : (uint32_t)e.type << 24;
    tlc_bin1x_encode(f, &e, buf + i * 24);
  }
  *len = n * 24 + extra;
  for (i = n * 24; i < *len; i++)
    buf[i] = (uint8_t)rng_next(g);
  if (style == 1) {
    size_t k = 1 + (size_t)rng_below(g, 10);
    while (k--) {
      size_t at = (size_t)rng_below(g, *len), m = 1 + (size_t)rng_below(g, 8);
      switch (rng_below(g, 3)) {
      case 0:
        buf[at] ^= (uint8_t)(1 + rng_below(g, 255));
        break;
      case 1: /* drop */
        if (at + m > *len)
          m = *len - at;
        memmove(buf + at, buf + at + m, *len - at - m);
        *len -= m;
        break;
      default: /* insert (room: 64 spare bytes; at most 8 per site, a few sites) */
        if (*len + m > n * 24 + extra + 64)
          break;
        memmove(buf + at + m, buf + at, *len - at);
        for (i = 0; i < m; i++)
          buf[at + i] = (uint8_t)rng_next(g);
        *len += m;
        break;
      }
    }
  } else if (style == 3) {
    for (i = 0; i < *len; i++)
      buf[i] = (uint8_t)rng_next(g);
  }
  return buf;
}

static uint8_t *gen_bin10(rng_t *g, size_t *len) {
  return gen_bin1x(TLC_FMT_BIN10, g, len);
}

static uint8_t *gen_bin11(rng_t *g, size_t *len) {
  return gen_bin1x(TLC_FMT_BIN11, g, len);
}

typedef struct chunk_case {
  const char *name;
  tlc_format_t format;
  uint8_t *(*gen)(rng_t *g, size_t *len);
} chunk_case_t;

static const chunk_case_t cases[] = {
  { "bin10", TLC_FMT_BIN10, gen_bin10 },
  { "bin11", TLC_FMT_BIN11, gen_bin11 },
};

/* ---- the property ------------------------------------------------------------------------- */

static void check_case(const chunk_case_t *cc, int resync, uint64_t seeds) {
  uint64_t seed;
  for (seed = 1; seed <= seeds; seed++) {
    rng_t g, gc;
    tlc_dec_opts_t o;
    outcome_t ref, other;
    uint8_t *buf;
    size_t len;
    int k;
    char what[120];
    memset(&o, 0, sizeof(o));
    rng_seed(&g, seed * 7919 + (uint64_t)resync);
    o.resync = resync;
    o.confirm = 1 + (unsigned)rng_below(&g, 5);
    o.time_tolerance_ns = rng_chance(&g, 1, 2) ? 0 : rng_range(&g, 1, 3000000000ll);
    buf = cc->gen(&g, &len);
    run_decoder(cc->format, &o, buf, len, 0, NULL, 64, &ref);
    for (k = 0; k < 4; k++) {
      int chunking = k == 0 ? 1 : 2;
      size_t batch = k == 1 ? 1 : 1 + (size_t)rng_below(&g, 64);
      rng_seed(&gc, seed * 31 + (uint64_t)k);
      snprintf(what, sizeof(what), "%s %s seed %" PRIu64 " chunking %d batch %zu confirm %u",
               cc->name, resync ? "resync" : "strict", seed, chunking, batch, o.confirm);
      run_decoder(cc->format, &o, buf, len, chunking, &gc, batch, &other);
      same_outcome(&ref, &other, what);
      free(other.ev);
    }
    if (resync)
      assert_int_equal(24 * ref.c.records + ref.c.bytes_skipped + ref.c.truncated, len);
    free(ref.ev);
    free(buf);
  }
}

static void test_strict(void **state) {
  size_t i;
  (void)state;
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    check_case(&cases[i], 0, 150);
}

static void test_resync(void **state) {
  size_t i;
  (void)state;
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    check_case(&cases[i], 1, 150);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_strict),
    cmocka_unit_test(test_resync),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
