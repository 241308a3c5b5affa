/* bench_export.c - exporters on large tables: cost per area at 10,000 and 100,000 areas.
 *
 * For each writer (Text1, JSON, XML, aprof, BR) the same synthetic capture is exported at two
 * sizes; the figure that matters is the ratio of the cost per area at 100,000 areas to the
 * cost per area at 10,000 (about 1 when the writer is linear, about 10 when it is quadratic).
 * Output goes to a sink that only counts bytes. Median of 5 runs each.
 *
 * Usage: bench_export [runs]
 */
#include "formats/aprofw.h"
#include "formats/brw.h"
#include "formats/json.h"
#include "formats/mapping.h"
#include "formats/stats.h"
#include "formats/text1.h"
#include "formats/xml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct cap {
  tlc_table_t t;
  tlc_mapping_t m;
  tlc_event_t *ev;
  int nev, done;
} cap_t;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int sink(void *ud, const void *buf, size_t len) {
  (void)buf;
  *(size_t *)ud += len;
  return 0;
}

static int tl_next(void *ud, const tlc_event_t **evs) {
  cap_t *c = ud;
  if (c->done)
    return 0;
  c->done = 1;
  *evs = c->ev;
  return c->nev;
}

static int tl_rewind(void *ud) {
  ((cap_t *)ud)->done = 0;
  return 0;
}

/* n function areas (half of them with a line area), names with commas and quotes, two cores,
 * and a timeline of one call per function. */
static void build(cap_t *c, size_t n) {
  size_t i;
  tlc_ctx_t ctx = { TLC_CTXK_CORE, 0, 0, 0, 0 };
  tlc_table_init(&c->t);
  tlc_mapping_init(&c->m);
  c->t.format = TLC_FMT_BIN11;
  c->t.counters.events = 2 * n;
  c->t.last_time = (int64_t)(20 * n);
  tlc_table_add_ctx(&c->t, &ctx);
  ctx.core = 1;
  tlc_table_add_ctx(&c->t, &ctx);
  c->ev = malloc(2 * n * sizeof(*c->ev));
  c->nev = (int)(2 * n);
  for (i = 0; i < n; i++) {
    uint32_t h = (uint32_t)(i / 2) | (i % 2 ? 0x10000000u : 0);
    char name[64];
    tlc_map_area_t a;
    unsigned ctxi;
    memset(&a, 0, sizeof(a));
    a.handle = h;
    a.parent = i % 2 ? (uint32_t)(i / 2) : TLC_NO_HANDLE;
    a.state_handle = TLC_NO_HANDLE;
    a.has_value = i % 2;
    a.value = i;
    snprintf(name, sizeof(name), "fn_%zu,\"q\"<&>", i);
    a.name = name;
    a.file = (char *)"src/file.c";
    tlc_mapping_add(&c->m, &a);
    for (ctxi = 0; ctxi < 2; ctxi++) {
      tlc_stat_t *r = tlc_table_add(&c->t);
      r->handle = h;
      r->context = ctxi;
      r->count = 3;
      r->total[TLC_NET] = r->total[TLC_CALL] = r->total[TLC_GROSS] = 300;
      tlc_dist_add(&r->dist[TLC_NET], 100);
      tlc_dist_add(&r->dist[TLC_NET], 200);
      r->dist[TLC_CALL] = r->dist[TLC_GROSS] = r->dist[TLC_NET];
    }
    memset(&c->ev[2 * i], 0, 2 * sizeof(*c->ev));
    c->ev[2 * i].handle = h;
    c->ev[2 * i].type = TLC_EV_ENTRY;
    c->ev[2 * i].time_ns = (int64_t)(20 * i);
    c->ev[2 * i + 1].handle = h;
    c->ev[2 * i + 1].type = TLC_EV_EXIT;
    c->ev[2 * i + 1].time_ns = (int64_t)(20 * i + 10);
  }
  tlc_mapping_finish(&c->m);
  tlc_table_sort(&c->t);
}

static void drop(cap_t *c) {
  tlc_table_fini(&c->t);
  tlc_mapping_fini(&c->m);
  free(c->ev);
}

static int cmpd(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Seconds for one export of `which`, median of runs. */
static double run(cap_t *c, int which, int runs, size_t *bytes) {
  double t[16];
  int k;
  for (k = 0; k < runs; k++) {
    tlc_out_t o;
    tlc_timeline_t tl = { tl_next, tl_rewind, c };
    double t0;
    *bytes = 0;
    tlc_out_init(&o, 0, sink, bytes);
    t0 = now();
    switch (which) {
    case 0: {
      tlc_text1_opts_t opts;
      tlc_text1_opts_default(&opts);
      tlc_text1_write(&o, &opts, &c->t, &c->m, &tl);
      break;
    }
    case 1:
      tlc_json_write(&o, &c->t, &c->m, "bench", 0);
      break;
    case 2: {
      tlc_xml_opts_t opts;
      tlc_xml_opts_default(&opts);
      tlc_xml_write(&o, &opts, &c->t, &c->m, &tl, NULL);
      break;
    }
    case 3:
      tlc_aprof_write(&o, NULL, &c->t, &c->m, &tl);
      break;
    default:
      tlc_br_export(&o, &c->t, &c->m);
      break;
    }
    tlc_out_fini(&o);
    t[k] = now() - t0;
  }
  qsort(t, (size_t)runs, sizeof(double), cmpd);
  return t[runs / 2];
}

int main(int argc, char **argv) {
  static const char *const names[] = { "text1", "json", "xml", "aprof", "br" };
  int runs = argc > 1 ? atoi(argv[1]) : 5, w;
  cap_t small, big;
  if (runs < 1 || runs > 15)
    runs = 5;
  build(&small, 10000);
  build(&big, 100000);
  printf("%-6s %14s %14s %16s %16s %8s\n", "export", "ns/area@10k", "ns/area@100k", "MB@100k",
         "MB/s@100k", "ratio");
  for (w = 0; w < 5; w++) {
    size_t bs, bb;
    double ts = run(&small, w, runs, &bs), tb = run(&big, w, runs, &bb);
    double ps = ts / 10000 * 1e9, pb = tb / 100000 * 1e9;
    printf("%-6s %14.1f %14.1f %16.1f %16.1f %8.2f\n", names[w], ps, pb, (double)bb / 1e6,
           (double)bb / 1e6 / tb, pb / ps);
  }
  drop(&small);
  drop(&big);
  return 0;
}
