/* test_frame.c - the varint length-delimited framing: headers, every split of a stream, caps
 * checked before allocation, malformed varints, zero-length frames, and protobuf round trips of
 * a table through tlc_pb_snapshot_build / tlc_pb_snapshot_apply. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "base/err.h"
#include "proto/convert.h"
#include "proto/frame.h"
#include "testalloc.h"

#include <string.h>

static void test_header(void **state) {
  uint8_t b[TLC_FRAME_MAX_HEADER];
  uint64_t v;
  static const uint64_t vals[] = { 0, 1, 127, 128, 300, 16383, 16384, 1u << 28, UINT64_MAX };
  size_t i;
  (void)state;
  assert_int_equal(tlc_frame_header(b, 300), 2);
  assert_int_equal(b[0], 0xAC);
  assert_int_equal(b[1], 0x02);
  for (i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
    size_t n = tlc_frame_header(b, vals[i]);
    assert_int_equal(tlc_frame_varint(b, n, &v), (int)n);
    assert_int_equal(v, vals[i]);
    assert_int_equal(tlc_frame_varint(b, n - 1, &v), 0); /* incomplete */
  }
  assert_int_equal(tlc_frame_header(b, UINT64_MAX), 10);
}

static void test_bad_varints(void **state) {
  uint8_t eleven[11];
  uint8_t over[10] = { 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02 }; /* > 2^64 */
  uint64_t v;
  tlc_frame_dec_t d;
  size_t used, flen;
  const uint8_t *f;
  (void)state;
  memset(eleven, 0x80, sizeof(eleven));
  assert_int_equal(tlc_frame_varint(eleven, 11, &v), TLC_EFRAME);
  assert_int_equal(tlc_frame_varint(over, 10, &v), TLC_EFRAME);
  tlc_frame_dec_init(&d, 100);
  assert_int_equal(tlc_frame_dec_feed(&d, eleven, 11, &used, &f, &flen), TLC_EFRAME);
  assert_int_equal(tlc_frame_dec_feed(&d, eleven, 1, &used, &f, &flen), TLC_EFRAME); /* sticky */
  tlc_frame_dec_fini(&d);
  tlc_frame_dec_init(&d, 100);
  assert_int_equal(tlc_frame_dec_feed(&d, (const uint8_t *)"\0", 1, &used, &f, &flen),
                   TLC_EFRAME); /* zero-length frame */
  tlc_frame_dec_fini(&d);
}

static void test_cap_before_alloc(void **state) {
  tlc_frame_dec_t d;
  uint8_t b[TLC_FRAME_MAX_HEADER];
  size_t n, used, flen;
  const uint8_t *f;
  (void)state;
  testalloc_install();
  tlc_frame_dec_init(&d, 1024);
  n = tlc_frame_header(b, 1025);
  assert_int_equal(tlc_frame_dec_feed(&d, b, n, &used, &f, &flen), TLC_ELIMIT);
  tlc_frame_dec_fini(&d);
  tlc_frame_dec_init(&d, 1u << 20);
  n = tlc_frame_header(b, 4ull << 30); /* 4 GiB */
  assert_int_equal(tlc_frame_dec_feed(&d, b, n, &used, &f, &flen), TLC_ELIMIT);
  tlc_frame_dec_fini(&d);
  assert_int_equal(testalloc_count(), 0);
  /* exactly at the cap is fine; the buffer is exactly the frame */
  tlc_frame_dec_init(&d, 1024);
  n = tlc_frame_header(b, 1024);
  assert_int_equal(tlc_frame_dec_feed(&d, b, n, &used, &f, &flen), 0);
  assert_int_equal(tlc_frame_dec_feed(&d, b, 1, &used, &f, &flen), 0);
  assert_int_equal(testalloc_max_request(), 1024);
  assert_int_equal(tlc_frame_dec_pending(&d), 1024);
  tlc_frame_dec_fini(&d);
  /* no memory for the payload */
  tlc_frame_dec_init(&d, 1024);
  testalloc_fail_at(1);
  assert_int_equal(tlc_frame_dec_feed(&d, b, n, &used, &f, &flen), 0);
  assert_int_equal(tlc_frame_dec_feed(&d, b, 1, &used, &f, &flen), TLC_ENOMEM);
  tlc_frame_dec_fini(&d);
  testalloc_fail_at(0);
  assert_int_equal(testalloc_live_bytes(), 0);
  testalloc_uninstall();
}

/* Three frames, fed in every possible pair of chunk splits: always the same frames. */
static void test_every_split(void **state) {
  uint8_t stream[600];
  size_t len = 0, i, j, k;
  static const size_t sizes[3] = { 1, 200, 300 };
  (void)state;
  for (k = 0; k < 3; k++) {
    len += tlc_frame_header(stream + len, sizes[k]);
    for (i = 0; i < sizes[k]; i++)
      stream[len++] = (uint8_t)(k * 50 + i);
  }
  testalloc_install();
  for (i = 0; i <= len; i += 7)
    for (j = i; j <= len; j += 5) {
      tlc_frame_dec_t d;
      size_t cuts[4] = { 0, i, j, len }, c, got = 0;
      tlc_frame_dec_init(&d, 300);
      for (c = 0; c < 3; c++) {
        const uint8_t *p = stream + cuts[c];
        size_t n = cuts[c + 1] - cuts[c];
        while (n > 0) {
          size_t used, flen;
          const uint8_t *f;
          int r = tlc_frame_dec_feed(&d, p, n, &used, &f, &flen);
          assert_true(r >= 0);
          p += used;
          n -= used;
          if (r == 1) {
            assert_int_equal(flen, sizes[got]);
            assert_int_equal(f[flen - 1], (uint8_t)(got * 50 + flen - 1));
            got++;
          }
        }
      }
      assert_int_equal(got, 3);
      tlc_frame_dec_fini(&d);
    }
  /* byte at a time */
  {
    tlc_frame_dec_t d;
    size_t got = 0, used, flen;
    const uint8_t *f;
    tlc_frame_dec_init(&d, 300);
    for (i = 0; i < len; i++) {
      int r = tlc_frame_dec_feed(&d, stream + i, 1, &used, &f, &flen);
      assert_int_equal(used, 1);
      if (r == 1)
        assert_int_equal(flen, sizes[got++]);
    }
    assert_int_equal(got, 3);
    tlc_frame_dec_fini(&d);
  }
  assert_int_equal(testalloc_live_bytes(), 0);
  testalloc_uninstall();
}

static void test_snapshot_roundtrip(void **state) {
  tlc_table_t t, u;
  tlc_ctx_t c0 = { TLC_CTXK_CORE, 0, 0, 0, 0 }, c1 = { TLC_CTXK_TASK, 0, 0, 0, 0xABCDEF };
  tlc_stat_t *r;
  tlc_pb_arena_t a;
  tlc_pb_snap_sel_t sel;
  Tlcap__Snapshot s;
  Tlcap__ServerMessage sm = TLCAP__SERVER_MESSAGE__INIT, *back;
  uint8_t *buf;
  size_t payload, n, used, flen;
  tlc_frame_dec_t d;
  const uint8_t *f;
  (void)state;
  testalloc_install();
  tlc_table_init(&t);
  t.format = TLC_FMT_BIN11;
  t.first_time = -5;
  t.last_time = 1000;
  t.nwindows = 2;
  t.window_ns[0] = 1000;
  t.window_ns[1] = 10000;
  t.counters.events = 77;
  t.counters.resyncs = 3;
  t.seq = 99;
  assert_int_equal(tlc_table_add_ctx(&t, &c0), 0);
  assert_int_equal(tlc_table_add_ctx(&t, &c1), 1);
  r = tlc_table_add(&t);
  r->handle = 0x30000001;
  r->context = TLC_CTX_NONE;
  r->state = 7;
  r->kind = TLC_ROW_STATE;
  r->count = 2;
  r->total[TLC_NET] = INT64_MAX;
  tlc_dist_add(&r->dist[TLC_NET], INT64_MIN);
  tlc_dist_add(&r->dist[TLC_NET], 3);
  r = tlc_table_add(&t);
  r->handle = 0x00000002;
  r->context = 1;
  r->kind = TLC_ROW_CODE;
  r->count = 1;
  r->dist[TLC_CALL].n = 1;
  r->dist[TLC_CALL].q[3] = 123;
  r->dist[TLC_CALL].has_q = 1;
  r->nwin = 2;
  r->win[1].count = 5;
  r->win[1].k[TLC_OUTSIDE].n = 1;
  r->win[1].k[TLC_OUTSIDE].min = -9;
  r->win[1].k[TLC_OUTSIDE].max = -9;
  r->anomalies = 4;
  r->seq = 98;
  tlc_table_sort(&t);
  tlc_pb_arena_init(&a, 0);
  memset(&sel, 0, sizeof(sel));
  sel.windows = 1;
  sel.quantiles = 1;
  assert_int_equal(tlc_pb_snapshot_build(&a, &s, &t, "lab", &sel, NULL), 0);
  s.full = 1;
  sm.msg_case = TLCAP__SERVER_MESSAGE__MSG_SNAPSHOT;
  sm.snapshot = &s;
  n = tlc_pb_frame_size(&sm.base, &payload);
  buf = tlc_malloc(n);
  assert_int_equal(tlc_pb_frame_pack(&sm.base, payload, buf), n);
  tlc_pb_arena_fini(&a);
  tlc_frame_dec_init(&d, 1u << 20);
  assert_int_equal(tlc_frame_dec_feed(&d, buf, n, &used, &f, &flen), 1);
  assert_int_equal(used, n);
  back = tlcap__server_message__unpack(&tlc_pb_allocator, flen, f);
  assert_non_null(back);
  tlc_table_init(&u);
  assert_int_equal(tlc_pb_snapshot_apply(&u, back->snapshot), 0);
  assert_int_equal(u.nrows, 2);
  assert_int_equal(u.ncontexts, 2);
  assert_int_equal(u.contexts[1].key, 0xABCDEF);
  assert_int_equal(u.seq, 99);
  assert_int_equal(u.first_time, -5);
  assert_int_equal(u.counters.resyncs, 3);
  assert_int_equal(u.nwindows, 2);
  assert_memory_equal(&u.rows[0], &t.rows[0], sizeof(tlc_stat_t));
  assert_memory_equal(&u.rows[1], &t.rows[1], sizeof(tlc_stat_t));
  /* a bad context index is refused */
  back->snapshot->rows[0]->context = 5;
  assert_int_equal(tlc_pb_snapshot_apply(&u, back->snapshot), TLC_EFRAME);
  tlcap__server_message__free_unpacked(back, &tlc_pb_allocator);
  tlc_frame_dec_fini(&d);
  tlc_free(buf);
  tlc_table_fini(&t);
  tlc_table_fini(&u);
  assert_int_equal(testalloc_live_bytes(), 0);
  testalloc_uninstall();
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_header),
    cmocka_unit_test(test_bad_varints),
    cmocka_unit_test(test_cap_before_alloc),
    cmocka_unit_test(test_every_split),
    cmocka_unit_test(test_snapshot_roundtrip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
