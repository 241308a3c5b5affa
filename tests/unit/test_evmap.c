/* test_evmap.c - the evlog mapping (SPEC section 2): golden sequences worked out by hand,
 * handles in order of first appearance, the per-thread stack rules, gaps, flags, every cap,
 * allocation failures (nothing changes on ENOMEM), no allocation in the steady state, the
 * export into a mapping, and decoded random streams end to end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/err.h"
#include "evlog_gen.h"
#include "formats/dec.h"
#include "formats/evmap.h"
#include "formats/mapping.h"
#include "testalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One input item: thread, time, event, detail, flags. */
typedef struct in {
  uint64_t thread;
  int64_t t;
  const char *event, *detail;
  uint16_t flags;
} in_t;

/* One expected output event. */
typedef struct want {
  char type; /* 'E', 'S', 'R', 'X', 'W' */
  uint32_t handle;
  int64_t t;
  uint64_t data;
  uint16_t flags;
  uint64_t thread;
} want_t;

static tlc_evlog_ext_t ext_of(const in_t *i) {
  tlc_evlog_ext_t x;
  memset(&x, 0, sizeof(x));
  x.event = i->event;
  x.event_len = (uint16_t)strlen(i->event);
  x.detail = i->detail;
  x.detail_len = i->detail ? (uint16_t)strlen(i->detail) : 0;
  x.tim = (double)i->t / 1e9;
  return x;
}

/* Maps in[0..n) and compares with want[0..nw). */
static void run_seq(tlc_evmap_t *m, const in_t *in, size_t n, const want_t *want, size_t nw) {
  size_t i, k = 0;
  for (i = 0; i < n; i++) {
    tlc_evlog_ext_t x = ext_of(&in[i]);
    tlc_event_t e, out[2];
    int r, j;
    memset(&e, 0, sizeof(e));
    e.time_ns = in[i].t;
    e.thread = in[i].thread;
    e.offset = 1000 + i;
    e.type = TLC_EV_NONE;
    e.core = TLC_CORE_UNKNOWN;
    e.flags = in[i].flags;
    e.evlog = &x;
    r = tlc_evmap_map(m, &e, out);
    assert_true(r >= 0 && r <= 2);
    for (j = 0; j < r; j++, k++) {
      if (k >= nw)
        fail_msg("input %zu (%s): more output than expected", i, in[i].event);
      if (tlc_ev_char(out[j].type) != want[k].type || out[j].handle != want[k].handle ||
          out[j].time_ns != want[k].t || out[j].data != want[k].data ||
          out[j].flags != want[k].flags)
        fail_msg("output %zu (input %zu %s): got %c %08X t=%lld data=%llu flags=%x, want %c %08X "
                 "t=%lld data=%llu flags=%x",
                 k, i, in[i].event, tlc_ev_char(out[j].type), out[j].handle,
                 (long long)out[j].time_ns, (unsigned long long)out[j].data, out[j].flags,
                 want[k].type, want[k].handle, (long long)want[k].t,
                 (unsigned long long)want[k].data, want[k].flags);
      assert_int_equal(out[j].thread, in[i].thread);
      assert_int_equal(out[j].core, TLC_CORE_UNKNOWN);
      assert_int_equal(out[j].offset, 1000 + i);
      assert_ptr_equal(out[j].evlog, &x);
    }
  }
  assert_int_equal(k, nw);
}

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define SY   TLC_EVF_SYNTH

/* +a +b -b -a on one thread:
 *   +a @10: E a(00000000)
 *   +b @20: S a (a is the innermost open), E b(00000001)
 *   -b @30: X b, R a (the new innermost)
 *   -a @40: X a (nothing left: no R) */
static void test_nested(void **state) {
  static const in_t in[] = { { 1, 10, "+a", NULL, 0 },
                             { 1, 20, "+b", NULL, 0 },
                             { 1, 30, "-b", NULL, 0 },
                             { 1, 40, "-a", NULL, 0 } };
  static const want_t w[] = { { 'E', 0x00000000, 10, 0, 0, 0 },  { 'S', 0x00000000, 20, 0, SY, 0 },
                              { 'E', 0x00000001, 20, 0, 0, 0 },  { 'X', 0x00000001, 30, 0, 0, 0 },
                              { 'R', 0x00000000, 30, 0, SY, 0 }, { 'X', 0x00000000, 40, 0, 0, 0 } };
  tlc_evmap_t *m;
  (void)state;
  assert_int_equal(tlc_evmap_new(&m, NULL), 0);
  run_seq(m, in, N(in), w, N(w));
  assert_int_equal(tlc_evmap_counters(m)->synthesized, 2);
  assert_int_equal(tlc_evmap_counters(m)->events, 6);
  assert_int_equal(tlc_evmap_counters(m)->items, 4);
  tlc_evmap_free(m);
}

/* Handles in order of first appearance, per type:
 *   +a -> 00000000, >s -> 30000000 (W 1), !x -> 20000000 (W 0), *CPUFREQ 0 -> 40000000 (W 2400),
 *   +b (thread 2, empty stack: no S) -> 00000001, <s -> X 30000000, !y -> 20000001,
 *   *CPUUSED 7f00 -> 40000001 (W 55), *CPUFREQ 0 again -> 40000000 (W 1200),
 *   -c never seen (thread 3) -> 00000002, X without R; >s again -> 30000000. */
static void test_handles(void **state) {
  static const in_t in[] = {
    { 1, 100, "+a", NULL, 0 },           { 1, 110, ">s", NULL, 0 },
    { 1, 120, "!x", "ignored", 0 },      { 0, 130, "*CPUFREQ 0", "2400", 0 },
    { 2, 140, "+b", NULL, 0 },           { 2, 150, "<s", NULL, 0 },
    { 2, 160, "!y", NULL, 0 },           { 5, 170, "*CPUUSED 7f00", " 55 ", 0 },
    { 0, 180, "*CPUFREQ 0", "1200", 0 }, { 3, 190, "-c", NULL, 0 },
    { 3, 200, ">s", NULL, 0 },
  };
  static const want_t w[] = {
    { 'E', 0x00000000, 100, 0, 0, 0 },    { 'W', 0x30000000, 110, 1, 0, 0 },
    { 'W', 0x20000000, 120, 0, 0, 0 },    { 'W', 0x40000000, 130, 2400, 0, 0 },
    { 'E', 0x00000001, 140, 0, 0, 0 },    { 'X', 0x30000000, 150, 0, 0, 0 },
    { 'W', 0x20000001, 160, 0, 0, 0 },    { 'W', 0x40000001, 170, 55, 0, 0 },
    { 'W', 0x40000000, 180, 1200, 0, 0 }, { 'X', 0x00000002, 190, 0, 0, 0 },
    { 'W', 0x30000000, 200, 1, 0, 0 },
  };
  static const uint32_t order[] = { 0x00000000, 0x30000000, 0x20000000, 0x40000000,
                                    0x00000001, 0x20000001, 0x40000001, 0x00000002 };
  tlc_evmap_t *m;
  size_t i;
  (void)state;
  assert_int_equal(tlc_evmap_new(&m, NULL), 0);
  run_seq(m, in, N(in), w, N(w));
  assert_string_equal(tlc_evmap_name(m, 0x00000000), "a");
  assert_string_equal(tlc_evmap_name(m, 0x00000001), "b");
  assert_string_equal(tlc_evmap_name(m, 0x00000002), "c");
  assert_string_equal(tlc_evmap_name(m, 0x30000000), "s");
  assert_string_equal(tlc_evmap_name(m, 0x20000001), "y");
  assert_string_equal(tlc_evmap_name(m, 0x40000000), "CPUFREQ 0");
  assert_string_equal(tlc_evmap_name(m, 0x40000001), "CPUUSED 7f00");
  assert_null(tlc_evmap_name(m, 0x00000003));
  assert_null(tlc_evmap_name(m, 0x50000000));
  assert_null(tlc_evmap_name(m, 0xF0000000));
  assert_int_equal(tlc_evmap_area_count(m), N(order));
  for (i = 0; i < N(order); i++)
    assert_int_equal(tlc_evmap_area_handle(m, i), order[i]);
  assert_int_equal(tlc_evmap_area_handle(m, N(order)), TLC_NO_HANDLE);
  tlc_evmap_free(m);
}

/* Items that map to nothing: metadata and malformed ones. */
static void test_nothing(void **state) {
  static const in_t in[] = {
    { 1, 1, "*meta", "x", 0 },                         /* metadata */
    { 1, 2, "*CPUFREQUENCY", "1", 0 },                 /* not "*CPUFREQ" + space: metadata */
    { 1, 3, "*CPUFREQ 1", "fast", 0 },                 /* not an integer */
    { 1, 4, "*CPUFREQ 2", NULL, 0 },                   /* no detail */
    { 1, 5, "*CPUUSED 1", "-5", 0 },                   /* negative */
    { 1, 6, "*CPUUSED 1", "99999999999999999999", 0 }, /* > u64 */
    { 1, 7, "?x", NULL, 0 },                           /* unknown kind */
    { 1, 8, "+", NULL, 0 },                            /* empty name */
    { 1, 9, "", NULL, 0 },                             /* empty event */
    { 1, 10, "*CPUFREQ", "18446744073709551615", 0 },  /* area "CPUFREQ", u64 max */
  };
  static const want_t w[] = { { 'W', 0x40000000, 10, 18446744073709551615ull, 0, 0 } };
  tlc_evmap_t *m;
  const tlc_evmap_counters_t *c;
  (void)state;
  assert_int_equal(tlc_evmap_new(&m, NULL), 0);
  run_seq(m, in, N(in), w, N(w));
  c = tlc_evmap_counters(m);
  assert_int_equal(c->metadata, 2);
  assert_int_equal(c->parse_errors, 7);
  assert_int_equal(tlc_evmap_area_count(m), 1);
  assert_string_equal(tlc_evmap_name(m, 0x40000000), "CPUFREQ");
  tlc_evmap_free(m);
}

/* The engine's X rules: X closes the innermost open activation of its area and truncates those
 * above; X of an area with none open changes nothing; recursion stacks.
 *   +a @1: E a                      stack a
 *   +b @2: S a, E b                 stack a b
 *   +c @3: S b, E c                 stack a b c
 *   -a @4: X a (b, c truncated)     stack empty: no R
 *   +d @5: E d                      stack d
 *   -b @6: X b (none open)          stack d: no R
 *   +d @7: S d, E d (recursion)     stack d d
 *   -d @8: X d, R d                 stack d
 *   -d @9: X d                      empty */
static void test_x_rules(void **state) {
  static const in_t in[] = { { 7, 1, "+a", NULL, 0 }, { 7, 2, "+b", NULL, 0 },
                             { 7, 3, "+c", NULL, 0 }, { 7, 4, "-a", NULL, 0 },
                             { 7, 5, "+d", NULL, 0 }, { 7, 6, "-b", NULL, 0 },
                             { 7, 7, "+d", NULL, 0 }, { 7, 8, "-d", NULL, 0 },
                             { 7, 9, "-d", NULL, 0 } };
  static const want_t w[] = {
    { 'E', 0, 1, 0, 0, 0 },  { 'S', 0, 2, 0, SY, 0 }, { 'E', 1, 2, 0, 0, 0 },
    { 'S', 1, 3, 0, SY, 0 }, { 'E', 2, 3, 0, 0, 0 },  { 'X', 0, 4, 0, 0, 0 },
    { 'E', 3, 5, 0, 0, 0 },  { 'X', 1, 6, 0, 0, 0 },  { 'S', 3, 7, 0, SY, 0 },
    { 'E', 3, 7, 0, 0, 0 },  { 'X', 3, 8, 0, 0, 0 },  { 'R', 3, 8, 0, SY, 0 },
    { 'X', 3, 9, 0, 0, 0 },
  };
  tlc_evmap_t *m;
  (void)state;
  assert_int_equal(tlc_evmap_new(&m, NULL), 0);
  run_seq(m, in, N(in), w, N(w));
  tlc_evmap_free(m);
}

/* Stacks are per thread; X of a thread other than the opener's finds nothing there.
 *   T1 +a @1: E a;  T2 +b @2: E b (T2 empty: no S);  T2 -a @3: X a (T2 has no a: no R);
 *   T1 +c @4: S a, E c;  T1 -c @5: X c, R a;  T2 -b @6: X b. */
static void test_threads(void **state) {
  static const in_t in[] = { { 1, 1, "+a", NULL, 0 }, { 2, 2, "+b", NULL, 0 },
                             { 2, 3, "-a", NULL, 0 }, { 1, 4, "+c", NULL, 0 },
                             { 1, 5, "-c", NULL, 0 }, { 2, 6, "-b", NULL, 0 } };
  static const want_t w[] = { { 'E', 0, 1, 0, 0, 0 },  { 'E', 1, 2, 0, 0, 0 },
                              { 'X', 0, 3, 0, 0, 0 },  { 'S', 0, 4, 0, SY, 0 },
                              { 'E', 2, 4, 0, 0, 0 },  { 'X', 2, 5, 0, 0, 0 },
                              { 'R', 0, 5, 0, SY, 0 }, { 'X', 1, 6, 0, 0, 0 } };
  tlc_evmap_t *m;
  (void)state;
  assert_int_equal(tlc_evmap_new(&m, NULL), 0);
  run_seq(m, in, N(in), w, N(w));
  tlc_evmap_free(m);
}

/* A gap forgets every stack (the engine truncates everything there); flags are placed: GAP on
 * the first output, BLOCK_END on the last.
 *   +a @1, +b @2 (S a, E b; BLOCK_END on E only), -b @3 with GAP: stacks forgotten, X b (GAP),
 *   no R; +c @4: E c (no S); tlc_evmap_gap(); -c @5 with BLOCK_END: X c; +d @6, +e @7
 *   (S d, E e), -e @8 with BLOCK_END: X e, R d (SYNTH|BLOCK_END). */
static void test_gap_and_flags(void **state) {
  static const in_t in1[] = { { 1, 1, "+a", NULL, 0 },
                              { 1, 2, "+b", NULL, TLC_EVF_BLOCK_END },
                              { 1, 3, "-b", NULL, TLC_EVF_GAP },
                              { 1, 4, "+c", NULL, 0 } };
  static const want_t w1[] = { { 'E', 0, 1, 0, 0, 0 },
                               { 'S', 0, 2, 0, SY, 0 },
                               { 'E', 1, 2, 0, TLC_EVF_BLOCK_END, 0 },
                               { 'X', 1, 3, 0, TLC_EVF_GAP, 0 },
                               { 'E', 2, 4, 0, 0, 0 } };
  static const in_t in2[] = { { 1, 5, "-c", NULL, TLC_EVF_BLOCK_END },
                              { 1, 6, "+d", NULL, 0 },
                              { 1, 7, "+e", NULL, 0 },
                              { 1, 8, "-e", NULL, TLC_EVF_BLOCK_END } };
  static const want_t w2[] = { { 'X', 2, 5, 0, TLC_EVF_BLOCK_END, 0 },
                               { 'E', 3, 6, 0, 0, 0 },
                               { 'S', 3, 7, 0, SY, 0 },
                               { 'E', 4, 7, 0, 0, 0 },
                               { 'X', 4, 8, 0, 0, 0 },
                               { 'R', 3, 8, 0, SY | TLC_EVF_BLOCK_END, 0 } };
  tlc_evmap_t *m;
  (void)state;
  assert_int_equal(tlc_evmap_new(&m, NULL), 0);
  run_seq(m, in1, N(in1), w1, N(w1));
  assert_int_equal(tlc_evmap_counters(m)->gaps, 1);
  tlc_evmap_gap(m);
  assert_int_equal(tlc_evmap_counters(m)->gaps, 2);
  run_seq(m, in2, N(in2), w2, N(w2));
  tlc_evmap_free(m);
}

/* A memory budget for test_budget: grants until `left` is spent, unless forced. */
typedef struct budget {
  size_t left, granted, released, forced;
} budget_t;

static int budget_charge(void *ud, size_t bytes, int force) {
  budget_t *b = ud;
  if (!force && bytes > b->left)
    return -1;
  b->left = bytes > b->left ? 0 : b->left - bytes;
  b->granted += bytes;
  b->forced += force ? bytes : 0;
  return 0;
}

static void budget_release(void *ud, size_t bytes) {
  ((budget_t *)ud)->released += bytes;
}

/* The memory budget: each new name is charged before it is kept; past the budget a new name
 * maps to nothing and is counted (known names still map); a checkpoint's names are charged by
 * force; everything granted is given back at free. */
static void test_budget(void **state) {
  static const in_t in[] = { { 1, 1, "+a", NULL, 0 },
                             { 1, 2, "+b", NULL, 0 },
                             { 1, 3, "+c", NULL, 0 },
                             { 1, 4, "-b", NULL, 0 },
                             { 1, 5, "-a", NULL, 0 } };
  static const want_t w[] = { { 'E', 0, 1, 0, 0, 0 },  { 'S', 0, 2, 0, SY, 0 },
                              { 'E', 1, 2, 0, 0, 0 },  { 'X', 1, 4, 0, 0, 0 },
                              { 'R', 0, 4, 0, SY, 0 }, { 'X', 0, 5, 0, 0, 0 } };
  budget_t b = { (size_t)-1, 0, 0, 0 }, b2 = { 0, 0, 0, 0 };
  tlc_evmap_opts_t o;
  tlc_evmap_t *m, *m2;
  tlc_ckw_t cw;
  tlc_ckr_t cr;
  size_t one;
  (void)state;
  memset(&o, 0, sizeof(o));
  o.charge_cb = budget_charge;
  o.release_cb = budget_release;
  o.acct_ud = &b;
  /* what one single-letter name costs, then a budget for exactly two of them */
  assert_int_equal(tlc_evmap_new(&m, &o), 0);
  run_seq(m, in, 1, w, 1);
  one = b.granted;
  assert_true(one >= 2 * 2); /* the name and its NUL, twice at least */
  tlc_evmap_free(m);
  assert_int_equal(b.released, one);
  memset(&b, 0, sizeof(b));
  b.left = 2 * one;
  assert_int_equal(tlc_evmap_new(&m, &o), 0);
  run_seq(m, in, N(in), w, N(w));
  assert_int_equal(tlc_evmap_counters(m)->dropped_area_limit, 1); /* +c */
  assert_int_equal(tlc_evmap_area_count(m), 2);
  assert_int_equal(b.granted, 2 * one);
  /* a checkpoint of it loads into a mapper whose budget is spent: forced, not refused */
  tlc_ckw_init(&cw, 1u << 20);
  assert_int_equal(tlc_evmap_save(m, &cw), 0);
  o.acct_ud = &b2;
  assert_int_equal(tlc_evmap_new(&m2, &o), 0);
  tlc_ckr_init(&cr, cw.p, cw.len);
  assert_int_equal(tlc_evmap_load(m2, &cr), 0);
  assert_int_equal(tlc_evmap_area_count(m2), 2);
  assert_int_equal(b2.forced, 2 * one);
  tlc_evmap_free(m2);
  assert_int_equal(b2.released, b2.granted);
  tlc_ckw_fini(&cw);
  tlc_evmap_free(m);
  assert_int_equal(b.released, b.granted);
}

static void test_caps(void **state) {
  tlc_evmap_opts_t o;
  tlc_evmap_t *m;
  const tlc_evmap_counters_t *c;
  (void)state;
  /* max_names 2: +c is dropped, known names still map */
  {
    static const in_t in[] = { { 1, 1, "+a", NULL, 0 },
                               { 1, 2, "!b", NULL, 0 },
                               { 1, 3, "+c", NULL, 0 },
                               { 1, 4, "-a", NULL, 0 } };
    static const want_t w[] = { { 'E', 0, 1, 0, 0, 0 },
                                { 'W', 0x20000000, 2, 0, 0, 0 },
                                { 'X', 0, 4, 0, 0, 0 } };
    memset(&o, 0, sizeof(o));
    o.max_names = 2;
    assert_int_equal(tlc_evmap_new(&m, &o), 0);
    run_seq(m, in, N(in), w, N(w));
    assert_int_equal(tlc_evmap_counters(m)->dropped_area_limit, 1);
    tlc_evmap_free(m);
  }
  /* max_name_bytes 4: "abc\0" fits, "d" does not */
  {
    static const in_t in[] = { { 1, 1, "+abc", NULL, 0 }, { 1, 2, "+d", NULL, 0 } };
    static const want_t w[] = { { 'E', 0, 1, 0, 0, 0 } };
    memset(&o, 0, sizeof(o));
    o.max_name_bytes = 4;
    assert_int_equal(tlc_evmap_new(&m, &o), 0);
    run_seq(m, in, N(in), w, N(w));
    assert_int_equal(tlc_evmap_counters(m)->dropped_area_limit, 1);
    tlc_evmap_free(m);
  }
  /* max_depth 2: +c is emitted (after S b) but not tracked; its X finds no open c */
  {
    static const in_t in[] = { { 1, 1, "+a", NULL, 0 },
                               { 1, 2, "+b", NULL, 0 },
                               { 1, 3, "+c", NULL, 0 },
                               { 1, 4, "-c", NULL, 0 },
                               { 1, 5, "-b", NULL, 0 } };
    static const want_t w[] = { { 'E', 0, 1, 0, 0, 0 }, { 'S', 0, 2, 0, SY, 0 },
                                { 'E', 1, 2, 0, 0, 0 }, { 'S', 1, 3, 0, SY, 0 },
                                { 'E', 2, 3, 0, 0, 0 }, { 'X', 2, 4, 0, 0, 0 },
                                { 'X', 1, 5, 0, 0, 0 }, { 'R', 0, 5, 0, SY, 0 } };
    memset(&o, 0, sizeof(o));
    o.max_depth = 2;
    assert_int_equal(tlc_evmap_new(&m, &o), 0);
    run_seq(m, in, N(in), w, N(w));
    assert_int_equal(tlc_evmap_counters(m)->depth_limit, 1);
    tlc_evmap_free(m);
  }
  /* max_threads 1: thread 2 gets E/X but no S/R */
  {
    static const in_t in[] = { { 1, 1, "+a", NULL, 0 },
                               { 2, 2, "+b", NULL, 0 },
                               { 2, 3, "+c", NULL, 0 },
                               { 2, 4, "-c", NULL, 0 },
                               { 1, 5, "+d", NULL, 0 } };
    static const want_t w[] = { { 'E', 0, 1, 0, 0, 0 },  { 'E', 1, 2, 0, 0, 0 },
                                { 'E', 2, 3, 0, 0, 0 },  { 'X', 2, 4, 0, 0, 0 },
                                { 'S', 0, 5, 0, SY, 0 }, { 'E', 3, 5, 0, 0, 0 } };
    memset(&o, 0, sizeof(o));
    o.max_threads = 1;
    assert_int_equal(tlc_evmap_new(&m, &o), 0);
    run_seq(m, in, N(in), w, N(w));
    c = tlc_evmap_counters(m);
    assert_int_equal(c->untracked_thread, 3);
    tlc_evmap_free(m);
  }
  memset(&o, 0, sizeof(o));
  o.max_names = (1u << 28) + 1;
  assert_int_equal(tlc_evmap_new(&m, &o), TLC_EINVAL);
  assert_null(m);
  {
    tlc_event_t e, out[2];
    memset(&e, 0, sizeof(e));
    assert_int_equal(tlc_evmap_new(&m, NULL), 0);
    assert_int_equal(tlc_evmap_map(m, &e, out), TLC_EINVAL);
    tlc_evmap_free(m);
  }
  tlc_evmap_free(NULL);
}

/* Many names and threads: the tables grow and every name keeps its handle. */
static void test_many(void **state) {
  tlc_evmap_t *m;
  char name[32];
  uint32_t i;
  (void)state;
  assert_int_equal(tlc_evmap_new(&m, NULL), 0);
  for (i = 0; i < 20000; i++) {
    tlc_evlog_ext_t x;
    tlc_event_t e, out[2];
    in_t it = { i % 3000, i, name, NULL, 0 };
    snprintf(name, sizeof(name), "%c%u", i % 2 ? '!' : '+', i % 5000);
    x = ext_of(&it);
    memset(&e, 0, sizeof(e));
    e.thread = it.thread;
    e.evlog = &x;
    assert_int_equal(tlc_evmap_map(m, &e, out) > 0, 1);
  }
  /* '+' names are the even numbers below 5000, in order: +0 -> 0, +2 -> 1, ... */
  assert_string_equal(tlc_evmap_name(m, 0x00000000), "0");
  assert_string_equal(tlc_evmap_name(m, 0x00000001), "2");
  assert_string_equal(tlc_evmap_name(m, 0x000009C3), "4998");
  assert_string_equal(tlc_evmap_name(m, 0x20000000), "1");
  assert_null(tlc_evmap_name(m, 0x000009C4));
  assert_int_equal(tlc_evmap_area_count(m), 5000);
  tlc_evmap_free(m);
}

/* A fixed mixed sequence for the allocation tests. */
static const in_t MIX[] = {
  { 1, 1, "+a", NULL, 0 },  { 2, 2, "+b", NULL, 0 },  { 1, 3, "+b", NULL, 0 },
  { 3, 4, ">s", NULL, 0 },  { 1, 5, "-b", NULL, 0 },  { 4, 6, "*CPUFREQ 1", "9", 0 },
  { 2, 7, "!v", NULL, 0 },  { 1, 8, "+c", NULL, 0 },  { 1, 9, "+d", NULL, 0 },
  { 1, 10, "+e", NULL, 0 }, { 5, 11, "+a", NULL, 0 }, { 1, 12, "-a", NULL, 0 },
};

static int map_all(tlc_evmap_t *m, tlc_event_t *outs, int retry) {
  size_t i;
  int k = 0;
  for (i = 0; i < N(MIX); i++) {
    tlc_evlog_ext_t x = ext_of(&MIX[i]);
    tlc_event_t e;
    int r;
    memset(&e, 0, sizeof(e));
    e.time_ns = MIX[i].t;
    e.thread = MIX[i].thread;
    e.evlog = &x;
    r = tlc_evmap_map(m, &e, outs + k);
    if (r == TLC_ENOMEM && retry)
      r = tlc_evmap_map(m, &e, outs + k);
    assert_true(r >= 0);
    k += r;
  }
  return k;
}

/* Each allocation fails once in turn: map returns ENOMEM and nothing changed, so retrying the
 * same item gives the same output as a run without failures; no leak. */
static void test_alloc_failures(void **state) {
  tlc_evmap_t *m;
  tlc_event_t ref[64], got[64];
  int nref, n, k;
  (void)state;
  assert_int_equal(tlc_evmap_new(&m, NULL), 0);
  nref = map_all(m, ref, 0);
  tlc_evmap_free(m);
  for (k = 1; k < 60; k++) {
    testalloc_install();
    testalloc_fail_at((uint64_t)k);
    if (tlc_evmap_new(&m, NULL) != 0) {
      assert_null(m);
      testalloc_uninstall();
      continue;
    }
    n = map_all(m, got, 1);
    assert_int_equal(n, nref);
    for (n = 0; n < nref; n++) {
      assert_int_equal(got[n].handle, ref[n].handle);
      assert_int_equal(got[n].type, ref[n].type);
      assert_int_equal(got[n].flags, ref[n].flags);
    }
    tlc_evmap_free(m);
    assert_int_equal(testalloc_live_bytes(), 0);
    testalloc_uninstall();
  }
}

static void test_steady_state_no_alloc(void **state) {
  tlc_evmap_t *m;
  tlc_event_t got[64];
  uint64_t before;
  int i;
  (void)state;
  testalloc_install();
  assert_int_equal(tlc_evmap_new(&m, NULL), 0);
  map_all(m, got, 0);
  tlc_evmap_gap(m);
  before = testalloc_count();
  for (i = 0; i < 100; i++) {
    map_all(m, got, 0);
    tlc_evmap_gap(m);
  }
  assert_int_equal(testalloc_count(), before);
  tlc_evmap_free(m);
  assert_int_equal(testalloc_live_bytes(), 0);
  testalloc_uninstall();
}

/* Decoded random streams (properly nested per thread) end to end: E = '+' items; an S for each
 * '+' on a thread with something open, an R for each '-' that leaves something open; W for
 * '>', '!', CPUFREQ; X for '-' and '<'. The expectations are counted here from the events. */
static void test_decoded_stream(void **state) {
  evgen_t g;
  tlc_dec_t d;
  tlc_event_t ev[256], out[2];
  tlc_evmap_t *m;
  size_t used, pos = 0;
  uint64_t depth[8] = { 0 };
  uint64_t want[5] = { 0 }, got[5] = { 0 };
  int n, i, j;
  (void)state;
  evgen_init(&g, EVGEN_STALE_PAD);
  evgen_random(&g, 42, 20000, 100);
  assert_int_equal(tlc_dec_init(&d, TLC_FMT_EVLOG, NULL), 0);
  assert_int_equal(tlc_evmap_new(&m, NULL), 0);
  while (pos < g.len) {
    n = tlc_dec_push(&d, g.buf + pos, g.len - pos, &used, ev, 256);
    assert_true(n >= 0);
    pos += used;
    for (i = 0; i < n; i++) {
      const char *s = ev[i].evlog->event;
      uint64_t *dp = &depth[(ev[i].thread >> 12) & 7];
      switch (s[0]) {
      case '+':
        want[TLC_EV_ENTRY]++;
        if (*dp > 0)
          want[TLC_EV_SUSPEND]++;
        ++*dp;
        break;
      case '-':
        want[TLC_EV_EXIT]++;
        if (--*dp > 0)
          want[TLC_EV_RESUME]++;
        break;
      case '<':
        want[TLC_EV_EXIT]++;
        break;
      case '>':
      case '!':
        want[TLC_EV_WRITE]++;
        break;
      default:
        if (strncmp(s, "*CPUFREQ ", 9) == 0)
          want[TLC_EV_WRITE]++;
      }
      {
        int r = tlc_evmap_map(m, &ev[i], out);
        assert_true(r >= 0);
        for (j = 0; j < r; j++)
          got[out[j].type]++;
      }
    }
  }
  assert_int_equal(tlc_dec_finish(&d, ev, 256), 0);
  for (i = 0; i < 5; i++)
    assert_int_equal(got[i], want[i]);
  assert_true(tlc_evmap_counters(m)->metadata > 0);
  tlc_evmap_free(m);
  tlc_dec_fini(&d);
  evgen_free(&g);
}

/* Export: every area with its name; a state area with value 1. */
static void test_export(void **state) {
  static const in_t in[] = { { 1, 1, "+a", NULL, 0 },
                             { 1, 2, ">s", NULL, 0 },
                             { 1, 3, "!x", NULL, 0 },
                             { 1, 4, "*CPUFREQ 0", "5", 0 } };
  tlc_evmap_t *m;
  tlc_mapping_t map;
  const tlc_map_area_t *a;
  size_t i;
  (void)state;
  assert_int_equal(tlc_evmap_new(&m, NULL), 0);
  for (i = 0; i < N(in); i++) {
    tlc_evlog_ext_t x = ext_of(&in[i]);
    tlc_event_t e, out[2];
    memset(&e, 0, sizeof(e));
    e.thread = 1;
    e.evlog = &x;
    assert_int_equal(tlc_evmap_map(m, &e, out), 1);
  }
  tlc_mapping_init(&map);
  assert_int_equal(tlc_evmap_export(m, &map), 0);
  tlc_mapping_finish(&map);
  assert_int_equal(map.nareas, 4);
  a = tlc_mapping_find(&map, 0x00000000);
  assert_non_null(a);
  assert_string_equal(a->name, "a");
  a = tlc_mapping_find_value(&map, 0x30000000, 1);
  assert_non_null(a);
  assert_string_equal(a->name, "s");
  a = tlc_mapping_find(&map, 0x20000000);
  assert_non_null(a);
  assert_string_equal(a->name, "x");
  a = tlc_mapping_find(&map, 0x40000000);
  assert_non_null(a);
  assert_string_equal(a->name, "CPUFREQ 0");
  tlc_mapping_fini(&map);
  tlc_evmap_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_nested),
    cmocka_unit_test(test_handles),
    cmocka_unit_test(test_nothing),
    cmocka_unit_test(test_x_rules),
    cmocka_unit_test(test_threads),
    cmocka_unit_test(test_gap_and_flags),
    cmocka_unit_test(test_caps),
    cmocka_unit_test(test_many),
    cmocka_unit_test(test_budget),
    cmocka_unit_test(test_alloc_failures),
    cmocka_unit_test(test_steady_state_no_alloc),
    cmocka_unit_test(test_decoded_stream),
    cmocka_unit_test(test_export),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
