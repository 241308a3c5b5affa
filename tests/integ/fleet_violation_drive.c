/* fleet_violation_drive - drives daemon/fleet's violation publishing (tlc_fleet_violation) from
 * a test, on a libuv loop as tlcapd runs it, with a real engine and budget watch
 * (tests/integ/test_fleet_violations.py).
 *
 *   fleet_violation_drive URL PREFIX STORM
 *
 * Target "lab.1" (a '.' to be escaped in the subject) has budget net_a (TaskA's NET at most
 * 100 ns). Once the fleet is connected and its stream ready, STORM activations of TaskA on
 * core 0 with a NET of 500 ns each are pushed through the engine in one call (every one a
 * violation, each handed to tlc_fleet_violation as the daemon's fan-out does); 1.1 s later one
 * more with a NET of 700 ns. When every message is acknowledged (or 10 s passed) it prints one
 * line "seen N sent S suppressed X published P dropped D" and closes everything. Exit 0, or 1
 * when it cannot start or connect within 10 s.
 */
#include "base/clock.h"
#include "budget/budget.h"
#include "fleet/fleet.h"
#include "formats/mapping.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

static uv_loop_t *loop;
static tlc_fleet_t *fleet;
static tlc_engine_t *eng;
static tlc_bwatch_t *w;
static tlc_mapping_t map;
static uint64_t seen;
static int phase, closed;
static uint64_t t0, storm;
static uv_timer_t tick;

static size_t f_count(void *ud) {
  (void)ud;
  return 0; /* no statistics published: only the violations */
}

static int f_info(void *ud, size_t i, tlc_view_target_t *out) {
  (void)ud;
  (void)i;
  (void)out;
  return -1;
}

static int f_find(void *ud, const char *name, size_t *idx) {
  (void)ud;
  *idx = 0;
  return strcmp(name, "lab.1") == 0 ? 0 : -1;
}

static const tlc_mapping_t *f_mapping(void *ud, size_t i) {
  (void)ud;
  (void)i;
  return &map;
}

static int f_context(void *ud, size_t i, uint32_t context, tlc_ctx_t *c) {
  (void)ud;
  (void)i;
  return tlc_engine_context(eng, context, c);
}

static const char *area_name(void *ud, uint32_t handle) {
  (void)ud;
  return handle == 1 ? "TaskA" : NULL;
}

static void on_violation(void *ud, const tlc_violation_t *v) {
  (void)ud;
  seen++;
  tlc_fleet_violation(fleet, "lab.1", w, v, tlc_bwatch_key(w, v->budget), uv_now(loop), 0);
}

static void push(uint64_t n, int64_t from, int64_t net) {
  tlc_event_t *ev = calloc(2 * n, sizeof(*ev));
  uint64_t i;
  if (ev == NULL)
    exit(1);
  for (i = 0; i < n; i++) {
    ev[2 * i].time_ns = from + (int64_t)i * 1000;
    ev[2 * i].handle = 1;
    ev[2 * i].type = TLC_EV_ENTRY;
    ev[2 * i + 1] = ev[2 * i];
    ev[2 * i + 1].time_ns += net;
    ev[2 * i + 1].type = TLC_EV_EXIT;
  }
  tlc_engine_push(eng, ev, 2 * n);
  free(ev);
}

static void fleet_closed(void *ud) {
  (void)ud;
  closed = 1;
}

static void timer_closed(uv_handle_t *h) {
  (void)h;
}

static void finish(int rc) {
  tlc_fleet_counters_t c;
  tlc_fleet_counters(fleet, &c);
  printf("seen %llu sent %llu suppressed %llu published %llu dropped %llu\n",
         (unsigned long long)seen, (unsigned long long)c.violations_sent,
         (unsigned long long)c.violations_suppressed, (unsigned long long)c.published,
         (unsigned long long)c.dropped);
  fflush(stdout);
  uv_timer_stop(&tick);
  uv_close((uv_handle_t *)&tick, timer_closed);
  tlc_fleet_close(fleet, fleet_closed, NULL);
  phase = rc == 0 ? 100 : 101;
}

/* Every 10 ms: the next step once its condition holds (conditions, not sleeps). */
static void tick_cb(uv_timer_t *t) {
  tlc_fleet_counters_t c;
  uint64_t now = uv_now(loop);
  (void)t;
  tlc_fleet_counters(fleet, &c);
  switch (phase) {
  case 0: /* connected, stream ready */
    if (c.connected && c.stream_ready) {
      push(storm, 1000, 500);
      t0 = now;
      phase = 1;
    } else if (now - t0 > 10000) {
      fprintf(stderr, "fleet_violation_drive: not connected after 10 s\n");
      finish(1);
    }
    break;
  case 1: /* the bucket refilled */
    if (now - t0 >= 1100) {
      push(1, 1000 + (int64_t)storm * 1000, 700);
      t0 = now;
      phase = 2;
    }
    break;
  case 2: /* every message acknowledged or dropped */
    if ((c.awaiting_ack == 0 && c.published + c.dropped >= c.violations_sent) || now - t0 > 10000)
      finish(0);
    break;
  default:
    break;
  }
}

int main(int argc, char **argv) {
  static const char text[] = "[budget net_a]\narea = TaskA\nstat = net\nmax = 100ns\n";
  tlc_tbudget_set_t s;
  tlc_bwatch_opts_t bo;
  tlc_fleet_opts_t fo;
  tlc_view_t v;
  tlc_map_area_t a;
  char err[256];
  if (argc != 4) {
    fprintf(stderr, "usage: fleet_violation_drive URL PREFIX STORM\n");
    return 2;
  }
  storm = strtoull(argv[3], NULL, 10);
  loop = uv_default_loop();
  tlc_mapping_init(&map);
  memset(&a, 0, sizeof(a));
  a.parent = a.state_handle = 0xFFFFFFFFu;
  a.handle = 1;
  a.name = (char *)"TaskA";
  if (tlc_mapping_add(&map, &a) != 0)
    return 1;
  tlc_mapping_finish(&map);
  tlc_tbudget_set_init(&s);
  if (tlc_tbudget_parse(&s, text, strlen(text), "b.ini", err, sizeof(err)) != 0) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  memset(&bo, 0, sizeof(bo));
  bo.area_name = area_name;
  bo.on_violation = on_violation;
  if (tlc_bwatch_new(&w, "lab.1", &s, &bo) != 0 || tlc_engine_new(&eng, TLC_FMT_BIN11, NULL) != 0)
    return 1;
  tlc_tbudget_set_fini(&s);
  tlc_bwatch_attach(w, eng);
  memset(&v, 0, sizeof(v));
  v.count = f_count;
  v.info = f_info;
  v.find = f_find;
  v.mapping = f_mapping;
  v.context = f_context;
  memset(&fo, 0, sizeof(fo));
  fo.url = argv[1];
  fo.subject = argv[2];
  fo.instance_id = 77;
  fo.interval_ms = 60000;
  if (tlc_fleet_new(&fleet, loop, &v, &fo) != 0)
    return 1;
  uv_timer_init(loop, &tick);
  t0 = uv_now(loop);
  uv_timer_start(&tick, tick_cb, 10, 10);
  uv_run(loop, UV_RUN_DEFAULT);
  tlc_fleet_shutdown();
  tlc_bwatch_free(w);
  tlc_engine_free(eng);
  tlc_mapping_fini(&map);
  return closed && phase == 100 ? 0 : 1;
}
