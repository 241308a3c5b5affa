/* test_target.c - the target pipeline and the pubsub provider over the registry: feeding,
 * counters, strict decode errors, attach/detach gaps, observers, names, caps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/err.h"
#include "formats/bin1x.h"
#include "ingest/target.h"
#include "view/view.h"

#include <string.h>

typedef struct rec {
  int kinds[32];
  size_t nkinds;
  size_t decoded, batched, bytes;
} rec_t;

static void on_ev(void *ud, const tlc_target_t *t, int kind, const char *detail) {
  rec_t *r = ud;
  (void)t;
  (void)detail;
  if (r->nkinds < 32)
    r->kinds[r->nkinds++] = kind;
}

static void on_dec(void *ud, const tlc_target_t *t, const tlc_event_t *ev, size_t n) {
  (void)t;
  (void)ev;
  ((rec_t *)ud)->decoded += n;
}

static void on_batch(void *ud, const tlc_target_t *t, const tlc_event_t *ev, size_t n) {
  (void)t;
  (void)ev;
  ((rec_t *)ud)->batched += n;
}

static void on_bytes(void *ud, const tlc_target_t *t, const uint8_t *b, size_t n, uint64_t off) {
  rec_t *r = ud;
  (void)t;
  (void)b;
  assert_int_equal(off, r->bytes); /* contiguous stream offsets */
  r->bytes += n;
}

static size_t calls(uint8_t *out, size_t n, int64_t t0) {
  for (size_t i = 0; i < n; i++) {
    tlc_event_t e;
    memset(&e, 0, sizeof(e));
    e.handle = 0;
    e.core = 0;
    e.type = (i % 2) ? TLC_EV_EXIT : TLC_EV_ENTRY;
    e.time_ns = t0 + (int64_t)i * 10;
    tlc_bin1x_encode(TLC_FMT_BIN11, &e, out + i * TLC_BIN1X_RECORD);
  }
  return n * TLC_BIN1X_RECORD;
}

static void test_pipeline_and_provider(void **state) {
  tlc_targets_t reg;
  tlc_target_t *t = NULL, *t2 = NULL;
  tlc_target_conf_t conf;
  tlc_target_observer_t o;
  rec_t r;
  uint8_t buf[100 * TLC_BIN1X_RECORD];
  size_t len = calls(buf, 100, 1000);
  tlc_view_reg_t pv;
  tlc_view_target_t info;
  tlc_table_t tab;
  size_t idx;
  int src = 1;
  (void)state;

  memset(&r, 0, sizeof(r));
  assert_int_equal(tlc_targets_init(&reg, 2), 0);
  memset(&o, 0, sizeof(o));
  o.cb = on_ev;
  o.decoded_cb = on_dec;
  o.batch_cb = on_batch;
  o.bytes_cb = on_bytes;
  o.ud = &r;
  assert_int_equal(tlc_targets_observe(&reg, &o), 0);
  memset(&conf, 0, sizeof(conf));
  conf.format = TLC_FMT_BIN11;
  conf.histograms = 1;
  assert_int_equal(tlc_targets_get(&reg, "a@127.0.0.1", TLC_SRC_LISTEN, &conf, &t), 0);
  assert_int_equal(tlc_target_attach(t, &src, "127.0.0.1:1"), 0);
  assert_int_equal(tlc_target_attach(t, &src, "127.0.0.1:1"), TLC_EINVAL);
  /* fed in odd chunk sizes: a partial record is pending between calls */
  assert_int_equal(tlc_target_feed(t, buf, 37), 0);
  assert_true(tlc_target_pending(t) > 0);
  assert_int_equal(tlc_target_feed(t, buf + 37, len - 37), 0);
  assert_int_equal(tlc_target_pending(t), 0);
  assert_int_equal(r.decoded, 100);
  assert_int_equal(r.batched, 100);
  assert_int_equal(r.bytes, len);
  tlc_target_detach(t, "test");
  assert_int_equal(t->gaps, 1);
  assert_int_equal(t->connected, 0);
  /* reconnect: same target, a reconnect counted; a bad record stops it (strict) */
  assert_int_equal(tlc_target_attach(t, &src, "127.0.0.1:2"), 0);
  assert_int_equal(t->reconnects, 1);
  memset(buf, 0xff, TLC_BIN1X_RECORD);
  assert_true(tlc_target_feed(t, buf, TLC_BIN1X_RECORD) < 0);
  assert_int_equal(t->decode_errors, 1);
  tlc_target_detach(t, "decode error");
  /* a format clash and the cap */
  conf.format = TLC_FMT_BIN10;
  assert_int_equal(tlc_targets_get(&reg, "a@127.0.0.1", TLC_SRC_LISTEN, &conf, &t2), TLC_EINVAL);
  assert_ptr_equal(t2, t);
  assert_int_equal(tlc_targets_get(&reg, "../x", TLC_SRC_LISTEN, &conf, &t2), TLC_EINVAL);
  /* the cap with nothing evictable (a connected, b a dial target): refused */
  assert_int_equal(tlc_targets_get(&reg, "b", TLC_SRC_DIAL, &conf, &t2), 0);
  assert_int_equal(tlc_target_attach(t, &src, "127.0.0.1:3"), 0);
  assert_int_equal(tlc_targets_get(&reg, "c", TLC_SRC_LISTEN, &conf, &t2), TLC_ELIMIT);
  tlc_target_detach(t, "test");
  assert_int_equal(reg.refused_limit, 1);
  assert_int_equal(reg.refused_name, 1);
  assert_int_equal(reg.evicted, 0);
  /* events in order: created, connected, disconnected, connected, decode error, disconnected,
   * created (b), connected, disconnected */
  {
    static const int want[] = { TLC_TEV_CREATED,   TLC_TEV_CONNECTED,    TLC_TEV_DISCONNECTED,
                                TLC_TEV_CONNECTED, TLC_TEV_DECODE_ERROR, TLC_TEV_DISCONNECTED,
                                TLC_TEV_CREATED,   TLC_TEV_CONNECTED,    TLC_TEV_DISCONNECTED };
    assert_int_equal(r.nkinds, sizeof(want) / sizeof(want[0]));
    for (size_t i = 0; i < r.nkinds; i++)
      assert_int_equal(r.kinds[i], want[i]);
  }
  /* the provider */
  tlc_view_reg_init(&pv, &reg, NULL, NULL);
  assert_int_equal(pv.view.count(pv.view.ud), 2);
  assert_int_equal(pv.view.find(pv.view.ud, "b", &idx), 0);
  assert_int_equal(idx, 1);
  assert_int_equal(pv.view.find(pv.view.ud, "nope", &idx), TLC_ERANGE);
  assert_int_equal(pv.view.info(pv.view.ud, 0, &info), 0);
  assert_string_equal(info.name, "a@127.0.0.1");
  assert_int_equal(info.counters.records, 100);
  assert_int_equal(info.counters.events, 100);
  assert_int_equal(info.counters.bytes, len + TLC_BIN1X_RECORD);
  assert_int_equal(info.connections, 3);
  assert_int_equal(info.reconnects, 2);
  assert_int_equal(info.gaps, 3);
  assert_int_equal(info.decode_errors, 1);
  assert_int_equal(pv.view.info(pv.view.ud, 2, &info), TLC_ERANGE);
  assert_null(pv.view.mapping(pv.view.ud, 0));
  assert_int_equal(pv.view.rotate(pv.view.ud, 0), TLC_EINVAL);
  tlc_table_init(&tab);
  assert_int_equal(pv.view.snapshot(pv.view.ud, 0, &tab, NULL), 0);
  assert_int_equal(tab.counters.records, 100);
  assert_int_equal(tab.counters.gaps, 3);
  assert_true(tab.nrows >= 1);
  assert_int_equal(tab.rows[0].count, 50);
  tlc_table_fini(&tab);
  {
    char err[200] = "";
    const char *m = "* HANDLE(Functions) %HANDLE%,%NAME%,%VALUE%\n\n00000000,main,\n";
    assert_true(pv.view.load_mapping(pv.view.ud, 0, "* HANDLE(Functions) %BOGUS%\nx\n", 30, err,
                                     sizeof(err)) < 0);
    assert_true(err[0] != '\0');
    assert_int_equal(pv.view.load_mapping(pv.view.ud, 0, m, strlen(m), err, sizeof(err)), 0);
    assert_non_null(pv.view.mapping(pv.view.ud, 0));
  }
  tlc_targets_fini(&reg);
  assert_int_equal(r.kinds[r.nkinds - 1], TLC_TEV_FREED);
}

/* A full registry evicts the listener target disconnected the longest (observers get
 * TLC_TEV_FREED for it), and the newcomer takes its index with a new gen. */
static void test_full_registry_evicts(void **state) {
  tlc_targets_t reg;
  tlc_target_t *a = NULL, *b = NULL, *c = NULL;
  tlc_target_conf_t conf;
  tlc_target_observer_t o;
  rec_t r;
  int src = 1;
  uint64_t gen_a;
  (void)state;
  memset(&r, 0, sizeof(r));
  assert_int_equal(tlc_targets_init(&reg, 2), 0);
  memset(&o, 0, sizeof(o));
  o.cb = on_ev;
  o.ud = &r;
  assert_int_equal(tlc_targets_observe(&reg, &o), 0);
  memset(&conf, 0, sizeof(conf));
  conf.format = TLC_FMT_BIN11;
  assert_int_equal(tlc_targets_get(&reg, "a", TLC_SRC_LISTEN, &conf, &a), 0);
  assert_int_equal(tlc_targets_get(&reg, "b", TLC_SRC_LISTEN, &conf, &b), 0);
  assert_int_equal(tlc_target_attach(a, &src, "p"), 0);
  assert_int_equal(tlc_target_attach(b, &src, "p"), 0);
  tlc_target_detach(a, "test");
  gen_a = a->gen;
  r.nkinds = 0;
  assert_int_equal(tlc_targets_get(&reg, "c", TLC_SRC_LISTEN, &conf, &c), 0);
  assert_int_equal(reg.n, 2);
  assert_ptr_equal(reg.v[0], c); /* a's index */
  assert_string_equal(reg.v[0]->name, "c");
  assert_true(c->gen != gen_a && c->gen > b->gen);
  assert_int_equal(reg.evicted, 1);
  assert_int_equal(reg.refused_limit, 0);
  assert_int_equal(r.kinds[0], TLC_TEV_FREED); /* a, then c created */
  assert_int_equal(r.kinds[r.nkinds - 1], TLC_TEV_CREATED);
  assert_null(tlc_targets_find(&reg, "a"));
  /* every listener target connected: nothing to evict, refused */
  assert_int_equal(tlc_target_attach(c, &src, "p"), 0);
  assert_int_equal(tlc_targets_get(&reg, "d", TLC_SRC_LISTEN, &conf, &a), TLC_ELIMIT);
  assert_int_equal(reg.refused_limit, 1);
  tlc_target_detach(b, "test");
  tlc_target_detach(c, "test");
  tlc_targets_fini(&reg);
}

/* Regression (found by fuzz_ingest): the strict decoder hands out the good records before a
 * bad one and keeps the error for its next call; when the bad record came in the last chunk
 * of a stream, that call never came and the error went uncounted. */
static void test_decode_error_in_last_chunk(void **state) {
  tlc_targets_t reg;
  tlc_target_t *t = NULL;
  tlc_target_conf_t conf;
  tlc_target_observer_t o;
  rec_t r;
  uint8_t buf[2 * TLC_BIN1X_RECORD];
  int src = 1;
  (void)state;

  memset(&r, 0, sizeof(r));
  assert_int_equal(tlc_targets_init(&reg, 1), 0);
  memset(&o, 0, sizeof(o));
  o.cb = on_ev;
  o.decoded_cb = on_dec;
  o.ud = &r;
  assert_int_equal(tlc_targets_observe(&reg, &o), 0);
  memset(&conf, 0, sizeof(conf));
  conf.format = TLC_FMT_BIN11;
  assert_int_equal(tlc_targets_get(&reg, "x", TLC_SRC_LISTEN, &conf, &t), 0);
  assert_int_equal(tlc_target_attach(t, &src, "local"), 0);
  calls(buf, 2, 1000);
  buf[TLC_BIN1X_RECORD + 4] = 0x09; /* the last record: event type 9 */
  assert_true(tlc_target_feed(t, buf, sizeof(buf)) < 0);
  assert_int_equal(r.decoded, 1);
  assert_int_equal(t->decode_errors, 1);
  assert_int_equal(reg.decode_errors, 1);
  tlc_target_detach(t, "decode error"); /* counted once, not again at the end */
  assert_int_equal(t->decode_errors, 1);
  assert_int_equal(r.nkinds, 4);
  assert_int_equal(r.kinds[2], TLC_TEV_DECODE_ERROR);
  assert_int_equal(r.kinds[3], TLC_TEV_DISCONNECTED);
  tlc_targets_fini(&reg);
}

/* ---- checkpoint freeze (tlc_target_freeze / tlc_target_thaw) ---- */

typedef struct fsrc {
  int holds[16]; /* hold_cb calls: 1 stop, 0 read again */
  size_t n;
} fsrc_t;

static void f_hold(void *source, int on) {
  fsrc_t *s = source;
  if (s->n < 16)
    s->holds[s->n++] = on;
}

static int f_aborts;
static void f_abort(void *ud, tlc_target_t *t) {
  (void)ud;
  (void)t;
  f_aborts++;
}

/* A frozen target's state does not move; what a source fed meanwhile comes out in order at the
 * thaw, in parts; the source is held and let go; storage's hold outlasts the freeze. */
static void test_freeze_keeps_and_thaws_in_order(void **state) {
  tlc_targets_t reg;
  tlc_target_t *t = NULL;
  tlc_target_conf_t conf;
  tlc_target_observer_t o;
  rec_t r;
  static uint8_t buf[1000 * TLC_BIN1X_RECORD];
  size_t len = calls(buf, 1000, 1000), off, parts = 0;
  fsrc_t src;
  uint64_t ev0;
  (void)state;
  memset(&r, 0, sizeof(r));
  memset(&src, 0, sizeof(src));
  assert_int_equal(tlc_targets_init(&reg, 2), 0);
  memset(&o, 0, sizeof(o));
  o.decoded_cb = on_dec;
  o.bytes_cb = on_bytes; /* asserts contiguous stream offsets */
  o.ud = &r;
  assert_int_equal(tlc_targets_observe(&reg, &o), 0);
  memset(&conf, 0, sizeof(conf));
  conf.format = TLC_FMT_BIN11;
  assert_int_equal(tlc_targets_get(&reg, "f", TLC_SRC_LISTEN, &conf, &t), 0);
  assert_int_equal(tlc_target_attach(t, &src, "p"), 0);
  t->hold_cb = f_hold;
  assert_int_equal(tlc_target_feed(t, buf, 101), 0); /* a partial record pending */
  ev0 = tlc_engine_counters(t->pipe.engine)->events;
  f_aborts = 0;
  assert_int_equal(tlc_target_freeze(t, f_abort, NULL), 0);
  assert_int_equal(tlc_target_freeze(t, f_abort, NULL), TLC_EINVAL);
  assert_int_equal(src.n, 1);
  assert_int_equal(src.holds[0], 1);
  assert_int_equal(tlc_target_holding(t), 1);
  for (off = 101; off < len; off += 333) /* odd chunks */
    assert_int_equal(tlc_target_feed(t, buf + off, len - off < 333 ? len - off : 333), 0);
  tlc_target_idle(t); /* kept at its place */
  assert_int_equal(tlc_engine_counters(t->pipe.engine)->events, ev0);
  assert_int_equal(r.bytes, 101);
  assert_int_equal(t->freeze_bytes, len - 101);
  tlc_target_hold(t, 1); /* storage holds meanwhile: the source is held already */
  assert_int_equal(src.n, 1);
  while (!tlc_target_thaw(t, 1000))
    parts++;
  assert_true(parts >= (len - 101) / 1000 - 1);
  assert_int_equal(t->frozen, 0);
  assert_int_equal(r.bytes, len);
  assert_int_equal(r.decoded, 1000);
  assert_int_equal(tlc_engine_counters(t->pipe.engine)->events, 1000);
  assert_int_equal(src.n, 1); /* still held by storage: not let go */
  tlc_target_hold(t, 0);
  assert_int_equal(src.n, 2);
  assert_int_equal(src.holds[1], 0);
  assert_int_equal(f_aborts, 0);
  assert_int_equal(t->freeze_aborts, 0);
  tlc_target_detach(t, "test");
  tlc_targets_fini(&reg);
}

/* The freeze ends early without dropping a byte: kept bytes at their cap, and a detach (the
 * kept bytes come before the stream's end and its gap). */
static void test_freeze_aborts_lose_nothing(void **state) {
  tlc_targets_t reg;
  tlc_target_t *t = NULL;
  tlc_target_conf_t conf;
  rec_t r;
  tlc_target_observer_t o;
  static uint8_t buf[4096 * TLC_BIN1X_RECORD];
  size_t len, fed = 0, n = 0;
  int src = 1;
  (void)state;
  memset(&r, 0, sizeof(r));
  assert_int_equal(tlc_targets_init(&reg, 2), 0);
  memset(&o, 0, sizeof(o));
  o.cb = on_ev;
  o.decoded_cb = on_dec;
  o.ud = &r;
  assert_int_equal(tlc_targets_observe(&reg, &o), 0);
  memset(&conf, 0, sizeof(conf));
  conf.format = TLC_FMT_BIN11;
  conf.resync = 1; /* as a serial source */
  assert_int_equal(tlc_targets_get(&reg, "s", TLC_SRC_SERIAL, &conf, &t), 0);
  assert_int_equal(tlc_target_attach(t, &src, "/dev/x"), 0);
  f_aborts = 0;
  assert_int_equal(tlc_target_freeze(t, f_abort, NULL), 0);
  /* past the cap: the freeze gives way (once), every byte reaches the engine */
  while (fed <= TLC_TARGET_FREEZE_MAX) {
    len = calls(buf, 4096, 1000 + (int64_t)n * 40960);
    assert_int_equal(tlc_target_feed(t, buf, len), 0);
    fed += len;
    n += 4096;
  }
  assert_int_equal(f_aborts, 1);
  assert_int_equal(t->freeze_aborts, 1);
  assert_int_equal(t->frozen, 0);
  /* a detach while frozen: kept bytes first, then the end of the stream */
  assert_int_equal(tlc_target_freeze(t, f_abort, NULL), 0);
  len = calls(buf, 4096, 1000 + (int64_t)n * 40960);
  assert_int_equal(tlc_target_feed(t, buf, len), 0);
  n += 4096;
  tlc_target_detach(t, "unplugged");
  assert_int_equal(f_aborts, 2);
  assert_int_equal(t->frozen, 0);
  assert_int_equal(r.decoded, n);
  assert_int_equal(t->gaps, 1);
  /* freed while frozen: the abort is called before */
  assert_int_equal(tlc_target_freeze(t, f_abort, NULL), 0);
  tlc_targets_fini(&reg);
  assert_int_equal(f_aborts, 3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_pipeline_and_provider),
    cmocka_unit_test(test_full_registry_evicts),
    cmocka_unit_test(test_decode_error_in_last_chunk),
    cmocka_unit_test(test_freeze_keeps_and_thaws_in_order),
    cmocka_unit_test(test_freeze_aborts_lose_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
