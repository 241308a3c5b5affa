/* test_engine_checkpoint.c - an engine saved and loaded carries on exactly as the original.
 *
 * Property: for random streams of every mode (cores, context_area with task switches, evlog
 * threads through the evlog mapping), windows and histograms on, gaps and out-of-order times
 * included, engine A takes the whole stream; engine B is loaded from A's checkpoint taken at a
 * random point (an evmap likewise for evlog) and takes the rest. Every snapshot of B after that
 * (JSON export: every statistic, quantiles and windows included) equals A's, byte for byte,
 * and so does a second checkpoint's effect. Damage: every truncation of a checkpoint is
 * refused (never a crash), random bit flips are refused or give an engine that still works
 * (pushed to, snapshot, freed: ASan/UBSan builds check the memory), a checkpoint of other
 * options is refused as incompatible. Version 1 checkpoints (no extremes' times) still load:
 * every statistic as before, the times unknown until a sample makes a new extreme, which then
 * carries the same time as in the engine that never stopped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "base/err.h"
#include "engine/engine-int.h"
#include "engine/engine.h"
#include "formats/ckbuf.h"
#include "formats/evmap.h"
#include "formats/json.h"
#include "formats/stats.h"
#include "rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NEV 3000

enum { M_CORES, M_RTOS, M_EVLOG, M_NMODES };

typedef struct stream {
  tlc_format_t fmt;
  tlc_event_t ev[NEV];
  tlc_evlog_ext_t ext[NEV];
  char names[NEV][8];
  int gap_before[NEV];
  size_t n;
} stream_t;

static stream_t g_s;

static void gen(stream_t *s, int mode, uint64_t seed) {
  rng_t r;
  int64_t t = 1000;
  size_t i;
  rng_seed(&r, seed);
  memset(s, 0, sizeof(*s));
  s->fmt = mode == M_EVLOG ? TLC_FMT_EVLOG : TLC_FMT_BIN11;
  for (i = 0; i < NEV; i++) {
    tlc_event_t *e = &s->ev[i];
    t += rng_range(&r, -50, 4000000); /* sometimes backwards: anomalies */
    e->time_ns = t;
    e->core = (uint8_t)rng_below(&r, 3);
    s->gap_before[i] = rng_chance(&r, 1, 400);
    if (mode == M_EVLOG) {
      static const char pfx[] = "+-+-><!*";
      char c = pfx[rng_below(&r, 7)];
      snprintf(s->names[i], sizeof(s->names[i]), "%c%c", c, (char)('a' + rng_below(&r, 6)));
      s->ext[i].event = s->names[i];
      s->ext[i].event_len = strlen(s->names[i]);
      s->ext[i].detail = NULL;
      e->evlog = &s->ext[i];
      e->thread = 1 + rng_below(&r, 4);
      e->type = TLC_EV_WRITE;
      if (rng_chance(&r, 1, 300))
        e->flags |= TLC_EVF_GAP;
      continue;
    }
    switch (rng_below(&r, 10)) {
    case 0:
    case 1:
    case 2:
      e->type = TLC_EV_ENTRY;
      e->handle = (uint32_t)rng_below(&r, 12);
      break;
    case 3:
    case 4:
    case 5:
      e->type = TLC_EV_EXIT;
      e->handle = (uint32_t)rng_below(&r, 12);
      break;
    case 6:
      e->type = rng_chance(&r, 1, 2) ? TLC_EV_SUSPEND : TLC_EV_RESUME;
      e->handle = (uint32_t)rng_below(&r, 12);
      break;
    case 7:
      e->type = TLC_EV_WRITE;
      e->handle = 0x20000000u | (uint32_t)rng_below(&r, 5);
      e->data = rng_below(&r, 1000);
      break;
    case 8:
      e->type = rng_chance(&r, 3, 4) ? TLC_EV_WRITE : TLC_EV_EXIT;
      e->handle = 0x30000000u | (uint32_t)rng_below(&r, 3);
      e->data = rng_below(&r, 4);
      break;
    default:
      /* context_area writes (a task switch in RTOS mode) */
      e->type = TLC_EV_WRITE;
      e->handle = 0x30000010u;
      e->data = rng_below(&r, 5);
      break;
    }
  }
  s->n = NEV;
}

static void opts_for(int mode, tlc_engine_opts_t *o) {
  tlc_engine_opts_default(o);
  o->nwindows = 3;
  o->window_ns[0] = 10000000; /* short windows: they slide within the stream */
  o->window_ns[1] = 100000000;
  o->window_ns[2] = 1000000000;
  if (mode == M_RTOS) {
    o->has_context_area = 1;
    o->context_area = 0x30000010u;
  }
}

typedef struct pipe {
  tlc_engine_t *e;
  tlc_evmap_t *m;
} pipe_t;

static void feed(pipe_t *p, const stream_t *s, size_t from, size_t to) {
  size_t i;
  for (i = from; i < to; i++) {
    if (s->gap_before[i]) {
      tlc_engine_gap(p->e);
      if (p->m != NULL)
        tlc_evmap_gap(p->m);
    }
    if (p->m != NULL) {
      tlc_event_t out[2];
      int n = tlc_evmap_map(p->m, &s->ev[i], out);
      if (n > 0)
        tlc_engine_push(p->e, out, (size_t)n);
    } else {
      tlc_engine_push(p->e, &s->ev[i], 1);
    }
  }
}

static char *snap_json(tlc_engine_t *e, size_t *len) {
  tlc_table_t t;
  tlc_out_t o;
  char *s;
  tlc_table_init(&t);
  assert_int_equal(tlc_engine_snapshot(e, &t, NULL), 0);
  tlc_out_init(&o, 0, NULL, NULL);
  assert_int_equal(tlc_json_write(&o, &t, NULL, "x", 1), 0);
  s = tlc_malloc(o.len + 1);
  memcpy(s, o.buf, o.len);
  s[o.len] = '\0';
  *len = o.len;
  tlc_out_fini(&o);
  tlc_table_fini(&t);
  return s;
}

/* The same state saved in parts (tlc_engine_save_begin / _step, as the daemon's loop does it)
 * gives the same bytes, whatever the part size. */
static void save_sliced_same(pipe_t *p, const tlc_ckw_t *whole) {
  static size_t units = 0;
  tlc_engine_saver_t sv;
  tlc_ckw_t w;
  int rc, steps = 0;
  units = units % 37 + 1;
  tlc_ckw_init(&w, (size_t)1 << 30);
  rc = tlc_engine_save_begin(p->e, &sv, &w);
  while (rc == 0) {
    rc = tlc_engine_save_step(p->e, &sv, &w, units);
    steps++;
  }
  assert_int_equal(rc, 1);
  assert_true(steps >= 1);
  assert_int_equal(w.len, whole->len);
  assert_memory_equal(w.p, whole->p, w.len);
  tlc_ckw_fini(&w);
}

static void save(pipe_t *p, tlc_ckw_t *w) {
  tlc_ckw_init(w, (size_t)1 << 30);
  assert_int_equal(tlc_engine_save(p->e, w), 0);
  save_sliced_same(p, w);
  if (p->m != NULL)
    assert_int_equal(tlc_evmap_save(p->m, w), 0);
}

static int load(pipe_t *p, tlc_format_t fmt, const tlc_engine_opts_t *o, const void *buf,
                size_t len) {
  tlc_ckr_t r;
  int rc;
  memset(p, 0, sizeof(*p));
  assert_int_equal(tlc_engine_new(&p->e, fmt, o), 0);
  if (fmt == TLC_FMT_EVLOG)
    assert_int_equal(tlc_evmap_new(&p->m, NULL), 0);
  tlc_ckr_init(&r, buf, len);
  rc = tlc_engine_load(p->e, &r);
  if (rc == 0 && p->m != NULL)
    rc = tlc_evmap_load(p->m, &r);
  if (rc == 0 && r.off != r.len)
    rc = TLC_EFRAME;
  return rc;
}

static void pipe_free(pipe_t *p) {
  tlc_engine_free(p->e);
  tlc_evmap_free(p->m);
  memset(p, 0, sizeof(*p));
}

static void run(int mode, uint64_t seed) {
  stream_t *s = &g_s;
  tlc_engine_opts_t o;
  pipe_t a, b;
  tlc_ckw_t w;
  rng_t r;
  size_t cut, i;
  gen(s, mode, seed);
  opts_for(mode, &o);
  rng_seed(&r, seed ^ 0x5555);
  cut = (size_t)rng_below(&r, NEV);
  memset(&a, 0, sizeof(a));
  assert_int_equal(tlc_engine_new(&a.e, s->fmt, &o), 0);
  if (mode == M_EVLOG)
    assert_int_equal(tlc_evmap_new(&a.m, NULL), 0);
  feed(&a, s, 0, cut);
  if (rng_chance(&r, 1, 2)) {
    size_t l;
    tlc_free(snap_json(a.e, &l)); /* a snapshot before the save changes nothing */
  }
  save(&a, &w);
  assert_int_equal(load(&b, s->fmt, &o, w.p, w.len), 0);
  tlc_ckw_fini(&w);
  for (i = cut; i <= NEV; i += 500) {
    size_t end = i + 500 < NEV ? i + 500 : NEV, la, lb;
    char *ja, *jb;
    ja = snap_json(a.e, &la);
    jb = snap_json(b.e, &lb);
    if (la != lb || memcmp(ja, jb, la) != 0)
      fail_msg("mode %d seed %llu cut %zu: snapshots differ at event %zu", mode,
               (unsigned long long)seed, cut, i);
    tlc_free(ja);
    tlc_free(jb);
    feed(&a, s, i, end);
    feed(&b, s, i, end);
    if (end == NEV)
      break;
  }
  {
    size_t la, lb;
    char *ja = snap_json(a.e, &la), *jb = snap_json(b.e, &lb);
    assert_true(la == lb && memcmp(ja, jb, la) == 0);
    tlc_free(ja);
    tlc_free(jb);
  }
  pipe_free(&a);
  pipe_free(&b);
}

static void test_roundtrip(void **state) {
  (void)state;
  for (int mode = 0; mode < M_NMODES; mode++)
    for (uint64_t seed = 1; seed <= 40; seed++)
      run(mode, seed * 7919 + (uint64_t)mode);
}

static tlc_table_t snap(tlc_engine_t *e) {
  tlc_table_t t;
  tlc_table_init(&t);
  assert_int_equal(tlc_engine_snapshot(e, &t, NULL), 0);
  return t;
}

static int at_same(const tlc_at_t *a, const tlc_at_t *b) {
  return a->known == b->known && a->start == b->start && a->end == b->end && a->epoch == b->epoch &&
         a->seq_start == b->seq_start && a->seq_end == b->seq_end;
}

/* A version 1 checkpoint (a build before the extremes' times) loads with the times unknown;
 * samples after the load that make new extremes carry the times engine A (never stopped) has. */
static void test_version1(void **state) {
  (void)state;
  for (int mode = 0; mode < M_NMODES; mode++)
    for (uint64_t seed = 1; seed <= 10; seed++) {
      stream_t *s = &g_s;
      tlc_engine_opts_t o;
      pipe_t a, b;
      tlc_ckw_t w;
      tlc_table_t ta, tb;
      size_t cut = 300 + (size_t)seed * 200, i, nknown = 0, nunknown = 0;
      uint64_t seq_cut;
      unsigned k;
      gen(s, mode, seed * 31 + (uint64_t)mode);
      opts_for(mode, &o);
      memset(&a, 0, sizeof(a));
      assert_int_equal(tlc_engine_new(&a.e, s->fmt, &o), 0);
      if (mode == M_EVLOG)
        assert_int_equal(tlc_evmap_new(&a.m, NULL), 0);
      feed(&a, s, 0, cut);
      tlc__engine_set_ckpt_v1(a.e, 1);
      tlc_ckw_init(&w, (size_t)1 << 30);
      assert_int_equal(tlc_engine_save(a.e, &w), 0);
      assert_int_equal(*(const uint32_t *)w.p, 0x31474E45u); /* "ENG1" */
      if (a.m != NULL)
        assert_int_equal(tlc_evmap_save(a.m, &w), 0);
      assert_int_equal(load(&b, s->fmt, &o, w.p, w.len), 0);
      tlc_ckw_fini(&w);
      ta = snap(a.e);
      tb = snap(b.e);
      seq_cut = ta.seq;
      assert_int_equal(ta.nrows, tb.nrows);
      for (i = 0; i < ta.nrows; i++)
        for (k = 0; k < TLC_NKINDS; k++) {
          const tlc_dist_t *da = &ta.rows[i].dist[k], *db = &tb.rows[i].dist[k];
          assert_int_equal(db->min_at.known, 0);
          assert_int_equal(db->max_at.known, 0);
          /* every other statistic as saved */
          assert_true(da->n == db->n && da->sum == db->sum && da->min == db->min &&
                      da->max == db->max && da->sumsq_hi == db->sumsq_hi &&
                      da->sumsq_lo == db->sumsq_lo && da->has_q == db->has_q);
        }
      tlc_table_fini(&ta);
      tlc_table_fini(&tb);
      feed(&a, s, cut, NEV);
      feed(&b, s, cut, NEV);
      ta = snap(a.e);
      tb = snap(b.e);
      assert_int_equal(ta.nrows, tb.nrows);
      for (i = 0; i < ta.nrows; i++)
        for (k = 0; k < TLC_NKINDS; k++) {
          const tlc_dist_t *da = &ta.rows[i].dist[k], *db = &tb.rows[i].dist[k];
          const tlc_at_t *xa[2] = { &da->min_at, &da->max_at },
                         *xb[2] = { &db->min_at, &db->max_at };
          assert_int_equal(da->n, db->n);
          if (da->n == 0)
            continue;
          for (unsigned m = 0; m < 2; m++) {
            assert_int_equal(xa[m]->known, 1);
            if (xb[m]->known) { /* a new extreme after the load: the one A has */
              assert_true(at_same(xa[m], xb[m]));
              assert_true(xa[m]->seq_end > seq_cut);
              nknown++;
            } else { /* A's was taken before the checkpoint */
              assert_true(xa[m]->seq_end <= seq_cut);
              nunknown++;
            }
          }
        }
      assert_true(nknown > 0 && nunknown > 0);
      tlc_table_fini(&ta);
      tlc_table_fini(&tb);
      pipe_free(&a);
      pipe_free(&b);
    }
}

/* The extremes' wall clock and location (tlc_engine_set_wall_ms, tlc_engine_xnew,
 * tlc_engine_xlocate) survive a checkpoint; a version 2 checkpoint (before they existed) loads
 * with the same times and neither (0). */
static void test_version2(void **state) {
  (void)state;
  for (int mode = 0; mode < M_NMODES; mode++)
    for (uint64_t seed = 1; seed <= 3; seed++) {
      stream_t *s = &g_s;
      tlc_engine_opts_t o;
      pipe_t a, b, c;
      tlc_ckw_t w;
      tlc_table_t ta, tb, tc;
      tlc_engine_xnew_t x[16];
      size_t cut = 300 + (size_t)seed * 200, i, n, located = 0, walled = 0;
      unsigned k;
      gen(s, mode, seed * 17 + (uint64_t)mode);
      opts_for(mode, &o);
      memset(&a, 0, sizeof(a));
      assert_int_equal(tlc_engine_new(&a.e, s->fmt, &o), 0);
      if (mode == M_EVLOG)
        assert_int_equal(tlc_evmap_new(&a.m, NULL), 0);
      for (i = 0; i < cut; i += 50) { /* batches of 50: each one's new extremes located */
        tlc_engine_set_wall_ms(a.e, 1700000000000 + (int64_t)i);
        feed(&a, s, i, i + 50 < cut ? i + 50 : cut);
        n = tlc_engine_xnew(a.e, x, 16);
        for (size_t j = 0; j < n; j++) {
          uint64_t loc[4] = { 3 + x[j].seq_start % 2, x[j].seq_start * 24, 4, x[j].seq_end * 24 };
          assert_true(x[j].seq_start <= x[j].seq_end && x[j].seq_end <= tlc_engine_seq(a.e));
          assert_int_equal(tlc_engine_xlocate(a.e, &x[j], loc), 1);
        }
      }
      tlc_ckw_init(&w, (size_t)1 << 30);
      assert_int_equal(tlc_engine_save(a.e, &w), 0);
      assert_int_equal(*(const uint32_t *)w.p, 0x33474E45u); /* "ENG3" */
      if (a.m != NULL)
        assert_int_equal(tlc_evmap_save(a.m, &w), 0);
      assert_int_equal(load(&b, s->fmt, &o, w.p, w.len), 0);
      tlc_ckw_fini(&w);
      tlc__engine_set_ckpt_version(a.e, 2);
      tlc_ckw_init(&w, (size_t)1 << 30);
      assert_int_equal(tlc_engine_save(a.e, &w), 0);
      assert_int_equal(*(const uint32_t *)w.p, 0x32474E45u); /* "ENG2" */
      if (a.m != NULL)
        assert_int_equal(tlc_evmap_save(a.m, &w), 0);
      assert_int_equal(load(&c, s->fmt, &o, w.p, w.len), 0);
      tlc_ckw_fini(&w);
      ta = snap(a.e);
      tb = snap(b.e);
      tc = snap(c.e);
      assert_int_equal(ta.nrows, tb.nrows);
      assert_int_equal(ta.nrows, tc.nrows);
      for (i = 0; i < ta.nrows; i++)
        for (k = 0; k < TLC_NKINDS; k++) {
          const tlc_dist_t *da = &ta.rows[i].dist[k], *db = &tb.rows[i].dist[k],
                           *dc = &tc.rows[i].dist[k];
          const tlc_at_t *xa[2] = { &da->min_at, &da->max_at },
                         *xb[2] = { &db->min_at, &db->max_at },
                         *xc[2] = { &dc->min_at, &dc->max_at };
          if (da->n == 0)
            continue;
          for (unsigned m = 0; m < 2; m++) {
            assert_true(at_same(xa[m], xb[m]) && at_same(xa[m], xc[m]));
            assert_true(xb[m]->wall_ms == xa[m]->wall_ms && xb[m]->seg_first == xa[m]->seg_first &&
                        xb[m]->off_first == xa[m]->off_first &&
                        xb[m]->seg_last == xa[m]->seg_last && xb[m]->off_last == xa[m]->off_last);
            assert_true(xc[m]->wall_ms == 0 && xc[m]->seg_first == 0 && xc[m]->off_first == 0 &&
                        xc[m]->seg_last == 0 && xc[m]->off_last == 0);
            if (xa[m]->known && xa[m]->seg_first != 0) {
              assert_int_equal(xa[m]->off_first, xa[m]->seq_start * 24);
              assert_int_equal(xa[m]->off_last, xa[m]->seq_end * 24);
              located++;
            }
            if (xa[m]->wall_ms >= 1700000000000)
              walled++;
          }
        }
      assert_true(located > 0 && walled > 0);
      tlc_table_fini(&ta);
      tlc_table_fini(&tb);
      tlc_table_fini(&tc);
      pipe_free(&a);
      pipe_free(&b);
      pipe_free(&c);
    }
}

/* Damage: truncations, bit flips, other options. */
static void test_damage(void **state) {
  (void)state;
  for (int mode = 0; mode < M_NMODES; mode++) {
    stream_t *s = &g_s;
    tlc_engine_opts_t o, other;
    pipe_t a, b;
    tlc_ckw_t w;
    rng_t r;
    size_t len;
    gen(s, mode, 99 + (uint64_t)mode);
    opts_for(mode, &o);
    memset(&a, 0, sizeof(a));
    assert_int_equal(tlc_engine_new(&a.e, s->fmt, &o), 0);
    if (mode == M_EVLOG)
      assert_int_equal(tlc_evmap_new(&a.m, NULL), 0);
    feed(&a, s, 0, 400);
    save(&a, &w);
    /* every truncation is refused */
    for (len = 0; len < w.len; len += (len < 4096 ? 1 : 97)) {
      assert_int_not_equal(load(&b, s->fmt, &o, w.p, len), 0);
      feed(&b, s, 400, 420); /* still usable */
      pipe_free(&b);
    }
    /* bit flips: refused, or an engine that works */
    rng_seed(&r, 1234 + (uint64_t)mode);
    for (int k = 0; k < 300; k++) {
      uint8_t *copy = tlc_malloc(w.len);
      size_t at = (size_t)rng_below(&r, w.len), l;
      memcpy(copy, w.p, w.len);
      copy[at] ^= (uint8_t)(1u << rng_below(&r, 8));
      (void)load(&b, s->fmt, &o, copy, w.len);
      feed(&b, s, 400, 600);
      tlc_free(snap_json(b.e, &l));
      pipe_free(&b);
      tlc_free(copy);
    }
    /* other options: incompatible */
    other = o;
    other.window_ns[0] *= 2;
    assert_int_equal(load(&b, s->fmt, &other, w.p, w.len), TLC_EINVAL);
    pipe_free(&b);
    other = o;
    other.histograms = 0;
    assert_int_equal(load(&b, s->fmt, &other, w.p, w.len), TLC_EINVAL);
    pipe_free(&b);
    if (o.has_context_area) { /* another packing of the task variable: other contexts */
      other = o;
      other.pack.id_mask = 0xFFFF;
      other.pack.state_mask = 0xFF0000;
      tlc_ctxpack_finish(&other.pack);
      assert_int_equal(load(&b, s->fmt, &other, w.p, w.len), TLC_EINVAL);
      pipe_free(&b);
    }
    tlc_ckw_fini(&w);
    pipe_free(&a);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_roundtrip),
    cmocka_unit_test(test_version1),
    cmocka_unit_test(test_version2),
    cmocka_unit_test(test_damage),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
