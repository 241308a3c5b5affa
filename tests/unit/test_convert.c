/* test_convert.c - proto/convert.c: columnar rows (Snapshot.columns / cells) both ways, the
 * frames a server assembles from pre-encoded rows, and applying deltas to a client's table.
 *
 * Expected values come from the source table the snapshot was built from, field by field (a
 * column's cell is the field it names); everything goes through the real protobuf-c packing
 * and unpacking of proto/tlcap.proto.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "base/err.h"
#include "proto/convert.h"
#include "proto/frame.h"
#include "testalloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A table with two contexts: code rows per context and Neutral, a data row with a value that
 * has its top bit set, a state row; distributions with quantiles, two windows. */
static void table_fill(tlc_table_t *t) {
  tlc_ctx_t c;
  uint32_t h, k, ctxs[3] = { 0, 1, TLC_CTX_NEUTRAL };
  unsigned ci, w;
  tlc_table_init(t);
  t->format = TLC_FMT_BIN11;
  t->first_time = 10;
  t->last_time = 123456789;
  t->nwindows = 2;
  t->window_ns[0] = 1000000000;
  t->window_ns[1] = 10000000000;
  t->seq = 77;
  t->counters.events = 1000;
  memset(&c, 0, sizeof(c));
  c.kind = TLC_CTXK_CORE;
  assert_int_equal(tlc_table_add_ctx(t, &c), 0);
  c.core = 1;
  assert_int_equal(tlc_table_add_ctx(t, &c), 1);
  for (h = 0; h < 3; h++)
    for (ci = 0; ci < 3; ci++) {
      tlc_stat_t *r = tlc_table_add(t);
      assert_non_null(r);
      r->handle = h;
      r->context = ctxs[ci];
      r->kind = TLC_ROW_CODE;
      r->count = 100 * h + ci + 1;
      r->anomalies = h;
      r->seq = 10 * h + ci;
      for (k = 0; k < TLC_NKINDS; k++) {
        r->total[k] = (int64_t)(1000000007u * (h + 1) + k);
        tlc_dist_add(&r->dist[k], 1000 + (int64_t)h);
        tlc_dist_add(&r->dist[k], 50000 + (int64_t)k);
        if (k != TLC_CALL) { /* CALL's times unknown: they stay unknown */
          r->dist[k].min_at =
              (tlc_at_t){ -5 - (int64_t)h, 995, 3 * h, 3 * h + 1, ci, 1, 0, 0, 0, 0, 0 };
          if (h % 2 == 0) /* a wall clock and a location, or neither */
            r->dist[k].min_at = (tlc_at_t){
              -5 - (int64_t)h, 995,    3 * h, 3 * h + 1, ci, 1, 1700000000000 + (int64_t)h,
              h + 1,           24 * h, h + 2, 48
            };
          r->dist[k].max_at =
              (tlc_at_t){ INT64_MIN, INT64_MAX, UINT64_MAX - k, UINT64_MAX, UINT32_MAX, 1, 0, 0, 0,
                          0,         0 };
        }
        r->dist[k].q[0] = 1000;
        r->dist[k].q[3] = 50000;
        r->dist[k].has_q = k != TLC_OUTSIDE;
      }
      r->nwin = 2;
      for (w = 0; w < 2; w++) {
        r->win[w].count = 7 + w;
        r->win[w].k[TLC_CALL].n = 3;
        r->win[w].k[TLC_CALL].sum = 3000;
        r->win[w].k[TLC_CALL].min = 900;
        r->win[w].k[TLC_CALL].max = 1100 + w;
      }
    }
  {
    tlc_stat_t *r = tlc_table_add(t);
    r->handle = 0x20000001;
    r->context = TLC_CTX_NONE;
    r->kind = TLC_ROW_DATA;
    r->has_value = 1;
    r->count = 5;
    r->value = 0x8000000000000005ull;
    r->value_min = 1;
    r->value_max = UINT64_MAX;
    tlc_dist_add(&r->dist[TLC_PERIOD], 1000000);
    r = tlc_table_add(t);
    r->handle = 0x30000002;
    r->context = TLC_CTX_NONE;
    r->kind = TLC_ROW_STATE;
    r->state = 0xABCDEF;
    r->count = 2;
    r->total[TLC_NET] = 555;
  }
  tlc_table_sort(t);
}

/* Packs a Snapshot into a framed ServerMessage and unpacks it again, as a client would. */
static Tlcap__ServerMessage *roundtrip(Tlcap__Snapshot *s) {
  Tlcap__ServerMessage sm = TLCAP__SERVER_MESSAGE__INIT, *out;
  size_t payload, n = 0, used = 0;
  uint8_t *buf;
  uint64_t len;
  int h;
  sm.msg_case = TLCAP__SERVER_MESSAGE__MSG_SNAPSHOT;
  sm.snapshot = s;
  n = tlc_pb_frame_size(&sm.base, &payload);
  buf = malloc(n);
  assert_non_null(buf);
  assert_int_equal(tlc_pb_frame_pack(&sm.base, payload, buf), n);
  h = tlc_frame_varint(buf, n, &len);
  assert_true(h > 0);
  used = (size_t)h;
  assert_int_equal(used + len, n);
  out = tlcap__server_message__unpack(&tlc_pb_allocator, (size_t)len, buf + used);
  free(buf);
  assert_non_null(out);
  return out;
}

static void test_normalise(void **state) {
  uint32_t req[] = { TLC_COL_COUNT,
                     5,
                     TLC_COL_DIST(TLC_NET, TLC_COLF_Q + 2),
                     999,
                     TLC_COL_COUNT,
                     TLC_COL_WIN(1, TLC_CALL, TLC_COLW_MAX),
                     TLC_COL_HANDLE };
  uint32_t out[TLC_COL_MAX_COLUMNS];
  int w = 0, q = 0;
  size_t n;
  (void)state;
  n = tlc_cols_normalise(req, sizeof(req) / sizeof(req[0]), out, &w, &q);
  assert_int_equal(n, 7);
  assert_int_equal(out[0], TLC_COL_HANDLE);
  assert_int_equal(out[1], TLC_COL_CONTEXT);
  assert_int_equal(out[2], TLC_COL_STATE);
  assert_int_equal(out[3], TLC_COL_KIND);
  assert_int_equal(out[4], TLC_COL_COUNT);
  assert_int_equal(out[5], 16 + 9); /* NET p99 */
  assert_int_equal(out[6], 128 + 32 + 1 + 8 + 3);
  assert_true(w);
  assert_true(q);
  n = tlc_cols_normalise(req, 2, out, &w, &q);
  assert_int_equal(n, 5);
  assert_false(w);
  assert_false(q);
  /* every known column is accepted once: the cap holds them all */
  {
    uint32_t all[512];
    size_t i, k = 0;
    for (i = 0; i < 512; i++)
      if (tlc_col_known((uint32_t)i))
        all[k++] = (uint32_t)i;
    assert_true(k < TLC_COL_MAX_COLUMNS);
    assert_int_equal(tlc_cols_normalise(all, k, out, &w, &q), k);
  }
}

/* Every row round-trips through cells: the columns sent equal the source fields, the others
 * are 0; quantile flags only for kinds whose quantile columns were sent. */
/* The sample kinds a column list needs: NET from its total, CALL from a window field, OUTSIDE
 * from a quantile column; key, COUNT and window COUNT columns need none. */
static void test_cols_kinds(void **state) {
  const uint32_t none[] = { TLC_COL_HANDLE, TLC_COL_KIND, TLC_COL_COUNT, TLC_COL_WCOUNT(1) };
  const uint32_t some[] = { TLC_COL_COUNT, TLC_COL_DIST(TLC_NET, TLC_COLF_TOTAL),
                            TLC_COL_WIN(2, TLC_CALL, TLC_COLW_MAX),
                            TLC_COL_DIST(TLC_OUTSIDE, TLC_COLF_Q + 3) };
  (void)state;
  assert_int_equal(tlc_cols_kinds(none, 4), 0);
  assert_int_equal(tlc_cols_kinds(some, 4),
                   (1u << TLC_NET) | (1u << TLC_CALL) | (1u << TLC_OUTSIDE));
  assert_int_equal(tlc_cols_kinds(some + 2, 1), 1u << TLC_CALL);
  assert_int_equal(tlc_cols_kinds(some, 0), 0);
}

static void test_columns_roundtrip(void **state) {
  uint32_t req[] = { TLC_COL_COUNT,
                     TLC_COL_ANOMALIES,
                     TLC_COL_VALUE,
                     TLC_COL_VALUE_MAX,
                     TLC_COL_SEQ,
                     TLC_COL_DIST(TLC_NET, TLC_COLF_TOTAL),
                     TLC_COL_DIST(TLC_NET, TLC_COLF_N),
                     TLC_COL_DIST(TLC_NET, TLC_COLF_SUM),
                     TLC_COL_DIST(TLC_NET, TLC_COLF_MIN),
                     TLC_COL_DIST(TLC_NET, TLC_COLF_MAX),
                     TLC_COL_DIST(TLC_NET, TLC_COLF_SUMSQ_LO),
                     TLC_COL_DIST(TLC_NET, TLC_COLF_Q + 0),
                     TLC_COL_DIST(TLC_NET, TLC_COLF_Q + 3),
                     TLC_COL_DIST(TLC_NET, TLC_COLF_MAX_START),
                     TLC_COL_DIST(TLC_NET, TLC_COLF_MAX_END),
                     TLC_COL_DIST(TLC_NET, TLC_COLF_MAX_EPOCH),
                     TLC_COL_DIST(TLC_CALL, TLC_COLF_MAX_EPOCH),
                     TLC_COL_DIST(TLC_PERIOD, TLC_COLF_N),
                     TLC_COL_WCOUNT(1),
                     TLC_COL_WIN(1, TLC_CALL, TLC_COLW_MAX) };
  uint32_t cols[TLC_COL_MAX_COLUMNS];
  tlc_table_t src, dst;
  tlc_pb_arena_t a;
  tlc_pb_snap_sel_t sel;
  Tlcap__Snapshot s;
  Tlcap__ServerMessage *m;
  int w, q;
  size_t i;
  (void)state;
  table_fill(&src);
  memset(&sel, 0, sizeof(sel));
  sel.ncolumns = tlc_cols_normalise(req, sizeof(req) / sizeof(req[0]), cols, &w, &q);
  sel.columns = cols;
  sel.windows = w;
  sel.quantiles = q;
  tlc_pb_arena_init(&a, 0);
  assert_int_equal(tlc_pb_snapshot_build(&a, &s, &src, "t", &sel, NULL), 0);
  s.full = 1;
  assert_int_equal(s.n_rows, 0);
  assert_int_equal(s.n_columns, sel.ncolumns);
  assert_int_equal(s.n_cells, src.nrows * sel.ncolumns);
  m = roundtrip(&s);
  tlc_pb_arena_fini(&a);
  tlc_table_init(&dst);
  assert_int_equal(tlc_pb_snapshot_apply(&dst, m->snapshot), 0);
  tlcap__server_message__free_unpacked(m, &tlc_pb_allocator);
  assert_int_equal(dst.nrows, src.nrows);
  assert_int_equal(dst.ncontexts, 2);
  assert_int_equal(dst.nwindows, 2);
  assert_int_equal(dst.seq, 77);
  for (i = 0; i < src.nrows; i++) {
    const tlc_stat_t *x = &src.rows[i], *y = &dst.rows[i];
    assert_int_equal(y->handle, x->handle);
    assert_int_equal(y->context, x->context);
    assert_int_equal(y->state, x->state);
    assert_int_equal(y->kind, x->kind);
    assert_int_equal(y->has_value, x->has_value);
    assert_int_equal(y->count, x->count);
    assert_int_equal(y->anomalies, x->anomalies);
    assert_int_equal(y->value, x->value);
    assert_int_equal(y->value_min, 0); /* not sent */
    assert_int_equal(y->value_max, x->value_max);
    assert_int_equal(y->seq, x->seq);
    assert_int_equal(y->total[TLC_NET], x->total[TLC_NET]);
    assert_int_equal(y->total[TLC_CALL], 0);
    assert_int_equal(y->dist[TLC_NET].n, x->dist[TLC_NET].n);
    assert_int_equal(y->dist[TLC_NET].sum, x->dist[TLC_NET].sum);
    assert_int_equal(y->dist[TLC_NET].min, x->dist[TLC_NET].n > 0 ? x->dist[TLC_NET].min : 0);
    assert_int_equal(y->dist[TLC_NET].max, x->dist[TLC_NET].n > 0 ? x->dist[TLC_NET].max : 0);
    assert_int_equal(y->dist[TLC_NET].sumsq_lo, x->dist[TLC_NET].sumsq_lo);
    assert_int_equal(y->dist[TLC_NET].sumsq_hi, 0);
    assert_int_equal(y->dist[TLC_NET].has_q, x->dist[TLC_NET].has_q && x->dist[TLC_NET].n > 0);
    if (y->dist[TLC_NET].has_q) {
      assert_int_equal(y->dist[TLC_NET].q[0], x->dist[TLC_NET].q[0]);
      assert_int_equal(y->dist[TLC_NET].q[3], x->dist[TLC_NET].q[3]);
    }
    /* MAX's time (tlcap top's MAX AT): start, end and epoch (UINT32_MAX: EPOCH + 1 still
     * fits); the change sequences were not asked for; CALL's time stays unknown */
    assert_int_equal(y->dist[TLC_NET].max_at.known,
                     x->dist[TLC_NET].n > 0 && x->dist[TLC_NET].max_at.known);
    if (y->dist[TLC_NET].max_at.known) {
      assert_int_equal(y->dist[TLC_NET].max_at.start, INT64_MIN);
      assert_int_equal(y->dist[TLC_NET].max_at.end, INT64_MAX);
      assert_int_equal(y->dist[TLC_NET].max_at.epoch, UINT32_MAX);
    }
    assert_int_equal(y->dist[TLC_NET].max_at.seq_end, 0);
    assert_false(y->dist[TLC_CALL].max_at.known);
    assert_false(y->dist[TLC_NET].min_at.known);
    assert_false(y->dist[TLC_CALL].has_q); /* CALL's quantiles were not asked for */
    assert_int_equal(y->dist[TLC_PERIOD].n, x->dist[TLC_PERIOD].n);
    assert_int_equal(y->nwin, 2); /* window 1 was asked for */
    assert_int_equal(y->win[1].count, x->nwin > 1 ? x->win[1].count : 0);
    assert_int_equal(y->win[1].k[TLC_CALL].max,
                     x->nwin > 1 && x->win[1].k[TLC_CALL].n > 0 ? x->win[1].k[TLC_CALL].max : 0);
    assert_int_equal(y->win[1].k[TLC_CALL].n, 0);
    assert_int_equal(y->win[0].count, 0);
  }
  /* neutral_only: with two contexts, code rows only as Neutral */
  sel.neutral_only = 1;
  tlc_pb_arena_init(&a, 0);
  assert_int_equal(tlc_pb_snapshot_build(&a, &s, &src, "t", &sel, NULL), 0);
  s.full = 1;
  assert_int_equal(s.n_cells / s.n_columns, 3 + 2);
  m = roundtrip(&s);
  tlc_pb_arena_fini(&a);
  assert_int_equal(tlc_pb_snapshot_apply(&dst, m->snapshot), 0);
  tlcap__server_message__free_unpacked(m, &tlc_pb_allocator);
  assert_int_equal(dst.nrows, 5);
  for (i = 0; i < dst.nrows; i++)
    assert_true(dst.rows[i].kind != TLC_ROW_CODE || dst.rows[i].context == TLC_CTX_NEUTRAL);
  tlc_table_fini(&dst);
  tlc_table_fini(&src);
}

static int apply_cells(const uint32_t *cols, size_t ncols, const int64_t *cells, size_t ncells,
                       int with_rows) {
  Tlcap__Snapshot s = TLCAP__SNAPSHOT__INIT;
  Tlcap__Context c = TLCAP__CONTEXT__INIT, *cp = &c;
  Tlcap__Row row = TLCAP__ROW__INIT, *rp = &row;
  tlc_table_t t;
  int r;
  s.full = 1;
  s.n_contexts = 1;
  s.contexts = &cp;
  s.columns = (uint32_t *)cols;
  s.n_columns = ncols;
  s.cells = (int64_t *)cells;
  s.n_cells = ncells;
  if (with_rows) {
    s.n_rows = 1;
    s.rows = &rp;
  }
  tlc_table_init(&t);
  r = tlc_pb_snapshot_apply(&t, &s);
  tlc_table_fini(&t);
  return r;
}

/* A columnar snapshot that does not make sense is refused, nothing else. */
static void test_columns_malformed(void **state) {
  uint32_t good[] = { 1, 2, 3, 4, 6 }, nokey[] = { 1, 2, 3, 6 }, dup[] = { 1, 2, 3, 4, 6, 6 },
           unknown[] = { 1, 2, 3, 4, 6, 77777 };
  int64_t cells[] = { 5, 0, 0, 0, 9, 6, 0, 0, 0, 8, 7 };
  int64_t cells6[] = { 5, 0, 0, 0, 9, 1, 6, 0, 0, 0, 8, 2 };
  int64_t badctx[] = { 5, 1, 0, 0, 9 }, badkind[] = { 5, 0, 0, 3, 9 };
  (void)state;
  assert_int_equal(apply_cells(good, 5, cells, 10, 0), 0);
  assert_int_equal(apply_cells(unknown, 6, cells6, 12, 0), 0);      /* newer column: ignored */
  assert_int_equal(apply_cells(good, 5, cells, 11, 0), TLC_EFRAME); /* not whole rows */
  assert_int_equal(apply_cells(nokey, 4, cells, 8, 0), TLC_EFRAME);
  assert_int_equal(apply_cells(dup, 6, cells6, 12, 0), TLC_EFRAME);
  assert_int_equal(apply_cells(good, 5, cells, 10, 1), TLC_EFRAME); /* rows and cells */
  assert_int_equal(apply_cells(good, 5, badctx, 5, 0), TLC_EFRAME); /* context 1 of 1 */
  assert_int_equal(apply_cells(good, 5, badkind, 5, 0), TLC_EFRAME);
}

/* Frames assembled from pre-encoded rows (what the server does) decode to the same table as
 * the snapshot packed whole by protobuf-c, with Row messages and with cells. */
static void test_preencoded_frames(void **state) {
  uint32_t req[] = { TLC_COL_COUNT, TLC_COL_VALUE, TLC_COL_DIST(TLC_NET, TLC_COLF_SUM),
                     TLC_COL_WCOUNT(0) };
  uint32_t cols[TLC_COL_MAX_COLUMNS];
  tlc_table_t src, t1, t2;
  int mode;
  (void)state;
  table_fill(&src);
  for (mode = 0; mode < 2; mode++) {
    tlc_pb_arena_t a, ra;
    tlc_pb_snap_sel_t sel, hsel;
    Tlcap__Snapshot s, hdr;
    Tlcap__ServerMessage *m1, *m2;
    tlc_table_t empty;
    uint8_t *rows = NULL, *frame, *p;
    size_t i, rl = 0, n, hl;
    uint64_t plen;
    int w, q, hb;
    memset(&sel, 0, sizeof(sel));
    sel.windows = 1;
    sel.quantiles = 1;
    if (mode == 1) {
      sel.ncolumns = tlc_cols_normalise(req, 4, cols, &w, &q);
      sel.columns = cols;
    }
    /* whole, by protobuf-c */
    tlc_pb_arena_init(&a, 0);
    assert_int_equal(tlc_pb_snapshot_build(&a, &s, &src, "tgt", &sel, NULL), 0);
    s.full = 1;
    s.stream = 42;
    m1 = roundtrip(&s);
    tlc_pb_arena_fini(&a);
    /* assembled: rows encoded one by one, then a header without rows */
    tlc_pb_arena_init(&ra, 0);
    rows = malloc(src.nrows * 4096);
    assert_non_null(rows);
    for (i = 0; i < src.nrows; i++) {
      if (mode == 1) {
        rl += tlc_pb_cells_encode(&src.rows[i], cols, sel.ncolumns,
                                  tlc_pb_cells_qmask(cols, sel.ncolumns), rows + rl);
      } else {
        Tlcap__Row pr;
        size_t packed;
        assert_int_equal(tlc_pb_row_build(&ra, &pr, &src.rows[i], src.nwindows, &sel), 0);
        assert_true(tlc_pb_row_field_size(&pr, &packed) < 4096);
        rl += tlc_pb_row_field_pack(&pr, packed, rows + rl);
        tlc_pb_arena_reset(&ra);
      }
    }
    tlc_pb_arena_fini(&ra);
    tlc_table_init(&empty);
    empty = src;
    empty.nrows = 0; /* the header fields only (rows and contexts stay src's) */
    hsel = sel;
    tlc_pb_arena_init(&a, 0);
    assert_int_equal(tlc_pb_snapshot_build(&a, &hdr, &empty, "tgt", &hsel, NULL), 0);
    hdr.full = 1;
    hdr.stream = 42;
    n = tlc_pb_snapshot_frame_size(&hdr, rl, &hl);
    frame = malloc(n);
    assert_non_null(frame);
    p = tlc_pb_snapshot_frame_begin(&hdr, hl, rl, frame);
    memcpy(p, rows, rl);
    assert_int_equal((size_t)(p + rl - frame), n);
    tlc_pb_arena_fini(&a);
    hb = tlc_frame_varint(frame, n, &plen);
    assert_true(hb > 0);
    assert_int_equal((size_t)hb + plen, n);
    m2 = tlcap__server_message__unpack(&tlc_pb_allocator, (size_t)plen, frame + hb);
    assert_non_null(m2);
    free(frame);
    free(rows);
    assert_int_equal(m2->msg_case, TLCAP__SERVER_MESSAGE__MSG_SNAPSHOT);
    assert_int_equal(m2->snapshot->stream, 42);
    assert_string_equal(m2->snapshot->target, "tgt");
    tlc_table_init(&t1);
    tlc_table_init(&t2);
    assert_int_equal(tlc_pb_snapshot_apply(&t1, m1->snapshot), 0);
    assert_int_equal(tlc_pb_snapshot_apply(&t2, m2->snapshot), 0);
    assert_int_equal(t1.nrows, src.nrows);
    assert_int_equal(t2.nrows, t1.nrows);
    assert_memory_equal(t1.rows, t2.rows, t1.nrows * sizeof(tlc_stat_t));
    if (mode == 0) /* whole rows carry when their extremes were taken, when known */
      for (i = 0; i < t1.nrows; i++) {
        const tlc_stat_t *y = &t1.rows[i],
                         *x = tlc_table_find(&src, y->handle, y->context, y->state);
        unsigned k;
        assert_non_null(x);
        for (k = 0; k < TLC_NKINDS; k++) {
          const tlc_dist_t *dx = &x->dist[k], *dy = &y->dist[k];
          int known = dx->n > 0 && dx->min_at.known;
          assert_int_equal(dy->min_at.known, known);
          assert_int_equal(dy->max_at.known, dx->n > 0 && dx->max_at.known);
          if (known) {
            assert_int_equal(dy->min_at.start, dx->min_at.start);
            assert_int_equal(dy->min_at.end, dx->min_at.end);
            assert_int_equal(dy->min_at.epoch, dx->min_at.epoch);
            assert_int_equal(dy->min_at.seq_start, dx->min_at.seq_start);
            assert_int_equal(dy->min_at.seq_end, dx->min_at.seq_end);
            assert_int_equal(dy->min_at.wall_ms, dx->min_at.wall_ms);
            assert_int_equal(dy->min_at.seg_first, dx->min_at.seg_first);
            assert_int_equal(dy->min_at.off_first, dx->min_at.off_first);
            assert_int_equal(dy->min_at.seg_last, dx->min_at.seg_last);
            assert_int_equal(dy->min_at.off_last, dx->min_at.off_last);
            assert_true(dy->max_at.start == INT64_MIN && dy->max_at.end == INT64_MAX);
            assert_true(dy->max_at.seq_end == UINT64_MAX && dy->max_at.epoch == UINT32_MAX);
            assert_true(dy->max_at.seq_start == dx->max_at.seq_start);
          }
        }
      }
    assert_int_equal(t2.ncontexts, t1.ncontexts);
    assert_int_equal(t2.counters.events, 1000);
    tlc_table_fini(&t1);
    tlc_table_fini(&t2);
    tlcap__server_message__free_unpacked(m1, &tlc_pb_allocator);
    tlcap__server_message__free_unpacked(m2, &tlc_pb_allocator);
  }
  tlc_table_fini(&src);
}

static void delta_rows(tlc_table_t *t, const uint32_t *handles, size_t n, int full,
                       uint64_t count) {
  Tlcap__Snapshot s = TLCAP__SNAPSHOT__INIT;
  Tlcap__Row rows[8], *rp[8];
  size_t i;
  assert_true(n <= 8);
  for (i = 0; i < n; i++) {
    tlcap__row__init(&rows[i]);
    rows[i].handle = handles[i];
    rows[i].context = TLC_CTX_NONE;
    rows[i].count = count;
    rp[i] = &rows[i];
  }
  s.full = full;
  s.rows = rp;
  s.n_rows = n;
  assert_int_equal(tlc_pb_snapshot_apply(t, &s), 0);
}

/* A delta that adds a row before existing ones and updates one after it: the update finds its
 * row (no duplicate), the table ends sorted. */
static void test_delta_apply_order(void **state) {
  static const uint32_t full[] = { 1, 3, 5, 7 }, d1[] = { 2, 7 }, d2[] = { 0, 4, 6, 8, 3 };
  tlc_table_t t;
  size_t i;
  (void)state;
  tlc_table_init(&t);
  delta_rows(&t, full, 4, 1, 1);
  delta_rows(&t, d1, 2, 0, 2);
  assert_int_equal(t.nrows, 5);
  assert_int_equal(tlc_table_find(&t, 7, TLC_CTX_NONE, 0)->count, 2);
  delta_rows(&t, d2, 5, 0, 3);
  assert_int_equal(t.nrows, 9);
  for (i = 0; i < t.nrows; i++)
    assert_int_equal(t.rows[i].handle, i);
  assert_int_equal(t.rows[3].count, 3);
  assert_int_equal(t.rows[5].count, 1);
  tlc_table_fini(&t);
}

/* tlc_pb_row_field_max bounds the packed size of every Row tlc_pb_row_build makes: rows with
 * every field at the longest values of its type (and random ones), every selection. */
static void fill_all(tlc_stat_t *r, uint64_t v, uint32_t v32, uint32_t nwin) {
  unsigned k, w, q;
  memset(r, 0, sizeof(*r));
  r->handle = r->context = v32;
  r->state = r->count = r->anomalies = r->value = r->value_min = r->value_max = r->seq = v;
  r->kind = 255;
  r->has_value = 1;
  r->nwin = nwin;
  for (k = 0; k < TLC_NKINDS; k++) {
    r->total[k] = (int64_t)v;
    r->dist[k].n = v | 1;
    r->dist[k].sum = r->dist[k].min = r->dist[k].max = (int64_t)v;
    r->dist[k].sumsq_hi = r->dist[k].sumsq_lo = v;
    r->dist[k].has_q = 1;
    for (q = 0; q < TLC_NQUANT; q++)
      r->dist[k].q[q] = (int64_t)v;
    r->dist[k].min_at.start = r->dist[k].min_at.end = r->dist[k].max_at.start =
        r->dist[k].max_at.end = (int64_t)v;
    r->dist[k].min_at.seq_start = r->dist[k].min_at.seq_end = r->dist[k].max_at.seq_start =
        r->dist[k].max_at.seq_end = v;
    r->dist[k].min_at.epoch = r->dist[k].max_at.epoch = v32;
    r->dist[k].min_at.known = r->dist[k].max_at.known = 1;
    r->dist[k].min_at.wall_ms = r->dist[k].max_at.wall_ms = (int64_t)v;
    r->dist[k].min_at.seg_first = r->dist[k].min_at.off_first = r->dist[k].min_at.seg_last =
        r->dist[k].min_at.off_last = v;
    r->dist[k].max_at.seg_first = r->dist[k].max_at.off_first = r->dist[k].max_at.seg_last =
        r->dist[k].max_at.off_last = v;
    for (w = 0; w < TLC_MAX_WINDOWS; w++) {
      r->win[w].count = v;
      r->win[w].k[k].n = v | 1;
      r->win[w].k[k].sum = r->win[w].k[k].min = r->win[w].k[k].max = (int64_t)v;
    }
  }
}

static void test_row_field_max(void **state) {
  static const uint64_t vals[] = { (uint64_t)INT64_MIN, (uint64_t)INT64_MAX, UINT64_MAX, 0,
                                   1u << 20 };
  uint32_t nwins[] = { 0, 3, TLC_MAX_WINDOWS };
  unsigned sw, sq, iw, iv, it;
  size_t worst[4] = { 0 };
  (void)state;
  srand(7);
  for (sw = 0; sw < 2; sw++)
    for (sq = 0; sq < 2; sq++)
      for (iw = 0; iw < 3; iw++) {
        tlc_pb_snap_sel_t sel;
        size_t max, packed, n;
        memset(&sel, 0, sizeof(sel));
        sel.windows = (int)sw;
        sel.quantiles = (int)sq;
        max = tlc_pb_row_field_max(nwins[iw], &sel);
        assert_true(max > 0);
        for (iv = 0; iv < 5 + 200; iv++) {
          tlc_pb_arena_t a;
          Tlcap__Row pr;
          tlc_stat_t r;
          if (iv < 5) {
            fill_all(&r, vals[iv], iv == 3 ? 0 : UINT32_MAX, nwins[iw]);
          } else { /* random values of random lengths */
            uint64_t v = 0;
            for (it = 0; it < 4; it++)
              v = (v << 16) ^ (uint64_t)(rand() & 0xFFFF);
            fill_all(&r, v >> (rand() % 64), (uint32_t)rand(), nwins[iw]);
          }
          tlc_pb_arena_init(&a, 0);
          assert_int_equal(tlc_pb_row_build(&a, &pr, &r, sw ? nwins[iw] : 0, &sel), 0);
          n = tlc_pb_row_field_size(&pr, &packed);
          assert_true(n <= max);
          if (n > worst[sw * 2 + sq])
            worst[sw * 2 + sq] = n;
          tlc_pb_arena_fini(&a);
        }
      }
  /* and not far above the longest rows (it counts a key and a 5-byte length for every
   * repeated field and message) */
  for (sw = 0; sw < 2; sw++)
    for (sq = 0; sq < 2; sq++) {
      tlc_pb_snap_sel_t sel;
      memset(&sel, 0, sizeof(sel));
      sel.windows = (int)sw;
      sel.quantiles = (int)sq;
      assert_true(tlc_pb_row_field_max(TLC_MAX_WINDOWS, &sel) <= worst[sw * 2 + sq] * 5 / 4);
    }
}

/* tlc_pb_arena_rewind: the chunks are reused (no new ones for the same allocations again),
 * every allocation still zeroed and apart from the others; large ones get their own chunk. */
static void test_arena_rewind(void **state) {
  tlc_pb_arena_t a;
  unsigned char *p[64];
  size_t sz[64], i, j, round;
  uint64_t grown = 0;
  (void)state;
  testalloc_install();
  tlc_pb_arena_init(&a, 0);
  for (i = 0; i < 64; i++)
    sz[i] = i % 9 == 0 ? 200000 : 100 + i * 997 % 5000;
  for (round = 0; round < 3; round++) {
    if (round == 1)
      grown = testalloc_count();
    for (i = 0; i < 64; i++) {
      p[i] = tlc_pb_arena_alloc(&a, sz[i]);
      assert_non_null(p[i]);
      for (j = 0; j < sz[i]; j++)
        assert_int_equal(p[i][j], 0);
      memset(p[i], (int)(i + 1), sz[i]);
    }
    for (i = 0; i < 64; i++) /* nothing overwrote another allocation */
      for (j = 0; j < sz[i]; j += 97)
        assert_int_equal(p[i][j], (unsigned char)(i + 1));
    assert_true(a.used >= 64 * 100);
    tlc_pb_arena_rewind(&a);
    assert_int_equal(a.used, 0);
  }
  assert_int_equal(testalloc_count(), grown); /* rounds 1 and 2 allocated nothing */
  tlc_pb_arena_fini(&a);
  tlc_pb_arena_fini(&a); /* twice is harmless */
  assert_int_equal(testalloc_live_blocks(), 0);
  testalloc_uninstall();
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_normalise),         cmocka_unit_test(test_columns_roundtrip),
    cmocka_unit_test(test_columns_malformed), cmocka_unit_test(test_preencoded_frames),
    cmocka_unit_test(test_delta_apply_order), cmocka_unit_test(test_cols_kinds),
    cmocka_unit_test(test_row_field_max),     cmocka_unit_test(test_arena_rewind),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
