/* test_export_roundtrip.c - exports read back give the statistics they were written from.
 *
 * Random bin11 streams (nested calls with S/R as winIDEA sends them, line areas inside
 * functions, several cores, streams cut mid-way) go through the engine; the aprof and BR
 * exports are then parsed by the readers of formats/ and compared with the engine's table:
 *  - aprof (ns variant): per routine, occ / sum / min / max equal the CALL samples and
 *    self-sum / self-min / self-max the NET samples, summed over contexts. The aprof writer
 *    measures activations with its own stacks over the timeline, so this also cross-checks
 *    two independent implementations of the activation rules.
 *  - BR: per line area, TIME SPENT equals its NET total over contexts; module files and
 *    function names come from the mapping, including names with commas, quotes, <>&, non-ASCII
 *    and empty names.
 * Seeds are printed on failure.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "engine/engine.h"
#include "formats/aprof.h"
#include "formats/aprofw.h"
#include "formats/br.h"
#include "formats/brw.h"
#include "formats/stats.h"
#include "rng.h"

#include <stdio.h>
#include <string.h>

#define NFUNC 12
#define NLINE 30
#define MAXEV 4000

static const char *const fnames[NFUNC] = { "main",        "a,b", "\"quoted\"", "<tag>&amp;",
                                           "caf\xc3\xa9", "",    "x y",        "f7",
                                           "f8",          "f9",  "f10",        "f11" };

typedef struct gen {
  tlc_event_t ev[MAXEV];
  int n;
} gen_t;

typedef struct vec_tl {
  const tlc_event_t *ev;
  int n, done;
} vec_tl_t;

static int vtl_next(void *ud, const tlc_event_t **evs) {
  vec_tl_t *v = ud;
  if (v->done)
    return 0;
  v->done = 1;
  *evs = v->ev;
  return v->n;
}

static int vtl_rewind(void *ud) {
  ((vec_tl_t *)ud)->done = 0;
  return 0;
}

static void emit(gen_t *g, uint32_t h, int type, int core, int64_t t) {
  tlc_event_t *e = &g->ev[g->n++];
  memset(e, 0, sizeof(*e));
  e->handle = h;
  e->type = (uint8_t)type;
  e->core = (uint8_t)core;
  e->time_ns = t;
  e->raw = ((uint32_t)core << 4) | (uint32_t)type;
}

/* Per core: a stack of functions; a call suspends the caller and enters the callee, a return
 * exits it and resumes the caller; lines are entered and left inside the running function. */
static void generate(gen_t *g, rng_t *r, int ncores) {
  uint32_t stack[4][32];
  int depth[4] = { 0, 0, 0, 0 };
  int64_t t = (int64_t)rng_below(r, 1000);
  g->n = 0;
  while (g->n < MAXEV - 8) {
    int c = (int)rng_below(r, (uint64_t)ncores);
    unsigned act = (unsigned)rng_below(r, 10);
    t += (int64_t)rng_below(r, 50);
    if (act < 4 && depth[c] < 30) {
      uint32_t f = (uint32_t)rng_below(r, NFUNC);
      if (depth[c] > 0)
        emit(g, stack[c][depth[c] - 1], TLC_EV_SUSPEND, c, t);
      emit(g, f, TLC_EV_ENTRY, c, t);
      stack[c][depth[c]++] = f;
    } else if (act < 8 && depth[c] > 0) {
      emit(g, stack[c][--depth[c]], TLC_EV_EXIT, c, t);
      if (depth[c] > 0)
        emit(g, stack[c][depth[c] - 1], TLC_EV_RESUME, c, t);
    } else if (depth[c] > 0) {
      uint32_t l = 0x10000000u | (uint32_t)rng_below(r, NLINE);
      emit(g, l, TLC_EV_ENTRY, c, t);
      t += (int64_t)rng_below(r, 20);
      emit(g, l, TLC_EV_EXIT, c, t);
    }
  }
}

static void build_mapping(tlc_mapping_t *m) {
  int i;
  tlc_mapping_init(m);
  for (i = 0; i < NFUNC; i++) {
    tlc_map_area_t a;
    memset(&a, 0, sizeof(a));
    a.handle = (uint32_t)i;
    a.parent = a.state_handle = TLC_NO_HANDLE;
    a.name = (char *)fnames[i];
    a.file = (char *)(i % 2 ? "src/odd,file.c" : "src/even.c");
    assert_int_equal(tlc_mapping_add(m, &a), 0);
  }
  for (i = 0; i < NLINE; i++) {
    tlc_map_area_t a;
    memset(&a, 0, sizeof(a));
    a.handle = 0x10000000u | (uint32_t)i;
    a.parent = (uint32_t)(i % NFUNC);
    a.state_handle = TLC_NO_HANDLE;
    a.has_value = 1;
    a.value = 100 + (uint64_t)i;
    a.name = (char *)"x = 1;";
    a.file = (char *)(i % 3 == 0 ? "a.c" : i % 3 == 1 ? "b \xc3\xa9.c" : "");
    assert_int_equal(tlc_mapping_add(m, &a), 0);
  }
  tlc_mapping_finish(m);
}

/* Sums of a code area's per-context rows. */
typedef struct sums {
  uint64_t call_n, call_sum, net_sum;
  int64_t call_min, call_max, net_min, net_max;
  uint64_t net_total;
} sums_t;

static sums_t sum_rows(const tlc_table_t *t, uint32_t h) {
  sums_t s;
  size_t i;
  memset(&s, 0, sizeof(s));
  for (i = 0; i < t->nrows; i++) {
    const tlc_stat_t *r = &t->rows[i];
    const tlc_dist_t *c = &r->dist[TLC_CALL], *n = &r->dist[TLC_NET];
    if (r->handle != h || r->kind != TLC_ROW_CODE || r->context == TLC_CTX_NEUTRAL)
      continue;
    s.net_total += (uint64_t)r->total[TLC_NET];
    if (c->n) {
      if (s.call_n == 0 || c->min < s.call_min)
        s.call_min = c->min;
      if (s.call_n == 0 || c->max > s.call_max)
        s.call_max = c->max;
      if (s.call_n == 0 || n->min < s.net_min)
        s.net_min = n->min;
      if (s.call_n == 0 || n->max > s.net_max)
        s.net_max = n->max;
      s.call_n += c->n;
      s.call_sum += (uint64_t)c->sum;
      s.net_sum += (uint64_t)n->sum;
    }
  }
  return s;
}

static void check_aprof(uint64_t seed, const tlc_table_t *t, const tlc_mapping_t *m,
                        tlc_timeline_t *tl) {
  tlc_aprofw_opts_t o;
  tlc_out_t out;
  tlc_aprof_t a;
  tlc_parse_err_t pe;
  char *text;
  size_t len, i;
  memset(&o, 0, sizeof(o));
  o.ns = 1;
  tlc_out_init(&out, 0, NULL, NULL);
  assert_int_equal(tlc_aprof_write(&out, &o, t, m, tl), 0);
  text = tlc_out_take(&out, &len);
  tlc_out_fini(&out);
  tlc_aprof_init(&a);
  if (tlc_aprof_parse(&a, text, len, &pe) != 0)
    fail_msg("seed %llu: aprof reader: line %llu: %s", (unsigned long long)seed,
             (unsigned long long)pe.line, pe.reason);
  assert_int_equal(a.layout, 12);
  assert_string_equal(a.metric, "time-nsec");
  for (i = 0; i < a.nroutines; i++) {
    const tlc_aprof_routine_t *rt = &a.routines[i];
    uint32_t h = TLC_NO_HANDLE;
    sums_t s;
    int k;
    /* names identify routines: the writer turns '"' into '\'' */
    for (k = 0; k < NFUNC; k++) {
      char want[64];
      size_t j;
      /* an empty name is written as fn_<HANDLE> (docs/exports.md) */
      if (fnames[k][0] == '\0')
        snprintf(want, sizeof(want), "fn_%08X", (unsigned)k);
      else
        snprintf(want, sizeof(want), "%s", fnames[k]);
      for (j = 0; want[j]; j++)
        if (want[j] == '"')
          want[j] = '\'';
      if (strcmp(want, rt->name) == 0)
        h = (uint32_t)k;
    }
    if (h == TLC_NO_HANDLE)
      fail_msg("seed %llu: unknown routine name \"%s\"", (unsigned long long)seed, rt->name);
    assert_string_equal(rt->image, h % 2 ? "src/odd,file.c" : "src/even.c");
    s = sum_rows(t, h);
    if (rt->npoints == 0) {
      assert_int_equal(s.call_n, 0);
      continue;
    }
    assert_int_equal(rt->npoints, 1);
    {
      const tlc_aprof_point_t *p = &a.points[rt->first_point];
      if (p->occ != s.call_n || p->sum != s.call_sum || p->self_sum != s.net_sum ||
          (int64_t)p->min != s.call_min || (int64_t)p->max != s.call_max ||
          (int64_t)p->self_min != s.net_min || (int64_t)p->self_max != s.net_max)
        fail_msg("seed %llu routine %s: aprof occ %llu sum %llu self %llu min %llu max %llu; "
                 "engine %llu %llu %llu %lld %lld",
                 (unsigned long long)seed, rt->name, (unsigned long long)p->occ,
                 (unsigned long long)p->sum, (unsigned long long)p->self_sum,
                 (unsigned long long)p->min, (unsigned long long)p->max,
                 (unsigned long long)s.call_n, (unsigned long long)s.call_sum,
                 (unsigned long long)s.net_sum, (long long)s.call_min, (long long)s.call_max);
    }
  }
  tlc_aprof_fini(&a);
  tlc_free(text);
}

static void check_br(uint64_t seed, const tlc_table_t *t, const tlc_mapping_t *m) {
  tlc_out_t out;
  tlc_br_t b;
  tlc_parse_err_t pe;
  char *bytes;
  size_t len, i, lines = 0;
  tlc_out_init(&out, 0, NULL, NULL);
  assert_int_equal(tlc_br_export(&out, t, m), 0);
  bytes = tlc_out_take(&out, &len);
  tlc_out_fini(&out);
  tlc_br_init(&b);
  if (tlc_br_parse(&b, (const uint8_t *)bytes, len, &pe) != 0)
    fail_msg("seed %llu: BR reader: byte %llu: %s", (unsigned long long)seed,
             (unsigned long long)pe.offset, pe.reason);
  for (i = 0; i < t->nrows; i++)
    if (t->rows[i].kind == TLC_ROW_CODE && t->rows[i].context != TLC_CTX_NEUTRAL &&
        tlc_handle_area(t->rows[i].handle) == TLC_AREA_LINE &&
        (i == 0 || t->rows[i - 1].handle != t->rows[i].handle))
      lines++;
  assert_int_equal(b.nlines, lines);
  for (i = 0; i < b.nlines; i++) {
    const tlc_br_line_t *l = &b.lines[i];
    uint32_t h = 0x10000000u | (uint32_t)(l->at.line - 100);
    const tlc_map_area_t *ma = tlc_mapping_find(m, h);
    sums_t s = sum_rows(t, h);
    assert_non_null(ma);
    assert_string_equal(tlc_br_module_file(&b, l->at.module), ma->file);
    assert_true(l->has_time);
    if (l->time_ns != s.net_total)
      fail_msg("seed %llu line %u: BR time %llu, engine NET %llu", (unsigned long long)seed,
               (unsigned)l->at.line, (unsigned long long)l->time_ns,
               (unsigned long long)s.net_total);
    assert_int_not_equal(l->at.function, TLC_BR_NONAME);
    assert_string_equal(b.names[l->at.function], fnames[(l->at.line - 100) % NFUNC]);
  }
  tlc_br_fini(&b);
  tlc_free(bytes);
}

static void test_random_streams(void **state) {
  static gen_t g;
  tlc_mapping_t m;
  uint64_t seed;
  (void)state;
  build_mapping(&m);
  for (seed = 1; seed <= 300; seed++) {
    rng_t r;
    tlc_engine_t *e;
    tlc_table_t t;
    vec_tl_t v;
    tlc_timeline_t tl = { vtl_next, vtl_rewind, &v };
    int cut;
    rng_seed(&r, seed);
    generate(&g, &r, 1 + (int)(seed % 4));
    /* cut some streams at both ends: partial activations at the start, open ones at the end */
    cut = seed % 3 == 0 ? (int)rng_below(&r, 200) : 0;
    v.ev = g.ev + cut;
    v.n = g.n - cut - (seed % 5 == 0 ? (int)rng_below(&r, 200) : 0);
    v.done = 0;
    assert_int_equal(tlc_engine_new(&e, TLC_FMT_BIN11, NULL), 0);
    tlc_engine_push(e, v.ev, (size_t)v.n);
    tlc_table_init(&t);
    assert_int_equal(tlc_engine_snapshot(e, &t, NULL), 0);
    check_aprof(seed, &t, &m, &tl);
    check_br(seed, &t, &m);
    tlc_table_fini(&t);
    tlc_engine_free(e);
  }
  tlc_mapping_fini(&m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_random_streams),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
