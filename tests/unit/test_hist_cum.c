/* test_hist_cum.c - the engine's exact bucket counts for /metrics (tlc_engine_hist_cum,
 * tlc_engine_hist_edge) and its code-area figures (tlc_engine_code_net), against counts and
 * sums taken here from the NET samples fed in: random calls on several cores with durations
 * drawn around the edges (so a count one bucket off would show), spans wide enough that some
 * bucket passes 65,535 (carries), per context and Neutral; edges that are not bucket
 * boundaries refused; an open activation's running time in the NET total only.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "base/err.h"
#include "engine/engine.h"
#include "rng.h"

#include <stdlib.h>
#include <string.h>

static const int64_t steps[] = {
  100,   250,    500,    1000,   2500,    5000,    10000,   25000,
  50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000
};
#define NSTEPS (sizeof(steps) / sizeof(steps[0]))
#define CORES  3
#define AREAS  4

static void ev(tlc_event_t *e, uint32_t h, unsigned type, unsigned core, int64_t t) {
  memset(e, 0, sizeof(*e));
  e->handle = h;
  e->type = (uint8_t)type;
  e->core = (uint8_t)core;
  e->time_ns = t;
}

typedef struct model {
  int64_t *s[AREAS][CORES]; /* NET samples */
  size_t n[AREAS][CORES], cap[AREAS][CORES];
  uint64_t calls[AREAS][CORES];
} model_t;

static void add(model_t *m, unsigned a, unsigned c, int64_t v) {
  if (m->n[a][c] == m->cap[a][c]) {
    m->cap[a][c] = m->cap[a][c] ? 2 * m->cap[a][c] : 256;
    m->s[a][c] = realloc(m->s[a][c], m->cap[a][c] * sizeof(int64_t));
    assert_non_null(m->s[a][c]);
  }
  m->s[a][c][m->n[a][c]++] = v;
}

static void test_exact_counts(void **state) {
  tlc_engine_t *e;
  tlc_event_t b[4];
  model_t m;
  rng_t r;
  int64_t le[NSTEPS], t[CORES];
  uint64_t cum[NSTEPS];
  size_t i, k;
  unsigned a, c;
  (void)state;
  memset(&m, 0, sizeof(m));
  rng_seed(&r, 19);
  for (i = 0; i < NSTEPS; i++) {
    le[i] = tlc_engine_hist_edge(steps[i]);
    assert_true(i == 0 || le[i] > le[i - 1]);
    /* within 1 % of the step, exact below 256 */
    assert_true(llabs(le[i] - steps[i]) * 100 <= steps[i]);
  }
  assert_int_equal(le[0], 100);
  assert_int_equal(tlc_engine_new(&e, TLC_FMT_BIN11, NULL), 0);
  for (c = 0; c < CORES; c++)
    t[c] = 1000 + c;
  /* 200,000 calls: the busiest buckets pass 65,535 (carries) */
  for (i = 0; i < 200000; i++) {
    int64_t net, base = steps[rng_below(&r, NSTEPS)];
    size_t nb = 0;
    a = (unsigned)rng_below(&r, AREAS);
    c = (unsigned)rng_below(&r, CORES);
    net = base + rng_range(&r, -3, 3); /* right around an edge */
    if (net < 1)
      net = 1;
    ev(&b[nb++], a, TLC_EV_ENTRY, c, t[c]);
    if (rng_chance(&r, 1, 4)) { /* suspended once: not net time */
      int64_t at = rng_range(&r, 0, net), pause = rng_range(&r, 1, 999);
      ev(&b[nb++], a, TLC_EV_SUSPEND, c, t[c] + at);
      ev(&b[nb++], a, TLC_EV_RESUME, c, t[c] + at + pause);
      t[c] += pause;
    }
    t[c] += net;
    ev(&b[nb++], a, TLC_EV_EXIT, c, t[c]);
    t[c] += 7;
    tlc_engine_push(e, b, nb);
    add(&m, a, c, net);
    m.calls[a][c]++;
  }
  for (a = 0; a < AREAS; a++) {
    for (c = 0; c <= CORES; c++) {                     /* c == CORES: Neutral */
      uint32_t ctx = c == CORES ? TLC_CTX_NEUTRAL : c; /* contexts in order of first use... */
      tlc_ctx_t cx;
      if (c < CORES) {
        /* ...which is not the core number: find the context index of core c */
        for (ctx = 0; tlc_engine_context(e, ctx, &cx) == 0 && cx.core != c; ctx++)
          ;
        assert_int_equal(cx.core, c);
      }
      assert_int_equal(tlc_engine_hist_cum(e, a, ctx, TLC_NET, le, NSTEPS, cum), 0);
      for (k = 0; k < NSTEPS; k++) {
        uint64_t want = 0;
        for (unsigned cc = 0; cc < CORES; cc++) {
          if (c < CORES && cc != c)
            continue;
          for (i = 0; i < m.n[a][cc]; i++)
            want += m.s[a][cc][i] <= le[k];
        }
        assert_int_equal(cum[k], want);
      }
    }
  }
  /* the code-area figures: per area Neutral (several contexts); an open activation's running
   * time counts in the total only */
  {
    int64_t tmax = t[0];
    for (c = 1; c < CORES; c++)
      tmax = t[c] > tmax ? t[c] : tmax;
    ev(&b[0], 0, TLC_EV_ENTRY, 0, tmax);
    ev(&b[1], 1, TLC_EV_ENTRY, 1, tmax + 5000);
    tlc_engine_push(e, b, 2);
  }
  {
    tlc_engine_code_net_t *cn = NULL;
    size_t n = 0, cap = 0;
    assert_int_equal(tlc_engine_code_net(e, &cn, &n, &cap), 0);
    assert_int_equal(n, AREAS);
    for (i = 0; i < n; i++) {
      uint64_t calls = 0, ns = 0;
      int64_t sum = 0;
      a = cn[i].handle;
      assert_true(a < AREAS);
      assert_int_equal(cn[i].context, TLC_CTX_NEUTRAL);
      for (c = 0; c < CORES; c++) {
        calls += m.calls[a][c];
        ns += m.n[a][c];
        for (k = 0; k < m.n[a][c]; k++)
          sum += m.s[a][c][k];
      }
      assert_int_equal(cn[i].count, calls + (a <= 1));
      assert_int_equal(cn[i].n, ns);
      assert_int_equal(cn[i].sum, sum);
      /* area 0 opened on core 0 at the latest time so far, running until the last event
       * 5,000 ns later; area 1 opened at that last event (0 so far) */
      assert_int_equal(cn[i].net_total, sum + (a == 0 ? 5000 : 0));
      /* the same counts through the entry's ref as by handle */
      {
        uint64_t c1[NSTEPS], c2[NSTEPS];
        assert_int_equal(tlc_engine_hist_cum(e, a, TLC_CTX_NEUTRAL, TLC_NET, le, NSTEPS, c1), 0);
        assert_int_equal(tlc_engine_code_hist(e, &cn[i], TLC_NET, le, NSTEPS, c2), 0);
        assert_memory_equal(c1, c2, sizeof(c1));
      }
    }
    /* every entry in one call (tlc_engine_code_hists), one of them with a stale ref (found by
     * handle instead), one with no such area: the same counts as by handle, each */
    {
      uint64_t *all = calloc((n + 1) * NSTEPS, sizeof(*all)), c1[NSTEPS];
      int *ok = calloc(n + 1, sizeof(*ok));
      tlc_engine_code_net_t *xs = calloc(n + 1, sizeof(*xs));
      assert_non_null(all);
      assert_non_null(ok);
      assert_non_null(xs);
      memcpy(xs, cn, n * sizeof(*xs));
      xs[0].ref = xs[n - 1].ref; /* names another area's rows */
      xs[n] = cn[0];
      xs[n].handle = 0x1234; /* no such area */
      assert_int_equal(tlc_engine_code_hists(e, xs, n + 1, TLC_NET, le, NSTEPS, all, ok), 0);
      for (i = 0; i < n; i++) {
        assert_int_equal(ok[i], 1);
        assert_int_equal(
            tlc_engine_hist_cum(e, xs[i].handle, TLC_CTX_NEUTRAL, TLC_NET, le, NSTEPS, c1), 0);
        assert_memory_equal(c1, &all[i * NSTEPS], sizeof(c1));
      }
      assert_int_equal(ok[n], 0);
      {
        int64_t bad[2] = { 1000, 100 }; /* not ascending: refused, nothing found */
        ok[0] = 1;
        assert_int_equal(tlc_engine_code_hists(e, xs, 1, TLC_NET, bad, 2, all, ok), TLC_EINVAL);
        assert_int_equal(ok[0], 0);
      }
      free(all);
      free(ok);
      free(xs);
    }
    tlc_free(cn);
  }
  /* not an edge: refused rather than guessed */
  {
    int64_t bad[2] = { 100, 1000 };
    if (tlc_engine_hist_edge(1000) != 1000)
      assert_int_equal(tlc_engine_hist_cum(e, 0, TLC_CTX_NEUTRAL, TLC_NET, bad, 2, cum),
                       TLC_EINVAL);
    assert_int_equal(tlc_engine_hist_cum(e, 0x1234, TLC_CTX_NEUTRAL, TLC_NET, le, 1, cum),
                     TLC_ERANGE);
  }
  tlc_engine_free(e);
  for (a = 0; a < AREAS; a++)
    for (c = 0; c < CORES; c++)
      free(m.s[a][c]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_exact_counts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
